"""Robust two-sample tests: the sensitivity by brute force, the proofs' inequalities under
adversarial corruption, the worst-case level on tiny samples, and the certificate."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from monk_framework import DataError, MonkError, ParameterError, aggregated_test
from monk_framework.core.resources import Resources
from monk_framework.two_sample import permutation_test
from monk_framework.two_sample.robust import RobustTestResult, auto_blocks, contamination_count, median_pvalue, mmd_sensitivity, robust_test

BOUNDED = [
    ("rbf", {"sigma": 0.7}),
    ("laplace", {"sigma": 1.3}),
    ("quadratic", {"normalize": True}),
    ("polynomial", {"degree": 3, "normalize": True}),
    ("linear", {"normalize": True}),
]

#: the bandwidth kernels at sigma = 1 (their default is the median heuristic)
FIXED = {"rbf": {"sigma": 1.0}, "laplace": {"sigma": 1.0}}


def v_mmd(kernel, X, Y):
    """‖μ̂_X − μ̂_Y‖ from the three Gram matrices (the definition)."""
    v = kernel.gram(X).mean() + kernel.gram(Y).mean() - 2 * kernel.gram(X, Y).mean()
    return math.sqrt(max(v, 0.0))


def candidates(rng, X, d):
    """Replacement values an adversary would try: near, far, on other points, huge."""
    out = [rng.normal(size=d) * s for s in (0.1, 1, 3, 10) for _ in range(5)]
    out += [X[i] + 1e-9 for i in range(len(X))] + [np.full(d, 1e6), -np.full(d, 1e6), np.zeros(d)]
    return out


@pytest.mark.parametrize("name, params", BOUNDED)
def test_one_replaced_point_moves_the_v_statistic_mmd_by_at_most_the_sensitivity(registry, name, params):
    kernel = registry.get_kernel(name, **params)
    worst = 0.0
    for seed in range(6):
        g = np.random.default_rng(seed)
        n, m = (3, 4) if seed % 2 else (4, 2)
        X, Y = g.normal(size=(n, 2)), g.normal(0.5, 1.0, size=(m, 2))
        delta = mmd_sensitivity(kernel, n, m)
        base = v_mmd(kernel, X, Y)
        for which in range(n + m):
            for value in candidates(g, np.vstack([X, Y]), 2):
                Xc, Yc = X.copy(), Y.copy()
                if which < n:
                    Xc[which] = value
                else:
                    Yc[which - n] = value
                worst = max(worst, abs(v_mmd(kernel, Xc, Yc) - base) / delta)
    assert worst <= 1 + 1e-9


def test_the_sensitivity_is_attained(registry):
    # one point each, at the same place: MMD 0; moving one far away gives MMD -> sqrt(2) = D / 1
    rbf = registry.get_kernel("rbf", sigma=1.0)
    assert mmd_sensitivity(rbf, 1, 1) == pytest.approx(math.sqrt(2))
    assert v_mmd(rbf, np.zeros((1, 1)), np.full((1, 1), 40.0)) == pytest.approx(math.sqrt(2), rel=1e-12)
    # a kernel that can be negative: the normalised linear kernel, x and -x give D = 2
    lin = registry.get_kernel("linear", normalize=True)
    assert lin.feature_diameter() == 2.0
    assert v_mmd(lin, np.ones((1, 2)), -np.ones((1, 2))) == pytest.approx(2.0)
    assert mmd_sensitivity(rbf, 10, 4) == pytest.approx(math.sqrt(2) / 4)


def test_unbounded_kernels_declare_no_bound(registry):
    for name in ("quadratic", "polynomial", "linear", "exponential", "energy"):
        kernel = registry.get_kernel(name, **FIXED.get(name, {}))
        assert kernel.sup_diag() is None and kernel.feature_diameter() is None
        assert mmd_sensitivity(kernel, 5, 5) is None
    assert registry.get_kernel("ssk").feature_diameter() == pytest.approx(math.sqrt(2))
    assert registry.get_kernel("ssk", normalize=False).feature_diameter() is None


def test_contamination_is_a_count_or_a_fraction_below_one_half():
    assert contamination_count(7, 100) == 7
    assert contamination_count(0.05, 100) == 5
    assert contamination_count(0.0, 100) == 0
    assert contamination_count(0.29, 100) == 29  # not 28 from 0.29 * 100 = 28.999...
    for bad in (-1, 101, 0.5, 1.5, -0.1, True, "5", float("nan")):
        with pytest.raises(ParameterError, match="contamination"):
            contamination_count(bad, 100)
    # a contamination that is no count or fraction is named before anything else is asked
    # of the user (an rbf at the median heuristic would be refused too, for its own reason)
    from monk_framework import get_registry
    from monk_framework.two_sample.robust import check_robust_test

    for bad in (float("nan"), 1e30, "five"):
        with pytest.raises(ParameterError, match=r"^contamination"):
            check_robust_test(get_registry().get_kernel("rbf"), contamination=bad, method="auto", estimator=None, n_permutations=99, alpha=0.05)


def corrupt(X, Y, positions, values):
    Xc, Yc = X.copy(), Y.copy()
    for i, v in zip(positions, values):
        if i < len(X):
            Xc[i] = v
        else:
            Yc[i - len(X)] = v
    return Xc, Yc


def adversaries(g, X, Y, r):
    """Corruptions of r points: far outliers on one side, on both sides, copies of the
    other sample's points, and a cluster placed to pull the means apart."""
    n, m = len(X), len(Y)
    d = X.shape[1]
    yield corrupt(X, Y, range(r), [np.full(d, 50.0)] * r)
    yield corrupt(X, Y, [n + i for i in range(r)], [np.full(d, -50.0 - i) for i in range(r)])
    yield corrupt(X, Y, g.choice(n + m, r, replace=False), [g.normal(size=d) * 30 for _ in range(r)])
    yield corrupt(X, Y, range(r), [Y[i % m] for i in range(r)])
    shift = np.sign(X.mean(0) - Y.mean(0) + 1e-12)
    yield corrupt(X, Y, range(r), [X.mean(0) + 3 * shift] * r)


def test_dc_rejects_under_corruption_only_if_the_clean_test_rejects(registry):
    # the proof: T(c) - 2rΔ <= T(o) and every relabelled value of c is within rΔ of o's,
    # so with the same relabellings, rejecting c at budget r implies rejecting o at 0
    kernel = registry.get_kernel("rbf", sigma=1.0)
    checked = 0
    for seed in range(40):
        g = np.random.default_rng(seed)
        X, Y = g.normal(size=(12, 1)), g.normal(size=(10, 1))
        for r in (1, 2):
            clean = robust_test(X, Y, kernel=kernel, contamination=0, method="dc", n_permutations=49, rng=seed)
            for Xc, Yc in adversaries(g, X, Y, r):
                dirty = robust_test(Xc, Yc, kernel=kernel, contamination=r, method="dc", n_permutations=49, rng=seed)
                assert dirty.pvalue >= clean.pvalue - 1e-12
                assert not dirty.reject or clean.reject
                checked += 1
    assert checked == 400


def block_pvalues(kernel, X, Y, n_blocks, seed, r=0):
    return np.array(robust_test(X, Y, kernel=kernel, contamination=r, method="mom", n_blocks=n_blocks, n_permutations=99, rng=seed).block_pvalues)


def test_mom_median_pvalue_is_bounded_by_a_clean_order_statistic(registry):
    # the proof: the k-th smallest block p-value under corruption of r points is at least
    # the (k - r)-th smallest of the uncorrupted data's, with the same blocks and relabellings
    kernel = registry.get_kernel("quadratic")
    Q = 7
    k = Q // 2 + 1
    for seed in range(25):
        g = np.random.default_rng(seed)
        X, Y = g.normal(size=(21, 1)), g.normal(size=(18, 1))
        clean = np.sort(block_pvalues(kernel, X, Y, Q, seed))
        for r in (1, 2):
            for Xc, Yc in adversaries(g, X, Y, r):
                dirty = np.sort(block_pvalues(kernel, Xc, Yc, Q, seed))
                assert dirty[k - 1] >= clean[k - r - 1]
                # hence the mom p-value is at least the clean rule's binomial tail
                assert median_pvalue(dirty, r) >= stats.binom.sf(k - r - 1, Q, clean[k - r - 1]) - 1e-15


@pytest.mark.slow  # 3 s: a Monte-Carlo level (.ci/run runs it)
def test_median_pvalue_keeps_its_level_when_r_pvalues_are_zero():
    # r blocks corrupted in the adversary's favour (p = 0), the others uniform: the rate
    # of p <= alpha is at most alpha (here computed exactly over 20000 draws)
    g = np.random.default_rng(0)
    for Q, r in ((21, 5), (11, 3), (5, 1)):
        p = g.uniform(size=(20000, Q))
        p[:, :r] = 0.0
        rate = np.mean([median_pvalue(row, r) <= 0.05 for row in p])
        assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 20000)


@pytest.mark.slow  # 45 s: 120 nulls, each with 113 corruptions tried (.ci/run runs it)
@pytest.mark.parametrize("method, kernel_name, r", [("dc", "rbf", 1), ("mom", "quadratic", 1), ("mom", "rbf", 2)])
def test_worst_case_corruption_keeps_the_level_on_tiny_samples(registry, method, kernel_name, r):
    # under H0, an adversary who knows the data, the blocks and the relabellings (same
    # seed) tries every corruption of r points from a grid of values and keeps the one with
    # the smallest p-value; the test still rejects in at most alpha + 2 SE of the runs
    kernel = registry.get_kernel(kernel_name, **FIXED.get(kernel_name, {}))
    values = [np.array([v]) for v in (-40.0, -4.0, -1.5, 0.0, 1.5, 4.0, 40.0)]
    runs, rejected = 120, 0
    for seed in range(runs):
        g = np.random.default_rng([seed, 3])
        X, Y = g.normal(size=(8, 1)), g.normal(size=(8, 1))
        run = lambda A, B, seed=seed: robust_test(  # noqa: E731
            A,
            B,
            kernel=kernel,
            contamination=r,
            method=method,
            n_blocks=3 if method == "mom" else "auto",
            n_permutations=39,
            rng=seed,
        )
        best = run(X, Y).pvalue
        positions = [(i,) for i in range(16)] if r == 1 else [(i, 15 - i) for i in range(8)]
        for pos in positions:
            for v in values:
                Xc, Yc = corrupt(X, Y, pos, [v] * r)
                best = min(best, run(Xc, Yc).pvalue)
        rejected += best <= 0.05
    assert rejected / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)


@pytest.mark.parametrize("method, kernel_name", [("dc", "rbf"), ("mom", "quadratic")])
def test_the_certificate_is_the_largest_contamination_that_still_rejects(registry, method, kernel_name):
    kernel = registry.get_kernel(kernel_name, **FIXED.get(kernel_name, {}))
    seen = set()
    for seed in range(8):
        g = np.random.default_rng(seed)
        shift = (0.0, 0.6, 1.2, 2.0)[seed % 4]
        X, Y = g.normal(size=(300, 1)), g.normal(shift, 1.0, size=(300, 1))
        run = lambda r, X=X, Y=Y, seed=seed: robust_test(  # noqa: E731
            X,
            Y,
            kernel=kernel,
            contamination=r,
            method=method,
            n_blocks=31 if method == "mom" else "auto",
            n_permutations=199,
            rng=seed,
        )
        first = run(0)
        c = first.certificate  # None: it does not reject even without corruption
        seen.add(c is not None and c >= 1)
        if c is not None:
            assert run(c).reject and run(c).certificate == c
        assert not run(0 if c is None else c + 1).reject
        assert first.reject == (c is not None)
    assert seen == {True, False}  # both outcomes were exercised


def test_with_auto_blocks_the_reported_q_reruns_the_certified_test(registry):
    # n_blocks="auto" chooses Q from the sizes and the budget; the result reports it, and
    # the same test with that Q rejects for every budget up to the certificate
    g = np.random.default_rng(11)
    X, Y = g.normal(size=(400, 1)), g.normal(1.5, 1.0, size=(400, 1))
    kernel = registry.get_kernel("quadratic")
    auto = robust_test(X, Y, kernel=kernel, contamination=2, method="mom", n_permutations=99, rng=3)
    assert auto.reject and auto.n_blocks is not None and auto.certificate >= 2
    for r in range(auto.certificate + 1):
        again = robust_test(X, Y, kernel=kernel, contamination=r, method="mom", n_blocks=auto.n_blocks, n_permutations=99, rng=3)
        assert again.reject and again.certificate == auto.certificate
    beyond = robust_test(X, Y, kernel=kernel, contamination=auto.certificate + 1, method="mom", n_blocks=auto.n_blocks, n_permutations=99, rng=3)
    assert not beyond.reject


def test_dc_without_contamination_is_the_v_statistic_permutation_test(registry, rng):
    X, Y = rng.normal(size=(40, 2)), rng.normal(0.4, 1.0, size=(35, 2))
    kernel = registry.get_kernel("rbf", sigma=1.2)
    robust = robust_test(X, Y, kernel=kernel, contamination=0, method="dc", n_permutations=199, rng=4)
    plain = permutation_test(X, Y, kernel=kernel, estimator=registry.get_estimator("v-stat"), n_permutations=199, rng=4)
    assert robust.pvalue == plain.pvalue and robust.reject == plain.reject
    assert robust.statistic == pytest.approx(plain.statistic, rel=1e-12)
    assert robust.threshold == pytest.approx(plain.null_quantile, rel=1e-12)


def test_mom_with_one_block_is_the_u_statistic_permutation_test(registry, rng):
    # Q = 1: one block holds everything, its relabellings are global ones, and the mom
    # p-value is that block's permutation p-value of the U-statistic
    from monk_framework.engine.partitions import pair_partition
    from monk_framework.engine.pooled import PooledSample
    from monk_framework.engine.within_blocks import relabellings

    X, Y = rng.normal(size=(30, 1)), rng.normal(0.5, 1.0, size=(24, 1))
    kernel = registry.get_kernel("quadratic")
    result = robust_test(X, Y, kernel=kernel, contamination=0, method="mom", n_blocks=1, n_permutations=150, rng=6)
    seq = np.random.SeedSequence(6)
    _, null_seq = seq.spawn(2)
    part = pair_partition(30, 24, 1, np.random.default_rng(seq.spawn(1)[0]))
    perms = relabellings(part, 30, 0, 150, null_seq)
    u = registry.get_estimator("u-stat")
    pool = PooledSample(kernel, X, Y, resources=Resources.of())
    values = u.permuted_statistics(pool, perms, [None] * 150)
    observed = u.estimate(kernel, X, Y).mmd2
    assert result.pvalue == pytest.approx((1 + np.sum(values >= observed - 1e-12 * abs(observed))) / 151)
    assert result.block_pvalues == [result.pvalue]


def test_clean_level_and_power(registry):
    # 150 seeded runs each (the 500-run study is in docs/studies/tests.md)
    rbf, quad = registry.get_kernel("rbf", sigma=1.0), registry.get_kernel("quadratic")
    null_dc = null_mom = power_dc = power_mom = 0
    for seed in range(150):
        g = np.random.default_rng([seed, 11])
        X, Y = g.normal(size=(60, 1)), g.normal(size=(60, 1))
        null_dc += robust_test(X, Y, kernel=rbf, contamination=0, n_permutations=99, rng=seed).reject
        null_mom += robust_test(X, Y, kernel=quad, contamination=0, n_permutations=99, rng=seed).reject
        if seed < 30:
            power_dc += robust_test(X, Y + 1.5, kernel=rbf, contamination=2, n_permutations=99, rng=seed).reject
            power_mom += robust_test(X, Y + 2.5, kernel=quad, contamination=1, n_permutations=99, rng=seed).reject
    assert null_dc / 150 <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / 150)
    assert null_mom / 150 <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / 150)
    assert power_dc >= 27 and power_mom >= 24


def test_auto_picks_dc_for_bounded_kernels_clip_for_unbounded_and_mom_for_a_u_statistic_or_blocks(registry, rng):
    X, Y = rng.normal(size=(40, 1)), rng.normal(size=(40, 1))
    run = lambda kernel, **kw: robust_test(X, Y, kernel=kernel, contamination=1, n_permutations=20, rng=0, **kw).method  # noqa: E731
    assert run(registry.get_kernel("rbf", sigma=1.0)) == "dc"
    assert run(registry.get_kernel("quadratic", normalize=True)) == "dc"
    assert run(registry.get_kernel("quadratic")) == "clip"
    assert run(registry.get_kernel("quadratic"), estimator=registry.get_estimator("v-stat")) == "clip"
    assert run(registry.get_kernel("quadratic"), estimator=registry.get_estimator("u-stat")) == "mom"
    assert run(registry.get_kernel("rbf", sigma=1.0), estimator=registry.get_estimator("u-stat")) == "mom"
    # a number of blocks asks for mom, the one method with blocks; the others refuse it
    assert run(registry.get_kernel("rbf", sigma=1.0), n_blocks=5) == "mom"
    for method in ("dc", "clip"):
        with pytest.raises(ParameterError, match=f"runs method='{method}', which has none"):
            run(registry.get_kernel("rbf", sigma=1.0), n_blocks=5, method=method)


# -- method "clip": dcMMD on the clipped-feature kernel -----------------------------------


def test_clip_with_a_given_radius_is_dc_on_the_clipped_kernel(registry, rng):
    from monk_framework.core.combinators import ClippedKernel

    quad = registry.get_kernel("quadratic")
    X, Y = rng.normal(size=(60, 2)), rng.normal(0.8, 1.0, size=(50, 2))
    X[:2] = 40.0
    clip = robust_test(X, Y, kernel=quad, contamination=2, method="clip", clip=4.0, n_permutations=99, rng=7)
    dc = robust_test(X, Y, kernel=ClippedKernel(c=4.0, kernel=quad), contamination=2, method="dc", n_permutations=99, rng=7)
    assert clip.method == "clip" and clip.clip_radius == 4.0 and clip.clip_slack == 0.0
    assert (clip.statistic, clip.pvalue, clip.certificate, clip.threshold) == (dc.statistic, dc.pvalue, dc.certificate, dc.threshold)
    # feature diameter √2·c (the quadratic kernel is nonnegative, so is its clipping) over min(N, M)
    assert clip.sensitivity == pytest.approx(math.sqrt(2) * 4.0 / 50)
    # the kernel reported is the one the user gave; the radius is a field of its own
    assert clip.kernel_params == quad.params()


def test_the_clip_radius_of_the_uncorrupted_data_lies_within_its_slack(registry):
    # the quantile of norms of which r were replaced stays within the observed (j ± r)-th
    from monk_framework.two_sample.clipping import ClipRadius
    from monk_framework.two_sample.clipping import quantile_rank as _quantile_rank

    for seed in range(300):
        g = np.random.default_rng(seed)
        size, r = int(g.integers(5, 40)), int(g.integers(1, 4))
        tau = float(g.choice([0.3, 0.5, 0.75, 0.9]))
        clean = g.exponential(size=size)
        dirty = clean.copy()
        idx = g.choice(size, r, replace=False)
        dirty[idx] = g.choice([0.0, 1e6, float(np.median(clean)), 3.0], size=r)
        j = _quantile_rank(tau, size)
        c0, c = np.sort(clean)[j - 1], np.sort(dirty)[j - 1]
        radius = ClipRadius(radius=float(c), quantile=tau, norms=np.sort(dirty), n=size // 2 + 1, m=size - size // 2 - 1 or 1)
        w = radius.slack(r)
        assert abs(c - c0) <= w + 1e-12 or not math.isfinite(w)


def test_clip_moves_every_relabelled_mmd_by_at_most_its_shift(registry):
    # the proof's inequality, on the definition: |T'(c') − T(c0)| <= s(r) for the samples
    # and for relabellings, with c0 the uncorrupted data's radius and c' the corrupted one's
    from monk_framework.core.combinators import ClippedKernel
    from monk_framework.two_sample.robust import clip_radius

    quad = registry.get_kernel("quadratic")
    checked = 0
    for seed in range(12):
        g = np.random.default_rng(seed)
        X, Y = g.normal(size=(15, 2)), g.normal(0.5, 1.0, size=(12, 2))
        for r in (1, 2):
            for Xc, Yc in adversaries(g, X, Y, r):
                clean = clip_radius(quad, X, Y, clip=None, quantile=0.5)
                dirty = clip_radius(quad, Xc, Yc, clip=None, quantile=0.5)
                k0, k1 = ClippedKernel(c=clean.radius, kernel=quad), ClippedKernel(c=dirty.radius, kernel=quad)
                delta = k1.feature_diameter() / 12
                s = dirty.shift(r, delta)
                Z, Zc = np.vstack([X, Y]), np.vstack([Xc, Yc])
                for perm in [np.arange(27)] + [g.permutation(27) for _ in range(4)]:
                    a = v_mmd(k0, Z[perm[:15]], Z[perm[15:]])
                    b = v_mmd(k1, Zc[perm[:15]], Zc[perm[15:]])
                    assert abs(a - b) <= s + 1e-9
                    checked += 1
    assert checked >= 500


def test_clip_rejects_under_corruption_only_if_the_clean_test_rejects(registry):
    quad = registry.get_kernel("quadratic")
    for seed in range(30):
        g = np.random.default_rng(seed)
        X, Y = g.normal(size=(40, 1)), g.normal(0.6, 1.0, size=(40, 1))
        clean = robust_test(X, Y, kernel=quad, contamination=0, method="clip", n_permutations=49, rng=seed)
        for Xc, Yc in adversaries(g, X, Y, 2):
            dirty = robust_test(Xc, Yc, kernel=quad, contamination=2, method="clip", n_permutations=49, rng=seed)
            # the clean test here is at the clean data's own radius: the dirty p-value bounds it
            assert dirty.pvalue >= clean.pvalue - 1e-12
            assert not dirty.reject or clean.reject


def test_clip_has_power_where_mom_has_little(registry):
    # the issue's design at N = M = 400 (a shift of 0.6 in d = 3, five outliers of norm 300):
    # clip about 0.9 (measured), mom about 0.1
    quad = registry.get_kernel("quadratic")
    hits = {"clip": 0, "mom": 0}
    for seed in range(10):
        g = np.random.default_rng([seed, 37])
        X, Y = g.normal(size=(400, 3)), g.normal(size=(400, 3))
        Y[:, 0] += 0.6
        u = g.normal(size=(5, 3))
        X[:5] = 300 * u / np.linalg.norm(u, axis=1, keepdims=True)
        for method in hits:
            hits[method] += robust_test(X, Y, kernel=quad, contamination=5, method=method, n_permutations=99, rng=seed).reject
    assert hits["clip"] >= 7 and hits["clip"] >= hits["mom"] + 4


def test_bad_clip_options_are_named(registry, rng):
    X, Y = rng.normal(size=(30, 1)), rng.normal(size=(30, 1))
    quad, rbf = registry.get_kernel("quadratic"), registry.get_kernel("rbf", sigma=1.0)
    with pytest.raises(ParameterError, match="clip must be a radius"):
        robust_test(X, Y, kernel=quad, contamination=1, method="clip", clip=-1.0)
    with pytest.raises(ParameterError, match="clip_quantile"):
        robust_test(X, Y, kernel=quad, contamination=1, method="clip", clip_quantile=1.5)
    with pytest.raises(ParameterError, match="radius of method='clip'"):
        robust_test(X, Y, kernel=rbf, contamination=1, method="dc", clip=2.0)
    with pytest.raises(ParameterError, match="cannot tolerate contamination"):
        robust_test(X, Y, kernel=quad, contamination=5, method="clip", clip_quantile=1.0)
    zero = np.zeros((30, 1))
    with pytest.raises(ParameterError, match="quantile of the feature norms"):
        robust_test(zero, zero, kernel=registry.get_kernel("linear"), contamination=1, method="clip")


def test_auto_blocks():
    assert auto_blocks(200, 200, 0) == 29 and auto_blocks(1000, 900, 5) == 59  # odd, about 2 sqrt(min(N, M))
    assert auto_blocks(200, 200, 10) == 41  # at least 4r + 1
    assert auto_blocks(40, 300, 4) == 17
    assert auto_blocks(40, 300, 8) == 19  # capped at min(N, M)/2 = 20, odd
    with pytest.raises(ParameterError, match="contamination = 12"):
        auto_blocks(40, 40, 12)


def test_bad_robust_test_inputs_are_named(registry, rng):
    X, Y = rng.normal(size=(20, 1)), rng.normal(size=(20, 1))
    rbf, quad = registry.get_kernel("rbf", sigma=1.0), registry.get_kernel("quadratic")
    cases = [
        # a combination that reads a bandwidth: only a kernel's own median heuristic is made robust
        (dict(kernel=registry.get_kernel("rbf") + registry.get_kernel("laplace", sigma=1.0)), "fixed before seeing the data"),
        (dict(kernel=quad, method="dc"), "bounded kernel"),
        (dict(method="robust"), "method must be"),
        (dict(contamination=0.7), "fraction"),
        (dict(estimator=registry.get_estimator("u-stat"), method="dc"), "V-statistic"),
        (dict(estimator=registry.get_estimator("monk-bcd"), method="mom"), "mmd2_from_sums"),
        (dict(method="mom", n_blocks=11), "n_blocks"),
        (dict(method="mom", n_blocks=0), "n_blocks"),
        (dict(n_permutations=0), "n_permutations"),
        (dict(alpha=1.0), "alpha"),
    ]
    for kwargs, message in cases:
        kernel = kwargs.pop("kernel", rbf)
        with pytest.raises(ParameterError, match=message):
            robust_test(X, Y, kernel=kernel, **{"contamination": 1, **kwargs})
    with pytest.raises(MonkError, match="Expected a Kernel"):
        robust_test(X, Y, kernel=3.0, contamination=1)
    # by name, the bandwidth kernels default to the median heuristic, made robust (test_bandwidth.py)
    assert robust_test(X, Y, kernel="rbf", contamination=1, n_permutations=19).bandwidths


def test_result_unpacks_and_round_trips_through_json(registry, rng):
    X, Y = rng.normal(size=(80, 1)), rng.normal(3.0, 1.0, size=(80, 1))
    for kernel in (registry.get_kernel("rbf", sigma=1.0), registry.get_kernel("quadratic")):
        result = robust_test(X, Y, kernel=kernel, contamination=2, n_permutations=99, rng=1)
        statistic, pvalue = result
        assert (statistic, pvalue) == (result.statistic, result.pvalue)
        data = json.loads(result.to_json())
        assert data["type"] == "robust-test" and result.reject
        assert f"the rejection stays valid if up to {result.certificate} points were corrupted" in data["decision"]
        assert RobustTestResult.from_dict(data) == result
    with pytest.raises(MonkError, match="p-value"):
        attrs_evolve_pvalue(result)


def attrs_evolve_pvalue(result):
    import attrs

    return attrs.evolve(result, pvalue=0.0)


def test_clip_keeps_its_answer_for_outliers_beyond_float64(registry):
    # the issue's design at N = M = 400 with its five outliers moved from norm 300 to
    # norms whose quadratic k(x, x) overflows: those points get the feature 0 (at any
    # such norm the same), the test runs, and it still rejects with its certificate
    quad = registry.get_kernel("quadratic")
    g = np.random.default_rng(3)
    X, Y = g.normal(size=(400, 3)), g.normal(size=(400, 3))
    Y[:, 0] += 0.6
    results = []
    for norm in (1e100, 1e250):
        Xc = X.copy()
        Xc[:5] = norm / np.sqrt(3)
        results.append(robust_test(Xc, Y, kernel=quad, contamination=5, method="clip", n_permutations=199, rng=4))
    assert results[0].statistic == results[1].statistic and results[0].pvalue == results[1].pvalue
    assert results[0].reject and results[0].certificate >= 5
    # the radius is the median norm, with the overflowing norms counted as the largest
    ordinary = np.sqrt(np.concatenate([quad.diag(X[5:]), quad.diag(Y)]))
    assert results[1].clip_radius == pytest.approx(np.sort(np.concatenate([ordinary, [np.inf] * 5]))[399], rel=1e-12)


def test_clip_says_when_the_radius_itself_is_beyond_float64(registry):
    g = np.random.default_rng(0)
    X = np.full((30, 2), 1e200) + g.normal(size=(30, 2))
    with pytest.raises(DataError, match="beyond float64"):
        robust_test(X, g.normal(size=(10, 2)), kernel="quadratic", contamination=1, method="clip", n_permutations=99)
    with pytest.raises(ParameterError, match="norm 1 ranks above the radius is beyond float64"):
        robust_test(X[:20], g.normal(size=(20, 2)), kernel="quadratic", contamination=1, method="clip", n_permutations=99)


def test_clip_radii_whose_square_leaves_float64_are_refused(registry):
    g = np.random.default_rng(1)
    X, Y = g.normal(size=(30, 2)), g.normal(size=(30, 2))
    for c in (1e-300, 1e300):
        with pytest.raises(ParameterError, match="clip must be a radius whose square is within float64's range"):
            robust_test(X, Y, kernel="quadratic", contamination=1, method="clip", clip=c)
    # a radius read from data at 1e-160: its square would vanish, so the kernel would be 0
    with pytest.raises(DataError, match="whose square is outside float64's range"):
        robust_test(X * 1e-160, Y * 1e-160, kernel="linear", contamination=1, method="clip", n_permutations=9)


def _declaring(kappa, diameter=None):
    """The Gaussian kernel exp(−‖x − y‖²/2) (k(x, x) = 1, D = √2) with declared bounds."""
    from typing import ClassVar

    import attrs

    from monk_framework import Kernel

    @attrs.frozen(kw_only=True)
    class Declaring(Kernel):
        name: ClassVar[str] = "declaring"
        summary: ClassVar[str] = "exp(-|x - y|^2 / 2) with the bounds it is told to declare"
        nonnegative: ClassVar[bool] = True

        def compute_gram(self, A, B):
            return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

        def compute_diag(self, A):
            return np.ones(len(A))

        def sup_diag(self):
            return kappa

        def feature_diameter(self):
            return super().feature_diameter() if diameter is None else diameter

    return Declaring()


@pytest.mark.parametrize(
    "kappa, diameter, message",
    [
        (float("nan"), None, r"sup_diag\(\) must return None or a finite number >= 0; got nan"),
        (-1.0, None, r"sup_diag\(\) must return None or a finite number >= 0; got -1.0"),
        ("1", None, r"sup_diag\(\) must return None or a finite number >= 0; got '1'"),
        (10**400, None, r"sup_diag\(\) must return None or a finite number >= 0; got an int of about 10\^400"),
        (1.0, float("inf"), r"feature_diameter\(\) must return None or a finite number >= 0; got inf"),
        (0.5, None, r"declares sup_diag\(\) = 0.5, but k\(z, z\) = 1 at point 0 of the pooled sample"),
        (1.0, 1e-9, r"declares feature_diameter\(\) = 1e-09, but points \d+ and \d+ of the pooled sample .* apart"),
    ],
)
def test_a_bound_that_would_make_a_false_certificate_is_refused(registry, kappa, diameter, message):
    # a robust test computes its guarantee from the declared bound: a plugin's wrong bound
    # gave certificate 80 of 80 points (D = 1e-9), or an internal AssertionError (NaN)
    from monk_framework import KernelContractError

    g = np.random.default_rng(0)
    X, Y = g.normal(size=(40, 2)), g.normal(1.0, 1.0, size=(40, 2))
    with pytest.raises(KernelContractError, match=message):
        robust_test(X, Y, kernel=_declaring(kappa, diameter), contamination=2, method="dc", n_permutations=99, rng=0)
    with pytest.raises(KernelContractError, match=message):
        aggregated_test(X, Y, kernels=[_declaring(kappa, diameter)], contamination=2, n_permutations=99, rng=0)
    # the true bounds pass, and give the built-in Gaussian kernel's test
    fine = robust_test(X, Y, kernel=_declaring(1.0), contamination=2, method="dc", n_permutations=99, rng=0)
    rbf = robust_test(X, Y, kernel=registry.get_kernel("rbf", sigma=1.0), contamination=2, method="dc", n_permutations=99, rng=0)
    assert fine.pvalue == rbf.pvalue and fine.certificate == rbf.certificate


def test_mom_reads_a_shift_free_kernels_blocks_on_centred_data():
    # the block U-statistics of the linear kernel on data near 2^30 were lost in sums of
    # values near 1e18; moved by an exact 2^30, the test gives the same bits
    gen = np.random.default_rng(3)
    X = np.round(gen.normal(size=(120, 2)) * 2**20) / 2**20
    Y = np.round(gen.normal(0.5, 1.0, size=(120, 2)) * 2**20) / 2**20
    near = robust_test(X, Y, kernel="linear", contamination=2, method="mom", estimator="u-stat", n_permutations=99, rng=0)
    far = robust_test(X + 2.0**30, Y + 2.0**30, kernel="linear", contamination=2, method="mom", estimator="u-stat", n_permutations=99, rng=0)
    assert (far.pvalue, far.statistic, far.certificate) == (near.pvalue, near.statistic, near.certificate)
