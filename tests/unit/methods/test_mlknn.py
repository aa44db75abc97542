"""ML-kNN: agreement with a plain-Python ML-kNN, tie-breaking, degenerate labels, contract."""

from __future__ import annotations

import inspect
import pickle
import warnings

import numpy as np
import pytest

from app.methods.mlknn import SPEC, ExactKNN, MLkNN


# ------------------------------------------------------------------ independent reference
def brute_mlknn(Xtr, Ytr, Xte, k, s):
    """Zhang & Zhou's ML-kNN written with plain Python loops (no scaling, ties by index)."""
    m, q = len(Xtr), len(Ytr[0])

    def dist(a, b):
        return sum((float(u) - float(v)) ** 2 for u, v in zip(a, b))

    def knn(x, exclude):
        cand = [a for a in range(m) if a != exclude]
        return sorted(cand, key=lambda a: (dist(x, Xtr[a]), a))[:k]

    post = []
    priors, tables_pos, tables_neg = [], [], []
    train_nbrs = [knn(Xtr[i], i) for i in range(m)]
    for j in range(q):
        npos = sum(int(Ytr[i][j]) for i in range(m))
        priors.append((s + npos) / (s * 2 + m))
        kap = [0] * (k + 1)
        kbar = [0] * (k + 1)
        for i in range(m):
            c = sum(int(Ytr[a][j]) for a in train_nbrs[i])
            if Ytr[i][j] == 1:
                kap[c] += 1
            else:
                kbar[c] += 1
        tables_pos.append(kap)
        tables_neg.append(kbar)
    for x in Xte:
        nb = knn(x, None)
        row = []
        for j in range(q):
            c = sum(int(Ytr[a][j]) for a in nb)
            kap, kbar = tables_pos[j], tables_neg[j]
            p1 = priors[j] * ((s + kap[c]) / (s * (k + 1) + sum(kap)))
            p0 = (1.0 - priors[j]) * ((s + kbar[c]) / (s * (k + 1) + sum(kbar)))
            row.append(p1 / (p1 + p0))
        post.append(row)
    return np.array(post)


def brute_knn(Xtr, Xq, k, loo):
    D = ((Xq[:, None, :] - Xtr[None, :, :]) ** 2).sum(-1)
    out = []
    for i in range(len(Xq)):
        cand = [a for a in range(len(Xtr)) if not (loo and a == i)]
        out.append(sorted(cand, key=lambda a: (D[i, a], a))[:k])
    return np.array(out)


def make_data(rng, m, d, q, kind):
    if kind == "continuous":
        X = rng.normal(size=(m, d))
    elif kind == "binary":  # ties everywhere, exact in float64
        X = (rng.random((m, d)) < 0.3).astype(float)
    else:  # duplicated rows
        X = rng.normal(size=(m, d))
        X[1::4] = X[0::4][: len(X[1::4])]
    Y = (rng.random((m, q)) < 0.35).astype(np.int64)
    return X, Y


# --------------------------------------------------------------------------- agreement
@pytest.mark.filterwarnings("ignore::app.methods.fit_warnings.EmptyLabelSetWarning")
@pytest.mark.parametrize("kind", ["continuous", "binary", "duplicates"])
@pytest.mark.parametrize("k,s,d", [(1, 1.0, 4), (3, 0.5, 3), (10, 1.0, 20)])
def test_posteriors_identical_to_plain_python(kind, k, s, d):
    rng = np.random.default_rng([len(kind), k, d])
    X, Y = make_data(rng, 80, d, 4, kind)
    Xte = np.vstack([make_data(rng, 25, d, 4, kind)[0], X[:5]])  # test rows incl. training rows
    model = MLkNN(k=k, s=s, scale="none", threshold="map", ensure_nonempty="off").fit(X, Y)
    ref = brute_mlknn(X.tolist(), Y.tolist(), Xte.tolist(), k, s)
    got = model.decision_function(Xte)
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(model.predict(Xte), (ref > 0.5).astype(int))


@pytest.mark.parametrize("d,m", [(3, 200), (40, 150)])  # KD-tree path and GEMM path
@pytest.mark.parametrize("kind", ["continuous", "binary", "duplicates"])
def test_neighbours_exact_with_index_tie_break(d, m, kind):
    rng = np.random.default_rng(d * 1000 + m)
    X, _ = make_data(rng, m, d, 1, kind)
    index = ExactKNN(X)
    assert (index.tree is not None) == (d <= 15)
    np.testing.assert_array_equal(index.kneighbors(None, 7), brute_knn(X, X, 7, loo=True))
    Q = make_data(rng, 30, d, 1, kind)[0]
    np.testing.assert_array_equal(index.kneighbors(Q, 7), brute_knn(X, Q, 7, loo=False))


def test_ties_go_to_lower_index_and_self_is_excluded_by_index():
    X = np.array([[1.0], [-1.0], [1.0], [-1.0], [1.0]])
    index = ExactKNN(X)
    np.testing.assert_array_equal(index.kneighbors(np.array([[0.0]]), 3), [[0, 1, 2]])
    loo = index.kneighbors(None, 2)
    # row 0's duplicates (2, 4) stay eligible; itself never appears
    np.testing.assert_array_equal(loo[0], [2, 4])
    np.testing.assert_array_equal(loo[2], [0, 4])
    assert all(i not in loo[i] for i in range(len(X)))


def test_minmax_scaling_matches_manual_scaling_and_affine_invariance():
    rng = np.random.default_rng(3)
    X, Y = make_data(rng, 120, 6, 3, "continuous")
    X[:, 2] = 7.0  # constant feature
    Xte = rng.normal(size=(40, 6))
    lo, hi = X.min(0), X.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled = (X - lo) / span
    scaled[:, 2] = 0.0
    scaled_te = (Xte - lo) / span
    scaled_te[:, 2] = 0.0
    a = MLkNN(scale="minmax").fit(X, Y).decision_function(Xte)
    b = MLkNN(scale="none").fit(scaled, Y).decision_function(scaled_te)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    A = np.array([3.0, 0.5, 2.0, 10.0, 1.0, 4.0])
    shift = np.arange(6.0)
    c = MLkNN().fit(X * A + shift, Y).decision_function(Xte * A + shift)
    np.testing.assert_allclose(a, c, rtol=1e-12)
    assert not np.allclose(a, MLkNN(scale="none").fit(X * A, Y).decision_function(Xte * A))


def test_never_and_always_positive_labels_no_nan_no_warning():
    rng = np.random.default_rng(4)
    X, Y = make_data(rng, 60, 5, 4, "continuous")
    Y[:, 0] = 0
    Y[:, 1] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = MLkNN(k=5).fit(X, Y)
        P = model.decision_function(rng.normal(size=(20, 5)))
    assert np.isfinite(P).all() and ((P > 0) & (P < 1)).all()
    assert (P[:, 0] < 0.5).all() and (P[:, 1] > 0.5).all()
    assert np.isfinite(model.posterior_table_).all()


def test_tables_are_consistent():
    rng = np.random.default_rng(5)
    X, Y = make_data(rng, 90, 5, 5, "binary")
    model = MLkNN(k=6, s=0.7).fit(X, Y)
    m = len(X)
    np.testing.assert_array_equal(model.kappa_.sum(1), Y.sum(0))
    np.testing.assert_array_equal((model.kappa_ + model.kappa_bar_).sum(1), np.full(5, m))
    np.testing.assert_allclose(model.prior_, (0.7 + Y.sum(0)) / (1.4 + m))
    assert ((model.posterior_table_ > 0) & (model.posterior_table_ < 1)).all()


def test_threshold_and_strict_map_rule():
    rng = np.random.default_rng(6)
    X, Y = make_data(rng, 70, 4, 3, "continuous")
    model = MLkNN(k=4, threshold="map", ensure_nonempty="off").fit(X, Y)
    P = model.decision_function(X)
    np.testing.assert_array_equal(model.predict(X), (P > 0.5).astype(int))
    np.testing.assert_array_equal(model.predict(X, threshold=0.2), (P > 0.2).astype(int))
    assert model.predict(X).dtype.kind == "i"


def test_pickle_round_trip_and_refit_determinism():
    rng = np.random.default_rng(7)
    X, Y = make_data(rng, 100, 3, 3, "binary")  # KD-tree path, many ties
    model = MLkNN(k=7).fit(X, Y)
    Q = make_data(rng, 30, 3, 3, "binary")[0]
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.decision_function(Q), model.decision_function(Q))
    np.testing.assert_array_equal(MLkNN(k=7).fit(X, Y).decision_function(Q), model.decision_function(Q))


def test_validation():
    rng = np.random.default_rng(8)
    X, Y = make_data(rng, 10, 3, 2, "continuous")
    with pytest.raises(ValueError):
        MLkNN(k=10).fit(X, Y)  # k > m - 1
    MLkNN(k=9).fit(X, Y)
    with pytest.raises(ValueError):
        MLkNN(s=0).fit(X, Y)
    with pytest.raises(ValueError):
        MLkNN().fit(X, Y * 2)
    with pytest.raises(ValueError):
        MLkNN(k=3, scale="zscore").fit(X, Y)


def test_spec_contract_and_progress():
    params = set(inspect.signature(MLkNN.__init__).parameters) - {"self"}
    assert set(SPEC.params.model_fields) == params
    est = SPEC.build({"k": 4})
    assert isinstance(est, MLkNN) and est.k == 4 and est.get_params()["scale"] == "minmax"
    seen = []
    rng = np.random.default_rng(9)
    est.fit(*make_data(rng, 30, 3, 2, "continuous"), progress=lambda st, f: seen.append((st, f)))
    assert {st for st, _ in seen} <= set(SPEC.stages)
    assert seen[-1][1] == 1.0 and all(0 <= f <= 1 for _, f in seen)
    assert SPEC.outputs == ("labels", "ranking") and SPEC.task == "multilabel"


@pytest.mark.realdata
def test_emotions_official_split_quality():
    datasets = pytest.importorskip("benchmarks.datasets")
    if datasets.data_dir() is None:
        pytest.skip("no ../shared/data")
    from app.scoring import average_precision

    tr, te = datasets.load_mulan("emotions", "train"), datasets.load_mulan("emotions", "test")
    P = MLkNN(k=10).fit(tr.X, tr.Y).decision_function(te.X)
    raw = MLkNN(k=10, scale="none").fit(tr.X, tr.Y).decision_function(te.X)
    # FACTS: scaling to [0, 1] lifts emotions AP from ~0.69 to ~0.80
    assert average_precision(te.Y, P) > 0.76
    assert average_precision(te.Y, P) > average_precision(te.Y, raw) + 0.03


@pytest.mark.parametrize("d", [3, 40])
def test_blocked_search_and_single_rows_match(monkeypatch, d):
    import app.methods.neighbours as mod

    rng = np.random.default_rng(d)
    X, Y = make_data(rng, 150, d, 3, "duplicates")
    Q = make_data(rng, 20, d, 3, "duplicates")[0]
    full_loo, full_q = ExactKNN(X).kneighbors(None, 5), ExactKNN(X).kneighbors(Q, 5)
    monkeypatch.setattr(mod, "_BLOCK_ENTRIES", 1000)  # blocks of 6 rows (leave-one-out)
    monkeypatch.setattr(mod, "_QUERY_BLOCK_ENTRIES", 1000)  # and of new rows
    np.testing.assert_array_equal(ExactKNN(X).kneighbors(None, 5), full_loo)
    np.testing.assert_array_equal(ExactKNN(X).kneighbors(Q, 5), full_q)
    np.testing.assert_array_equal(full_loo, brute_knn(X, X, 5, loo=True))
    model = MLkNN(k=5).fit(X, Y)
    batch = model.decision_function(Q)
    for i in range(len(Q)):
        np.testing.assert_array_equal(model.decision_function(Q[i : i + 1]), batch[i : i + 1])
    assert model.decision_function(Q[:0]).shape == (0, 3)


@pytest.mark.parametrize("kind", ["continuous", "binary", "duplicates"])
def test_tree_and_gemm_queries_find_the_same_neighbours(monkeypatch, kind):
    """New rows skip the KD-tree for small training sets; forcing the tree gives the same sets."""
    from app.methods import neighbours

    rng = np.random.default_rng(11)
    X, _ = make_data(rng, 200, 3, 1, kind)
    Q = make_data(rng, 40, 3, 1, kind)[0]
    index = ExactKNN(X)
    assert index.tree is not None
    gemm = index.kneighbors(Q, 7)
    monkeypatch.setattr(neighbours, "_BRUTE_QUERY_MAX_ENTRIES", 0)
    np.testing.assert_array_equal(index.kneighbors(Q, 7), gemm)
    np.testing.assert_array_equal(gemm, brute_knn(X, Q, 7, loo=False))


def test_neighbour_counts_gathered_or_looped_agree(monkeypatch):
    from app.methods import mlknn

    rng = np.random.default_rng(12)
    Y = (rng.random((50, 4)) > 0.5).astype(np.uint8)
    N = rng.integers(0, 50, size=(9, 6))
    gathered = mlknn.neighbour_counts(Y, N)
    monkeypatch.setattr(mlknn, "_GATHER_MAX_ENTRIES", 0)
    looped = mlknn.neighbour_counts(Y, N)
    assert gathered.dtype == looped.dtype == np.int64
    np.testing.assert_array_equal(gathered, looped)
