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


@pytest.mark.parametrize(("kernel", "estimator"), [("rbf:sigma=1.5", "u-stat"), ("laplace", "monk-bcd:n_blocks=5"), ("quadratic", "monk-bcd-fast:n_blocks=5")])
def test_estimate_by_spec_is_the_estimators_own_estimate(kernel, estimator):
    X, Y = _data()
    by_spec = mf.estimate(X, Y, kernel=kernel, estimator=estimator, rng=4)
    by_object = REG.resolve_estimator(estimator).estimate(REG.resolve_kernel(kernel), X, Y, rng=4)
    assert attrs.evolve(by_spec, timings={}) == attrs.evolve(by_object, timings={})  # all but the clock
    mixed = mf.estimate(X, Y, kernel=REG.resolve_kernel(kernel), estimator=estimator, rng=4)
    assert mixed.mmd2 == by_spec.mmd2


def test_embed_by_spec_and_the_kinds_are_not_confused():
    X, Y = _data()
    emb = mf.embed(X, kernel="rbf:sigma=1", estimator="monk-embedding:n_blocks=3", rng=2)
    again = REG.get_estimator("monk-embedding", n_blocks=3).embed(REG.get_kernel("rbf", sigma=1.0), X, rng=2)
    assert attrs.evolve(emb, timings={}) == attrs.evolve(again, timings={})
    with pytest.raises(MonkError, match=r"estimate needs an MMD estimator, or its spec such as 'u-stat'; got 'mean' \(an embedding"):
        mf.estimate(X, Y, kernel="rbf", estimator="mean")
    with pytest.raises(MonkError, match=r"embed needs an embedding estimator, or its spec such as 'mean'; got 'u-stat' \(an MMD"):
        mf.embed(X, kernel="rbf", estimator="u-stat")
    assert mf.estimate(X, Y, kernel="rbf", estimator=None).estimator == "u-stat"  # None: the default
    with pytest.raises(UnknownNameError, match="Did you mean 'u-stat'"):
        mf.estimate(X, Y, kernel="rbf", estimator="ustat")


def test_every_entry_point_takes_the_same_specs():
    X, Y = _data()
    kernel, estimator = "rbf:sigma=1", "u-stat"
    assert mf.permutation_test(X, Y, kernel=kernel, estimator=estimator, n_permutations=19, rng=1).estimator == "u-stat"
    assert mf.split_test(X, Y, kernel=kernel, estimator=estimator, n_permutations=19, rng=1).kernel == "rbf"
    assert mf.robust_test(X, Y, kernel=kernel, contamination=1, method="mom", estimator=estimator, n_permutations=19, rng=1).estimator == "u-stat"


def test_a_backend_given_by_name_is_refused_not_run_here():
    from monk_framework import ParameterError

    X, Y = _data()
    for run in (
        lambda: mf.estimate(X, Y, kernel="rbf", estimator="u-stat", backend="dask"),
        lambda: mf.permutation_test(X, Y, kernel="rbf", estimator="u-stat", backend="dask"),
        lambda: mf.split_test(X, Y, kernel="rbf", estimator="u-stat", backend="dask"),
        lambda: mf.robust_test(X, Y, kernel="rbf:sigma=1", contamination=1, backend="dask"),
    ):
        with pytest.raises(ParameterError, match=r"backend must be a backend object.*get_backend\('dask'\).*got str 'dask'"):
            run()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda X, Y: mf.estimate(X, Y, kernel=X),
            r"kernel must be a kernel object or a spec such as 'rbf:sigma=1'; got "
            r"a ndarray of shape \(30, 2\), which looks like a sample",
        ),
        (lambda X, Y: mf.embed(X, kernel="rbf", estimator=Y), r"estimator must be .* got a ndarray of shape \(25, 2\)"),
        (lambda X, Y: mf.permutation_test(X, Y, estimator=Y), r"estimator must be .*samples come first"),
        (lambda X, Y: mf.split_test(X, Y, kernel=X.tolist()), r"got a list of 30 items, which looks like a sample"),
        (lambda X, Y: mf.robust_test(X, Y, kernel=Y, contamination=2), r"kernel must be .*looks like a sample"),
    ],
)
def test_a_sample_where_the_kernel_goes_is_refused_by_name(call, message):
    X, Y = _data()
    with pytest.raises(mf.ParameterError, match=message):
        call(X, Y)
