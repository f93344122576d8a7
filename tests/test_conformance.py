"""Checks every registered kernel and estimator must pass (as scikit-learn's
``parametrize_with_checks`` does): a new plugin is tested the moment it is registered."""

from __future__ import annotations

import string

import numpy as np
import pytest

from monk_framework import DataError, Embedding, EmbeddingEstimator, MMDEstimator, MMDResult, get_registry

REG = get_registry()
KERNELS = [e.cls for e in REG.kernels()]
ESTIMATORS = [e.cls for e in REG.estimators()]


def sample(kind: str, n: int, seed: int, shift: float = 0.0):
    gen = np.random.default_rng(seed)
    if kind == "string":
        letters = np.array(list(string.ascii_uppercase[:4]))
        return ["".join(gen.choice(letters, size=gen.integers(3, 12))) for _ in range(n)]
    return gen.normal(size=(n, 3)) * 0.5 + shift


def bad_samples(kind: str):
    if kind == "string":
        return [([], "empty"), ([1, 2], "is int"), (np.zeros(3), "numbers")]
    return [([], "empty"), ([[np.nan, 0, 0]] * 3, "NaN"), (np.zeros((2, 2, 2)), "dimensions"), (["ab", "cd"], "strings")]


@pytest.mark.parametrize("cls", KERNELS, ids=lambda c: c.name)
class TestKernelConformance:
    def test_gram_shapes_and_exact_symmetry(self, cls):
        kernel = cls().fit(sample(cls.input_kind, 40, 0))
        X, Y = sample(cls.input_kind, 40, 0), sample(cls.input_kind, 25, 1)
        K = kernel.gram(X)
        assert K.shape == (40, 40) and K.dtype == np.float64
        assert np.array_equal(K, K.T)
        assert np.array_equal(np.diag(K), kernel.diag(X))
        Kxy, Kyx = kernel.gram(X, Y), kernel.gram(Y, X)
        assert Kxy.shape == (40, 25)
        np.testing.assert_allclose(Kxy, Kyx.T, rtol=1e-12, atol=1e-12)

    def test_declared_bound_holds(self, cls):
        # a kernel that declares sup k(x, x) (robust tests rely on it) never exceeds it, even
        # on extreme inputs; a nonnegative one never gives a negative value
        kernel = cls().fit(sample(cls.input_kind, 30, 5))
        X = sample(cls.input_kind, 30, 5)
        if cls.input_kind == "vector":
            X = np.vstack([X, X[:5] * 1e3, np.zeros((1, 3))])
        kappa = kernel.sup_diag()
        if kappa is not None:
            assert kernel.diag(X).max() <= kappa * (1 + 1e-12)
            assert kernel.feature_diameter() <= 2 * np.sqrt(kappa) + 1e-12
        if kernel.nonnegative:
            assert kernel.gram(X).min() >= 0

    def test_positive_semi_definite(self, cls):
        if not cls.is_psd:
            pytest.skip("declared not PSD")
        kernel = cls().fit(sample(cls.input_kind, 60, 2))
        K = kernel.gram(sample(cls.input_kind, 60, 2))
        eig = np.linalg.eigvalsh(K)
        assert eig.min() >= -1e-9 * max(1.0, abs(eig).max())

    def test_features_reproduce_the_gram(self, cls):
        if not cls.has_features:
            pytest.skip("no explicit feature map")
        kernel = cls()
        X, Y = sample(cls.input_kind, 10, 3), sample(cls.input_kind, 7, 4)
        np.testing.assert_allclose(kernel.features(X) @ kernel.features(Y).T, kernel.gram(X, Y), rtol=1e-10, atol=1e-12)

    @pytest.mark.parametrize("which", range(4))
    def test_bad_input_is_rejected_with_a_message(self, cls, which):
        cases = bad_samples(cls.input_kind)
        if which >= len(cases):
            pytest.skip("fewer cases for this input kind")
        value, message = cases[which]
        with pytest.raises(DataError, match=message):
            cls().fit(sample(cls.input_kind, 5, 0)).gram(value)

    def test_parameters_round_trip(self, cls):
        kernel = cls()
        assert cls.from_params(kernel.params()) == kernel
        assert cls.summary and cls.formula and cls.input_kind in ("vector", "string")


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.name)
@pytest.mark.parametrize("kernel_name", ["rbf", "quadratic"])
class TestEstimatorConformance:
    def test_seed_reproduces_and_json_round_trips(self, cls, kernel_name):
        kernel = REG.get_kernel(kernel_name)
        need = max(cls().min_sample_size()[0], 2)
        n = max(8 * need, 40)
        X, Y = sample("vector", n, 5), sample("vector", n + 3, 6, shift=0.5)
        est = cls()
        if isinstance(est, MMDEstimator):
            a, b = est.estimate(kernel, X, Y, rng=11), est.estimate(kernel, X, Y, rng=11)
            assert (a.mmd2, a.mmd, a.diagnostics) == (b.mmd2, b.mmd, b.diagnostics)
            assert np.isfinite(a.mmd2) and a.mmd >= 0 or est.params().get("root") == "signed"
            assert MMDResult.from_json(a.to_json()) == a and a.seed == 11
        else:
            assert isinstance(est, EmbeddingEstimator)
            a, b = est.embed(kernel, X, rng=11), est.embed(kernel, X, rng=11)
            assert np.array_equal(a.weights, b.weights)
            assert Embedding.from_json(a.to_json(), registry=REG) == a and a.seed == 11

    def test_too_few_points_is_a_clear_error(self, cls, kernel_name):
        est = cls()
        need, _ = est.min_sample_size()
        if need <= 1:
            pytest.skip("accepts a single point")
        small = sample("vector", need - 1, 0)
        with pytest.raises(DataError, match=f"needs at least {need}"):
            if isinstance(est, MMDEstimator):
                est.estimate(REG.get_kernel(kernel_name), small, sample("vector", need + 5, 1))
            else:
                est.embed(REG.get_kernel(kernel_name), small)

    def test_no_difference_means_small_mmd(self, cls, kernel_name):
        est = cls()
        X = sample("vector", 300, 8)
        if isinstance(est, MMDEstimator):
            same = est.estimate(REG.get_kernel(kernel_name), X, X, rng=0).mmd
            far = est.estimate(REG.get_kernel(kernel_name), X, X + 2.0, rng=0).mmd
            assert same < 0.05 * far
        else:
            kernel = REG.get_kernel(kernel_name)
            emb = est.embed(kernel, X, rng=0)
            empirical = REG.get_estimator("mean").embed(kernel, X)
            shifted = REG.get_estimator("mean").embed(kernel, X + 2.0)
            # on clean data the estimate sits near the empirical embedding of X
            assert emb.distance(empirical) < 0.05 * emb.distance(shifted)
