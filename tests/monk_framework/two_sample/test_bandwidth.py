"""The median heuristic made robust: the interval that holds the uncorrupted data's
median whatever r points were replaced, its snapped candidates, and the robust test that
rejects only at every candidate."""

from __future__ import annotations

import math

import numpy as np
import pytest

import monk_framework as mf
from monk_framework.two_sample.bandwidth import MedianBandwidth, snap


def test_snap_is_the_nearest_quarter_octave_and_monotone():
    assert snap(1.0) == 1.0 and snap(2.0) == 2.0 and snap(1.1) == 2**0.25 and snap(0.95) == 1.0 and snap(0.9) == 2**-0.25
    values = np.geomspace(1e-3, 1e3, 2001)
    snapped = [snap(v) for v in values]
    assert all(a <= b for a, b in zip(snapped, snapped[1:]))
    assert all(abs(math.log2(s) - math.log2(v)) <= 0.125 + 1e-12 for s, v in zip(snapped, values))


@pytest.mark.parametrize("r", [1, 2, 3])
def test_the_uncorrupted_median_lies_in_the_bounds_whatever_the_corruption(r):
    # brute force over adversaries: the clean median against bounds read from the corrupted data
    gen = np.random.default_rng(r)
    for trial in range(200):
        clean = gen.normal(size=(13, 2))
        corrupted = clean.copy()
        which = gen.choice(13, r, replace=False)
        kind = trial % 4
        corrupted[which] = (
            gen.normal(size=(r, 2)) * 10.0 ** gen.integers(-3, 4)
            if kind == 0
            else np.repeat(gen.normal(size=(1, 2)), r, axis=0)
            if kind == 1
            # all at one point
            else clean[gen.choice(13, r)]
            if kind == 2
            # copies of others
            else np.zeros((r, 2)) + 1e6
        )  # far away
        truth = MedianBandwidth.of(clean[:7], clean[7:], "l2").median()
        assert truth == pytest.approx(float(np.median([np.linalg.norm(a - b) for i, a in enumerate(clean) for b in clean[i + 1 :]])), rel=1e-12)
        low, high = MedianBandwidth.of(corrupted[:7], corrupted[7:], "l2").bounds(r)
        assert low <= truth <= high
        candidates = MedianBandwidth.of(corrupted[:7], corrupted[7:], "l2").candidates(r)
        assert candidates is None or snap(truth) in candidates


def test_without_corruption_the_one_candidate_is_the_snapped_median_heuristic():
    gen = np.random.default_rng(0)
    X, Y = gen.normal(size=(50, 3)), gen.normal(size=(40, 3))
    bandwidth = MedianBandwidth.of(X, Y, "l2")
    assert bandwidth.candidates(0) == [snap(bandwidth.median())] == [bandwidth.observed()]
    # the library's median heuristic reads the same median
    fitted = mf.get_registry().get_kernel("rbf").fitted(X, Y)
    assert bandwidth.median() == pytest.approx(fitted.params()["sigma"], rel=1e-12)
    assert MedianBandwidth.of(X, Y, "l1").median() == pytest.approx(
        mf.get_registry().get_kernel("laplace", norm="l1").fitted(X, Y).params()["sigma"], rel=1e-12
    )


def test_the_default_robust_test_is_dcmmd_at_every_candidate():
    gen = np.random.default_rng(2)
    X, Y = gen.normal(size=(80, 2)), gen.normal(0.5, 1.0, size=(80, 2))
    for r in (0, 3, 12):
        default = mf.robust_test(X, Y, contamination=r, n_permutations=199, rng=1)
        sigmas = MedianBandwidth.of(X, Y, "l2").candidates(r)
        assert default.bandwidths == sigmas and default.kernel_params["sigma"] == snap(MedianBandwidth.of(X, Y, "l2").median())
        fixed = [mf.robust_test(X, Y, contamination=r, kernel=f"rbf:sigma={s!r}", n_permutations=199, rng=1) for s in sigmas]
        assert default.pvalue == max(f.pvalue for f in fixed)
        assert default.reject == all(f.reject for f in fixed)
        at_chosen = next(f for f, s in zip(fixed, sigmas) if s == default.kernel_params["sigma"])
        assert default.statistic == at_chosen.statistic
    assert len(sigmas) >= 2  # r = 12 of 160 points spans several candidates


def test_the_default_robust_certificate_is_the_largest_budget_that_still_rejects():
    gen = np.random.default_rng(4)
    X, Y = gen.normal(size=(100, 2)), gen.normal(0.6, 1.0, size=(100, 2))
    first = mf.robust_test(X, Y, contamination=0, n_permutations=199, rng=2)
    c = first.certificate
    assert c is not None and c >= 1
    assert mf.robust_test(X, Y, contamination=c, n_permutations=199, rng=2).reject
    assert not mf.robust_test(X, Y, contamination=c + 1, n_permutations=199, rng=2).reject


def test_a_budget_that_could_move_the_median_anywhere_is_refused_by_name():
    gen = np.random.default_rng(0)
    X, Y = gen.normal(size=(10, 1)), gen.normal(size=(10, 1))
    with pytest.raises(mf.ParameterError, match=r"contamination = 6 touches up to .* of the 190 pairwise distances"):
        mf.robust_test(X, Y, contamination=6, n_permutations=19)
    with pytest.raises(mf.ParameterError, match="reads its bandwidth from the data.*method='dc'"):
        mf.robust_test(X, Y, contamination=1, method="clip")
