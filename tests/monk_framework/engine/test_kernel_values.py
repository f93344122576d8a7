"""The engine's Gram matrices: the same values as the kernel alone, their bands counted."""

from typing import ClassVar

import attrs
import numpy as np
import pytest

from monk_framework import Kernel
from monk_framework.core.resources import Resources
from monk_framework.engine.kernel_values import gram_matrix
from monk_framework.engine.memory import CHUNK_BYTES
from monk_framework.engine.reductions import kernel_sums


@pytest.fixture
def small_chunks(monkeypatch):
    # bands of a few rows, so that a small matrix has many of them
    monkeypatch.setitem(CHUNK_BYTES, "band", 8 * 7 * 64)


@pytest.mark.parametrize("symmetric", [True, False])
def test_a_counted_gram_matrix_is_the_kernels_own_bit_for_bit(registry, rng, small_chunks, symmetric):
    X, Y = rng.normal(size=(150, 3)), rng.normal(size=(90, 3))
    kernel = registry.get_kernel("rbf", sigma=1.3)
    told: list[tuple[float, float, str]] = []
    other = None if symmetric else Y
    got = gram_matrix(kernel, X, other, report=lambda *t: told.append(t))
    assert np.array_equal(got, kernel.gram(X, other))
    assert np.array_equal(got, gram_matrix(kernel, X, other))  # counting changes nothing
    done = sorted(t[0] for t in told)
    total = 150 * 151 / 2 if symmetric else 150 * 90
    assert len(told) >= 3 and done[-1] == total and {t[1] for t in told} == {total}
    assert {t[2] for t in told} == {"Gram matrix"}
    # brute force, one pair at a time
    i, j = 17, 61
    b = X[j] if symmetric else Y[j]
    assert got[i, j] == pytest.approx(np.exp(-np.sum((X[i] - b) ** 2) / (2 * 1.3**2)), rel=1e-13)


@attrs.frozen(kw_only=True)
class OldStyleGram(Kernel):
    """A plugin written to ``rectangular_gram(X, Y)``, before it took ``run_bands``."""

    name: ClassVar[str] = "old-style"
    summary: ClassVar[str] = "exp(-|x - y|) on the first coordinate, with its own rectangular Gram matrix."

    def compute_gram(self, X, Y):
        return np.exp(-np.abs(X[:, :1] - Y[:, 0]))

    def compute_diag(self, X):
        return np.ones(len(X))

    def rectangular_gram(self, X, Y):
        return self.compute_gram(X, Y)


def test_an_override_without_run_bands_still_serves_the_engine(rng):
    X, Y = rng.normal(size=(40, 2)), rng.normal(size=(30, 2))
    told: list[tuple[float, float, str]] = []
    got = gram_matrix(OldStyleGram(), X, Y, report=lambda *t: told.append(t))
    np.testing.assert_array_equal(got, np.exp(-np.abs(X[:, :1] - Y[:, 0])))
    assert told == []  # one step, which the caller tells when it returns
    seen: list[tuple[float, float, str]] = []
    whole = OldStyleGram()
    object.__setattr__(whole, "computes_gram_whole", lambda: True)  # read from its stored matrices
    sums = kernel_sums(whole, X, Y, resources=Resources(progress=lambda *t: seen.append(t)))
    assert sums.xy == pytest.approx(got.sum(), rel=1e-13) and not sums.tiled
    assert seen[-1] == (70 * 71 / 2, 70 * 71 / 2, "Gram matrix")  # the pooled sample's, one matrix
    # and an embedding's witness values, told or not, call it without run_bands (a
    # TypeError before), against the definition
    from monk_framework import Embedding

    emb = Embedding(kernel=OldStyleGram(), sample=X, weights=np.full(40, 1 / 40), estimator="custom")
    want = np.exp(-np.abs(Y[:, :1] - X[:, 0])) @ np.full(40, 1 / 40)
    np.testing.assert_allclose(emb.evaluate(Y), want, rtol=1e-14)
    np.testing.assert_allclose(emb.evaluate(Y, progress=lambda *t: None), want, rtol=1e-14)
