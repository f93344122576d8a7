"""Sums of kernel values within the budget: an embedding's bilinear forms and witness values in tiles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monk_framework import get_registry
from monk_framework.core.resources import Resources
from monk_framework.engine.kernel_sums import bilinear, weighted_gram

REG = get_registry()


def test_an_embedding_over_the_budget_gives_the_stored_norms_and_witness():
    gen = np.random.default_rng(7)
    X, Y, Z = gen.normal(size=(70, 3)), gen.normal(0.5, 1.0, size=(50, 3)), gen.normal(size=(9, 3))
    kernel = REG.get_kernel("rbf", sigma=1.0)
    u, v = gen.random(70), gen.random(50)
    tiny = Resources(budget=64)
    assert bilinear(kernel, X, Y, u, v, resources=tiny) == pytest.approx(u @ kernel(X, Y) @ v, rel=1e-12)
    assert bilinear(kernel, X, None, u, u, resources=tiny) == pytest.approx(u @ kernel(X) @ u, rel=1e-12)
    np.testing.assert_allclose(weighted_gram(kernel, Z, X, u, resources=tiny), kernel(Z, X) @ u, rtol=1e-12)
    mean = REG.get_estimator("mean")
    ex, ey = mean.embed(kernel, X), mean.embed(kernel, Y)
    tiled = (ex.norm(max_memory="1kB"), ex.distance(ey, max_memory="1kB"), ex.evaluate(Z, max_memory="1kB"))
    assert tiled[0] == pytest.approx(ex.norm(), rel=1e-12) and tiled[1] == pytest.approx(ex.distance(ey), rel=1e-10)
    np.testing.assert_allclose(tiled[2], ex.evaluate(Z), rtol=1e-12)


@pytest.mark.parametrize("budget", [None, 64, 8 * 7 * 40 * 4])
def test_a_symmetric_bilinear_form_from_the_upper_triangle_is_the_brute_force_sum(budget):
    # u'Kv with u != v from upper-triangle tiles (the diagonal from diag_tile), one pair at a time
    gen = np.random.default_rng(8)
    X = gen.normal(size=(40, 2))
    u, v = gen.normal(size=40), gen.normal(size=40)
    kernel = REG.get_kernel("laplace", sigma=0.7)
    k = lambda a, b: math.exp(-math.sqrt(float(np.sum((a - b) ** 2))) / 0.7)  # noqa: E731
    brute = sum(u[i] * v[j] * k(X[i], X[j]) for i in range(40) for j in range(40))
    told: list[float] = []
    got = bilinear(kernel, X, None, u, v, resources=Resources(budget=budget), report=told.append)
    assert got == pytest.approx(brute, rel=1e-12)
    assert told == sorted(told) and told[-1] == 40 * 41 / 2  # the upper triangle, each value once
    if budget == 64:
        assert len(told) == 40  # a row a tile
