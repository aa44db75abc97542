"""Every sparse ARFF of ../shared/data round-trips through the sparse parser and the store to
exactly the dense table liac-arff's dense reader gives; models fitted on the stored CSR as it is
(``br``, ``rf``, ``mlknn`` exact and approximate, ``dmknn``) predict CSR rows as the same models
fitted dense predict the dense rows, to 1e-12 (skipped when the data folder is absent)."""

from __future__ import annotations

from pathlib import Path

import arff
import numpy as np
import pytest
import scipy.sparse as sp

from app.formats import parse_dataset
from app.formats.arff_format import parse_mulan_xml
from app.methods.catalog import get_method
from app.storage import store as store_module
from app.storage.store import Store, VerifiedDatasets
from benchmarks import datasets as bd

pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(bd.data_dir() is None, reason="../shared/data not available"),
]

# (folder, file stem, labels file stem): the sparse ARFF files of the data README
SPARSE_FILES = [
    ("bibtex", "bibtex-train", "bibtex"),
    ("bibtex", "bibtex-test", "bibtex"),
    ("medical", "medical-train", "medical"),
    ("medical", "medical-test", "medical"),
    ("tmc2007", "tmc2007-500-train", "tmc2007-500"),
    ("tmc2007", "tmc2007-500-test", "tmc2007-500"),
]


def dense_reference(path: Path, labels: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """liac-arff's dense reading of the file (every attribute of these sets is nominal {0,1})."""
    obj = arff.load(path.read_text(), encode_nominal=True)
    names = [name for name, _ in obj["attributes"]]
    assert all(kind == ["0", "1"] for _, kind in obj["attributes"])  # index == value
    table = np.array(obj["data"], dtype=np.float64)
    label_idx = [names.index(name) for name in labels]
    label_cols = sorted(label_idx)
    feature_cols = [j for j in range(len(names)) if j not in set(label_cols)]
    return table[:, feature_cols], table[:, label_cols]


@pytest.mark.parametrize(("folder", "stem", "xml"), SPARSE_FILES, ids=[s for _, s, _ in SPARSE_FILES])
def test_sparse_real_set_round_trips_to_the_dense_table(tmp_path, monkeypatch, folder, stem, xml):
    monkeypatch.setattr(store_module, "VERIFIED", VerifiedDatasets(1 << 26))
    base = bd.require_data_dir() / "multilabel" / folder
    path, labels_file = base / f"{stem}.arff", (base / f"{xml}.xml").read_bytes()
    parsed = parse_dataset(path.read_bytes(), filename=path.name, labels_file=labels_file)
    assert sp.isspmatrix_csr(parsed.X) and parsed.Y.dtype == np.uint8
    store = Store(tmp_path)
    store.save_dataset("r" * 64, parsed.X, parsed.Y)
    assert store.dataset_storage("r" * 64).stored_bytes <= 3 * path.stat().st_size
    X, Y = store.load_dataset("r" * 64)
    Xd, Yd = dense_reference(path, parse_mulan_xml(labels_file))
    np.testing.assert_array_equal(X, Xd)
    np.testing.assert_array_equal(Y, Yd)

    # the sparse path end to end: the stored CSR fitted and predicted as it is, against dense
    stored = store.load_stored("r" * 64)
    assert sp.isspmatrix_csr(stored.X)
    Xs, Ys = stored.X, stored.Y
    rows = min(400, X.shape[0] - 100)
    for method, params in (
        ("br", {}),
        ("rf", {"n_estimators": 5, "max_depth": 6}),
        ("mlknn", {}),
        ("mlknn", {"neighbors": "approximate"}),
        ("dmknn", {}),
    ):
        spec = get_method(method)
        assert spec is not None and spec.estimator.accepts_sparse
        sparse_model = spec.build(params).fit(Xs[:rows], Ys[:rows])
        dense_model = spec.build(params).fit(Xd[:rows], Yd[:rows])
        np.testing.assert_allclose(
            sparse_model.decision_function(Xs[rows : rows + 100]),
            dense_model.decision_function(Xd[rows : rows + 100]),
            rtol=0,
            atol=1e-12,
        )
        np.testing.assert_array_equal(
            sparse_model.predict(Xs[rows : rows + 100]), dense_model.predict(Xd[rows : rows + 100])
        )
