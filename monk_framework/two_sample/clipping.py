"""The radius of the clipped-feature kernel in a robust test, and what a corruption can move it by.

Method "clip" of :func:`~monk_framework.two_sample.robust.robust_test` clips the
features of any kernel at a radius c (:class:`~monk_framework.core.combinators.ClippedKernel`),
given or read from the pooled feature norms; a radius read from the data is itself moved
by the corrupted points, and :class:`ClipRadius` bounds by how much, so that the
guarantee accounts for it.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from monk_framework.core.combinators import RADIUS_RANGE
from monk_framework.core.errors import DataError, ParameterError
from monk_framework.core.kernels import Kernel

__all__ = ["CLIP_QUANTILE", "ClipRadius", "clip_radius", "quantile_rank"]

#: "clip" without a radius: c is this quantile of the pooled feature norms √k(z, z)
#: (the median: of 0.5, 0.75, 0.9 and 0.95 the most powerful at N = M = 200 and as
#: powerful as any at 1000, docs/studies/robustness.md; a higher quantile widens the margin)
CLIP_QUANTILE = 0.5


@attrs.frozen
class ClipRadius:
    """The radius c of method "clip" and what a corruption of r points can do to it.

    ``radius`` is c as used. With c the τ-quantile of the pooled feature norms (the
    j-th smallest, j = ⌈τ(N + M)⌉), the radius c₀ the uncorrupted data would give is the
    j-th smallest of norms of which at most r differ, so it lies between the observed
    (j − r)-th and (j + r)-th smallest: |c − c₀| ≤ ``slack(r)``. Moving the radius from
    c₀ to c moves only the features of points whose norm exceeds min(c, c₀) ≥ the
    (j − r)-th norm, each by at most |c − c₀|; there are at most K + r of them, K counted
    on the observed norms, so any relabelled X's mean moves by at most
    min(1, (K + r)/N)·|c − c₀|, Y's by min(1, (K + r)/M)·|c − c₀| (:meth:`shift`).
    """

    radius: float
    quantile: float | None  # None: the radius was given
    norms: np.ndarray = attrs.field(eq=False, repr=False)  # sorted pooled norms √k(z, z)
    n: int
    m: int

    def slack(self, r: int) -> float:
        """The most |c − c₀| can be with r corrupted points (0 for a given radius; inf when
        the quantile's rank j + r exceeds the points)."""
        if self.quantile is None or r == 0:
            return 0.0
        j = quantile_rank(self.quantile, len(self.norms))
        if j + r > len(self.norms):
            return math.inf
        below = self.norms[j - r - 1] if j - r >= 1 else 0.0
        return max(self.radius - below, self.norms[j + r - 1] - self.radius)

    def shift(self, r: int, delta: float) -> float:
        """s(r) = rΔ + (min(1, (K + r)/N) + min(1, (K + r)/M))·slack(r): the most r
        corrupted points move the clipped MMD, or any relabelled one, from the value the
        uncorrupted data give with their own radius."""
        w = self.slack(r)
        if w == 0.0:
            return r * delta
        if not math.isfinite(w):
            return math.inf
        j = quantile_rank(self.quantile, len(self.norms))  # type: ignore[arg-type]
        low = self.norms[j - r - 1] if j - r >= 1 else 0.0
        beyond = int(len(self.norms) - np.searchsorted(self.norms, low, side="right")) + r
        share = min(1.0, beyond / self.n) + min(1.0, beyond / self.m)
        return r * delta + share * w


def quantile_rank(quantile: float, size: int) -> int:
    """j = ⌈τ·size⌉ within 1..size: the rank of the τ-quantile among ``size`` sorted values."""
    return min(size, max(1, int(math.ceil(quantile * size - 1e-9))))


def clip_radius(kernel: Kernel, X: Any, Y: Any, *, clip: float | None, quantile: float) -> ClipRadius:
    """The radius of method "clip": ``clip`` when given, else the ``quantile`` of the
    pooled feature norms √k(z, z) (:class:`ClipRadius`)."""
    # a norm beyond float64 sorts last, as the largest it is (ClippedKernel gives that point the feature 0)
    norms = np.sort(np.sqrt(np.maximum(np.concatenate([kernel.diag_tile(X, overflow=True), kernel.diag_tile(Y, overflow=True)]), 0.0)))
    if clip is not None:
        return ClipRadius(radius=float(clip), quantile=None, norms=norms, n=len(X), m=len(Y))
    c = float(norms[quantile_rank(quantile, len(norms)) - 1])
    if not math.isfinite(c):
        raise DataError(
            f"method='clip': the {quantile:g}-quantile of the feature norms sqrt(k(z, z)) of {kernel.spec()} is "
            "beyond float64 on these data (that many points have k(z, z) beyond float64: gross outliers, or data to "
            "rescale). Give a radius (clip=c) or a lower clip_quantile."
        )
    if not c > 0:
        raise ParameterError(
            f"method='clip': the {quantile:g}-quantile of the feature norms sqrt(k(z, z)) is 0 for "
            f"{kernel.spec()} on these data (k(z, z) is 0, or below float64's range, for that many points), "
            "so every feature would be clipped to 0. Give a radius (clip=c) or a higher clip_quantile."
        )
    if not RADIUS_RANGE[0] <= c <= RADIUS_RANGE[1]:
        raise DataError(
            f"method='clip': the {quantile:g}-quantile of the feature norms sqrt(k(z, z)) of {kernel.spec()} is "
            f"{c:.3g}, whose square is outside float64's range ({RADIUS_RANGE[0]:.3g} <= c <= {RADIUS_RANGE[1]:.3g}): "
            "the clipped kernel's values would overflow or vanish. Rescale the data."
        )
    return ClipRadius(radius=c, quantile=float(quantile), norms=norms, n=len(X), m=len(Y))
