"""The estimator interface: seeds, validation, results and embeddings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monk_framework import DataError, Embedding, MonkError, get_registry

REG = get_registry()


@pytest.mark.parametrize(
    ("X", "Y", "message"),
    [
        (np.zeros((3, 2)), np.zeros((3, 3)), "X has 2 feature\\(s\\) per point but Y has 3"),
        (np.zeros((3, 1)), [[np.nan]] * 3, "Y contains NaN at point 0"),
        ([], np.zeros((3, 1)), "X is empty"),
        (["a", "b"], np.zeros((2, 1)), "X holds strings, but kernel 'rbf' needs numeric vectors"),
    ],
)
def test_estimate_validates_both_samples(X, Y, message):
    with pytest.raises(DataError, match=message):
        REG.get_estimator("v-stat").estimate(REG.get_kernel("rbf"), X, Y)


def test_estimate_rejects_a_non_kernel():
    with pytest.raises(MonkError, match="Expected a Kernel"):
        REG.get_estimator("v-stat").estimate("rbf", np.zeros((2, 1)), np.zeros((2, 1)))


def test_embedding_algebra_matches_brute_force(rng):
    kernel = REG.get_kernel("rbf", sigma=0.9)
    X, Y = rng.normal(size=(6, 2)), rng.normal(size=(4, 2))
    wx, wy = rng.normal(size=6), rng.normal(size=4)
    ex = Embedding(kernel=kernel, sample=X, weights=wx, estimator="custom")
    ey = Embedding(kernel=kernel, sample=Y, weights=wy, estimator="custom")
    k = lambda a, b: math.exp(-np.sum((a - b) ** 2) / (2 * 0.81))  # noqa: E731
    inner = sum(wx[i] * wy[j] * k(X[i], Y[j]) for i in range(6) for j in range(4))
    nx2 = sum(wx[i] * wx[j] * k(X[i], X[j]) for i in range(6) for j in range(6))
    ny2 = sum(wy[i] * wy[j] * k(Y[i], Y[j]) for i in range(4) for j in range(4))
    assert ex.inner(ey) == pytest.approx(inner, rel=1e-12)
    assert ex.norm() == pytest.approx(math.sqrt(nx2), rel=1e-12)
    assert ex.distance(ey) == pytest.approx(math.sqrt(nx2 + ny2 - 2 * inner), rel=1e-12)
    z = rng.normal(size=(1, 2))
    assert ex.evaluate(z)[0] == pytest.approx(sum(wx[i] * k(z[0], X[i]) for i in range(6)), rel=1e-12)


def test_embeddings_with_different_kernels_cannot_be_compared(rng):
    X = rng.normal(size=(5, 1))
    a = REG.get_estimator("mean").embed(REG.get_kernel("rbf", sigma=1.0), X)
    b = REG.get_estimator("mean").embed(REG.get_kernel("rbf", sigma=2.0), X)
    with pytest.raises(MonkError, match="different kernels"):
        a.distance(b)


def test_embedding_weights_are_validated(rng):
    with pytest.raises(DataError, match="one weight per sample point: 3"):
        Embedding(kernel=REG.get_kernel("rbf"), sample=np.zeros((3, 1)), weights=[1.0], estimator="x")


def test_embedding_round_trips_through_json(rng):
    emb = REG.get_estimator("mean").embed(REG.get_kernel("laplace", sigma="median"), rng.normal(size=(7, 2)), rng=3)
    back = Embedding.from_json(emb.to_json())
    assert back == emb
    assert back.kernel.sigma == emb.kernel.sigma and back.seed == 3
