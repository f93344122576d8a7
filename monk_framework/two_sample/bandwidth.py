"""The median heuristic made robust: the bandwidths r corrupted points could have moved it
to, for a robust test whose kernel reads σ from the data.

A robust test needs its kernel fixed before the data, because corrupted points move a
bandwidth read from them. The median heuristic moves only a little, and by a known
amount: σ is the median of the T = P(P − 1)/2 pairwise distances of the P pooled
points, a corrupted point touches its own P − 1 pairs only, so r corrupted points
change at most t = r(P − 1) − r(r − 1)/2 of the T distances. If at most t values of a
list change, its k-th smallest value stays between the (k − t)-th and the (k + t)-th
smallest of the list as observed. So the median the uncorrupted data would give lies in
[d_(⌊(T−1)/2⌋ − t), d_(⌊T/2⌋ + t)] (0-based ranks of the observed distances, sorted).

The bandwidth is then snapped to the grid 2^(j/4) (:func:`snap`; neighbours 19 % apart),
and snapping is monotone, so the uncorrupted data's snapped bandwidth is one of the grid
points between the snapped ends: the *candidates*. A robust test that rejects only when
it rejects at every candidate (with the same relabellings) rejects only when the test
the uncorrupted data would have run rejects: :func:`monk_framework.two_sample.robust_test`
has the proof. With r = 0 the one candidate is the snapped median heuristic.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from monk_framework.core.errors import DataError, ParameterError
from monk_framework.core.kernels import Kernel
from monk_framework.engine.median_heuristic import median_points

__all__ = ["STEPS_PER_OCTAVE", "MedianBandwidth", "reads_its_bandwidth", "snap"]

#: the snapping grid 2^(j / STEPS_PER_OCTAVE): four steps an octave, a ratio of 2^(1/4) ≈ 1.19
STEPS_PER_OCTAVE = 4


def snap(value: float) -> float:
    """The grid point 2^(j/4) nearest to ``value`` in log scale (monotone in ``value``)."""
    return float(2.0 ** (round(STEPS_PER_OCTAVE * math.log2(value)) / STEPS_PER_OCTAVE))


def reads_its_bandwidth(kernel: Kernel) -> bool:
    """A kernel whose bandwidth ``sigma`` is the median heuristic ("median") and that
    names the distance it takes the median of: the kernels whose robust test can use
    :class:`MedianBandwidth`."""
    return not kernel.is_fitted and kernel.params().get("sigma") == "median" and getattr(kernel, "distance_metric", None) in ("l2", "l1")


@attrs.frozen
class MedianBandwidth:
    """The sorted pairwise distances the median heuristic reads, and what r corrupted
    points could have done to their median (module docstring)."""

    distances: np.ndarray = attrs.field(eq=False, repr=False)
    points: int

    @classmethod
    def of(cls, X: np.ndarray, Y: np.ndarray, metric: str) -> MedianBandwidth:
        """The pooled pairwise distances of X and Y (``metric`` "l2" or "l1"); above
        2000 points, of a subsample of positions drawn with a fixed
        seed, so at most r of its points are corrupted."""
        from scipy.spatial.distance import pdist  # 0.2 s to import: only when a robust test reads σ

        Z = median_points(np.vstack([X, Y]))  # the points the library's median heuristic reads
        with np.errstate(over="ignore", invalid="ignore"):
            distances = np.sort(pdist(Z.reshape(len(Z), -1), "cityblock" if metric == "l1" else "euclidean"))
        if not np.isfinite(distances).all():
            raise DataError(
                "The robust median heuristic reads the pooled pairwise distances, and some are beyond float64 here. Rescale the data, or give sigma."
            )
        return cls(distances=distances, points=len(Z))

    def median(self) -> float:
        """The median of the distances, as ``np.median`` takes it."""
        d, T = self.distances, len(self.distances)
        return float(d[(T - 1) // 2] + d[T // 2]) / 2.0

    def touched(self, r: int) -> int:
        """t: the most pairwise distances r corrupted points can change."""
        s = min(r, self.points)
        return s * (self.points - 1) - s * (s - 1) // 2

    def bounds(self, r: int) -> tuple[float, float]:
        """[low, high], holding the median the uncorrupted data would give (inf: unbounded)."""
        d, T, t = self.distances, len(self.distances), self.touched(r)
        low = float(d[(T - 1) // 2 - t]) if (T - 1) // 2 - t >= 0 else 0.0
        high = float(d[T // 2 + t]) if T // 2 + t < T else math.inf
        return low, high

    def candidates(self, r: int) -> list[float] | None:
        """The snapped bandwidths the uncorrupted data's median heuristic could give, in
        increasing order, or None when r corrupted points could set it anywhere."""
        low, high = self.bounds(r)
        if not (low > 0 and math.isfinite(high)):
            return None
        first, last = (round(STEPS_PER_OCTAVE * math.log2(v)) for v in (low, high))
        return [float(2.0 ** (j / STEPS_PER_OCTAVE)) for j in range(first, last + 1)]

    def observed(self) -> float:
        """The snapped median heuristic of the data as given (a candidate for every r)."""
        median = self.median()
        if not median > 0:
            raise DataError(
                "The median heuristic gives sigma = 0: more than half of the pooled pairwise distances are zero (many repeated points). Give sigma."
            )
        return snap(median)


def unbounded(kernel: Any, r: int, bandwidth: MedianBandwidth) -> ParameterError:
    """The error of a budget whose corrupted points could move the median heuristic anywhere."""
    T = len(bandwidth.distances)
    return ParameterError(
        f"contamination = {r} touches up to {bandwidth.touched(r):,} of the {T:,} pairwise distances whose median sets "
        f"the bandwidth of {kernel.spec()}, so corrupted points could set it anywhere. Give sigma (e.g. "
        f"'{kernel.name}:sigma=1'), or a smaller contamination."
    )
