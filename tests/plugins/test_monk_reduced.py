"""The Q-dimensional solvers against brute force and against each other."""

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from monk_framework.engine.partitions import median_value
from monk_plugins import monk_reduced as R


def _brute_sup_median(A, n_dirs=200_001):
    """max over unit directions e in R^2 of med_q <e, a_q> (or 0), on a fine grid."""
    th = np.linspace(0, 2 * np.pi, n_dirs)
    E = np.stack([np.cos(th), np.sin(th)], 1)
    return max(float(median_value(E @ A.T, axis=1).max()), 0.0)


@pytest.mark.parametrize("Q", [1, 2, 3, 4, 5, 7, 9])
def test_exact_equals_brute_force_over_directions(Q):
    rng = np.random.default_rng(Q)
    for _ in range(4):
        A = rng.standard_normal((Q, 2)) + rng.standard_normal(2)
        sol = R.sup_median_exact(A @ A.T)
        brute = _brute_sup_median(A)
        # the grid misses the optimum by at most max‖a_q‖ times the angular step
        slack = np.linalg.norm(A, axis=1).max() * 2 * np.pi / 200_000
        assert brute - 1e-12 <= sol.value <= brute + slack
        # the certificate: a strict majority reaches the value, the active face attains it
        values = A @ A.T @ sol.beta
        assert (values[list(sol.majority_blocks)] >= sol.value - 1e-9).all()
        if sol.value > 0:
            assert np.allclose(values[list(sol.active)], sol.value, rtol=1e-7)
            assert sol.beta @ A @ A.T @ sol.beta == pytest.approx(1.0)


@pytest.mark.parametrize("r", [1, 2, 3, 5])
def test_the_enumeration_stops_at_the_dimension_plus_one_with_the_same_optimum(r):
    # faces of more than r + 1 points in R^r are affinely dependent: their candidates are
    # those of smaller faces, so skipping them changes nothing (and skips the singular
    # systems that sent a whole batch of faces to the pseudo-inverse)
    rng = np.random.default_rng(r)
    for Q in (5, 9, 11):
        A = rng.standard_normal((Q, r)) + rng.standard_normal(r)
        G = A @ A.T
        full, cut = R.sup_median_exact(G), R.sup_median_exact(G, dimension=r)
        assert cut.value == pytest.approx(full.value, rel=1e-12, abs=1e-15)
        assert cut.candidates <= full.candidates and (cut.candidates < full.candidates) == (r + 1 < R.majority(Q))
        # the same witness direction, up to round-off
        assert np.allclose(A.T @ cut.beta, A.T @ full.beta, rtol=1e-9, atol=1e-12)


def test_affine_min_norm_solves_each_face_whatever_its_batch_mates():
    # a singular face (a repeated point) in a batch: the regular faces keep their LU
    # solution, and the singular one gets the pseudo-inverse's
    rng = np.random.default_rng(4)
    A = rng.standard_normal((4, 3))
    A[3] = A[0]
    G = A @ A.T
    faces = np.array([[0, 1], [0, 3], [1, 2]])
    batch = R._affine_min_norm(G, faces)
    for face, lam in zip(faces, batch):
        alone = R._affine_min_norm(G, face[None, :])[0]
        np.testing.assert_allclose(lam, alone, rtol=1e-12, atol=1e-15)
        assert lam.sum() == pytest.approx(1.0)
    # the repeated point: the affine min-norm point is that point, its weight split evenly
    np.testing.assert_allclose(batch[1], [0.5, 0.5])


def test_exact_dominates_bcd_on_100_random_cases():
    rng = np.random.default_rng(0)
    for case in range(100):
        Q = int(rng.choice([3, 5, 7, 9, 11]))
        A = rng.standard_normal((Q, int(rng.integers(1, 8)))) + rng.standard_normal() * rng.standard_normal(1)
        G = A @ A.T
        start = np.ones(Q) / np.sqrt(np.ones(Q) @ G @ np.ones(Q))
        exact = R.sup_median_exact(G)
        for variant in ("authors", "paper"):
            _, trace = R.bcd_fixed(G, 50, variant=variant, beta0=start)
            assert exact.value >= trace[-1] - 1e-10, (case, variant)
        local = R.sup_median_local(G, start)
        assert R.objective(G, start) - 1e-12 <= local.value <= exact.value + 1e-10


def test_local_search_reaches_the_optimum_beyond_enumeration_size_on_easy_cases():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((21, 3)) * 0.1 + np.array([1.0, 0.5, 0.0])
    G = A @ A.T
    local = R.sup_median_local(G, np.ones(21))
    # a brute-force lower bound: random unit directions
    E = rng.standard_normal((200_000, 3))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    brute = float(median_value(E @ A.T, axis=1).max())
    assert local.value >= brute - 1e-9


def test_min_norm_point_equals_brute_force():
    rng = np.random.default_rng(4)
    for k in (1, 2, 3, 6):
        A = rng.standard_normal((k, 3)) + 1.0
        lam = R.min_norm_point(A @ A.T)
        assert lam.min() >= 0 and lam.sum() == pytest.approx(1.0)
        # affine minimum-norm points of all faces, kept when inside the hull
        best = np.inf
        for size in range(1, k + 1):
            for face in itertools.combinations(range(k), size):
                mu = R._affine_min_norm(A @ A.T, np.array([face]))[0]
                if (mu >= -1e-12).all():
                    best = min(best, float(np.linalg.norm(mu @ A[list(face)])))
        assert np.linalg.norm(lam @ A) == pytest.approx(best, rel=1e-9)


def _depth_by_majorities(points, u):
    """D(u) = max over strict majorities S of dist(u, conv{a_q : q ∈ S}), by enumeration."""
    B = points - u
    H = B @ B.T
    best = 0.0
    for S in itertools.combinations(range(len(points)), len(points) // 2 + 1):
        G = H[np.ix_(S, S)]
        lam = R.min_norm_point(G)
        best = max(best, float(np.sqrt(max(lam @ G @ lam, 0.0))))
    return best


def test_the_exact_oracle_is_right_beside_far_outlier_blocks():
    # six ordinary blocks spanning five dimensions and five outlier blocks 1e5-1e8 away
    # along a sixth: witnesses that cancel the outliers' entries had scored on round-off
    # and beaten every true one, and D came out 0 (wrong in 19 of 120 such cases)
    for seed in range(60):
        gen = np.random.default_rng(seed)
        ordinary = gen.normal(size=(6, 6))
        ordinary[:, 5] = 0.0
        outliers = gen.normal(size=(5, 6))
        outliers[:, 5] = 10.0 ** (5 + seed % 4)
        points = np.vstack([ordinary, outliers])
        u = np.append(gen.normal(size=5) * 3, gen.normal() * 2)
        H = (points - u) @ (points - u).T
        assert R.sup_median_exact(H).value == pytest.approx(_depth_by_majorities(points, u), rel=1e-6)


def test_minmax_center_in_one_dimension_is_the_median():
    points = np.array([[3.0], [-1.0], [0.5], [10.0], [0.7]])
    sol = R.minmax_center(points)
    assert sol.u[0] == pytest.approx(0.7, abs=1e-6)
    assert sol.objective == pytest.approx(0.0, abs=1e-10)


@pytest.mark.slow  # 4 s: a grid search to compare with (.ci/run runs it)
def test_minmax_center_is_certified_and_beats_a_grid_search():
    rng = np.random.default_rng(5)
    points = rng.standard_normal((7, 2))
    sol = R.minmax_center(points, tol=1e-7)  # tighter than the default: this one converges
    assert sol.converged and sol.lower <= sol.upper <= sol.lower + 1e-6
    loose = R.minmax_center(points)
    # the default stops at a gap of 1e-6 times the search radius (about 3 here)
    assert loose.converged and loose.lower <= sol.upper and loose.upper - loose.lower <= 1e-6 * 4
    grid = np.linspace(-2, 2, 81)
    best_grid = min(R._depth_oracle(points, np.array([a, b]))[0] for a in grid for b in grid)
    assert sol.lower <= best_grid + 1e-9 and sol.upper <= best_grid + 1e-9


def test_weiszfeld_equals_a_generic_minimiser():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((9, 4))
    beta, iterations, step = R.weiszfeld(A @ A.T)
    assert beta.min() >= 0 and beta.sum() == pytest.approx(1.0) and step < 1e-10

    def total(u):
        return np.linalg.norm(A - u, axis=1).sum()

    ref = minimize(total, A.mean(axis=0), method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 20000})
    assert total(beta @ A) <= ref.fun + 1e-9


def test_factor_is_exact_and_scale_safe():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((6, 3))
    M = A @ A.T
    F, pivots = R.factor(M)
    assert F.shape == (6, 3) and np.allclose(F @ F.T, M, atol=1e-12)
    # one block 1e15 times farther: the other blocks' geometry is untouched
    B = np.vstack([A, [1e15, 0.0, 0.0]])
    F2, _ = R.factor(B @ B.T)
    clean = F2[:6]
    assert np.allclose(clean @ clean.T, M, rtol=1e-10, atol=1e-10)


def test_the_minmax_solver_reports_each_iteration_and_an_embedding_passes_it_on():
    from monk_framework import embed

    points = np.random.default_rng(9).normal(size=(9, 3))
    seen = []
    sol = R.minmax_center(points, report=lambda done, most: seen.append((done, most)))
    assert seen == [(i, 300) for i in range(1, sol.iterations + 1)]
    np.testing.assert_array_equal(sol.u, R.minmax_center(points).u)  # the same solve, told or not
    told = []
    embed(
        np.random.default_rng(3).normal(size=(40, 2)),
        kernel="rbf",
        estimator="monk-embedding:n_blocks=9",
        rng=0,
        progress=lambda done, total, what: told.append(what),
    )
    assert any(what.startswith("minmax centre (Q = 9)") for what in told)
