"""Arguments every test shares, checked once (two_sample/common.py and core/params.py):
a Python caller's value of the wrong kind gets a message naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import (
    MonkError,
    ParameterError,
    aggregated_test,
    load_sample,
    permutation_test,
    robust_test,
    split_test,
)

RNG = np.random.default_rng(0)
X, Y = RNG.normal(size=(24, 2)), RNG.normal(0.5, 1.0, size=(24, 2))

CALLS = {
    "permutation_test": lambda **kw: permutation_test(X, Y, kernel="rbf:sigma=1", estimator="u-stat", n_permutations=19, rng=0, **kw),
    "robust_test": lambda **kw: robust_test(X, Y, kernel="rbf:sigma=1", contamination=1, n_permutations=19, rng=0, **kw),
    "aggregated_test": lambda **kw: aggregated_test(X, Y, bandwidths=[0.5, 1.0], n_permutations=79, rng=0, **kw),
    "split_test": lambda **kw: split_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=19, rng=0, **kw),
}

#: what a yes-or-no argument is sometimes given: truthiness read "false" as yes, and an
#: array failed with numpy's "truth value of an array ... is ambiguous"
NOT_FLAGS = ["false", "", 1, 0, None, np.array([1.0, 2.0]), [True]]


@pytest.mark.parametrize("value", NOT_FLAGS, ids=repr)
@pytest.mark.parametrize("call", list(CALLS))
def test_return_null_is_true_or_false(call, value):
    with pytest.raises(ParameterError, match=r"^return_null must be True or False; got "):
        CALLS[call](return_null=value)


@pytest.mark.parametrize("value", NOT_FLAGS, ids=repr)
def test_report_estimate_and_case_sensitive_are_true_or_false(value, tmp_path):
    with pytest.raises(ParameterError, match=r"^report_estimate must be True or False"):
        CALLS["permutation_test"](report_estimate=value)
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(ParameterError, match=r"^load_sample: case_sensitive must be True or False"):
        load_sample(tmp_path / "x.npy", case_sensitive=value)


def test_flags_given_as_bools_keep_their_meaning():
    # numpy's bools are bools (a flag read from an array of settings)
    assert CALLS["permutation_test"](return_null=np.False_).null_distribution is None
    assert len(CALLS["permutation_test"](return_null=np.True_).null_distribution) == 19


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        ("permutation_test", "relabel"),
        ("robust_test", "method"),
        ("aggregated_test", "method"),
    ],
)
@pytest.mark.parametrize("value", [np.array(["auto", "dc"]), 3, None, "Auto"], ids=repr)
def test_a_named_option_of_another_kind_lists_the_options(call, argument, value):
    with pytest.raises(ParameterError, match=rf"^{argument} must be one of '.*'; got "):
        CALLS[call](**{argument: value})


def test_n_blocks_as_an_array_is_refused_by_name():
    with pytest.raises(ParameterError, match=r"n_blocks must be 'auto' or an int >= 1; got array"):
        robust_test(X, Y, kernel="rbf:sigma=1", contamination=1, method="mom", n_blocks=np.array([3, 5]), rng=0)


@pytest.mark.parametrize("value", [1, 0.5, True, object()], ids=["1", "0.5", "True", "an-object"])
@pytest.mark.parametrize("call", ["robust_test", "aggregated_test"])
def test_an_estimator_that_is_no_estimator_is_named(call, value):
    # robust_test(estimator=1) was AttributeError: 'int' object has no attribute 'role'
    with pytest.raises(MonkError, match=r"^estimator must be an MMD estimator \(e\.g\. 'u-stat' or "):
        CALLS[call](estimator=value)


@pytest.mark.parametrize("value", [1, 2.5, np.array(3), {"rbf:sigma=1": 1}, {"rbf:sigma=1"}], ids=repr)
def test_kernels_that_are_no_list_of_kernels_are_named(value):
    # kernels=1 was TypeError: 'int' object is not iterable; a set or a dict has no order
    with pytest.raises(MonkError, match=r"^kernels must be a list of Kernel objects or specs"):
        aggregated_test(X, Y, kernels=value, n_permutations=79, rng=0)


@pytest.mark.parametrize("value", ["abc", 1 + 1j, object(), np.full((48, 48), 1 + 0j), np.full((48, 48), "a")], ids=lambda v: type(v).__name__)
def test_a_precomputed_gram_matrix_of_another_kind_is_named(value):
    # gram='abc' was ValueError: could not convert string to float; complex values had their
    # imaginary parts dropped by float()
    with pytest.raises(ParameterError, match=r"^The precomputed Gram matrix must be a 48 x 48 array of real numbers; got"):
        CALLS["permutation_test"](gram=value)
    with pytest.raises(ParameterError, match=r"^The precomputed Gram matrix must be 48 x 48 \(the pooled sample\); got shape \(\)"):
        CALLS["permutation_test"](gram=10**40)  # was OverflowError: int too large to convert to float


def test_a_precomputed_gram_matrix_of_python_numbers_is_read():
    from monk_framework import get_registry

    kernel = get_registry().get_kernel("rbf", sigma=1.0)
    Z = np.vstack([X, Y])
    K = kernel.gram(Z, Z)
    as_objects = np.array([[float(v) for v in row] for row in K], dtype=object)
    same = CALLS["permutation_test"](gram=as_objects)
    assert same.pvalue == CALLS["permutation_test"](gram=K).pvalue == CALLS["permutation_test"]().pvalue


@pytest.mark.parametrize("value", [np.eye(16), "gram", 3], ids=lambda v: type(v).__name__)
def test_split_test_gram_must_be_a_function(value):
    # gram=np.eye(16) was TypeError: 'numpy.ndarray' object is not callable, deep in the work
    with pytest.raises(ParameterError, match=r"^gram must be a function gram\(kernel, ix, iy\)"):
        CALLS["split_test"](gram=value)


@pytest.mark.parametrize("value", ["vectors", 1, np.array(["vector"])], ids=repr)
def test_load_sample_kind_is_named(value, tmp_path):
    # was a ValueError (not the library's error), and an array failed in its comparison
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(ParameterError, match=r"^load_sample: kind must be 'vector', 'string' or None; got"):
        load_sample(tmp_path / "x.npy", kind=value)
