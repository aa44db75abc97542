"""Neighbour search: the approximate index against exact search, leave-one-out with duplicates
and ties, the recorded recall, sparse input, pickling, and the graph shared within a selection."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import sparse

from app import scoring
from app.evaluation import cross_validation, pricing
from app.methods import neighbours
from app.methods.dmknn import DMKNN
from app.methods.graph_cache import sharing_graphs
from app.methods.mlknn import MLkNN, lookup, neighbour_counts, posterior_table
from app.methods.neighbours import ApproximateKNN, ExactKNN, training_graph
from app.methods.numerics import FeatureScaling


def clustered(rng: np.random.Generator, m: int, d: int, q: int, centres: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Rows around a few centres, labels that depend on the centre (kNN has something to find)."""
    where = rng.integers(0, centres, size=m)
    C = rng.normal(scale=3.0, size=(centres, d))
    X = C[where] + rng.normal(size=(m, d))
    label_of = rng.random((centres, q)) < 0.3
    Y = (label_of[where] ^ (rng.random((m, q)) < 0.1)).astype(np.int64)
    return X, Y


def tie_aware_recall(X: np.ndarray, found: np.ndarray, k: int) -> float:
    """Share of found leave-one-out neighbours within each row's true k-th distance, brute force."""
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    kth = np.sort(D, axis=1)[:, k - 1]
    got = D[np.arange(len(X))[:, None], found]
    return float(np.mean(got <= kth[:, None] * (1 + 1e-9) + 1e-12))


# ------------------------------------------------------------------------ exact stays exact
def test_exact_forced_is_todays_search_bit_for_bit(monkeypatch):
    """neighbors="exact" is ExactKNN's graph and tables, whatever the size threshold."""
    monkeypatch.setattr(neighbours, "EXACT_MAX_N", 10)
    rng = np.random.default_rng(0)
    X, Y = clustered(rng, 120, 6, 4)
    Xt = clustered(rng, 30, 6, 4)[0]
    model = MLkNN(k=7, neighbors="exact").fit(X, Y)
    assert model.neighbour_search_ == "exact" and model.neighbour_recall_ is None
    assert isinstance(model.index_, ExactKNN)
    Xs = FeatureScaling.minmax(X, constant="zero").transform(X)
    graph = ExactKNN(Xs).kneighbors(None, 7)
    _, _, _, table = posterior_table(Y.astype(np.uint8), neighbour_counts(Y.astype(np.uint8), graph), 7, 1.0, 2.0 + 120)
    np.testing.assert_array_equal(model.posterior_table_, table)
    Q = model.scaling_.transform(Xt)
    expected = lookup(table, neighbour_counts(Y.astype(np.uint8), ExactKNN(Xs).kneighbors(Q, 7)))
    np.testing.assert_array_equal(model.decision_function(Xt), expected)


def test_auto_is_exact_up_to_the_threshold_and_approximate_above(monkeypatch):
    rng = np.random.default_rng(1)
    X, Y = clustered(rng, 150, 5, 3)
    assert MLkNN(k=5).fit(X, Y).neighbour_search_ == "exact"
    monkeypatch.setattr(neighbours, "EXACT_MAX_N", 149)
    model = MLkNN(k=5).fit(X, Y)
    assert model.neighbour_search_ == "approximate" and isinstance(model.index_, ApproximateKNN)
    assert DMKNN(k=5).fit(X, Y).neighbour_search_ == "approximate"


# ------------------------------------------------------------------------ leave-one-out
@pytest.mark.parametrize("copies", [1, 3, 15])
def test_leave_one_out_excludes_each_row_by_index_not_its_duplicates(copies):
    """Each row appears ``copies`` times: its duplicates (distance 0) are its nearest others,
    itself never; with more duplicates than k they are all at distance 0 (ties by index)."""
    rng = np.random.default_rng(copies)
    base = (rng.random((400 // copies, 8)) < 0.3).astype(float)  # binary: ties everywhere
    X = np.repeat(base, copies, axis=0)
    k = 5
    found = ApproximateKNN(X).kneighbors(None, k)
    rows = np.arange(len(X))
    assert not (found == rows[:, None]).any()
    D = ((X[rows[:, None]] - X[found]) ** 2).sum(-1)
    assert (np.diff(D, axis=1) >= 0).all()  # nearest first
    # equal distances are ordered by index
    assert ((np.diff(D, axis=1) > 0) | (np.diff(found, axis=1) > 0)).all()
    dup = min(copies - 1, k)
    assert (D[:, :dup] == 0).all()
    assert tie_aware_recall(X, found, k) >= 0.95


def test_query_rows_and_loo_rows_agree_with_exact_on_easy_data():
    rng = np.random.default_rng(2)
    X, _ = clustered(rng, 500, 10, 1)
    Q = clustered(rng, 50, 10, 1)[0]
    approx, exact = ApproximateKNN(X), ExactKNN(X)
    assert np.mean(approx.kneighbors(Q, 8) == exact.kneighbors(Q, 8)) > 0.97
    assert np.mean(approx.kneighbors(None, 8) == exact.kneighbors(None, 8)) > 0.97
    with pytest.raises(ValueError, match="k=500"):
        approx.kneighbors(None, 500)


# ------------------------------------------------------------------------ the recorded recall
def test_recorded_recall_is_the_measured_recall(monkeypatch):
    """With every row in the sample, the recorded recall is the graph's tie-aware recall."""
    monkeypatch.setattr(neighbours, "RECALL_SAMPLE", 10_000)
    rng = np.random.default_rng(3)
    X, Y = clustered(rng, 300, 12, 3)
    model = MLkNN(k=10, neighbors="approximate", scale="none").fit(X, Y)
    graph = training_graph(X, 10, "approximate")
    assert model.neighbour_recall_ == pytest.approx(tie_aware_recall(X, graph.neighbours, 10), abs=1e-12)
    assert model.neighbour_recall_ >= neighbours.RECALL_TARGET


def test_a_poor_index_records_a_poor_recall(monkeypatch):
    """A crippled index (many small cells, the least breadth, no target) on noise: the recorded
    recall drops far below target and still equals the brute-force measurement (measured, not
    assumed)."""
    monkeypatch.setattr(neighbours, "RECALL_SAMPLE", 10_000)
    monkeypatch.setattr(neighbours, "ROWS_PER_LIST", 10)
    monkeypatch.setattr(neighbours, "RECALL_TARGET", 0.0)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 30))
    graph = training_graph(X, 10, "approximate")
    assert isinstance(graph.index, ApproximateKNN) and graph.index.loo_rows == 11
    assert graph.recall is not None and graph.recall < 0.9
    assert graph.recall == pytest.approx(tie_aware_recall(X, graph.neighbours, 10), abs=1e-12)


@pytest.mark.parametrize("binary", [True, False])
def test_the_breadths_are_the_fewest_that_reach_the_target(monkeypatch, binary):
    """With every row sampled, the graph's recall at the chosen breadth reaches the target and
    one row less of breadth falls below it; the query breadth likewise, measured by brute force
    on the training rows queried with their own row left out (binary rows: float32 distances
    exact, ties everywhere; normal rows: float32 candidates, float64 distances)."""
    monkeypatch.setattr(neighbours, "RECALL_SAMPLE", 10_000)
    monkeypatch.setattr(neighbours, "ROWS_PER_LIST", 10)
    monkeypatch.setattr(neighbours, "MIN_QUERY_PROBES", 1)
    rng = np.random.default_rng(5)
    X = (rng.random((800, 20)) < 0.3).astype(float) if binary else rng.normal(size=(800, 20))
    graph = training_graph(X, 10, "approximate")
    index = graph.index
    assert isinstance(index, ApproximateKNN) and index.float32_exact is binary
    assert graph.recall is not None and graph.recall >= neighbours.RECALL_TARGET
    assert graph.recall == pytest.approx(tie_aware_recall(X, graph.neighbours, 10), abs=1e-12)
    narrower = index.loo_rows - 1
    index.set_probes(index.n_probe, narrower)
    assert tie_aware_recall(X, index.kneighbors(None, 10), 10) < neighbours.RECALL_TARGET
    assert graph.query_recall is not None and graph.query_recall >= neighbours.RECALL_TARGET
    assert 1 <= index.n_probe < index.n_lists


@pytest.mark.parametrize("binary", [True, False])
def test_the_graph_is_exact_within_its_cells(binary):
    """Every cell probed, the leave-one-out graph is exact search's, ties by index included."""
    rng = np.random.default_rng(13)
    X = (rng.random((700, 12)) < 0.25).astype(float) if binary else rng.normal(size=(700, 12))
    index = ApproximateKNN(X)
    index.set_probes(index.n_lists, index.n_samples)
    np.testing.assert_array_equal(index.kneighbors(None, 7), ExactKNN(X).kneighbors(None, 7))


# ------------------------------------------------------------------------ models
def test_approximate_model_is_close_to_exact():
    rng = np.random.default_rng(6)
    X, Y = clustered(rng, 900, 15, 6)
    Xt, Yt = clustered(rng, 300, 15, 6)
    exact = MLkNN(k=10, neighbors="exact").fit(X, Y)
    approx = MLkNN(k=10, neighbors="approximate").fit(X, Y)
    ap_exact = scoring.average_precision(Yt, exact.decision_function(Xt))
    ap_approx = scoring.average_precision(Yt, approx.decision_function(Xt))
    assert abs(ap_exact - ap_approx) < 0.005
    assert np.mean(exact.predict(Xt) == approx.predict(Xt)) > 0.98
    dm_exact = DMKNN(k=10, neighbors="exact").fit(X, Y).decision_function(Xt)
    dm_approx = DMKNN(k=10, neighbors="approximate").fit(X, Y).decision_function(Xt)
    assert abs(scoring.average_precision(Yt, dm_exact) - scoring.average_precision(Yt, dm_approx)) < 0.005


def test_approximate_model_pickles_and_single_rows_match_the_batch():
    rng = np.random.default_rng(7)
    X, Y = clustered(rng, 400, 8, 3)
    Xt = clustered(rng, 25, 8, 3)[0]
    model = MLkNN(k=6, neighbors="approximate").fit(X, Y)
    model.index_.set_probes(1)
    batch = model.decision_function(Xt)
    again = pickle.loads(pickle.dumps(model))
    assert again.index_.n_probe == 1 and again.neighbour_recall_ == model.neighbour_recall_
    np.testing.assert_array_equal(again.decision_function(Xt), batch)
    for i in range(len(Xt)):
        np.testing.assert_array_equal(again._decision_function(Xt[i : i + 1]), batch[i : i + 1])


def test_same_rows_give_the_same_graph():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(700, 16))
    a, b = training_graph(X, 10, "approximate"), training_graph(X.copy(), 10, "approximate")
    np.testing.assert_array_equal(a.neighbours, b.neighbours)
    assert a.recall == b.recall


def test_sparse_rows_are_indexed_without_densifying_the_matrix():
    """A CSR training matrix stays CSR in the index and gives the dense matrix's neighbours."""
    rng = np.random.default_rng(9)
    X = (rng.random((500, 60)) < 0.08) * rng.random((500, 60))
    Q = X[:20] + 0.01
    dense, csr = ApproximateKNN(X), ApproximateKNN(sparse.csr_matrix(X))
    assert sparse.issparse(csr.X)
    np.testing.assert_array_equal(csr.kneighbors(None, 5), dense.kneighbors(None, 5))
    np.testing.assert_array_equal(csr.kneighbors(Q, 5), dense.kneighbors(Q, 5))
    exact = training_graph(sparse.csr_matrix(X), 5, "exact")
    np.testing.assert_array_equal(exact.neighbours, ExactKNN(X).kneighbors(None, 5))


@pytest.mark.parametrize("binary", [False, True])
def test_exact_search_over_csr_gives_the_dense_neighbours(monkeypatch, binary):
    """Sparse products block by block (blocks forced small), ties by index as the dense path
    (binary rows: ties at the k-th distance are the norm), dense and CSR queries alike."""
    monkeypatch.setattr(neighbours, "_BLOCK_ENTRIES", 4000)
    monkeypatch.setattr(neighbours, "_QUERY_BLOCK_ENTRIES", 1000)
    X = sparse.random(300, 12, density=0.15, random_state=5, format="csr")
    if binary:
        X.data[:] = 1.0
    Q = sparse.random(40, 12, density=0.15, random_state=6, format="csr")
    dense, csr = ExactKNN(X.toarray()), ExactKNN(X)
    assert dense.tree is not None and csr.tree is None  # low d: a KD-tree for dense rows only
    assert sparse.issparse(csr.X) and csr.nbytes < dense.nbytes
    for k in (1, 5, 299):
        np.testing.assert_array_equal(csr.kneighbors(None, k), dense.kneighbors(None, k))
    for k in (1, 5, 300):
        expected = dense.kneighbors(Q.toarray(), k)
        np.testing.assert_array_equal(csr.kneighbors(Q, k), expected)
        np.testing.assert_array_equal(csr.kneighbors(Q.toarray(), k), expected)
        np.testing.assert_array_equal(dense.kneighbors(Q, k), expected)
    # brute force by (exact distance, index)
    D = ((Q.toarray()[:, None, :] - X.toarray()[None, :, :]) ** 2).sum(-1)
    order = np.lexsort((np.broadcast_to(np.arange(300), D.shape), D), axis=1)[:, :5]
    np.testing.assert_array_equal(csr.kneighbors(Q, 5), order)


def test_exact_csr_index_pickles_and_an_empty_query_answers_empty():
    X = sparse.random(80, 30, density=0.1, random_state=1, format="csr")
    index = pickle.loads(pickle.dumps(ExactKNN(X)))
    assert sparse.issparse(index.X)
    np.testing.assert_array_equal(index.kneighbors(X[:7], 3), ExactKNN(X.toarray()).kneighbors(X[:7].toarray(), 3))
    assert index.kneighbors(X[:0], 3).shape == (0, 3)


# ------------------------------------------------------------------------ sharing in a selection
@pytest.mark.parametrize("search", ["exact", "approximate"])
def test_sharing_the_graph_gives_the_same_leaderboard(monkeypatch, search):
    rng = np.random.default_rng(10)
    X, Y = clustered(rng, 300, 6, 4)
    entries = [("mlknn", {"neighbors": search}), ("dmknn", {"neighbors": search}), ("mlknn", {"k": 5})]
    monkeypatch.setattr(cross_validation, "GRAPH_METHODS", frozenset())
    alone = cross_validation.cross_validate(X, Y, "multilabel", entries, cv=3)
    monkeypatch.undo()
    builds: list[int] = []
    real = neighbours._build

    def counted(*args: object, **kwargs: object) -> neighbours.NeighbourGraph:
        builds.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(neighbours, "_build", counted)
    shared = cross_validation.cross_validate(X, Y, "multilabel", entries, cv=3)
    assert len(builds) == 3 * 2  # per fold: one graph for k=10 (mlknn and dmknn), one for k=5
    for a, b in zip(alone, shared, strict=True):
        assert a.fold_metrics == b.fold_metrics
        np.testing.assert_array_equal(a.oof_scores, b.oof_scores)


def test_pilots_share_graphs_as_their_folds_will(monkeypatch):
    """The second kNN method's pilot reuses the first one's graph (its folds will), while every
    repeated run of a pilot builds its own, as every fold does (else the repeats' fastest run
    would price the first method without its graph)."""
    rng = np.random.default_rng(13)
    X, Y = clustered(rng, 700, 6, 4)
    builds: list[str] = []
    real = neighbours._build

    def counted(*args: object, **kwargs: object) -> neighbours.NeighbourGraph:
        builds.append("build")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(neighbours, "_build", counted)
    monkeypatch.setattr(pricing, "PILOT_REPEAT_SECONDS", 1e9)  # always PILOT_RUNS runs
    costs = pricing.pilot_costs(X, Y, [("dmknn", {}), ("mlknn", {})], cv=5)
    assert len(builds) == pricing.PILOT_RUNS  # dmknn's runs built it; mlknn's reused the last
    assert set(costs) == {"dmknn", "mlknn"}
    assert costs["dmknn"].growth == pricing.GROWTH["dmknn"]
    assert costs["mlknn"].growth == pricing.GRAPH_REUSE_GROWTH  # its folds reuse the graph: the rest grows
    builds.clear()
    alone = pricing.pilot_costs(X, Y, [("mlknn", {})], cv=5)
    assert len(builds) == pricing.PILOT_RUNS  # alone: nothing to share, every run builds
    assert alone["mlknn"].growth == pricing.GROWTH["mlknn"]


def test_sharing_is_keyed_by_content_and_k():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(200, 5))
    with sharing_graphs() as cache:
        first = training_graph(X, 5, "exact")
        assert training_graph(X.copy(), 5, "exact") is first
        assert training_graph(X, 6, "exact") is not first
        assert training_graph(X + 1e-12, 5, "exact") is not first
        with sharing_graphs() as inner:
            assert inner is cache
    assert (cache.builds, cache.hits) == (3, 1)
    assert training_graph(X, 5, "exact") is not first  # outside the block nothing is shared


def test_models_pickled_before_the_option_load_as_exact():
    rng = np.random.default_rng(12)
    X, Y = clustered(rng, 120, 4, 3)
    for model in (MLkNN(k=5).fit(X, Y), DMKNN(k=5).fit(X, Y)):
        state = model.__getstate__()
        for name in ("neighbors", "neighbour_search_", "neighbour_recall_"):
            del state[name]
        old = type(model).__new__(type(model))
        old.__setstate__(state)
        assert old.get_params()["neighbors"] == "exact" and old.neighbour_search_ == "exact"
        np.testing.assert_array_equal(old.decision_function(X[:9]), model.decision_function(X[:9]))
