"""Every real dataset in ../shared/data loads through the service parser with the n/d/q of the
data README (skipped when the data folder is absent)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import datasets as bd

pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(bd.data_dir() is None, reason="../shared/data not available"),
]

# name: (n_train, n_test, d, q) from the data README (genbase d = 1186 - the `protein` id)
MULAN = {
    "emotions": (391, 202, 72, 6),
    "scene": (1211, 1196, 294, 6),
    "yeast": (1500, 917, 103, 14),
    "birds": (322, 323, 260, 19),
    "flags": (129, 65, 19, 7),
    "genbase": (463, 199, 1185, 27),
    "medical": (333, 645, 1449, 45),
}
YAHOO = {
    "Arts": (462, 26),
    "Business": (438, 30),
    "Computers": (681, 33),
    "Education": (550, 33),
    "Health": (612, 32),
    "Recreation": (606, 22),
    "Reference": (793, 33),
}
LDL = {
    "SJAFFE": (213, 243, 6),
    "Movie": (7755, 1869, 5),
    "Yeast_alpha": (2465, 24, 18),
    "Yeast_cdc": (2465, 24, 15),
    "Yeast_elu": (2465, 24, 14),
}


def _is_binary(Y: np.ndarray) -> bool:
    return bool(((Y == 0) | (Y == 1)).all())


@pytest.mark.parametrize("name", sorted(MULAN))
def test_mulan_shapes(name):
    n_train, n_test, d, q = MULAN[name]
    for part, n in (("train", n_train), ("test", n_test)):
        ds = bd.load_mulan(name, part)
        assert ds.X.shape == (n, d) and ds.Y.shape == (n, q), (name, part)
        assert ds.kind == "multilabel" and _is_binary(ds.Y)
        assert len(ds.feature_names) == d and len(ds.label_names) == q
        assert np.isfinite(ds.X).all()
    full = bd.load_mulan_full(name)
    assert full.X.shape == (n_train + n_test, d)


def test_cal500_full_only():
    ds = bd.load_mulan_full("cal500")
    assert ds.X.shape == (502, 68) and ds.Y.shape == (502, 174)


def test_mulan_quirks():
    genbase = bd.load_mulan("genbase")
    assert "protein" not in genbase.feature_names
    assert any("protein" in w for w in genbase.warnings)
    assert _is_binary(genbase.X) and genbase.X.any()  # {YES,NO} -> {1,0}
    # yeast: labels in ARFF order even though the XML lists them differently
    assert bd.load_mulan("yeast").label_names == [f"Class{i}" for i in range(1, 15)]
    birds = [bd.load_mulan("birds", part) for part in ("train", "test")]
    assert "Swainson's Thrush" in birds[0].label_names
    # empty label sets: 143 train, 151 test
    assert [int((b.Y.sum(axis=1) == 0).sum()) for b in birds] == [143, 151]
    medical = bd.load_mulan("medical")
    assert _is_binary(medical.X) and medical.X.sum() > 0  # sparse ARFF, nominal {0,1}
    # flags: nominal integer codes kept as their values
    flags = bd.load_mulan("flags")
    assert flags.X[:, flags.feature_names.index("religion")].max() > 1


def test_cache_returns_read_only_arrays():
    a = bd.load_mulan("Emotions")
    assert a is bd.load_mulan("emotions")
    with pytest.raises(ValueError):
        a.X[0, 0] = 1.0


@pytest.mark.parametrize("name", sorted(YAHOO))
def test_yahoo_shapes(name):
    d, q = YAHOO[name]
    for part, n in (("train", 2000), ("test", 3000)):
        ds = bd.load_yahoo(name, part)
        assert ds.X.shape == (n, d) and ds.Y.shape == (n, q)
        assert ds.kind == "multilabel" and _is_binary(ds.Y)
        assert (ds.Y.sum(axis=1) > 0).all()  # no empty label set in the Yahoo sets


@pytest.mark.parametrize("name", sorted(LDL))
def test_ldl_shapes(name):
    n, d, c = LDL[name]
    ds = bd.load_ldl(name)
    assert ds.X.shape == (n, d) and ds.Y.shape == (n, c)
    assert ds.kind == "distribution"
    np.testing.assert_allclose(ds.Y.sum(axis=1), 1.0, atol=1e-12)


def test_unknown_names_and_parts():
    with pytest.raises(ValueError, match="unknown Mulan dataset"):
        bd.load_mulan("cal500")  # full file only
    with pytest.raises(ValueError, match="part"):
        bd.load_yahoo("Arts", "valid")
