"""Aggregated tests: the scores against brute force, every kernel against its own
permutation test on the same relabellings, one kernel against the plain test, the
default grid's invariance, robust aggregation's bound under adversarial corruption,
the certificate, and the errors."""

from __future__ import annotations

import math
import re

import attrs
import numpy as np
import pytest

from monk_framework import DataError, MonkError, ParameterError, ResourceError, aggregated_test
from monk_framework.core.randomness import root
from monk_framework.core.resources import Resources
from monk_framework.core.test_results import AggregatedTestResult
from monk_framework.two_sample import permutation_test, robust_test
from monk_framework.two_sample.aggregated import (
    BANDWIDTH_MAX_POINTS,
    agg_scores,
    bandwidth_grid,
    collection_statistics,
    default_kernels,
    fuse_scores,
    pair_square_scale,
)


def samples(seed, n=60, m=50, shift=0.0, d=2):
    g = np.random.default_rng(seed)
    return g.normal(size=(n, d)), g.normal(shift, 1.0, size=(m, d))


def test_agg_scores_match_their_definition_by_brute_force():
    g = np.random.default_rng(0)
    values = np.round(g.normal(size=(31, 4)), 1)  # rounded: ties between rows
    weights = np.array([0.1, 0.2, 0.3, 0.4])
    S0, S, p0 = agg_scores(values, weights)
    size, L = values.shape
    brute = np.empty(size)
    for i in range(size):
        p = [sum(values[j, ell] >= values[i, ell] for j in range(size)) / size for ell in range(L)]
        brute[i] = max(math.log(L * weights[ell] / p[ell]) for ell in range(L))
    assert S0 == pytest.approx(brute[0]) and np.allclose(S, brute[1:])
    assert np.allclose(p0, [np.mean(values[:, ell] >= values[0, ell]) for ell in range(L)])


def test_fuse_scores_and_scale_match_their_definitions(registry):
    g = np.random.default_rng(1)
    values, w = g.normal(size=(9, 3)), np.array([0.5, 0.25, 0.25])
    scales, lam = np.array([0.3, 1.0, 2.0]), 7.0
    brute = [math.log(sum(w[ell] * math.exp(lam * values[i, ell] / scales[ell]) for ell in range(3))) for i in range(9)]
    assert np.allclose(fuse_scores(values, w, scales, lam), brute)
    kernel = registry.get_kernel("rbf", sigma=0.8)
    Z = g.normal(size=(23, 2))
    K = kernel.gram(Z)
    off = K[~np.eye(23, dtype=bool)]
    tiny = Resources.of(8 * 23 * 3)  # three rows a band
    assert pair_square_scale(kernel, Z, tiny) == pytest.approx(math.sqrt(np.mean(off**2)), rel=1e-12)


def _published_fuse(X, Y, grams):
    """MMD-FUSE's statistic as its authors' code defines it (Biggs, Schrab & Gretton, 2023;
    the package mmdfuse), written out from its definitions with loops: the larger sample
    first (m points), the smaller n; each kernel's diagonal set to 0; its value
    [Σ_XX k·(n − m + 1)(n − 1)/(m(m − 1)) + Σ_YY k·(m − n + 1)/m + Σ (v_i v_j k_ij)·(n − 1)/m]
    / √(Σ_ij k_ij²) · √(n(n − 1)), with v = +1 on X and −1 on Y; then the log of the mean of
    their exponentials (equal weights, lambda_multiplier = 1)."""
    if len(Y) > len(X):
        X, Y = Y, X
        grams = [K[np.r_[len(Y) : len(K), 0 : len(Y)]][:, np.r_[len(Y) : len(K), 0 : len(Y)]] for K in grams]
    m, n = len(X), len(Y)
    values = []
    for K in grams:
        K = K.copy()
        np.fill_diagonal(K, 0.0)
        size = m + n
        sign = [1.0] * m + [-1.0] * n
        xx = sum(K[i, j] for i in range(m) for j in range(m))
        yy = sum(K[i, j] for i in range(m, size) for j in range(m, size))
        signed = sum(sign[i] * sign[j] * K[i, j] for i in range(size) for j in range(size))
        unscaled_std = math.sqrt(sum(K[i, j] ** 2 for i in range(size) for j in range(size)))
        value = xx * (n - m + 1) * (n - 1) / (m * (m - 1)) + yy * (m - n + 1) / m + signed * (n - 1) / m
        values.append(value / unscaled_std * math.sqrt(n * (n - 1)))
    return math.log(sum(math.exp(v) for v in values) / len(values)), values


@pytest.mark.parametrize(("n", "m"), [(12, 12), (9, 14), (15, 8)])
def test_fuse_is_its_authors_statistic_on_shared_data(registry, n, m):
    g = np.random.default_rng(n * m)
    X, Y = g.normal(size=(n, 2)), g.normal(0.6, 1.0, size=(m, 2))
    specs = ["rbf:sigma=0.5", "rbf:sigma=1.5", "laplace:sigma=1.0,norm=l1", "laplace:sigma=3.0,norm=l1"]
    grams = [registry.resolve_kernel(spec).gram(np.vstack([X, Y])) for spec in specs]
    result = aggregated_test(X, Y, kernels=specs, method="fuse", n_permutations=19, rng=0)
    statistic, exponents = _published_fuse(X, Y, grams)
    assert result.statistic == pytest.approx(statistic, rel=1e-10)
    small = min(n, m)
    assert result.temperature == small * (small - 1)
    # the audit's finding, fixed: each kernel's exponent is the authors', not (n - 1)/2 times smaller
    mmd2 = result.kernel_statistics**2 * np.sign(result.kernel_statistics)
    np.testing.assert_allclose(result.temperature * mmd2 / result.kernel_scales, exponents, rtol=1e-9)


def test_every_kernel_is_its_own_permutation_test_on_the_same_relabellings(registry):
    X, Y = samples(2, shift=0.4)
    result = aggregated_test(X, Y, kernels=["rbf:sigma=0.5", "laplace:sigma=2", "energy"], n_permutations=99, rng=5)
    for ell, spec in enumerate(result.kernel_specs):
        single = permutation_test(X, Y, kernel=spec, estimator="u-stat", n_permutations=99, rng=5)
        assert result.kernel_pvalues[ell] == single.pvalue
        assert result.kernel_statistics[ell] == pytest.approx(single.statistic, rel=1e-12)


@pytest.mark.parametrize("method", ["agg", "fuse"])
def test_the_kernels_share_one_draw_of_the_relabellings_and_get_the_same_bits(monkeypatch, method):
    # drawn once for every kernel, with their indicator matrices made once, or drawn by
    # each kernel as a single test draws them: the same statistics and null, to the bit
    from monk_framework.engine import pooled, relabelling

    X, Y = samples(8, n=70, m=45, shift=0.3)
    kernels = ["rbf:sigma=0.5", "laplace:sigma=2", "energy", "rbf:sigma=3"]
    made: list[int] = []
    indicator_columns = pooled.indicator_columns
    monkeypatch.setattr(pooled, "indicator_columns", lambda *a, **k: made.append(1) or indicator_columns(*a, **k))
    shared = aggregated_test(X, Y, kernels=kernels, method=method, n_permutations=199, rng=3)
    made_shared = len(made)
    monkeypatch.setattr(relabelling, "SHARED_RELABELLINGS_MAX_BYTES", 0)
    made.clear()
    alone = aggregated_test(X, Y, kernels=kernels, method=method, n_permutations=199, rng=3)
    assert (shared.statistic, shared.pvalue) == (alone.statistic, alone.pvalue)
    for field in ("kernel_pvalues", "kernel_statistics", "null_distribution"):
        assert np.array_equal(getattr(shared, field), getattr(alone, field))
    assert made_shared == 1 and len(made) == len(kernels)  # one batch of 199 relabellings


@pytest.mark.parametrize("method", ["agg", "fuse"])
def test_one_kernel_aggregates_to_the_plain_permutation_test(method):
    for seed in range(5):
        X, Y = samples(seed, shift=0.3 * seed)
        one = aggregated_test(X, Y, kernels=["rbf:sigma=1"], method=method, n_permutations=199, rng=seed)
        plain = permutation_test(X, Y, kernel="rbf:sigma=1", estimator="u-stat", n_permutations=199, rng=seed)
        # a monotone score of one statistic: the same p-value and decision
        assert one.pvalue == plain.pvalue and one.reject == plain.reject


def test_the_decision_agrees_with_the_kernels_that_rejected():
    for seed in range(6):
        X, Y = samples(seed, shift=0.25 * seed)
        r = aggregated_test(X, Y, n_permutations=199, rng=seed)
        assert r.reject == (r.pvalue <= r.alpha) == bool(r.kernel_rejects.any())
        if r.reject:
            # kernel l rejects when its p-value is below its corrected level L·w_l·exp(−q̂)
            assert np.array_equal(r.kernel_rejects, r.kernel_pvalues < r.kernel_levels)


def test_the_default_grid_depends_on_the_pooled_set_only():
    g = np.random.default_rng(3)
    for n in (40, BANDWIDTH_MAX_POINTS // 2 + 300):  # the second one subsamples
        X, Y = g.normal(size=(n, 3)), g.normal(1.0, 2.0, size=(n + 7, 3))
        Z = np.vstack([X, Y])
        perm = g.permutation(len(Z))
        for metric in ("l2", "l1"):
            a = bandwidth_grid(X, Y, metric=metric)
            b = bandwidth_grid(Z[perm[:n]], Z[perm[n:]], metric=metric)
            assert np.array_equal(a, b) and len(a) == 10 and np.all(np.diff(a) > 0)
    kernels = default_kernels(X, Y, n_bandwidths=3)
    assert [k.name for k in kernels] == ["rbf"] * 3 + ["laplace"] * 3
    assert all(k.params()["norm"] == "l1" for k in kernels[3:])


def test_a_grid_from_the_distances_spans_their_quantiles():
    g = np.random.default_rng(4)
    X, Y = g.normal(size=(50, 2)), g.normal(size=(50, 2))
    Z = np.vstack([X, Y])
    d = np.linalg.norm(Z[:, None] - Z[None], axis=-1)[np.triu_indices(100, 1)]
    grid = bandwidth_grid(X, Y, n_bandwidths=5)
    assert grid[0] == pytest.approx(np.quantile(d, 0.01) / 2) and grid[-1] == pytest.approx(2 * np.quantile(d, 0.99))
    assert np.allclose(np.diff(np.log(grid)), np.log(grid[1] / grid[0]))


def test_the_grid_and_the_test_follow_the_data_to_the_limits_of_float64():
    # scaling the data by a power of two scales the grid by it (its ends exactly) and leaves
    # the test as it is: data of magnitude 1e-300 or 1e300 are not refused as "all equal"
    X, Y = samples(5, shift=0.4)
    base = aggregated_test(X, Y, n_permutations=99, rng=1)
    for e in (-1000, 1000, 1020):
        s = 2.0**e
        for metric in ("l2", "l1"):
            grid, want = bandwidth_grid(X * s, Y * s, metric=metric), bandwidth_grid(X, Y, metric=metric) * s
            assert grid[[0, -1]].tolist() == want[[0, -1]].tolist() and np.allclose(grid, want, rtol=1e-13, atol=0)
        scaled = aggregated_test(X * s, Y * s, n_permutations=99, rng=1)
        assert scaled.pvalue == base.pvalue and scaled.statistic == base.statistic
        assert np.allclose(scaled.kernel_statistics, base.kernel_statistics, rtol=1e-12, atol=0)


def test_a_gross_outlier_leaves_the_ordinary_distances_of_the_grid_exact():
    # one point at 1e200: the low end of the grid is read from the ordinary pairs, which a
    # single scale for all points would round to 0; brute force, pair by pair
    X, Y = samples(6)
    X = np.vstack([X, [[1e200, 0.0]]])
    Z = np.vstack([X, Y])
    pairs = [(i, j) for i in range(len(Z)) for j in range(i + 1, len(Z))]
    for metric, norm in (("l2", 2), ("l1", 1)):
        d = []
        for i, j in pairs:
            diff = Z[i] - Z[j]
            s = np.abs(diff).max()
            d.append(s * np.linalg.norm(diff / s, ord=norm))
        grid = bandwidth_grid(X, Y, n_bandwidths=4, metric=metric)
        want = np.quantile(d, [0.01, 0.99]) * [0.5, 2.0]
        assert grid[0] == pytest.approx(want[0], rel=1e-12) and grid[-1] == pytest.approx(want[1], rel=1e-12)
    result = aggregated_test(X, Y, n_permutations=99, rng=0)
    assert np.isfinite(result.kernel_statistics).all() and 0 < result.pvalue <= 1


def test_huge_weights_are_normalised_without_overflow():
    X, Y = samples(7, shift=0.5)
    a = aggregated_test(X, Y, n_permutations=99, rng=0)
    b = aggregated_test(X, Y, weights=[1e308] * 20, n_permutations=99, rng=0)
    assert b.pvalue == a.pvalue and np.allclose(b.weights, 1 / 20, rtol=1e-15)


def test_robust_aggregation_is_each_kernels_dcmmd_test_at_its_share_of_the_level(registry):
    # every kernel's p-value is robust_test(method="dc")'s with the same seed, and the test
    # rejects when one of them is at most alpha·w_l (the union bound)
    X, Y = samples(5, n=80, m=70, shift=0.5)
    grid = [0.5, 1.0, 2.0]
    r = 2
    result = aggregated_test(X, Y, bandwidths=grid, contamination=r, n_permutations=199, rng=3)
    assert result.kernel_specs[:3] == [f"rbf:sigma={s}" for s in grid]
    for ell, spec in enumerate(result.kernel_specs):
        dc = robust_test(X, Y, kernel=spec, contamination=r, method="dc", n_permutations=199, rng=3)
        assert result.kernel_pvalues[ell] == dc.pvalue
        assert result.kernel_statistics[ell] == pytest.approx(dc.statistic, rel=1e-12)
    w = result.weights
    assert result.pvalue == pytest.approx(min(1.0, float(np.min(result.kernel_pvalues / w))))
    assert np.array_equal(result.kernel_rejects, result.kernel_pvalues <= 0.05 * w)
    assert result.reject == bool(result.kernel_rejects.any()) == (result.pvalue <= 0.05)
    assert result.null_distribution is None and np.allclose(result.sensitivities, np.sqrt(2) / 70)


def test_robust_aggregation_rejects_under_corruption_only_if_the_clean_test_rejects(registry):
    grid = [0.5, 1.0, 2.0]
    checked = 0
    for seed in range(15):
        X, Y = samples(seed, n=40, m=40, shift=0.3 * (seed % 4))
        g = np.random.default_rng(seed)
        r = 2
        clean = aggregated_test(X, Y, bandwidths=grid, contamination=r, n_permutations=99, rng=seed)
        # the clean data's exact tests: each kernel's V-statistic permutation p-value
        exact = np.array([permutation_test(X, Y, kernel=spec, estimator="v-stat", n_permutations=99, rng=seed).pvalue for spec in clean.kernel_specs])
        clean_p = min(1.0, float(np.min(exact / clean.weights)))
        for target in (X, Y):
            Xc, Yc = X.copy(), Y.copy()
            hit = Xc if target is X else Yc
            hit[:r] = g.choice([-30.0, 30.0], size=(r, 2))
            dirty = aggregated_test(Xc, Yc, bandwidths=grid, contamination=r, n_permutations=99, rng=seed)
            assert np.all(dirty.kernel_pvalues >= exact - 1e-12)
            assert dirty.pvalue >= clean_p - 1e-12
            assert not dirty.reject or clean_p <= 0.05
            checked += 1
    assert checked == 30


def test_the_robust_certificate_is_the_largest_budget_that_still_rejects():
    seen = set()
    for seed in range(6):
        X, Y = samples(seed, n=300, m=300, shift=(0.0, 0.5, 0.9)[seed % 3])
        run = lambda r, X=X, Y=Y, seed=seed: aggregated_test(  # noqa: E731
            X, Y, bandwidths=[0.5, 1.0, 2.0], contamination=r, n_permutations=199, rng=seed
        )
        first = run(1)
        c = first.certificate  # None: not even without corruption (no sentinel number)
        seen.add(c is not None and c >= 2)
        assert first.reject == (c is not None and c >= 1)
        if c is not None and c >= 1:
            assert run(c).reject and run(c).certificate == c
        if c is not None:
            assert not run(c + 1).reject
    assert seen == {True, False}
    # six kernels at alpha = 0.05 need p <= 1/120: with B = 99 no kernel can, and it says so
    X, Y = samples(1, n=300, m=300, shift=0.9)
    few = aggregated_test(X, Y, bandwidths=[0.5, 1.0, 2.0], contamination=1, n_permutations=99, rng=1)
    assert not few.reject and "use at least 119" in few.decision


def test_result_round_trips_and_prints():
    X, Y = samples(9, shift=0.6)
    for kwargs in (dict(), dict(method="fuse"), dict(bandwidths=[1.0, 2.0], contamination=1)):
        r = aggregated_test(X, Y, n_permutations=99, rng=1, **kwargs)
        assert AggregatedTestResult.from_json(r.to_json()) == r
        assert "Aggregated two-sample test" in str(r) and r.decision
        # the collection in words; every spec is in kernel_specs
        grid = "2 bandwidths each (4 kernels)" if "bandwidths" in kwargs else "10 bandwidths each (20 kernels)"
        assert re.search(rf"^  kernel +rbf and laplace at {re.escape(grid)}$", str(r), re.M)
        statistic, pvalue = r
        assert 0 < pvalue <= 1 and math.isfinite(statistic)
    one = aggregated_test(X, Y, kernels=["rbf:sigma=1"], n_permutations=99, rng=1)
    assert "(MMDAgg over 1 kernel: p = " in one.decision
    fuse = aggregated_test(X, Y, n_permutations=99, rng=1, method="fuse")
    assert fuse.kernel_rejects is None and fuse.rejecting_kernels == [] and fuse.temperature == 50 * 49
    assert len(fuse.kernel_scales) == 20


def test_the_same_seed_gives_the_same_result():
    X, Y = samples(11, shift=0.3)
    a = aggregated_test(X, Y, n_permutations=99, rng=3)
    b = aggregated_test(X, Y, n_permutations=99, rng=3)
    assert attrs.evolve(a, timings={}) == attrs.evolve(b, timings={})


def test_bad_aggregated_inputs_are_named(registry):
    X, Y = samples(0)
    cases = [
        (dict(method="max"), ParameterError, "method must be"),
        (dict(contamination=2), ParameterError, "bandwidths fixed before"),
        (dict(contamination=2, method="fuse", bandwidths=[1.0]), ParameterError, "method='agg'"),
        (dict(kernels=["quadratic"], contamination=1), ParameterError, "bounded kernels"),
        (dict(kernels=["rbf"], contamination=1), ParameterError, "fixed before seeing the data"),
        (dict(contamination=1, bandwidths=[1.0], estimator="u-stat"), ParameterError, "V-statistic"),
        (dict(weights=[1, 2]), ParameterError, "weights must be 20"),
        (dict(weights=[-1.0] * 20), ParameterError, "weights must be 20"),
        (dict(bandwidths=[0.0]), ParameterError, "bandwidths must be a flat list of positive"),
        (dict(bandwidths=[[1.0, 2.0]]), ParameterError, "bandwidths must be a flat list"),
        (dict(bandwidths="1,2"), ParameterError, "bandwidths must be a flat list"),
        (dict(n_bandwidths=10**9), ResourceError, r"2,000,000,000 kernels \(n_bandwidths = 1000000000 a family\)"),
        (dict(n_permutations=10**12), ResourceError, r"n_permutations \(-B\) = 1,000,000,000,000 relabellings of 20"),
        (dict(n_bandwidths=0), ParameterError, "n_bandwidths"),
        (dict(kernels=["rbf:sigma=1"], bandwidths=[1.0]), ParameterError, "every kernel given here sets its own"),
        (dict(kernels=[]), ParameterError, "at least one kernel"),
        (dict(n_permutations=0), ParameterError, "n_permutations"),
        (dict(alpha=0.0), ParameterError, "alpha"),
        (dict(kernels=[3.0]), MonkError, "Kernel objects or specs"),
        # a repeated kernel doubled its weight without a word
        (dict(bandwidths=[1.0, 2.0, 1.0]), ParameterError, "bandwidths lists 1 more than once"),
        (
            dict(kernels=["rbf:sigma=1", "laplace:sigma=1", "gaussian:sigma=1.0"]),
            ParameterError,
            r"kernels 0 and 2 are the same, gaussian:sigma=1.0: a repeated kernel only doubles its weight",
        ),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            aggregated_test(X, Y, **kwargs)
    with pytest.raises(ParameterError, match=r"takes the samples first and the kernels by keyword.*got a kernel, 'rbf', as X"):
        aggregated_test("rbf", X, kernels=Y)
    with pytest.raises(ParameterError, match="for numeric vectors"):
        aggregated_test(["ACGT", "AGGT"], ["ACGA", "TTGA"])
    same = np.ones((10, 2))
    with pytest.raises(DataError, match="all pooled points are equal"):
        aggregated_test(same, same)
    with pytest.raises(DataError, match="beyond float64"):
        aggregated_test(np.vstack([X, [[1e308, 1e308]] * 5]), np.vstack([Y, [[-1e308, -1e308]] * 5]))
    with pytest.raises(DataError, match="at least 2 points"):
        aggregated_test(X[:1], Y)


def test_string_kernels_aggregate_when_given(registry):
    X = ["ACGTACGT", "ACGTTCGT", "ACGAACGT", "TCGTACGA", "ACGTACGG", "ACCTACGT"]
    Y = ["TTTTACGA", "TTGTACTA", "TTTAACGA", "TATTACGA", "TTTTTCGA", "TTTTACAA"]
    r = aggregated_test(X, Y, kernels=["ssk:n=2", "ssk:n=3"], n_permutations=99, rng=0)
    assert [spec.split(",")[0] for spec in r.kernel_specs] == ["ssk:n=2", "ssk:n=3"] and r.bandwidths == [None, None]
    for ell, spec in enumerate(["ssk:n=2", "ssk:n=3"]):
        # each string kernel's p-value and statistic are its own permutation test's
        single = permutation_test(X, Y, kernel=spec, estimator="u-stat", n_permutations=99, rng=0)
        assert r.kernel_pvalues[ell] == single.pvalue
        assert r.kernel_statistics[ell] == pytest.approx(single.statistic, rel=1e-12)


def test_every_kernel_of_the_collection_reads_the_data_itself(registry):
    # only the first kernel checked the samples: a string kernel after a vector one ran on
    # vectors and gave statistic 0 and p = 1 without a word
    X, Y = samples(6)
    for kernels in (["rbf:sigma=1", "ssk"], ["ssk", "rbf:sigma=1"]):
        with pytest.raises(DataError, match="X holds numbers, but kernel 'ssk' needs strings"):
            aggregated_test(X, Y, kernels=kernels, n_permutations=19, rng=0)
    with pytest.raises(DataError, match="needs strings"):
        collection_statistics(registry.get_estimator("u-stat"), [registry.get_kernel("ssk")], X, Y, 9, root(0), resources=Resources.of(None))


@pytest.mark.slow  # 20 s: 300 null runs (.ci/run runs it)
@pytest.mark.parametrize("method", ["agg", "fuse"])
def test_the_level_holds_on_a_seeded_null(method):
    # exact by exchangeability: rejection rate within alpha + 2.5 SE over 300 null runs
    rejected = 0
    for seed in range(300):
        g = np.random.default_rng([seed, 91])
        X, Y = g.standard_t(3, size=(25, 2)), g.standard_t(3, size=(20, 2))
        rejected += aggregated_test(X, Y, n_bandwidths=4, method=method, n_permutations=39, rng=seed).reject
    assert rejected / 300 <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / 300)


def test_a_small_memory_budget_gives_the_same_test():
    # over the budget every kernel's pooled Gram matrix is used in tiles computed on the fly
    X, Y = samples(13, n=120, m=100, shift=0.3)
    stored = aggregated_test(X, Y, n_bandwidths=3, method="fuse", n_permutations=99, rng=4)
    tiled = aggregated_test(X, Y, n_bandwidths=3, method="fuse", n_permutations=99, rng=4, max_memory=64 * 1024)
    assert tiled.pvalue == stored.pvalue and np.array_equal(tiled.kernel_pvalues, stored.kernel_pvalues)
    np.testing.assert_allclose(tiled.kernel_statistics, stored.kernel_statistics, rtol=1e-10)
    np.testing.assert_allclose(tiled.kernel_scales, stored.kernel_scales, rtol=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda X, Y: aggregated_test(X, Y, bandwidths=[1, 10**400]), r"bandwidths must be a flat list of positive finite"),
        (lambda X, Y: aggregated_test(X, Y, kernels=["rbf:sigma=1", "rbf:sigma=2"], weights=[1, 10**400]), r"weights must be 2 positive finite numbers"),
        (
            lambda X, Y: robust_test(X, Y, kernel="quadratic", contamination=2, clip=10**400),
            r"clip must be a radius > 0 \(a finite number\); got an int of about 10\^400",
        ),
        (lambda X, Y: permutation_test(X, Y, kernel="rbf", estimator="u-stat", alpha=10**400), r"alpha must be a number in \(0, 1\); got an int of"),
        (
            lambda X, Y: permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=10**400),
            r"n_permutations \(-B\) = an int of about 10\^400 \(beyond float64\) needs about 10\^401 bytes",
        ),
    ],
)
def test_numbers_beyond_float64_are_refused_by_name(call, message):
    # each raised OverflowError ("int too large to convert to float") from deep inside
    from monk_framework.core.errors import MonkError

    rng = np.random.default_rng(0)
    with pytest.raises(MonkError, match=message):
        call(rng.normal(size=(20, 2)), rng.normal(size=(20, 2)))


def test_one_corrupted_point_is_said_in_the_singular():
    # "valid with up to 1 corrupted points"
    from monk_framework import get_registry
    from monk_framework.two_sample import robust_test

    X, Y = samples(2, n=200, m=200, shift=1.0)
    agg = aggregated_test(X, Y, bandwidths=[1.0, 2.0], contamination=1, n_permutations=99, rng=0)
    one = robust_test(X, Y, kernel=get_registry().get_kernel("rbf", sigma=1.0), contamination=1, n_permutations=99, rng=0)
    for result in (agg, one):
        assert result.reject and "valid with up to 1 corrupted point " in result.decision
        assert not re.search(r"\b1 corrupted points|\b1 points were", result.decision)


def test_one_permutation_is_said_in_the_singular():
    from monk_framework import get_registry
    from monk_framework.two_sample import permutation_test

    X, Y = samples(3)
    one = permutation_test(X, Y, kernel=get_registry().get_kernel("rbf"), estimator=get_registry().get_estimator("u-stat"), n_permutations=1, rng=0)
    assert "with 1 permutation: the smallest attainable p-value is 1/2" in one.decision
    assert "(1 relabelling)" in str(one)
