"""Two-sample tests: batched permuted statistics, p-values, seeds, robustness, the split test."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monk_framework import Estimate, MMDEstimator, MonkError, ParameterError, hookimpl
from monk_framework.core.resources import Resources
from monk_framework.engine.memory import CHUNK_BYTES
from monk_framework.engine.pooled import PooledSample
from monk_framework.two_sample import PermutationTestResult, permutation_test, split_test
from monk_framework.two_sample.common import critical_rank, null_quantile, signed_root


def relabelled_estimates(estimator, kernel, pool, perms, seeds):
    """The naive loop: rebuild the samples of each relabelling and estimate from scratch."""
    out = []
    for perm, seed in zip(perms, seeds):
        X, Y = pool.relabelled(perm)
        out.append(estimator.estimate(kernel, X, Y, rng=np.random.default_rng(seed)).mmd2)
    return np.array(out)


@pytest.mark.parametrize("name", ["u-stat", "v-stat"])
@pytest.mark.parametrize("sizes", [(40, 40), (37, 23)])
def test_batched_classical_statistics_equal_a_naive_loop(registry, rng, monkeypatch, name, sizes):
    n, m = sizes
    X, Y = rng.normal(size=(n, 3)), rng.normal(0.2, 1.3, size=(m, 3))
    kernel = registry.get_kernel("rbf", sigma=1.5)
    est = registry.get_estimator(name)
    pool = PooledSample(kernel, X, Y, resources=Resources.of())
    perms = np.stack([np.arange(n + m)] + [rng.permutation(n + m) for _ in range(30)])
    monkeypatch.setitem(CHUNK_BYTES, "batch", 2 * 8 * (n + m) * 7)  # several batches
    batched = est.permuted_statistics(pool, perms, [None] * len(perms))
    naive = relabelled_estimates(est, kernel, pool, perms, [0] * len(perms))
    # MMD² is a difference of kernel means of size ~1, so round-off is absolute: 1e-12
    # relative to the kernel's scale (max k = 1 here) as well as to the value
    np.testing.assert_allclose(batched, naive, rtol=1e-12, atol=1e-12)
    assert batched[0] == pytest.approx(est.estimate(kernel, X, Y).mmd2, rel=1e-12)


@pytest.mark.parametrize(
    "name, params",
    [
        ("monk-bcd", {"n_blocks": 5, "n_iter": 20}),
        ("monk-bcd", {"n_blocks": 4, "n_iter": 10, "variant": "paper", "solver": "exact"}),
        ("monk-bcd", {"n_blocks": "auto", "n_iter": 10}),
        ("monk-bcd-fast", {"n_blocks": 5, "n_iter": 30}),
        ("monk-embedding-mmd", {"n_blocks": 5, "center": "geometric"}),
        ("monk-embedding-mmd", {"n_blocks": 3, "center": "minmax"}),
    ],
)
def test_monk_relabellings_reuse_the_pooled_gram_exactly(registry, rng, name, params):
    # the permuted view of the pooled Gram gives what the estimator computes from scratch
    X, Y = rng.normal(size=(30, 2)), rng.normal(0.5, 1.0, size=(26, 2))
    kernel = registry.get_kernel("quadratic")
    est = registry.get_estimator(name, **params)
    pool = PooledSample(kernel, X, Y, resources=Resources.of())
    perms = np.stack([np.arange(56)] + [rng.permutation(56) for _ in range(4)])
    seeds = [3, 4, 5, 6, 7]
    got = est.permuted_statistics(pool, perms, [np.random.default_rng(s) for s in seeds])
    want = relabelled_estimates(est, kernel, pool, perms, seeds)
    np.testing.assert_allclose(got, want, rtol=1e-10)


@attrs.frozen(kw_only=True)
class PlainVStatistic(MMDEstimator):
    """A third-party estimator without a batched path: the default loop serves it."""

    name: ClassVar[str] = "plain-v"
    summary: ClassVar[str] = "V-statistic without a permutation shortcut (test plugin)."
    formula: ClassVar[str] = "mean Kxx + mean Kyy - 2 mean Kxy"

    def compute_estimate(self, kernel, X, Y, rng, resources) -> Estimate:
        mmd2 = kernel.gram(X).mean() + kernel.gram(Y).mean() - 2 * kernel.gram(X, Y).mean()
        return Estimate(mmd2=mmd2, mmd=float(np.sqrt(max(mmd2, 0.0))))


@pytest.fixture
def plain_v(registry):
    import types

    plugin = types.ModuleType("plain_v_plugin")
    plugin.monk_estimators = hookimpl(lambda: [PlainVStatistic])  # type: ignore[attr-defined]
    registry.register(plugin)
    try:
        yield registry.get_estimator("plain-v")
    finally:
        registry.unregister(plugin)


def test_estimators_without_a_shortcut_get_the_default_loop(registry, rng, plain_v):
    X, Y = rng.normal(size=(15, 2)), rng.normal(0.4, 1.0, size=(12, 2))
    kernel = registry.get_kernel("rbf", sigma="median")
    ours = permutation_test(X, Y, kernel=kernel, estimator=plain_v, n_permutations=40, rng=8, return_null=True)
    batched = permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("v-stat"), n_permutations=40, rng=8, return_null=True)
    # the same seed gives the same relabellings, so the same null sample and p-value
    np.testing.assert_allclose(ours.null_distribution, batched.null_distribution, rtol=1e-10)
    assert ours.pvalue == batched.pvalue
    assert ours.kernel_params == batched.kernel_params  # median heuristic on the pooled sample


def test_p_value_quantile_and_decision_agree(registry, rng):
    X, Y = rng.normal(size=(25, 1)), rng.normal(0.7, 1.0, size=(20, 1))
    kernel = registry.get_kernel("rbf", sigma=1.0)
    for B, alpha in [(99, 0.05), (19, 0.05), (18, 0.05), (200, 0.1), (57, 0.29)]:
        r = permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("u-stat"), n_permutations=B, alpha=alpha, rng=1, return_null=True)
        null = np.array(r.null_distribution)
        assert len(null) == B
        assert r.pvalue == (1 + np.sum(null >= r.statistic)) / (1 + B)
        assert r.reject == (r.pvalue <= alpha + 1e-12)
        if r.null_quantile is None:
            assert B < 1 / alpha - 1 and not r.reject and "Cannot reject" in r.decision
        else:
            assert r.reject == (r.statistic > r.null_quantile)
        assert r.statistic == pytest.approx(float(signed_root(r.statistic_mmd2)), rel=1e-15)


@settings(max_examples=200, deadline=None)
@given(
    null=st.lists(st.integers(-5, 5), min_size=1, max_size=60),
    T=st.integers(-6, 6),
    alpha=st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.29, 0.5]),
)
def test_rejecting_above_the_quantile_is_rejecting_small_p_values(null, T, alpha):
    # ties included (integer values): T > q̂ exactly when (1 + #{T_b >= T}) / (1 + B) <= α
    values = np.array(null, dtype=float)
    B = len(values)
    q = null_quantile(values, alpha)
    by_count = int(np.sum(values >= T)) <= critical_rank(B, alpha)
    by_p = (1 + np.sum(values >= T)) / (1 + B) <= alpha * (1 + 1e-12)
    assert by_count == by_p
    assert by_count == (q is not None and T > q)


def test_seeds_reproduce_and_batching_does_not_matter(registry, rng, monkeypatch):
    X, Y = rng.normal(size=(20, 2)), rng.normal(size=(20, 2))
    kernel = registry.get_kernel("rbf", sigma=1.0)
    run = lambda name, seed: permutation_test(  # noqa: E731
        X,
        Y,
        kernel=kernel,
        estimator=registry.get_estimator(name, **({"n_iter": 10, "n_blocks": 5} if "monk" in name else {})),
        n_permutations=30,
        rng=seed,
        return_null=True,
    )
    for name in ("u-stat", "monk-bcd"):
        a, b = run(name, 4), run(name, 4)
        assert np.array_equal(a.null_distribution, b.null_distribution) and a.statistic == b.statistic and a.seed == 4
        assert not np.array_equal(run(name, 5).null_distribution, a.null_distribution)
    first = run("u-stat", 4)
    monkeypatch.setitem(CHUNK_BYTES, "batch", 2 * 8 * 40 * 4)
    rebatched = run("u-stat", 4)
    # the same relabellings; only BLAS round-off differs with the batch shape
    np.testing.assert_allclose(rebatched.null_distribution, first.null_distribution, rtol=1e-12, atol=1e-13)
    assert rebatched.pvalue == first.pvalue


def test_outliers_fool_the_u_statistic_test_but_not_monk(registry):
    # X and Y from one Gaussian, five of X's points moved to 2000 (quadratic kernel).
    # Relabellings keep all five outliers on one side with probability 2/32, so the
    # U-statistic's p-value sits near 1/32 and it rejects in most runs (docs/studies/tests.md
    # has the rates over 1000 runs); BCD-Fast relabelled within its 21 blocks leaves the
    # outliers' blocks out of the median in T and in every relabelled statistic.
    kernel = registry.get_kernel("quadratic")
    monk = registry.get_estimator("monk-bcd-fast", n_blocks=21)
    u_rejects = monk_rejects = monk_detects = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X, Y = rng.normal(size=(100, 1)), rng.normal(size=(100, 1))
        X[:5] = 2000.0
        u_rejects += permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("u-stat"), n_permutations=200, rng=seed).reject
        monk_rejects += permutation_test(X, Y, kernel=kernel, estimator=monk, n_permutations=40, rng=seed).reject
        # a real shift, with the outliers still there, is detected by MONK
        monk_detects += permutation_test(X, Y + 2.5, kernel=kernel, estimator=monk, n_permutations=40, rng=seed).reject
    assert u_rejects >= 6 and monk_rejects <= 2 and monk_detects >= 9


def test_with_outliers_in_the_smaller_sample_the_u_statistic_test_always_rejects(registry):
    # N = 100 < M = 200: a relabelling puts all five outliers back in X with probability
    # C(100, 5)/C(300, 5) < 0.004, and five in Y give a statistic about 4x smaller, so
    # the p-value is near 1/(B + 1): the false discovery is (almost) certain.
    kernel, u = registry.get_kernel("quadratic"), registry.get_estimator("u-stat")
    p_values = []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X, Y = rng.normal(size=(100, 1)), rng.normal(size=(200, 1))
        X[:5] = 2000.0
        p_values.append(permutation_test(X, Y, kernel=kernel, estimator=u, n_permutations=200, rng=seed).pvalue)
    assert max(p_values) <= 0.03


def test_the_exact_bcd_fast_test_keeps_its_level_under_outliers_and_sees_a_shift(registry):
    # the exact BCD-Fast statistic, med_q ||d_q||, leaves the five outliers' blocks out of
    # the median (within blocks, the test-time form of both solvers); docs/studies/tests.md has
    # the rates over 1000 runs
    kernel, fast = registry.get_kernel("quadratic"), registry.get_estimator("monk-bcd-fast", solver="exact")
    false_rejects = detects = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X, Y = rng.normal(size=(150, 1)), rng.normal(size=(150, 1))
        X[:5] = 2000.0
        false_rejects += permutation_test(X, Y, kernel=kernel, estimator=fast, n_permutations=100, rng=seed).reject
        detects += permutation_test(X, Y + 1.5, kernel=kernel, estimator=fast, n_permutations=100, rng=seed).reject
    assert false_rejects <= 2 and detects >= 9


def test_result_round_trips_through_json(registry, rng):
    X, Y = rng.normal(size=(10, 2)), rng.normal(size=(12, 2))
    r = permutation_test(
        X, Y, kernel=registry.get_kernel("rbf", sigma=1.0), estimator=registry.get_estimator("v-stat"), n_permutations=9, rng=0, return_null=True
    )
    import json

    data = json.loads(r.to_json())
    assert data["type"] == "permutation-test" and data["decision"] == r.decision
    assert PermutationTestResult.from_dict(data) == r


def test_bad_test_parameters_are_named(registry, rng):
    X, Y = rng.normal(size=(10, 2)), rng.normal(size=(10, 2))
    kernel, est = registry.get_kernel("rbf", sigma=1.0), registry.get_estimator("u-stat")
    with pytest.raises(ParameterError, match="n_permutations"):
        permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=0)
    with pytest.raises(ParameterError, match="alpha"):
        permutation_test(X, Y, kernel=kernel, estimator=est, alpha=1.5)
    with pytest.raises(MonkError, match="MMD estimator"):
        permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("mean"))
    with pytest.raises(MonkError, match="Expected a Kernel"):
        split_test(X, Y, kernel=3.0, estimator=est)
    with pytest.raises(MonkError, match="needs at least"):
        permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("monk-bcd", n_blocks=11))
    with pytest.raises(ParameterError, match="no parameter 'bandwidth'"):
        split_test(X, Y, kernel=kernel, estimator=est, grid={"bandwidth": [1, 2]})
    with pytest.raises(ParameterError, match="non-empty list"):
        split_test(X, Y, kernel=kernel, estimator=est, grid={"sigma": []})
    with pytest.raises(ParameterError, match=r"grid gives the kernel rbf\(sigma=1.0\) more than once"):
        split_test(X, Y, kernel=kernel, estimator=est, grid={"sigma": [1, 2, 1.0]})  # tuned twice: only time lost
    with pytest.raises(MonkError, match="three parts"):
        split_test(X, Y, kernel=kernel, estimator=registry.get_estimator("monk-bcd", n_blocks=3))


# -- the split test ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RecordingVStatistic(MMDEstimator):
    """V-statistic that records the points of every pooled sample it is asked about."""

    name: ClassVar[str] = "recording-v"
    summary: ClassVar[str] = "test plugin"
    formula: ClassVar[str] = "V-statistic"
    calls: ClassVar[list[tuple[str, set[float]]]] = []

    def compute_estimate(self, kernel, X, Y, rng, resources) -> Estimate:  # pragma: no cover - not used here
        raise AssertionError("the split test goes through permuted_statistics")

    def permuted_statistics(self, pool: PooledSample, perms: np.ndarray, rngs: Any) -> np.ndarray:
        identity = len(perms) == 1 and np.array_equal(perms[0], np.arange(pool.size))
        RecordingVStatistic.calls.append(("identity" if identity else "relabel", set(np.ravel(pool.Z).tolist())))
        K = pool.kernel.gram(pool.Z)
        out = []
        for perm in perms:
            x, y = perm[: pool.n], perm[pool.n :]
            out.append(K[np.ix_(x, x)].mean() + K[np.ix_(y, y)].mean() - 2 * K[np.ix_(x, y)].mean())
        return np.array(out)


def test_split_test_tunes_calibrates_and_tests_on_disjoint_parts(registry):
    # X's points are 0..29 and Y's 100..124, so each value names its point
    X = np.arange(30, dtype=float)[:, None]
    Y = 100.0 + np.arange(25, dtype=float)[:, None]
    RecordingVStatistic.calls.clear()
    grid = {"sigma": [1.0, 10.0, 100.0]}
    r = split_test(X, Y, kernel=registry.get_kernel("rbf", sigma=1.0), estimator=RecordingVStatistic(), grid=grid, n_permutations=20, rng=3)
    parts = {name: (set(p["x"]), set(p["y"])) for name, p in r.parts.items()}
    # three disjoint parts of (nearly) equal size that cover both samples
    for i, (ix, iy) in enumerate(parts.values()):
        assert len(ix) in (10,) and len(iy) in (8, 9)
        for j, (jx, jy) in enumerate(parts.values()):
            if i != j:
                assert not ix & jx and not iy & jy
    assert set().union(*(p[0] for p in parts.values())) == set(range(30))
    assert set().union(*(p[1] for p in parts.values())) == set(range(25))
    points = {name: {float(i) for i in ix} | {100.0 + i for i in iy} for name, (ix, iy) in parts.items()}
    calls = RecordingVStatistic.calls
    # one identity call per grid value on part 1, then relabellings of part 2, then part 3
    assert [kind for kind, _ in calls[:3]] == ["identity"] * 3
    assert all(seen == points["tune"] for _, seen in calls[:3])
    assert all(kind == "relabel" and seen == points["calibrate"] for kind, seen in calls[3:-1])
    assert calls[-1] == ("identity", points["test"])
    # the chosen sigma is the grid value with the largest statistic on part 1
    stats = [t["statistic"] for t in r.tuning]
    assert r.kernel_params["sigma"] == grid["sigma"][int(np.argmax(stats))]
    assert r.excess == pytest.approx(r.statistic - r.null_quantile)
    assert r.reject == (r.statistic > r.null_quantile)


def test_split_test_fits_data_dependent_rules_on_part_one_only(registry, rng):
    from monk_framework.engine.median_heuristic import median_distance

    X, Y = rng.normal(size=(30, 2)), rng.normal(1.0, 1.0, size=(30, 2))
    r = split_test(X, Y, kernel=registry.get_kernel("rbf", sigma="median"), estimator=registry.get_estimator("u-stat"), n_permutations=19, rng=0)
    ix, iy = r.parts["tune"]["x"], r.parts["tune"]["y"]
    assert r.kernel_params["sigma"] == pytest.approx(median_distance(np.vstack([X[ix], Y[iy]])), rel=1e-12)
    assert r.kernel_params_requested == {"sigma": "median"}


def test_split_test_on_strings_with_a_grid_over_n_and_lambda(registry):
    from monk_framework import load_splice

    seqs = load_splice(("EI", "IE"))
    X, Y = seqs["EI"][:90], seqs["IE"][:90]
    r = split_test(
        X,
        Y,
        kernel=registry.get_kernel("ssk"),
        estimator=registry.get_estimator("u-stat"),
        grid={"n": [2, 3], "lam": [0.5, 0.9]},
        n_permutations=50,
        rng=1,
    )
    assert [t["params"] for t in r.tuning] == [{"n": 2, "lam": 0.5}, {"n": 2, "lam": 0.9}, {"n": 3, "lam": 0.5}, {"n": 3, "lam": 0.9}]
    best = max(r.tuning, key=lambda t: t["statistic"])
    assert {k: r.kernel_params[k] for k in ("n", "lam")} == best["params"]
    assert r.reject  # EI and IE junctions differ


def test_a_split_test_grid_is_checked_before_its_combinations_are_made(registry, rng, monkeypatch):
    from monk_framework import ParameterError, ResourceError

    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    kernel, est = registry.get_kernel("polynomial"), registry.get_estimator("u-stat")
    with pytest.raises(ParameterError, match=r"grid must map kernel parameter names to lists of values.*got list"):
        split_test(X, Y, kernel=kernel, estimator=est, grid=[("degree", [1, 2])])  # it was an AttributeError
    # three keys of 10^4 values: 10^12 combinations, refused before itertools.product runs
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 8 * 2**30)
    values = list(range(1, 10**4 + 1))
    with pytest.raises(ResourceError, match=r"grid: 10000 x 10000 x 10000 = 1,000,000,000,000 combinations to tune need"):
        split_test(X, Y, kernel=kernel, estimator=est, grid={"degree": values, "scale": values, "offset": values})


def test_split_test_progress_counts_the_grid_points_then_the_relabellings(registry, rng):
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    seen: list[tuple[int, int]] = []
    args = dict(kernel=registry.get_kernel("rbf", sigma=1.0), estimator=registry.get_estimator("u-stat"))
    r = split_test(X, Y, **args, grid={"sigma": [0.5, 1.0, 2.0]}, n_permutations=40, rng=3, progress=lambda d, t, what: seen.append((d, t)))
    assert seen[:3] == [(1, 43), (2, 43), (3, 43)] and seen[-1] == (43, 43)
    assert all(t == 43 for _, t in seen) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    quiet = split_test(X, Y, **args, grid={"sigma": [0.5, 1.0, 2.0]}, n_permutations=40, rng=3)
    assert quiet.pvalue == r.pvalue and quiet.statistic == r.statistic  # progress changes no number


def test_relabelling_streams_are_the_spawned_children():
    from monk_framework.core.randomness import ChildStreams as _Streams

    seq = np.random.SeedSequence(11)
    lazy = _Streams(seq, 3, 7)
    children = np.random.SeedSequence(11).spawn(7)
    assert len(lazy) == 4
    for i in range(4):
        assert lazy[i].random() == np.random.default_rng(children[3 + i]).random()
    assert lazy[-1].random() == np.random.default_rng(children[6]).random()
    assert [g.random() for g in lazy[1:3]] == [np.random.default_rng(c).random() for c in children[4:6]]
    with pytest.raises(IndexError):
        lazy[4]


def test_bcd_fast_block_sums_of_all_partitions_in_bounded_products(registry, rng, monkeypatch):

    X, Y = rng.normal(size=(40, 2)), rng.normal(size=(34, 2))
    kernel = registry.get_kernel("rbf", sigma=0.7)
    est = registry.get_estimator("monk-bcd-fast", n_blocks=7, n_iter=60)
    pool = PooledSample(kernel, X, Y, resources=Resources.of())
    perms = np.stack([rng.permutation(74) for _ in range(3)])
    together = est.permuted_statistics(pool, perms, [np.random.default_rng(s) for s in range(3)])
    monkeypatch.setitem(CHUNK_BYTES, "batch", 1)  # one partition per product
    apart = est.permuted_statistics(pool, perms, [np.random.default_rng(s) for s in range(3)])
    np.testing.assert_allclose(apart, together, rtol=1e-12)
    want = relabelled_estimates(est, kernel, pool, perms, range(3))
    np.testing.assert_allclose(together, want, rtol=1e-10)


# -- within-block relabelling ------------------------------------------------------------


def test_monk_estimators_relabel_within_blocks_by_default(registry, rng):
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(26, 2))
    kernel = registry.get_kernel("rbf", sigma=1.0)
    fast = registry.get_estimator("monk-bcd-fast", n_blocks=5, solver="exact")
    within = permutation_test(X, Y, kernel=kernel, estimator=fast, n_permutations=20, rng=1)
    assert (within.relabel, within.n_blocks) == ("within-blocks", 5)
    glob = permutation_test(X, Y, kernel=kernel, estimator=fast, n_permutations=20, rng=1, relabel="global")
    assert (glob.relabel, glob.n_blocks) == ("global", None)
    u = permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("u-stat"), n_permutations=20, rng=1)
    assert u.relabel == "global"
    lepski = registry.get_estimator("monk-bcd", n_blocks="auto", n_iter=5)
    assert permutation_test(X, Y, kernel=kernel, estimator=lepski, n_permutations=5, rng=1).relabel == "global"
    for est in (registry.get_estimator("u-stat"), lepski):
        with pytest.raises(ParameterError, match="within-blocks"):
            permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=5, relabel="within-blocks")
    with pytest.raises(ParameterError, match="relabel"):
        permutation_test(X, Y, kernel=kernel, estimator=fast, n_permutations=5, relabel="inside")


@pytest.mark.parametrize(
    "name, params",
    [("monk-bcd-fast", {"n_blocks": 5, "solver": "exact"}), ("monk-bcd", {"n_blocks": 5, "n_iter": 15, "test_form": "signed"})],
)
def test_within_block_null_is_the_estimator_on_relabelled_samples_with_the_fixed_partition(registry, rng, monkeypatch, name, params):
    # rebuild the test's partition and relabellings from its documented streams, then run
    # the estimator from scratch on every relabelled sample with that partition
    import monk_plugins.monk_mmd as monk_mmd
    from monk_framework.engine.within_blocks import relabelled_partition, relabellings

    n, m = 33, 29
    X, Y = rng.normal(size=(n, 1)), rng.normal(0.3, 1.0, size=(m, 1))
    kernel, est = registry.get_kernel("quadratic"), registry.get_estimator(name, **params)
    result = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=70, rng=9, return_null=True)
    seq = np.random.SeedSequence(9)
    _, null_seq = seq.spawn(2)
    part = est.fixed_partition(n, m, np.random.default_rng(seq.spawn(1)[0]))
    perms = relabellings(part, n, 0, 70, null_seq.spawn(2)[0])
    pool = PooledSample(kernel, X, Y, resources=Resources.of())
    for b in (0, 33, 69):
        fixed = relabelled_partition(part, perms[b], n)
        monkeypatch.setattr(monk_mmd, "pair_partition", lambda *args, fixed=fixed: fixed)
        want = est.estimate(kernel, *pool.relabelled(perms[b]), rng=0).mmd2
        assert result.null_distribution[b] == pytest.approx(float(signed_root(want)), rel=1e-9)
    fixed = relabelled_partition(part, np.arange(n + m), n)
    monkeypatch.setattr(monk_mmd, "pair_partition", lambda *args: fixed)
    assert result.statistic == pytest.approx(est.estimate(kernel, X, Y, rng=0).mmd, rel=1e-9)


def test_within_block_relabellings_do_not_depend_on_batches_or_on_b(registry, rng, monkeypatch):
    X, Y = rng.normal(size=(40, 1)), rng.normal(size=(40, 1))
    kernel, est = registry.get_kernel("quadratic"), registry.get_estimator("monk-bcd-fast", solver="exact")
    from monk_framework.engine.partitions import pair_partition
    from monk_framework.engine.within_blocks import relabellings

    part, seq = pair_partition(40, 40, 11, rng), np.random.SeedSequence(5)
    np.testing.assert_array_equal(relabellings(part, 40, 100, 230, seq), relabellings(part, 40, 0, 300, seq)[100:230])
    long = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=300, rng=2, return_null=True)
    short = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=130, rng=2, return_null=True)
    # the same relabellings; only BLAS round-off differs with the batch shape
    np.testing.assert_allclose(short.null_distribution, long.null_distribution[:130], rtol=1e-12)
    monkeypatch.setitem(CHUNK_BYTES, "batch", 8 * 80 * 64)  # one draw chunk per batch
    again = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=300, rng=2, return_null=True)
    np.testing.assert_allclose(again.null_distribution, long.null_distribution, rtol=1e-12)
    assert again.pvalue == long.pvalue


def test_within_block_test_is_exact_on_clean_exchangeable_data(registry):
    # B = 19: under H0 the p-value is uniform on {1/20, ..., 1}, so P(p <= 0.05) = 0.05;
    # over 300 seeded runs the rate lies within 2.5 standard errors (docs/studies/tests.md has
    # the 500-run study)
    kernel, est = registry.get_kernel("quadratic"), registry.get_estimator("monk-bcd-fast", n_blocks=5, solver="exact")
    rejections = 0
    for seed in range(300):
        g = np.random.default_rng([seed, 77])
        X, Y = g.standard_t(3, size=(25, 1)), g.standard_t(3, size=(25, 1))
        rejections += permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=19, alpha=0.05, rng=seed).reject
    assert abs(rejections / 300 - 0.05) <= 2.5 * np.sqrt(0.05 * 0.95 / 300)


@pytest.mark.slow  # 2 s (.ci/run runs it)
def test_gauss_outliers_example_rejects_only_with_within_block_relabelling(registry):
    # the clean Gaussians of the gauss-outliers data set differ (MMD 0.88), and 5 outliers
    # sit in each sample; relabelling globally spreads them over the blocks, so the
    # null quantile explodes and BCD never rejected (the report: p = 0.07..0.11)
    from monk_framework.app.datasets import get_dataset

    kernel, bcd = registry.get_kernel("quadratic"), registry.get_estimator("monk-bcd")
    for seed in (0, 1):
        X, Y = get_dataset("gauss-outliers").sample(seed)
        assert permutation_test(X, Y, kernel=kernel, estimator=bcd, n_permutations=100, rng=seed).reject
        glob = permutation_test(X, Y, kernel=kernel, estimator=bcd, n_permutations=100, rng=seed, relabel="global")
        assert not glob.reject and glob.null_quantile > 100 * glob.statistic


def test_a_number_of_permutations_that_cannot_fit_is_refused_before_any_kernel_work(registry, rng, monkeypatch):
    from monk_framework import ResourceError
    from monk_framework.two_sample import permutation
    from monk_framework.two_sample.robust import robust_test

    calls = []
    kernel = registry.get_kernel("rbf", sigma=1.0)
    monkeypatch.setattr(type(kernel), "compute_gram", lambda self, X, Y: calls.append(1) or np.ones((len(X), len(Y))))
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 2**30)
    X, Y = rng.normal(size=(30, 1)), rng.normal(size=(30, 1))
    with pytest.raises(ResourceError, match=r"n_permutations \(-B\) = 100,000,000 needs about 5.96 GiB.*1/\(B \+ 1\)"):
        permutation.permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("monk-bcd"), n_permutations=10**8)
    with pytest.raises(ResourceError, match="n_permutations"):
        robust_test(X, Y, kernel=kernel, contamination=1, method="dc", n_permutations=10**8)
    with pytest.raises(ResourceError, match="n_permutations"):
        split_test(X, Y, kernel=kernel, estimator=registry.get_estimator("u-stat"), n_permutations=10**8)
    assert calls == []  # refused before the Gram matrix


def test_tests_accept_kernels_and_estimators_by_name(registry):
    from monk_framework.two_sample.robust import robust_test

    gen = np.random.default_rng(2)
    X, Y = gen.normal(size=(40, 2)), gen.normal(0.5, 1.0, size=(40, 2))
    by_name = permutation_test(X, Y, kernel="rbf:sigma=1.5", estimator="monk-bcd-fast:n_blocks=5", n_permutations=19, rng=0)
    by_object = permutation_test(
        X, Y, kernel=registry.get_kernel("rbf", sigma=1.5), estimator=registry.get_estimator("monk-bcd-fast", n_blocks=5), n_permutations=19, rng=0
    )
    assert attrs.evolve(by_name, timings={}) == attrs.evolve(by_object, timings={})
    assert split_test(X, Y, kernel="gaussian", estimator="u-stat", n_permutations=19, rng=0).kernel == "rbf"
    assert robust_test(X, Y, kernel="rbf:sigma=1", contamination=1, estimator="v-stat", n_permutations=19, rng=0).method == "dc"
    with pytest.raises(MonkError, match="Unknown estimator 'u-stats'"):
        permutation_test(X, Y, kernel="rbf", estimator="u-stats")


@pytest.mark.parametrize("name", ["u-stat", "v-stat"])
@pytest.mark.parametrize("matrix_free", [False, True])
def test_relabellings_that_tie_t_in_exact_arithmetic_all_count(registry, name, matrix_free):
    # X and Y mirror each other, so T is the largest value, reached exactly by the
    # relabellings whose X is X's set or Y's set (N = M: swapping the samples keeps the
    # statistic); computed in another order each, they differ from T by round-off only.
    # The exact p-value counts all of them: (1 + #ties) / (1 + B), by combinatorics.
    from monk_framework.core.randomness import root, stream

    budget = 1 if matrix_free else None  # a budget of one byte: every Gram matrix in tiles
    X = np.array([[0.1], [0.7], [1.3], [2.9]])
    Y = 7.0 - X
    kernel = registry.get_kernel("rbf", sigma=1.7)
    B = 300
    for seed in range(5):
        r = permutation_test(X, Y, kernel=kernel, estimator=name, n_permutations=B, rng=seed, max_memory=budget)
        perm_rng = np.random.default_rng(stream(root(seed), "relabel").spawn(2)[0])
        sets = [frozenset(perm_rng.permutation(8)[:4].tolist()) for _ in range(B)]
        ties = sum(s in ({0, 1, 2, 3}, {4, 5, 6, 7}) for s in sets)
        assert ties > 0
        assert r.pvalue == (1 + ties) / (1 + B)


def test_relabellings_are_drawn_as_successive_permutations(registry, rng):
    # the null sample's relabellings are rng.permutation(N + M), B times in a row, from the
    # relabelling stream (drawn as a block with Generator.permuted: the same draws)
    from monk_framework.core.randomness import root, stream

    X, Y = rng.normal(size=(9, 2)), rng.normal(size=(6, 2))
    kernel = registry.get_kernel("rbf", sigma=1.0)
    got = permutation_test(X, Y, kernel=kernel, estimator="v-stat", n_permutations=40, rng=3, return_null=True).null_distribution
    perm_rng = np.random.default_rng(stream(root(3), "relabel").spawn(2)[0])
    K = kernel.gram(np.vstack([X, Y]))
    want = []
    for _ in range(40):
        p = perm_rng.permutation(15)
        x, y = p[:9], p[9:]
        want.append(K[np.ix_(x, x)].mean() + K[np.ix_(y, y)].mean() - 2 * K[np.ix_(x, y)].mean())
    np.testing.assert_allclose(got, signed_root(np.array(want)), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("ahead", [None, 1, 5, 12, 40])
@pytest.mark.parametrize("bounds", [[0, 12], [0, 5, 12], [0, 1, 2, 9, 12], [0, 12, 30]])
def test_relabellings_drawn_ahead_are_the_same_whatever_the_batches(ahead, bounds):
    # rows are successive seq-child-0 permutations, however many were drawn ahead in the
    # background and however the batches cut them; the first batch carries one identity row
    from monk_framework.core.randomness import child
    from monk_framework.engine.relabelling import GlobalRelabellings

    seq = np.random.SeedSequence(21)
    drawn = GlobalRelabellings(seq, 7)
    if ahead is not None:
        drawn.draw_ahead(ahead, lead=1)
    got = [drawn.rows(a, b, lead=1 if a == 0 else 0) for a, b in zip(bounds, bounds[1:])]
    drawn.close()
    assert np.array_equal(got[0][0], np.arange(7))
    ref = np.random.default_rng(child(seq, 0))
    want = np.array([ref.permutation(7) for _ in range(bounds[-1])])
    assert np.array_equal(np.concatenate([got[0][1:], *got[1:]]), want)


@pytest.mark.parametrize("n, n_permutations, ahead", [(20, 99, False), (300, 200, True)])
def test_only_a_large_first_draw_runs_in_a_thread_and_either_way_gives_the_same_bits(registry, monkeypatch, n, n_permutations, ahead):
    # below DRAW_AHEAD_MIN_ENTRIES indices the relabellings are drawn when first asked for,
    # on this thread; the statistic, the p-value and the null are those of the threaded draw
    import threading

    from monk_framework.engine import relabelling

    g = np.random.default_rng(4)
    X, Y = g.normal(size=(n, 2)), g.normal(0.2, 1.0, size=(n, 2))
    started: list[str] = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self.name) or start(self))
    run = lambda: permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=n_permutations, rng=7)  # noqa: E731
    got = run()
    assert ("monkfw-relabellings" in started) == ahead
    monkeypatch.setattr(relabelling, "DRAW_AHEAD_MIN_ENTRIES", 0 if not ahead else 10**12)
    started.clear()
    other = run()
    assert ("monkfw-relabellings" in started) != ahead
    assert (other.statistic, other.pvalue) == (got.statistic, got.pvalue)
    assert np.array_equal(other.null_distribution, got.null_distribution)


def test_shared_relabellings_are_the_rows_each_test_would_draw():
    # an aggregated test draws the relabellings once for all its kernels: the successive
    # seq-child-0 permutations after one identity row, read-only, served in batches as a
    # test asks for them (views, or an identity row put in front)
    from monk_framework.core.randomness import child
    from monk_framework.core.resources import Resources
    from monk_framework.engine.relabelling import SharedRelabellings

    seq = np.random.SeedSequence(21)
    shared = SharedRelabellings.of(seq, 7, 12, Resources.of(None))
    assert shared is not None
    ref = np.random.default_rng(child(seq, 0))
    want = np.array([ref.permutation(7) for _ in range(12)])
    assert np.array_equal(shared.rows[0], np.arange(7)) and np.array_equal(shared.rows[1:], want)
    assert not shared.rows.flags.writeable
    for bounds in ([0, 12], [0, 5, 12], [0, 1, 2, 9, 12]):
        cursor = shared.cursor()
        got = [cursor.rows(a, b, lead=1 if a == 0 else 0) for a, b in zip(bounds, bounds[1:])]
        assert np.array_equal(got[0][0], np.arange(7))
        assert np.array_equal(np.concatenate([got[0][1:], *got[1:]]), want)
    cursor = shared.cursor()
    cursor.rows(0, 3)
    later = cursor.rows(3, 5, lead=1)
    assert np.array_equal(later[0], np.arange(7)) and np.array_equal(later[1:], want[3:5])
    with pytest.raises(RuntimeError, match="in order"):
        cursor.rows(6, 8)
    # they serve a test of the same stream, size and at most as many relabellings
    assert shared.serves(seq, 7, 12) and shared.serves(seq, 7, 5)
    assert not shared.serves(seq, 8, 12) and not shared.serves(seq, 7, 13)
    assert not shared.serves(np.random.SeedSequence(22), 7, 12) and not shared.serves(child(seq, 0), 7, 12)
    # 16 bytes a point a relabelling: beyond a quarter of the budget, none
    need = 16 * 13 * 7
    assert SharedRelabellings.of(seq, 7, 12, Resources(budget=4 * need)) is not None
    assert SharedRelabellings.of(seq, 7, 12, Resources(budget=4 * need - 4)) is None


def test_relabellings_are_asked_for_in_order():
    from monk_framework.engine.relabelling import GlobalRelabellings

    drawn = GlobalRelabellings(np.random.SeedSequence(1), 5)
    drawn.rows(0, 3)
    with pytest.raises(RuntimeError, match="in order"):
        drawn.rows(4, 6)
    with pytest.raises(RuntimeError, match="before any relabelling"):
        drawn.draw_ahead(3)


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.mark.parametrize("d, alone", [(3, True), (40, False)])
def test_blas_gets_one_thread_while_drawing_ahead_only_for_few_features(registry, rng, monkeypatch, d, alone):
    # low-dimensional data: the fit and the Gram matrix stay on this thread with one BLAS
    # thread, leaving the second core to the draw; many features: their row bands use
    # every core (threads with one BLAS thread each). Restored afterwards. The
    # relabelling products run on one BLAS thread a task either way, so that OpenBLAS's
    # own threads never spin after the test.
    from threadpoolctl import threadpool_limits

    from monk_framework.engine import backends
    from monk_framework.engine import gram_sources as gs

    monkeypatch.setattr(backends.os, "cpu_count", lambda: 2)
    kernel = registry.get_kernel("rbf", sigma="median")
    seen: list[tuple[list[int], str]] = []
    fit = type(kernel).fit

    def spying_fit(self, X, Y=None):
        seen.append((_blas_threads(), type(backends.in_this_process()).__name__))
        return fit(self, X, Y)

    products: list[list[int]] = []
    form_band = gs._subset_form_band  # the relabellings' 0/1 columns: subset sums, band by band
    monkeypatch.setattr(gs, "_subset_form_band", lambda task, shared: products.append(_blas_threads()) or form_band(task, shared))
    monkeypatch.setattr(type(kernel), "fit", spying_fit)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        # 600 x 200 indices: enough to be drawn ahead (DRAW_AHEAD_MIN_ENTRIES)
        r = permutation_test(rng.normal(size=(300, d)), rng.normal(size=(300, d)), kernel=kernel, estimator="u-stat", n_permutations=200, rng=0)
        assert _blas_threads() == before
    assert seen == ([([1] * len(before), "LocalBackend")] if alone else [(before, "ThreadBackend")])
    assert products and all(p == [1] * len(before) for p in products)
    assert 0 < r.pvalue <= 1


def test_blas_threads_come_back_when_the_fit_fails(registry, rng, monkeypatch):
    from threadpoolctl import threadpool_limits

    kernel = registry.get_kernel("rbf", sigma="median")

    def failing_fit(self, X, Y=None):
        raise ParameterError("the fit failed")

    monkeypatch.setattr(type(kernel), "fit", failing_fit)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        with pytest.raises(ParameterError, match="the fit failed"):
            permutation_test(rng.normal(size=(10, 2)), rng.normal(size=(10, 2)), kernel=kernel, estimator="u-stat", n_permutations=20, rng=0)
        assert _blas_threads() == before


def test_a_level_no_permutation_count_reaches_is_said_without_an_absurd_count():
    gen = np.random.default_rng(5)
    X, Y = gen.normal(size=(20, 2)), gen.normal(size=(20, 2))
    few = permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=10, rng=0)
    assert not few.reject and "the smallest attainable p-value is 1/11; use at least 19." in few.decision
    for alpha in (1e-300, 1e-320, 5e-324):  # 1/alpha overflows below about 5.6e-309 (an internal error)
        tiny = permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=10, alpha=alpha, rng=0)
        assert "use a larger alpha (no practical number of permutations reaches this one)" in tiny.decision


def test_exact_numbers_are_numbers_for_every_test_parameter(registry):
    # Decimal('0.05') was "alpha must be a number in (0, 1)", Fraction(1, 40) "contamination
    # must be a count (int) or a fraction", Decimal('5') "clip must be a radius > 0": false
    # messages, while Fraction passed some checks and then failed on Decimal + float
    from decimal import Decimal
    from fractions import Fraction

    from monk_framework.two_sample import aggregated_test, robust_test

    gen = np.random.default_rng(4)
    X, Y = gen.normal(size=(60, 2)), gen.normal(size=(60, 2)) + 0.5
    rbf, est = registry.get_kernel("rbf", sigma=1.0), registry.get_estimator("u-stat")
    runs = {
        "permutation": lambda a: permutation_test(X, Y, kernel=rbf, estimator=est, n_permutations=39, rng=0, alpha=a),
        "split": lambda a: split_test(X, Y, kernel=rbf, estimator=est, n_permutations=39, rng=0, alpha=a),
        "aggregated": lambda a: aggregated_test(X, Y, n_permutations=39, rng=0, alpha=a),
        "robust": lambda a: robust_test(X, Y, kernel=rbf, contamination=1, n_permutations=39, rng=0, alpha=a),
    }
    for name, run in runs.items():
        plain = run(0.05)
        for exact in (Decimal("0.05"), Fraction(1, 20)):
            got = run(exact)
            assert (got.statistic, got.pvalue, got.reject) == (plain.statistic, plain.pvalue, plain.reject), name
            assert type(got.alpha) is float and got.alpha == 0.05, name
    quadratic = registry.get_kernel("quadratic")
    plain = robust_test(X, Y, kernel=quadratic, contamination=3, clip=5.0, clip_quantile=0.75, n_permutations=39, rng=0)
    exact = robust_test(X, Y, kernel=quadratic, contamination=Fraction(1, 40), clip=Decimal("5"), clip_quantile=Fraction(3, 4), n_permutations=39, rng=0)
    assert exact.contamination == 3 and exact.pvalue == plain.pvalue
    assert registry.get_kernel("rbf", sigma=Decimal("0.5")) == registry.get_kernel("rbf", sigma=0.5)


def _exact_pvalue(kernel, X, Y):
    """The permutation p-value over every split of the pooled points (brute force)."""
    from itertools import combinations

    from monk_framework import estimate

    Z, n = np.vstack([X, Y]), len(X)
    observed = estimate(X, Y, kernel=kernel, estimator="v-stat").mmd2
    values = []
    for chosen in combinations(range(len(Z)), n):
        rest = [i for i in range(len(Z)) if i not in chosen]
        values.append(estimate(Z[list(chosen)], Z[rest], kernel=kernel, estimator="v-stat").mmd2)
    return np.mean(np.asarray(values) >= observed - 1e-12), len(values)


@pytest.mark.parametrize(("n", "m", "splits"), [(2, 2, 6), (1, 10, 11), (2, 3, 10)])
def test_samples_too_small_to_reject_say_so_instead_of_no_evidence(n, m, splits):
    # far apart, yet no split test can reject: the exact p-value is at least 1/C(N + M, N)
    from monk_framework import aggregated_test, robust_test

    gen = np.random.default_rng(31)
    X, Y = gen.normal(size=(n, 2)), gen.normal(size=(m, 2)) + 30
    exact, count = _exact_pvalue("rbf:sigma=1", X, Y)
    assert count == splits and exact >= 1 / splits > 0.05
    said = (
        rf"No evidence of a difference at level 0.05, and none is possible with N = {n} and M = {m}: the {n + m} "
        rf"points split into {n} and {m} in only {splits} ways, .* has no permutation p-value below 1/{splits} = "
    )
    result = permutation_test(X, Y, kernel="rbf:sigma=1", estimator="v-stat", n_permutations=999, rng=0)
    assert not result.reject and result.pvalue >= 1 / splits - 0.05
    assert re.match(said, result.decision), result.decision
    if n > 1:  # the aggregated and robust tests need two points a sample
        assert re.match(said, aggregated_test(X, Y, rng=0).decision)
        assert re.match(said, robust_test(X, Y, kernel="rbf:sigma=1", contamination=0, rng=0).decision)


def test_samples_just_large_enough_keep_the_usual_decision():
    # N = 1, M = 19: 20 splits, 1/20 = alpha, a rejection is possible and is made
    gen = np.random.default_rng(32)
    X, Y = gen.normal(size=(1, 2)) + 30, gen.normal(size=(19, 2))
    result = permutation_test(X, Y, kernel="rbf:sigma=1", estimator="v-stat", n_permutations=999, rng=0)
    assert result.reject and result.decision.startswith("Reject H0")
    # N = M = 3 (20 splits) at alpha = 0.01: too few for that level only
    X, Y = gen.normal(size=(3, 2)), gen.normal(size=(3, 2)) + 30
    assert "none is possible" not in permutation_test(X, Y, kernel="rbf:sigma=1", estimator="v-stat", n_permutations=999, rng=0).decision
    strict = permutation_test(X, Y, kernel="rbf:sigma=1", estimator="v-stat", alpha=0.01, n_permutations=999, rng=0).decision
    assert strict.startswith("No evidence of a difference at level 0.01, and none is possible with N = 3 and M = 3")
    assert "1/20 = 0.05" in strict


def test_one_long_pass_over_a_matrix_free_gram_matrix_reports_band_by_band(rng):
    # 20 000 + 20 000 points once showed "permutations 0/1,000" for 38 s: one batch of
    # relabellings is one pass over K, so the pass itself reports, band by band
    X, Y = rng.normal(size=(900, 2)), rng.normal(0.2, 1.0, size=(900, 2))
    seen: list[tuple[int, int, str]] = []
    tiled = permutation_test(
        X, Y, kernel="rbf:sigma=1", n_permutations=200, rng=1, max_memory="2MB", progress=lambda done, total, what: seen.append((done, total, what))
    )
    inside = [done for done, total, _ in seen if 0 < done < 200]
    assert len(inside) >= 3 and inside == sorted(inside)  # whole relabellings, never going back
    assert seen[0][0] == 0 and seen[-1][0] == 200 and {what for *_, what in seen} == {"permutations"}
    heard: list[tuple[float, float, str]] = []
    stored = permutation_test(X, Y, kernel="rbf:sigma=1", n_permutations=200, rng=1, progress=lambda done, total, what: heard.append((done, total, what)))
    assert tiled.pvalue == stored.pvalue  # listening changes no number
    # a stored Gram matrix is built before the first batch: a stage of its own, in shares
    building = [done for done, _, what in heard if what == "Gram matrix"]
    assert len(building) >= 2 and building == sorted(building) and building[-1] == 1.0
    assert heard[-1] == (200, 200, "permutations")
