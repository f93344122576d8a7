"""estimate and embed take the tests' arguments: objects or specs, the same numbers."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import monk_framework as mf
from monk_framework import MonkError, UnknownNameError, get_registry

REG = get_registry()


def _data():
    gen = np.random.default_rng(0)
    return gen.normal(size=(30, 2)), gen.normal(0.5, 1.0, size=(25, 2))


@pytest.mark.parametrize(("kernel", "estimator"), [("rbf:sigma=1.5", "u-stat"), ("laplace", "monk-bcd:n_blocks=5"),
                                                   ("quadratic", "monk-bcd-fast:n_blocks=5")])
def test_estimate_by_spec_is_the_estimators_own_estimate(kernel, estimator):
    X, Y = _data()
    by_spec = mf.estimate(kernel, estimator, X, Y, rng=4)
    by_object = REG.resolve_estimator(estimator).estimate(REG.resolve_kernel(kernel), X, Y, rng=4)
    assert attrs.evolve(by_spec, timings={}) == attrs.evolve(by_object, timings={})  # all but the clock
    mixed = mf.estimate(REG.resolve_kernel(kernel), estimator, X, Y, rng=4)
    assert mixed.mmd2 == by_spec.mmd2


def test_embed_by_spec_and_the_kinds_are_not_confused():
    X, Y = _data()
    emb = mf.embed("rbf:sigma=1", "monk-embedding:n_blocks=3", X, rng=2)
    again = REG.get_estimator("monk-embedding", n_blocks=3).embed(REG.get_kernel("rbf", sigma=1.0), X, rng=2)
    assert attrs.evolve(emb, timings={}) == attrs.evolve(again, timings={})
    with pytest.raises(MonkError, match=r"estimate needs an MMD estimator, or its spec such as 'u-stat'; got 'mean' \(an embedding"):
        mf.estimate("rbf", "mean", X, Y)
    with pytest.raises(MonkError, match=r"embed needs an embedding estimator, or its spec such as 'mean'; got 'u-stat' \(an MMD"):
        mf.embed("rbf", "u-stat", X)
    with pytest.raises(MonkError, match=r"got NoneType None\.$"):
        mf.estimate("rbf", None, X, Y)
    with pytest.raises(UnknownNameError, match="Did you mean 'u-stat'"):
        mf.estimate("rbf", "ustat", X, Y)


def test_every_entry_point_takes_the_same_specs():
    X, Y = _data()
    kernel, estimator = "rbf:sigma=1", "u-stat"
    assert mf.permutation_test(kernel, estimator, X, Y, n_permutations=19, rng=1).estimator == "u-stat"
    assert mf.split_test(kernel, estimator, X, Y, n_permutations=19, rng=1).kernel == "rbf"
    assert mf.robust_test(kernel, X, Y, contamination=1, method="mom", estimator=estimator, n_permutations=19,
                          rng=1).estimator == "u-stat"


def test_a_backend_given_by_name_is_refused_not_run_here():
    from monk_framework import ParameterError

    X, Y = _data()
    for run in (lambda: mf.estimate("rbf", "u-stat", X, Y, backend="dask"),
                lambda: mf.permutation_test("rbf", "u-stat", X, Y, backend="dask"),
                lambda: mf.split_test("rbf", "u-stat", X, Y, backend="dask"),
                lambda: mf.robust_test("rbf:sigma=1", X, Y, contamination=1, backend="dask")):
        with pytest.raises(ParameterError, match=r"backend must be a backend object.*get_backend\('dask'\).*got str 'dask'"):
            run()


@pytest.mark.parametrize(
    ("call", "form"),
    [
        (lambda X, Y: mf.estimate(X, Y, "rbf", "u-stat"), r"estimate takes the kernel first: estimate\(kernel, estimator, X, Y\)"),
        (lambda X, Y: mf.embed(X, "rbf", "mean"), r"embed takes the kernel first: embed\(kernel, estimator, X\)"),
        (lambda X, Y: mf.permutation_test(X, Y, "rbf", "u-stat"), r"permutation_test takes the kernel first"),
        (lambda X, Y: mf.split_test(X, Y, "rbf", "u-stat"), r"split_test takes the kernel first"),
        (lambda X, Y: mf.robust_test(X, Y, "rbf:sigma=1", contamination=2),
         r"robust_test takes the kernel first: robust_test\(kernel, X, Y, contamination=r\)"),
        (lambda X, Y: mf.permutation_test("rbf", X, Y, "u-stat"), r"permutation_test takes the kernel first.*where the estimator goes"),
        (lambda X, Y: mf.estimate(X.tolist(), Y.tolist(), "rbf", "u-stat"), r"got a list of 30 items where the kernel goes"),
    ],
)
def test_samples_where_the_kernel_goes_are_refused_with_the_calls_form(call, form):
    # aggregated_test takes the samples first: the guess carried over to the other calls
    X, Y = _data()
    with pytest.raises(mf.ParameterError, match=form):
        call(X, Y)
