"""The conformance kit catches broken plugins, with a message naming the fault."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pytest

from monk_framework import Estimate, Kernel, MMDEstimator, get_registry
from monk_framework.checks import check_estimator, check_kernel
from monk_framework.core.params import integer, parameter


@attrs.frozen(kw_only=True)
class Cauchy(Kernel):
    """A correct kernel: k(x, y) = 1 / (1 + ||x - y||^2)."""

    name: ClassVar[str] = "cauchy"
    summary: ClassVar[str] = "Cauchy kernel"
    formula: ClassVar[str] = "k(x, y) = 1 / (1 + ||x - y||^2)"

    def compute_gram(self, X, Y):
        sq = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
        return 1.0 / (1.0 + sq)

    def compute_diag(self, X):
        return np.ones(len(X))


@attrs.frozen(kw_only=True)
class WrongShape(Cauchy):
    name: ClassVar[str] = "wrong-shape"

    def compute_gram(self, X, Y):
        return super().compute_gram(X, Y)[:, :1]  # one column, which numpy would broadcast


@attrs.frozen(kw_only=True)
class Asymmetric(Cauchy):
    name: ClassVar[str] = "asymmetric"

    def compute_gram(self, X, Y):
        return super().compute_gram(X, Y) + 0.01 * X[:, :1] * np.ones(len(Y))[None, :]


@attrs.frozen(kw_only=True)
class WrongDiag(Cauchy):
    name: ClassVar[str] = "wrong-diag"

    def compute_diag(self, X):
        return np.full(len(X), 2.0)


@attrs.frozen(kw_only=True)
class Noisy(Cauchy):
    name: ClassVar[str] = "noisy"

    def compute_gram(self, X, Y):
        K = super().compute_gram(X, Y)
        return K + 1e-3 * np.random.default_rng().random() * (K < 1)  # symmetric, diagonal kept


@attrs.frozen(kw_only=True)
class NotPSD(Cauchy):
    name: ClassVar[str] = "not-psd"

    def compute_gram(self, X, Y):
        return -super().compute_gram(X, Y) + 2.0 * (np.abs(super().compute_gram(X, Y) - 1) < 1e-15)


@attrs.frozen(kw_only=True)
class WrongBlockGram(Cauchy):
    name: ClassVar[str] = "wrong-block-gram"

    def compute_block_gram(self, Z, W, diag):
        return W.T @ W  # the identity's W'KW, not this kernel's


@attrs.frozen(kw_only=True)
class ScalarBlockGram(Cauchy):
    name: ClassVar[str] = "scalar-block-gram"

    def compute_block_gram(self, Z, W, diag):
        return np.float64(1.0)  # one number where a 2 x 2 matrix is due


@attrs.frozen(kw_only=True)
class RightBlockGram(Cauchy):
    name: ClassVar[str] = "right-block-gram"

    def compute_block_gram(self, Z, W, diag):
        return W.T @ self.compute_gram(Z, Z) @ W


@attrs.frozen(kw_only=True)
class Gauss(Cauchy):
    """A correct translation-invariant bounded kernel with every optional hook:
    k(x, y) = exp(-||x - y||^2 / 2), frequencies N(0, I), sup k(x, x) = 1, E k closed form."""

    name: ClassVar[str] = "gauss"
    translation_invariant: ClassVar[bool] = True
    nonnegative: ClassVar[bool] = True
    #: how the broken subclasses below bend the hooks
    spread: ClassVar[float] = 1.0
    diameter: ClassVar[float] = 2.0**0.5
    expectation_bias: ClassVar[float] = 0.0

    def compute_gram(self, X, Y):
        return np.exp(-0.5 * ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))

    def spectral_frequencies(self, d, n_features, rng):
        return self.spread * rng.standard_normal((n_features, d))

    def sup_diag(self):
        return 1.0

    def feature_diameter(self):
        return self.diameter

    def gaussian_expectation(self, m1, c1, m2, c2):
        d = m1.size
        S = c1 + c2 + np.eye(d)
        delta = m1 - m2
        return float(np.linalg.det(S) ** -0.5 * np.exp(-0.5 * delta @ np.linalg.solve(S, delta))) + self.expectation_bias


@attrs.frozen(kw_only=True)
class WrongFrequencies(Gauss):
    name: ClassVar[str] = "wrong-frequencies"
    spread: ClassVar[float] = 1.3  # the kernel of bandwidth 1/1.3: rff would be biased


@attrs.frozen(kw_only=True)
class SmallDiameter(Gauss):
    name: ClassVar[str] = "small-diameter"
    diameter: ClassVar[float] = 0.5  # a robust test's guarantee would be computed from it


@attrs.frozen(kw_only=True)
class WrongExpectation(Gauss):
    name: ClassVar[str] = "wrong-expectation"
    expectation_bias: ClassVar[float] = 0.02


@attrs.frozen(kw_only=True)
class NotInvariant(Cauchy):
    name: ClassVar[str] = "not-invariant"
    translation_invariant: ClassVar[bool] = True

    def compute_gram(self, X, Y):
        return super().compute_gram(X, Y) * np.exp(-0.01 * (X.sum(1)[:, None] + Y.sum(1)[None, :]) ** 2)

    def compute_diag(self, X):
        return np.exp(-0.01 * (2 * X.sum(1)) ** 2)


@attrs.frozen(kw_only=True)
class WrongPairs(Gauss):
    name: ClassVar[str] = "wrong-pairs"

    def compute_pair_values(self, A, B):
        return np.exp(-0.5 * ((A - B[::-1]) ** 2).sum(-1))  # pairs a_l with b_(n-l): not k(a_l, b_l)


@attrs.frozen(kw_only=True)
class RightPairs(Gauss):
    name: ClassVar[str] = "right-pairs"

    def compute_pair_values(self, A, B):
        return np.exp(-0.5 * ((A - B) ** 2).sum(-1))


@attrs.frozen(kw_only=True)
class LowBound(Cauchy):
    name: ClassVar[str] = "low-bound"

    def sup_diag(self):
        return 0.5  # k(x, x) = 1


_BUFFERS: dict = {}


@attrs.frozen(kw_only=True)
class ReusedBuffer(Cauchy):
    """Right values, written into one buffer per shape that every call returns."""

    name: ClassVar[str] = "reused-buffer"

    def compute_gram(self, X, Y):
        out = _BUFFERS.setdefault((len(X), len(Y)), np.empty((len(X), len(Y))))
        out[...] = super().compute_gram(X, Y)
        return out


def test_a_correct_kernel_passes():
    check_kernel(Cauchy)
    check_kernel(RightWholeGrams)
    check_kernel(RightBlockGram)
    check_kernel(Gauss)
    check_kernel(RightPairs)


@attrs.frozen(kw_only=True)
class Dot(Cauchy):
    """A correct shift-free kernel: k(x, y) = <x, y>, whose MMD ||mean X - mean Y|| ignores the origin."""

    name: ClassVar[str] = "dot"

    def compute_gram(self, X, Y):
        return X @ Y.T

    def compute_diag(self, X):
        return (X**2).sum(1)

    def shift_free_mmd(self):
        return True


@attrs.frozen(kw_only=True)
class FalselyShiftFree(Dot):
    """(<x, y> + 1)^2 declared shift-free: its MMD depends on the origin."""

    name: ClassVar[str] = "falsely-shift-free"

    def compute_gram(self, X, Y):
        return (X @ Y.T + 1.0) ** 2

    def compute_diag(self, X):
        return ((X**2).sum(1) + 1.0) ** 2


@attrs.frozen(kw_only=True)
class ReusedDiagBuffer(Dot):
    name: ClassVar[str] = "reused-diag-buffer"

    def compute_diag(self, X):
        out = _BUFFERS.setdefault(len(X), np.empty(len(X)))
        out[...] = super().compute_diag(X)
        return out


@attrs.frozen(kw_only=True)
class FeaturedDot(Dot):
    """The dot product with its features (the identity) and their number."""

    name: ClassVar[str] = "featured-dot"
    has_features: ClassVar[bool] = True

    def compute_features(self, X):
        return X.copy()

    def compute_feature_count(self, d):
        return d


@attrs.frozen(kw_only=True)
class MiscountedFeatures(FeaturedDot):
    name: ClassVar[str] = "miscounted-features"

    def compute_feature_count(self, d):
        return d + 1


@attrs.frozen(kw_only=True)
class WrongFeatures(FeaturedDot):
    name: ClassVar[str] = "wrong-features"

    def compute_features(self, X):
        return 2.0 * X


@attrs.frozen(kw_only=True)
class AnchoredSquare(Cauchy):
    """(<x, y> + 1)^2 with an anchored form computed from its four values (right, if not
    digit-keeping: what the kit checks is the definition)."""

    name: ClassVar[str] = "anchored-square"
    _anchor: tuple = ()  # no parameter: a leading underscore

    def _plain(self, X, Y):
        return (X @ Y.T + 1.0) ** 2

    def compute_gram(self, X, Y):
        if not self._anchor:
            return self._plain(X, Y)
        a = np.asarray(self._anchor)[None, :]
        P, Q = X + a, Y + a
        return self._plain(P, Q) - self._plain(P, a) - self._plain(a, Q) + self._plain(a, a)

    def compute_diag(self, X):
        return np.diagonal(self.compute_gram(X, X)).copy()

    def anchored(self, anchor):
        start = np.asarray(self._anchor) if self._anchor else 0.0
        return attrs.evolve(self, anchor=tuple(anchor + start))


@attrs.frozen(kw_only=True)
class AnchorIgnored(AnchoredSquare):
    name: ClassVar[str] = "anchor-ignored"

    def anchored(self, anchor):
        return attrs.evolve(self, anchor=())  # the kernel as defined, on moved data: another MMD


@attrs.frozen(kw_only=True)
class AnchorReplaced(AnchoredSquare):
    name: ClassVar[str] = "anchor-replaced"

    def anchored(self, anchor):
        return attrs.evolve(self, anchor=tuple(anchor))  # anchoring again forgets the first anchor


@attrs.frozen(kw_only=True)
class AnchorOfAnotherClass(AnchoredSquare):
    name: ClassVar[str] = "anchor-of-another-class"

    def anchored(self, anchor):
        return AnchoredSquare(anchor=tuple(anchor))


@attrs.frozen(kw_only=True)
class WrongWholeGram(Cauchy):
    """A faster whole Gram matrix (symmetric_gram) whose off-diagonal values are not the kernel's."""

    name: ClassVar[str] = "wrong-whole-gram"

    def symmetric_gram(self, X, *, run_bands=None):
        K = self.compute_gram(X, X)
        return np.where(np.eye(len(X), dtype=bool), K, 0.9 * K)


@attrs.frozen(kw_only=True)
class WrongRectangularGram(Cauchy):
    """A faster k(X, Y) (rectangular_gram) that is not compute_gram(X, Y)."""

    name: ClassVar[str] = "wrong-rectangular-gram"

    def rectangular_gram(self, X, Y, *, run_bands=None):
        return 0.9 * self.compute_gram(X, Y)


@attrs.frozen(kw_only=True)
class RightWholeGrams(Cauchy):
    """Both whole-matrix overrides, computed as the kernel is."""

    name: ClassVar[str] = "right-whole-grams"

    def symmetric_gram(self, X, *, run_bands=None):
        K = self.compute_gram(X, X)
        return (K + K.T) / 2

    def rectangular_gram(self, X, Y, *, run_bands=None):
        return self.compute_gram(X, Y)


def test_a_true_shift_free_declaration_passes():
    check_kernel(Dot)
    check_kernel(FeaturedDot)
    check_kernel(AnchoredSquare)


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (FalselyShiftFree, r"declares shift_free_mmd\(\) but a common shift of the data moves its MMD from"),
        (WrongShape, r"compute_gram\(X, X\) returned shape \(30, 1\)"),
        (Asymmetric, "is not symmetric"),
        (WrongDiag, r"compute_diag gives k\(x_0, x_0\) = 2 but compute_gram's diagonal has 1"),
        (Noisy, "deterministic"),
        (NotPSD, "eigenvalue"),
        (WrongBlockGram, r"compute_block_gram\(X, W, diag\) is not W' K W"),
        (ScalarBlockGram, r"compute_block_gram fails the framework's checks.*shape \(\)"),
        (WrongFrequencies, r"spectral_frequencies do not give the kernel: .* differs from k\(x, y\) by up to"),
        (SmallDiameter, r"declares feature_diameter\(\) = 0.5 but two points are .* apart in feature space"),
        (WrongExpectation, r"gaussian_expectation gives E k\(x, y\) = .* but 20 000 draws give"),
        (NotInvariant, r"declares translation_invariant = True but k\(x \+ c, y \+ c\) differs"),
        (LowBound, r"declares sup_x k\(x, x\) = 0.5 \(sup_diag\) but k\(x, x\) reaches 1"),
        (WrongPairs, r"compute_pair_values\(A, B\) is not the diagonal of k\(A, B\)"),
        (ReusedBuffer, r"compute_gram wrote into the array it had returned before \(a reused output buffer\?\)"),
        (ReusedDiagBuffer, r"compute_diag wrote into the array it had returned before"),
        (WrongFeatures, r"has_features is true but features\(X\) @ features\(Y\).T is not k\(X, Y\)"),
        (MiscountedFeatures, r"compute_feature_count\(\d+\) gives (\d+), but features\(X\) has \d+ columns"),
        (AnchorIgnored, r"anchored\(a\).compute_gram\(X - a, Y - a\) is not k\(x, y\) - k\(x, a\) - k\(a, y\) \+ k\(a, a\)"),
        (AnchorReplaced, r"anchored\(a\).anchored\(b\) is not anchored\(a \+ b\)"),
        (AnchorOfAnotherClass, r"anchored fails the framework's checks: .*anchored returned AnchoredSquare"),
        (WrongWholeGram, r"gram\(X\) differs from compute_gram\(X, X\)"),
        (WrongRectangularGram, r"gram\(X, Y\) differs from compute_gram\(X, Y\) \(an override of rectangular_gram"),
    ],
)
def test_broken_kernels_are_caught_by_name(cls, message):
    with pytest.raises(AssertionError, match=message) as info:
        check_kernel(cls)
    assert f"kernel {cls.name!r}" in str(info.value)


def test_a_kernel_without_a_default_is_caught():
    @attrs.frozen(kw_only=True)
    class NoDefault(Cauchy):
        name: ClassVar[str] = "no-default"
        width: float = attrs.field()

    with pytest.raises(AssertionError, match="cannot be built with its defaults"):
        check_kernel(NoDefault)


def _v_mmd2(kernel, X, Y):
    return kernel.gram(X).mean() + kernel.gram(Y).mean() - 2 * kernel.gram(X, Y).mean()


@attrs.frozen(kw_only=True)
class Blocky(MMDEstimator):
    """A correct estimator: the V-statistic of a random half of the blocks."""

    name: ClassVar[str] = "blocky"
    summary: ClassVar[str] = "test estimator"
    formula: ClassVar[str] = "MMD_V^2 on one random block"
    n_blocks: int = parameter(3, doc="Q", check=integer(ge=1), kind="int")

    def compute_estimate(self, kernel, X, Y, rng, resources):
        ix = rng.permutation(len(X))[: max(2, len(X) // self.n_blocks)]
        iy = rng.permutation(len(Y))[: max(2, len(Y) // self.n_blocks)]
        if self.n_blocks == 1:
            ix, iy = np.arange(len(X)), np.arange(len(Y))
        v = _v_mmd2(kernel, X[ix], Y[iy])
        return Estimate(mmd2=v, mmd=max(v, 0.0) ** 0.5)


@attrs.frozen(kw_only=True)
class Unseeded(Blocky):
    name: ClassVar[str] = "unseeded"

    def compute_estimate(self, kernel, X, Y, rng, resources):
        return super().compute_estimate(kernel, X, Y, np.random.default_rng(), resources)


@attrs.frozen(kw_only=True)
class OffAtOneBlock(Blocky):
    name: ClassVar[str] = "off-at-one-block"

    def compute_estimate(self, kernel, X, Y, rng, resources):
        est = super().compute_estimate(kernel, X, Y, rng, resources)
        return Estimate(mmd2=est.mmd2 * 1.01, mmd=est.mmd * 1.01**0.5)  # a root of its MMD^2, the wrong one


def test_a_correct_estimator_passes():
    check_estimator(Blocky)
    check_estimator(Blocky, kernel=get_registry().get_kernel("quadratic"))


@attrs.frozen(kw_only=True)
class FastButWrong(Blocky):
    """Its test hook ignores the relabelling: a permutation test would test nothing."""

    name: ClassVar[str] = "fast-but-wrong"

    def permuted_statistics(self, pool, perms, rngs):
        X, Y = pool.relabelled(perms[0])
        return np.full(len(perms), self.compute_estimate(pool.kernel, X, Y, rngs[0], pool.resources).mmd2)


@attrs.frozen(kw_only=True)
class FalseRole(Blocky):
    name: ClassVar[str] = "false-role"
    role: ClassVar[str | None] = "u-statistic"  # it computes a V-statistic of a block


@attrs.frozen(kw_only=True)
class WrongSums(Blocky):
    name: ClassVar[str] = "wrong-sums"

    def mmd2_from_sums(self, sums, n, m):
        return sums.xx / (n * n)  # a robust test would compute this inside its blocks


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Unseeded, "same seed"),
        (OffAtOneBlock, "with n_blocks=1 gives MMD"),
        (FastButWrong, r"permuted_statistics\(pool, perms, rngs\) differs from compute_estimate on the relabelled samples"),
        (FalseRole, r"declares role 'u-statistic' but estimates MMD\^2 ="),
        (WrongSums, r"mmd2_from_sums of the samples' kernel sums gives"),
    ],
)
def test_broken_estimators_are_caught_by_name(cls, message):
    with pytest.raises(AssertionError, match=message) as info:
        check_estimator(cls)
    assert f"estimator {cls.name!r}" in str(info.value)


def test_a_malformed_minimum_size_is_caught_by_the_kit():
    @attrs.frozen(kw_only=True)
    class BareMinimum(Blocky):
        name: ClassVar[str] = "bare-minimum"

        def min_sample_size(self):
            return 5  # not (count, reason)

    with pytest.raises(
        AssertionError,
        match=r"estimator 'bare-minimum' .*min_sample_size fails the framework's checks: "
        r".*min_sample_size returned 5; it must return \(count, reason\)",
    ):
        check_estimator(BareMinimum)
