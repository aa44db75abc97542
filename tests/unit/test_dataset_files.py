"""Datasets stored in their compact form: sparse stays sparse from the parser to the store, the
methods get back exactly the dense tables they got before, and 0.1.x stores' files still load."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from app.errors import PayloadTooLarge
from app.formats import ParseOptions, parse_dataset
from app.methods.catalog import get_method
from app.storage import dataset_files
from app.storage import store as store_module
from app.storage.dataset_files import StoredArrays, legacy_digest
from app.storage.store import DatasetUnavailable, Store, VerifiedDatasets


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setattr(store_module, "VERIFIED", VerifiedDatasets(1 << 24))
    return Store(tmp_path)


def sparse_table(n: int = 300, d: int = 60, q: int = 7, density: float = 0.05, seed: int = 0):
    """Generated sparse features (counts and reals) with labels that depend on them."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed, data_rvs=lambda k: rng.integers(1, 5, k))
    X = X.multiply(rng.choice([0.5, 1.0, 2.25], size=(1, d))).tocsr()
    X = (X + sp.csr_matrix((np.ones(n), (np.arange(n), np.arange(n) % d)), shape=(n, d))).tocsr()  # no empty row
    W = rng.normal(size=(d, q))
    Y = ((X @ W) + rng.normal(scale=0.1, size=(n, q)) > 0.3).astype(np.uint8)
    Y[:, 0] = Y[:, 0] | (np.arange(n) % 2 == 0)  # no constant label
    return X, Y


def as_libsvm(X: sp.csr_matrix, Y: np.ndarray) -> bytes:
    lines = []
    for i in range(X.shape[0]):
        row = X.getrow(i)
        labels = ",".join(str(k) for k in np.flatnonzero(Y[i]))
        pairs = " ".join(f"{j + 1}:{float(v)!r}" for j, v in zip(row.indices, row.data, strict=True))
        lines.append(f"{labels} {pairs}".strip() if pairs else labels)
    return ("\n".join(lines) + "\n").encode()


def arff_header(d: int, q: int) -> str:
    return (
        "@relation gen\n"
        + "".join(f"@attribute f{j} numeric\n" for j in range(d))
        + "".join(f"@attribute l{k} {{0,1}}\n" for k in range(q))
        + "@data\n"
    )


def as_sparse_arff(X: sp.csr_matrix, Y: np.ndarray) -> bytes:
    d, rows = X.shape[1], []
    for i in range(X.shape[0]):
        row = X.getrow(i)
        pairs = [f"{j} {float(v)!r}" for j, v in zip(row.indices, row.data, strict=True)]
        pairs += [f"{d + k} 1" for k in np.flatnonzero(Y[i])]
        rows.append("{" + ",".join(pairs) + "}")
    return (arff_header(d, Y.shape[1]) + "\n".join(rows) + "\n").encode()


def as_dense_arff(X: sp.csr_matrix, Y: np.ndarray) -> bytes:
    body = "".join(
        ",".join([repr(float(v)) for v in x] + [str(int(v)) for v in y]) + "\n"
        for x, y in zip(X.toarray(), Y, strict=True)
    )
    return (arff_header(X.shape[1], Y.shape[1]) + body).encode()


def fit_predict(method: str, X: np.ndarray, Y: np.ndarray, X_test: np.ndarray) -> np.ndarray:
    spec = get_method(method)
    assert spec is not None
    model = spec.build({})
    model.fit(X, Y)
    return np.asarray(model.decision_function(X_test))


@pytest.mark.parametrize("fmt", ["libsvm", "arff"])
def test_sparse_round_trip_equals_the_dense_results(store, fmt):
    X, Y = sparse_table()
    content = as_libsvm(X, Y) if fmt == "libsvm" else as_sparse_arff(X, Y)
    name, options = ("g.svm", ParseOptions()) if fmt == "libsvm" else ("g.arff", ParseOptions(label_count=7))
    parsed = parse_dataset(content, filename=name, options=options)
    assert sp.isspmatrix_csr(parsed.X) and parsed.X.nnz == X.nnz and parsed.Y.dtype == np.uint8
    store.save_dataset("s" * 64, parsed.X, parsed.Y)
    stored = store.load_stored("s" * 64)
    assert stored.sparse and stored.Y.dtype == np.uint8
    Xs, Ys = store.load_dataset("s" * 64)  # what a job's method gets: dense float64

    dense = parse_dataset(as_dense_arff(X, Y), filename="d.arff", options=ParseOptions(label_count=Y.shape[1]))
    store.save_dataset("d" * 64, dense.X, dense.Y)
    Xd, Yd = store.load_dataset("d" * 64)
    assert Xs.dtype == Xd.dtype == np.float64 and Ys.dtype == Yd.dtype == np.float64
    np.testing.assert_array_equal(Xs, X.toarray())
    np.testing.assert_array_equal(Xs, Xd)
    np.testing.assert_array_equal(Ys, Yd)
    for method in ("br", "mlknn"):
        np.testing.assert_allclose(
            fit_predict(method, Xs[:200], Ys[:200], Xs[200:]),
            fit_predict(method, Xd[:200], Yd[:200], Xd[200:]),
            rtol=0,
            atol=1e-12,
        )


def test_sparse_is_stored_small_and_reports_its_form(store):
    X, Y = sparse_table(n=2000, d=500, q=40, density=0.02)
    store.save_dataset("a" * 64, X, Y)
    info = store.dataset_storage("a" * 64)
    assert info is not None and info.storage == "sparse"
    assert info.density == pytest.approx(X.nnz / (2000 * 500))
    assert info.stored_bytes == store.dataset_path("a" * 64).stat().st_size
    assert info.stored_bytes < (X.data.nbytes + X.indices.nbytes) / 2  # deflated: far below dense 8 MB
    with np.load(store.dataset_path("a" * 64)) as data:
        assert "X" not in data.files and data["Y_bits"].dtype == np.uint8
        assert data["Y_bits"].shape == (2000, 5)  # 40 labels, eight to a byte


def test_dense_features_mostly_zero_are_stored_sparse_and_come_back_equal(store):
    rng = np.random.default_rng(1)
    X = rng.random((200, 50)) * (rng.random((200, 50)) < 0.1)
    Y = (rng.random((200, 3)) < 0.5).astype(np.uint8)
    store.save_dataset("m" * 64, X, Y)
    assert store.dataset_storage("m" * 64).storage == "sparse"
    Xl, Yl = store.load_dataset("m" * 64)
    np.testing.assert_array_equal(Xl, X)
    np.testing.assert_array_equal(Yl, Y)


def test_dense_measurements_stay_dense_and_distributions_stay_float(store):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(100, 8))
    Y = rng.dirichlet(np.ones(4), size=100)
    store.save_dataset("e" * 64, X, Y)
    info = store.dataset_storage("e" * 64)
    assert info.storage == "dense" and info.density == 1.0
    stored = store.load_stored("e" * 64)
    assert isinstance(stored.X, np.ndarray) and stored.Y.dtype == np.float64
    np.testing.assert_array_equal(stored.X, X)
    np.testing.assert_array_equal(stored.Y, Y)


def test_datasets_stored_by_0_1_still_load(store):
    rng = np.random.default_rng(3)
    X, Y = rng.random((30, 4)), (rng.random((30, 2)) < 0.5).astype(float)
    path = store.dataset_path("o" * 64)
    with open(path, "wb") as fh:  # the layout 0.1.x wrote (tests/fixtures/artifacts-0.1 has one it wrote)
        np.savez(fh, X=X, Y=Y, sha256=np.array(legacy_digest(X, Y)))
    Xl, Yl = store.load_dataset("o" * 64)
    np.testing.assert_array_equal(Xl, X)
    np.testing.assert_array_equal(Yl, Y)
    info = store.dataset_storage("o" * 64)
    assert info.storage == "dense" and info.density is None and info.stored_bytes == path.stat().st_size
    with open(path, "wb") as fh:
        np.savez(fh, X=X + 1, Y=Y, sha256=np.array(legacy_digest(X, Y)))
    store_module.VERIFIED.__init__(1 << 20)
    with pytest.raises(DatasetUnavailable, match="checksum"):
        store.load_dataset("o" * 64)
    with open(path, "wb") as fh:  # no checksum: older than 0.1.0, outside the compatibility window
        np.savez(fh, X=X, Y=Y)
    with pytest.raises(DatasetUnavailable, match="unreadable"):
        store.load_dataset("o" * 64)


def test_a_tampered_member_is_refused(store, tmp_path):
    X, Y = sparse_table(n=50)
    store.save_dataset("t" * 64, X, Y)
    with np.load(store.dataset_path("t" * 64)) as data:
        members = {name: data[name] for name in data.files}
    members["X_data"] = members["X_data"] * 2
    np.savez(store.dataset_path("t" * 64), **members)
    with pytest.raises(DatasetUnavailable, match="checksum"):
        store.load_dataset("t" * 64)


def test_densifying_is_bounded(store):
    X, Y = sparse_table(n=100, d=60)
    store.save_dataset("b" * 64, X, Y)
    with pytest.raises(PayloadTooLarge, match="100 x 60 = 6000 values"):
        store.load_dataset("b" * 64, max_dense_cells=5999)
    assert store.load_dataset("b" * 64, max_dense_cells=6000)[0].shape == (100, 60)


def test_verified_datasets_count_the_bytes_a_csr_matrix_holds():
    X, Y = sparse_table(n=1000, d=400, density=0.01)
    arrays = StoredArrays(X, Y)
    assert arrays.nbytes == X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + Y.nbytes
    assert arrays.nbytes < 1000 * 400 * 8 / 10
    cache = VerifiedDatasets(budget_bytes=2 * arrays.nbytes)
    for i in range(3):
        cache.put((str(i), 0, 0, 0), arrays)
    assert cache.bytes_held == 2 * arrays.nbytes
    assert cache.get(("0", 0, 0, 0)) is None and cache.get(("2", 0, 0, 0)) is not None


def test_compression_only_where_it_pays(tmp_path):
    rng = np.random.default_rng(4)
    path = tmp_path / "x.npz"
    with open(path, "wb") as fh:
        dataset_files.write(fh, rng.normal(size=(300, 40)), (rng.random((300, 3)) < 0.5).astype(np.uint8))
    with zipfile.ZipFile(path) as zf:
        kinds = {info.filename: info.compress_type for info in zf.infolist()}
    assert kinds["X.npy"] == zipfile.ZIP_STORED  # random reals do not shrink
    assert kinds["Y_bits.npy"] in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


def test_artifacts_are_streamed_never_pickled_or_read_into_bytes(store, monkeypatch):
    model = {"weights": np.arange(200_000.0), "name": "m"}
    monkeypatch.setattr(store_module.pickle, "dumps", lambda *a, **k: pytest.fail("pickled in memory"))
    sha = store.save_artifact(model)
    assert hashlib.sha256(store.artifact_path(sha).read_bytes()).hexdigest() == sha
    assert store.artifact_size(sha) == store.artifact_path(sha).stat().st_size
    assert store.save_artifact(model) == sha  # the same bytes: one file, no temporary left
    assert [p.name for p in store.artifacts.iterdir()] == [f"{sha}.pkl"]
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read into bytes"))
    loaded = store.load_artifact(sha)
    np.testing.assert_array_equal(loaded["weights"], model["weights"])
