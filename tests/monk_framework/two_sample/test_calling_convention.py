"""One calling convention: the samples first, everything else by keyword, the command
line's defaults; the previous positional forms warn and give the same numbers."""

from __future__ import annotations

import subprocess
import sys

import attrs
import numpy as np
import pytest

import monk_framework as mf
from monk_framework import MonkDeprecationWarning


def _data(seed: int = 0):
    gen = np.random.default_rng(seed)
    return gen.normal(size=(40, 2)), gen.normal(0.4, 1.0, size=(35, 2))


def _same(a, b) -> bool:
    return attrs.evolve(a, timings={}) == attrs.evolve(b, timings={})


def test_every_entry_point_runs_with_its_defaults_and_says_which_it_chose():
    X, Y = _data()
    test = mf.permutation_test(X, Y, rng=0)
    assert (test.kernel, test.estimator, test.n_permutations) == ("rbf", "u-stat", 1000)
    assert test.kernel_params_requested == {"sigma": "median"} and isinstance(test.kernel_params["sigma"], float)
    assert _same(test, mf.permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=1000, rng=0))
    assert mf.split_test(X, Y, grid={"sigma": [0.5, 1.0]}, rng=0).n_permutations == 1000
    agg = mf.aggregated_test(X, Y, rng=0)
    assert agg.n_permutations == 1000 and len(agg.kernel_specs) == 20
    robust = mf.robust_test(X, Y, contamination=5, rng=0)  # rbf at the median heuristic, made robust
    assert (robust.kernel, robust.method, robust.estimator) == ("rbf", "dc", "v-stat") and robust.bandwidths
    assert mf.estimate(X, Y).estimator == "u-stat"
    assert mf.embed(X).estimator == "mean"
    strings = ["ACGTAC", "ACGGTA", "TTGACA", "GATTAC"] * 3
    assert mf.estimate(strings, strings[::-1]).kernel == "ssk"  # strings: the subsequence kernel


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            lambda X, Y: mf.permutation_test("rbf", "v-stat", X, Y, n_permutations=49, rng=1),
            lambda X, Y: mf.permutation_test(X, Y, kernel="rbf", estimator="v-stat", n_permutations=49, rng=1),
        ),
        (
            lambda X, Y: mf.split_test("rbf:sigma=1", "u-stat", X, Y, n_permutations=49, rng=1),
            lambda X, Y: mf.split_test(X, Y, kernel="rbf:sigma=1", estimator="u-stat", n_permutations=49, rng=1),
        ),
        (
            lambda X, Y: mf.robust_test("rbf:sigma=1", X, Y, contamination=1, n_permutations=49, rng=1),
            lambda X, Y: mf.robust_test(X, Y, contamination=1, kernel="rbf:sigma=1", n_permutations=49, rng=1),
        ),
        (
            lambda X, Y: mf.aggregated_test(X, Y, ["rbf:sigma=1", "laplace:sigma=2"], n_permutations=49, rng=1),
            lambda X, Y: mf.aggregated_test(X, Y, kernels=["rbf:sigma=1", "laplace:sigma=2"], n_permutations=49, rng=1),
        ),
        (
            lambda X, Y: mf.estimate(mf.get_registry().get_kernel("laplace"), "monk-bcd:n_blocks=5", X, Y, rng=2),
            lambda X, Y: mf.estimate(X, Y, kernel="laplace", estimator="monk-bcd:n_blocks=5", rng=2),
        ),
        (
            lambda X, Y: mf.embed("rbf:sigma=1", "monk-embedding:n_blocks=5", X, rng=2),
            lambda X, Y: mf.embed(X, kernel="rbf:sigma=1", estimator="monk-embedding:n_blocks=5", rng=2),
        ),
    ],
    ids=["permutation_test", "split_test", "robust_test", "aggregated_test", "estimate", "embed"],
)
def test_the_previous_forms_warn_with_the_new_call_and_give_the_same_numbers(old, new):
    X, Y = _data(3)
    with pytest.warns(MonkDeprecationWarning, match=r"is deprecated .* Write \w+\(X") as caught:
        before = old(X, Y)
    assert issubclass(caught[0].category, DeprecationWarning)
    assert caught[0].filename == __file__  # it points at the caller's line, where Python's filters show it
    assert _same(before, new(X, Y))


def test_the_previous_form_refuses_an_argument_given_twice():
    X, Y = _data()
    with pytest.raises(mf.ParameterError, match="got estimator both by position and by keyword"):
        mf.permutation_test("rbf", "u-stat", X, Y, estimator="v-stat")


def test_a_two_argument_progress_still_works_for_a_release():
    X, Y = _data()
    seen, seen3 = [], []
    with pytest.warns(MonkDeprecationWarning, match=r"progress\(done, total, what\)"):
        old = mf.permutation_test(X, Y, n_permutations=50, rng=0, progress=lambda d, t: seen.append((d, t)))
    new = mf.permutation_test(X, Y, n_permutations=50, rng=0, progress=lambda d, t, what: seen3.append((d, t, what)))
    assert seen and seen == [(d, t) for d, t, _ in seen3] and {w for *_, w in seen3} == {"Gram matrix", "permutations"}
    assert seen3[-1] == (50, 50, "permutations")  # the stored Gram matrix first, a stage of its own
    assert old.pvalue == new.pvalue


def test_the_alternatives_count_as_scipy_does():
    X, Y = _data(7)
    results = {alt: mf.permutation_test(X, Y, alternative=alt, n_permutations=199, rng=4) for alt in ("greater", "less", "two-sided")}
    null, T = results["greater"].null_distribution, results["greater"].statistic
    for r in results.values():  # one null distribution and one statistic whatever the alternative
        np.testing.assert_array_equal(r.null_distribution, null)
    greater = (1 + np.sum(null >= T)) / 200
    less = (1 + np.sum(null <= T)) / 200
    assert results["greater"].pvalue == greater and results["less"].pvalue == less
    assert results["two-sided"].pvalue == min(1.0, 2 * min(greater, less))
    for r in results.values():
        assert r.reject == (r.pvalue <= r.alpha) and r.decision


def test_less_finds_samples_more_alike_than_chance():
    # one sample split in alternation after sorting: the halves match far better than random halves
    Z = np.sort(np.random.default_rng(0).normal(size=200))[:, None]
    test = mf.permutation_test(Z[::2], Z[1::2], kernel="rbf:sigma=0.5", estimator="v-stat", alternative="less", n_permutations=199, rng=0)
    assert test.reject and test.pvalue == 1 / 200 and "(less)" in test.decision
    assert not mf.permutation_test(Z[::2], Z[1::2], kernel="rbf:sigma=0.5", estimator="v-stat", n_permutations=199, rng=0).reject


def test_an_unknown_alternative_is_named():
    X, Y = _data()
    with pytest.raises(mf.ParameterError, match="alternative"):
        mf.permutation_test(X, Y, alternative="bigger")


def test_import_monk_framework_leaves_the_application_layer_alone():
    code = "import sys, monk_framework; print(sorted(m for m in sys.modules if m.startswith('monk_framework.app')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
