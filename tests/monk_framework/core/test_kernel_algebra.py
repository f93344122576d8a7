"""k1 + k2, k1 * k2 and c * k: their values are the definitions', and they work everywhere."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import DataError, ParameterError, get_registry, load_result
from monk_framework.core.combinators import ProductKernel, ScaledKernel, SumKernel
from monk_framework.core.registry import kernel_from_spec
from monk_framework.two_sample import permutation_test, robust_test

REG = get_registry()
GEN = np.random.default_rng(7)
X, Y = GEN.normal(size=(25, 3)), GEN.normal(0.4, 1.0, size=(20, 3))


def test_kernels_are_callable():
    k = REG.get_kernel("rbf", sigma=1.3)
    np.testing.assert_array_equal(k(X, Y), k.gram(X, Y))
    np.testing.assert_array_equal(k(X), k.gram(X))


@pytest.mark.parametrize(
    ("build", "combine"),
    [
        (lambda a, b: a + b, lambda A, B: A + B),
        (lambda a, b: a * b, lambda A, B: A * B),
        (lambda a, b: 2.5 * a, lambda A, B: 2.5 * A),
        (lambda a, b: a * 0.5 + b, lambda A, B: 0.5 * A + B),
    ],
)
def test_combinations_match_their_definition_and_stay_psd(build, combine):
    a, b = REG.get_kernel("rbf", sigma=0.7), REG.get_kernel("quadratic")
    k = build(a, b)
    np.testing.assert_allclose(k(X, Y), combine(a(X, Y), b(X, Y)), rtol=1e-13)
    np.testing.assert_allclose(k.diag(X), np.diag(combine(a(X), b(X))), rtol=1e-13)
    K = k(np.vstack([X, Y]))
    assert np.array_equal(K, K.T) and np.linalg.eigvalsh(K).min() > -1e-9 * np.abs(K).max()


def test_bounds_follow_the_parts():
    rbf, lap, quad = REG.get_kernel("rbf", sigma=1.0), REG.get_kernel("laplace", sigma=2.0), REG.get_kernel("quadratic")
    assert (rbf + lap).sup_diag() == 2.0 and (rbf * lap).sup_diag() == 1.0 and (3 * rbf).sup_diag() == 3.0
    assert (rbf + quad).sup_diag() is None and (rbf * lap).nonnegative and not (rbf + REG.get_kernel("linear")).nonnegative
    # the dc robust test uses the bound: 3 * rbf has sensitivity sqrt(3) times rbf's
    a = robust_test(X, Y, kernel=rbf, contamination=1, method="dc", n_permutations=19, rng=0)
    b = robust_test(X, Y, kernel=3 * rbf, contamination=1, method="dc", n_permutations=19, rng=0)
    assert b.sensitivity == pytest.approx(np.sqrt(3) * a.sensitivity, rel=1e-12)
    assert b.statistic == pytest.approx(np.sqrt(3) * a.statistic, rel=1e-12)


def test_data_dependent_parts_are_fitted_on_the_pooled_sample():
    k = REG.get_kernel("rbf", sigma="median") + REG.get_kernel("laplace", sigma="median")
    assert not k.is_fitted
    fitted = k.fit(X, Y)
    assert fitted.left == REG.get_kernel("rbf", sigma="median").fit(X, Y) and fitted.is_fitted
    result = REG.get_estimator("u-stat").estimate(k, X, Y)
    assert result.kernel == "sum" and result.kernel_params["left"]["params"]["sigma"] == fitted.left.sigma


def test_closed_form_mmd_of_a_sum_is_the_sum_of_closed_forms():
    a, b = REG.get_kernel("rbf", sigma=1.0), REG.get_kernel("quadratic")
    args = (np.zeros(2), np.eye(2), np.ones(2) * 0.5, 2 * np.eye(2))
    assert (a + 2 * b).gaussian_mmd2(*args) == pytest.approx(a.gaussian_mmd2(*args) + 2 * b.gaussian_mmd2(*args), rel=1e-12)


def test_results_with_a_combined_kernel_round_trip_and_tests_run():
    k = REG.get_kernel("rbf", sigma=1.0) * REG.get_kernel("linear") + 0.1 * REG.get_kernel("quadratic")
    emb = REG.get_estimator("mean").embed(k, X)
    assert load_result(emb.to_json()) == emb
    assert kernel_from_spec(k.name, k.params()) == k
    result = permutation_test(X, Y, kernel=k, estimator=REG.get_estimator("monk-bcd-fast", n_blocks=5), n_permutations=19, rng=0)
    assert 0 < result.pvalue <= 1 and isinstance(k, SumKernel) and isinstance(k.left, ProductKernel)


@pytest.mark.parametrize("bad", [lambda k: -1.0 * k, lambda k: 0 * k, lambda k: k * "2", lambda k: k + REG.get_kernel("ssk")])
def test_invalid_combinations_are_refused_with_a_reason(bad):
    with pytest.raises((ParameterError, TypeError)):
        bad(REG.get_kernel("rbf", sigma=1.0))


def test_a_kernel_scaled_by_an_exact_number_or_one_beyond_float64():
    # Decimal('2') * k was "can be multiplied by a number or a kernel; got Decimal", and
    # 10**400 * k an OverflowError from float()
    from decimal import Decimal
    from fractions import Fraction

    rbf = REG.get_kernel("rbf", sigma=1.0)
    assert Decimal("2") * rbf == 2.0 * rbf and rbf * Fraction(1, 2) == 0.5 * rbf
    with pytest.raises(ParameterError, match=r"scaled by a finite number > 0 only .*got an int of about 10\^400"):
        10**400 * rbf


def test_scaled_kernel_refuses_a_non_kernel():
    with pytest.raises(ParameterError, match="takes kernels"):
        ScaledKernel(c=2.0, kernel="rbf")


def test_clipped_kernel_matches_its_definition_by_hand():
    # quadratic (xy + 1)^2 in d = 1: k(x, x) = (x^2 + 1)^2, so ||phi(x)|| = x^2 + 1
    from monk_framework.core.combinators import ClippedKernel

    k = ClippedKernel(c=5.0, kernel=REG.get_kernel("quadratic"))
    X = np.array([[1.0], [3.0]])  # norms 2 (kept) and 10 (shrunk by s = 5/10)
    K = k.gram(X)
    assert K[0, 0] == pytest.approx(4.0) and K[1, 1] == pytest.approx(25.0)  # min(norm, c)^2
    assert K[0, 1] == pytest.approx((3.0 + 1.0) ** 2 * 1.0 * 0.5)
    assert k.sup_diag() == 25.0 and k.feature_diameter() == pytest.approx(np.sqrt(2) * 5.0)  # nonnegative
    # a bounded kernel keeps its own, smaller diameter; a kernel inside the ball is unchanged
    rbf = REG.get_kernel("rbf", sigma=1.0)
    assert ClippedKernel(c=3.0, kernel=rbf).feature_diameter() == rbf.feature_diameter()
    Z = np.random.default_rng(0).normal(size=(20, 2))
    assert np.array_equal(ClippedKernel(c=1.0, kernel=rbf).gram(Z), rbf.gram(Z))
    assert kernel_from_spec(k.name, k.params()) == k and k.spec() == "clip(quadratic(scale=1.0, offset=1.0, normalize=False), c=5)"


def test_clipped_kernel_is_psd_with_every_feature_in_the_ball():
    from monk_framework.core.combinators import ClippedKernel

    g = np.random.default_rng(1)
    Z = g.normal(size=(40, 3)) * g.choice([1, 30], size=(40, 1))
    for base in (REG.get_kernel("quadratic"), REG.get_kernel("polynomial", degree=3), REG.get_kernel("linear")):
        k = ClippedKernel(c=4.0, kernel=base)
        K = k.gram(Z)
        assert np.linalg.eigvalsh(K).min() >= -1e-9 * np.abs(K).max()
        assert np.all(np.diag(K) <= 16.0 * (1 + 1e-12))
        D = np.sqrt(np.maximum(np.diag(K)[:, None] + np.diag(K)[None] - 2 * K, 0))
        assert D.max() <= k.feature_diameter() * (1 + 1e-12)


def test_a_clipped_kernel_needs_a_positive_radius():
    from monk_framework.core.combinators import ClippedKernel

    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ParameterError, match="clipped at a radius c that is a finite number > 0"):
            ClippedKernel(c=bad, kernel=REG.get_kernel("quadratic"))
    for bad in (1e-200, 1e200):  # c² outside float64: values that overflow or vanish
        with pytest.raises(ParameterError, match="whose square is within float64's range"):
            ClippedKernel(c=bad, kernel=REG.get_kernel("quadratic"))


def test_a_point_beyond_float64_gets_the_clipped_feature_zero():
    # quadratic at norm 1e100: k(x, x) = (1e200 + 1)^2 overflows, so the point's direction
    # is not computable; its feature is 0 and the ordinary points keep their clipped values
    from monk_framework.core.combinators import ClippedKernel

    k = ClippedKernel(c=3.0, kernel=REG.get_kernel("quadratic"))
    Z = np.random.default_rng(2).normal(size=(6, 2))
    far = np.array([[1e100, 0.0], [-3e200, 1.0]])
    K = k.gram(np.vstack([Z, far]))
    assert np.array_equal(K[:6, :6], k.gram(Z))
    assert np.all(K[6:] == 0.0) and np.all(K[:, 6:] == 0.0)
    assert np.array_equal(k.diag(np.vstack([Z, far])), np.concatenate([np.diag(k.gram(Z)), [0.0, 0.0]]))
    # still a Gram matrix of features in the ball
    assert np.linalg.eigvalsh(K).min() >= -1e-9 * np.abs(K).max()
    # a NaN from the kernel is never read as a point beyond float64
    with pytest.raises(DataError, match="NaN"):
        k.gram(np.vstack([Z, [[np.nan, 0.0]]]))


def test_a_negative_diagonal_is_caught_next_to_a_norm_beyond_float64():
    # the PSD check's tolerance is relative to the finite values (an inf made it -inf)
    from typing import ClassVar

    import attrs

    from monk_framework import Kernel, KernelContractError
    from monk_framework.core.combinators import ClippedKernel

    @attrs.frozen(kw_only=True)
    class NegativeDiag(Kernel):
        name: ClassVar[str] = "negative-diag"
        summary: ClassVar[str] = "linear, with one negative and one overflowing k(x, x)"

        def compute_gram(self, X, Y):
            return X @ Y.T

        def compute_diag(self, X):
            d = np.einsum("ij,ij->i", X, X)
            d[0], d[1] = -5.0, np.inf
            return d

    with pytest.raises(KernelContractError, match=r"not positive semi-definite: k\(x, x\) = -5 < 0 for point 0"):
        ClippedKernel(c=1.0, kernel=NegativeDiag()).gram(np.random.default_rng(0).normal(size=(5, 2)))


def test_clipped_pair_values_are_the_diagonal_of_the_clipped_gram():
    # the direct pair formula k0(a, b) s(a) s(b), with k0's own pair values, against the
    # Gram matrix; a point beyond float64 has the feature 0 in both
    from monk_framework.core.combinators import ClippedKernel

    g = np.random.default_rng(4)
    A, B = g.normal(size=(60, 3)) * 3, g.normal(size=(60, 3)) * 3
    A[3], B[7] = 1e200, -1e250
    for base in (REG.get_kernel("quadratic"), REG.get_kernel("rbf", sigma=1.0), REG.get_kernel("polynomial", degree=3)):
        k = ClippedKernel(c=4.0, kernel=base)
        np.testing.assert_allclose(k.pair_values(A, B), np.diag(k.gram(A, B)), rtol=1e-12, atol=1e-300)
        assert k.pair_values(A, B)[3] == 0.0 and k.pair_values(A, B)[7] == 0.0
    strings = ClippedKernel(c=0.5, kernel=REG.get_kernel("ssk", n=2))
    S, T = ["ACGTAC", "ACG", "TTTTGA"], ["ACGAAA", "AC", "GGGTTT"]
    np.testing.assert_allclose(strings.pair_values(S, T), np.diag(strings.gram(S, T)), rtol=1e-12)


def test_a_shift_free_mmd_is_declared_by_the_parts():
    lin, energy, rbf = REG.get_kernel("linear"), REG.get_kernel("energy"), REG.get_kernel("rbf", sigma=1.0)
    assert lin.shift_free_mmd() and energy.shift_free_mmd() and not rbf.shift_free_mmd()
    assert not REG.get_kernel("linear", normalize=True).shift_free_mmd()
    assert SumKernel(left=lin, right=energy).shift_free_mmd()  # the feature maps side by side
    assert SumKernel(left=lin, right=rbf).shift_free_mmd()  # rbf's values ignore the origin altogether
    assert not SumKernel(left=rbf, right=rbf).shift_free_mmd()  # nothing to centre: its data are read as given
    assert not SumKernel(left=lin, right=REG.get_kernel("quadratic")).shift_free_mmd()
    assert ScaledKernel(c=3.0, kernel=energy).shift_free_mmd()
    assert not ProductKernel(left=lin, right=lin).shift_free_mmd()  # (x·y)² is the quadratic kernel
