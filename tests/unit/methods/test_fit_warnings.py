"""Every fit that stops without converging or meets a degenerate case says so with a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from app.methods.elcfs import ELCFS
from app.methods.fit_warnings import ConstantScoresWarning, ConvergenceWarning, DegenerateFitWarning, NonConvexWarning
from app.methods.ghc_dr import GHCDR
from app.methods.ldlkm import LDLKM


def multilabel(seed: int, n: int = 80, d: int = 8, q: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = (X[:, :q] + 0.3 * rng.random((n, q)) > 0.7).astype(int)
    return X, Y


def test_elcfs_at_max_iter_raises_convergence_warning():
    X, Y = multilabel(0)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        model = ELCFS(max_iter=2, tol=0.0).fit(X, Y)
    assert not model.converged_
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert ELCFS(max_iter=2000, tol=1e-3).fit(X, Y).converged_


def test_ldlkm_kmeans_at_max_iter_raises_convergence_warning():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    D = rng.dirichlet(np.ones(4), size=200)
    with pytest.warns(ConvergenceWarning, match="k-means"):
        model = LDLKM(k=8, max_iter=1, random_state=0).fit(X, D)
    assert not model.converged_
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert LDLKM(k=2, max_iter=500, random_state=0).fit(X, D).converged_


def test_ghc_dr_psd_redundancy_is_convex_where_the_literal_reading_is_not():
    X, Y = multilabel(2, d=10)
    with pytest.warns(NonConvexWarning):
        literal = GHCDR(beta=100.0, redundancy="literal").fit(X, Y)
    assert literal.min_D_ < 0 and literal.label_min_eigenvalue_ < 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFitWarning)
        convex = GHCDR(beta=100.0, redundancy="psd").fit(X, Y)
    assert convex.convex_ and convex.min_D_ >= 1.0 - 1e-9
    assert convex.label_min_eigenvalue_ == pytest.approx(literal.label_min_eigenvalue_)
    assert issubclass(NonConvexWarning, DegenerateFitWarning)


def test_ghc_dr_unweighted_relevance():
    X, Y = multilabel(3)
    model = GHCDR(w_scaling="none", alpha=0.0, beta=0.0).fit(X, Y)
    np.testing.assert_array_equal(model.w_, 1.0)
    np.testing.assert_allclose(model.feature_scores_, model.C_.sum(axis=1))


def test_selectors_warn_on_constant_feature_scores():
    X, Y = multilabel(4)
    Y[:] = 0  # no label information at all: every relevance is 0
    with pytest.warns(ConstantScoresWarning, match="ghc-dr"):
        GHCDR().fit(X, Y)
    with pytest.warns(ConstantScoresWarning, match="elcfs"):
        ELCFS(max_iter=50).fit(X, Y)


def test_ghc_dr_default_is_convex_and_skips_the_fuzzy_dependency():
    X, Y = multilabel(5, d=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFitWarning)
        model = GHCDR(beta=100.0).fit(X, Y)
    assert model.convex_ and model.FD_ is None
    np.testing.assert_array_equal(model.w_, 1.0)
