"""The choice of the number of blocks Q: Lepski's method on a geometric grid."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs

__all__ = ["LepskiChoice", "choose_n_blocks", "geometric_grid", "lepski"]

#: the constant of Lepski's radii r_Q = C σ √Q (the paper leaves it open; see docs)
LEPSKI_CONSTANT = 2.0

T = TypeVar("T")


def geometric_grid(max_blocks: int) -> list[int]:
    """The odd geometric grid Q = 2^k − 1 (1, 3, 7, 15, 31, …) up to ``max_blocks``.

    Odd values keep the median a single block value; the ratio ≈ 2 is the usual
    choice for Lepski's method (the paper's footnote).
    """
    grid = []
    q = 1
    while q <= max_blocks:
        grid.append(q)
        q = 2 * q + 1
    return grid


def lepski(grid: list[int], radii: list[float], distance: Any) -> int:
    """Lepski's choice among estimates θ̂_Q on a grid of increasing Q (paper footnote).

    Larger Q tolerates more outliers but has a wider deviation radius r_Q. Returns the
    position of the smallest Q whose estimate is compatible with every larger one:
    distance(i, j) ≤ r_i + r_j for all j > i. The largest Q always qualifies.
    """
    for i in range(len(grid)):
        if all(distance(i, j) <= radii[i] + radii[j] for j in range(i + 1, len(grid))):
            return i
    return len(grid) - 1


@attrs.frozen
class LepskiChoice(Generic[T]):
    """The estimates on the grid of Q, their radii, and the one Lepski's rule chose."""

    grid: list[int]
    runs: list[T]
    radii: list[float]
    scale: float
    chosen: int

    @property
    def run(self) -> T:
        return self.runs[self.chosen]

    @property
    def chosen_n_blocks(self) -> int:
        return self.grid[self.chosen]

    def diagnostics(self) -> dict[str, Any]:
        return {"grid": self.grid, "radii": self.radii, "scale": self.scale, "chosen_n_blocks": self.chosen_n_blocks}


def choose_n_blocks(
    max_blocks: int,
    estimate: Callable[[int], T],
    scale: Callable[[int], float],
    distance: Callable[[Sequence[T], int, int], float],
    *,
    unit: float = 1.0,
) -> LepskiChoice[T]:
    """Lepski's choice of Q for any median-of-means estimate (paper footnote).

    ``estimate(Q)`` runs the estimator with Q blocks on the grid
    :func:`geometric_grid` up to ``max_blocks``; ``scale(Q_max)`` is a robust scale σ̂
    of the estimates' noise; the radii are r_Q = C σ̂ √Q · ``unit`` with
    C = :data:`LEPSKI_CONSTANT`; ``distance(runs, i, j)`` compares two estimates. The
    rule (:func:`lepski`) keeps the smallest Q whose estimate is within r_Q + r_Q' of
    every larger Q's.
    """
    grid = geometric_grid(max_blocks)
    runs = [estimate(q) for q in grid]
    sigma = scale(grid[-1])
    radii = [LEPSKI_CONSTANT * sigma * math.sqrt(q) * unit for q in grid]
    chosen = lepski(grid, radii, lambda i, j: distance(runs, i, j))
    return LepskiChoice(grid=grid, runs=runs, radii=radii, scale=sigma, chosen=chosen)
