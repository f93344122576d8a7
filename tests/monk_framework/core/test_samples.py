"""What the framework takes from a plugin's hook it holds alone (core.samples.owned_result)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from monk_framework.core.samples import owned_result

_HELD = np.arange(6.0)


@numba.njit(cache=False)
def _compiled_ones(n):
    return np.ones(n)


def test_a_fresh_array_is_taken_as_it_is():
    made = []

    def hook():
        out = np.arange(4.0)
        made.append(id(out))
        return out

    got = owned_result(hook)
    assert id(got) == made[0]  # no copy: the usual case costs nothing
    view = owned_result(lambda: np.arange(8.0)[2:5])  # a view of memory nothing else holds
    assert view.base is not None and np.array_equal(view, [2.0, 3.0, 4.0])
    compiled = owned_result(lambda: _compiled_ones(3))  # numba's arrays own their memory through a MemInfo
    assert compiled.base is not None and np.array_equal(compiled, np.ones(3))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_what_the_plugin_still_holds_is_copied():
    for held in (lambda: _HELD, lambda: _HELD[1:4], lambda: np.asmatrix(_HELD)):
        got = owned_result(held)
        assert type(got) is np.ndarray and not np.shares_memory(got, _HELD)
        assert np.array_equal(got.ravel(), np.asarray(held()).ravel())
    got = owned_result(lambda: memoryview(_HELD))  # a foreign object viewing held memory
    assert not np.shares_memory(got, _HELD) and np.array_equal(got, _HELD)


def test_other_answers_are_converted_or_passed_on():
    assert owned_result(lambda: None) is None
    assert np.array_equal(owned_result(lambda: [[1.0, 2.0]]), [[1.0, 2.0]])
