"""The kernels of an aggregated test: the published collection, bandwidth grids and families.

MMDAgg and MMD-FUSE publish one collection, the Gaussian and the Laplace (L1) kernels at
10 bandwidths each from half the 1 % quantile to twice the 99 % quantile of the pooled
distances (:func:`bandwidth_grid`, :func:`default_kernels`); a user's collection may hold
kernels and families, a kernel given without its bandwidth standing for it at the
collection's bandwidths (:class:`KernelFamily`, :func:`given_kernels`, :func:`expanded`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from monk_framework.core.errors import DataError, MonkError, ParameterError, shown
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import first_repeat, parse_spec, spec_label
from monk_framework.core.registry import get_registry
from monk_framework.numerics.distances import scaled_distances, scaled_l1_distances

__all__ = [
    "BANDWIDTH_MAX_POINTS",
    "DEFAULT_FAMILIES",
    "HIGH_QUANTILE",
    "LOW_QUANTILE",
    "N_BANDWIDTHS",
    "KernelFamily",
    "bandwidth_grid",
    "bandwidth_of",
    "check_grid",
    "data_order",
    "default_kernels",
    "expanded",
    "given_kernels",
    "label_of",
    "numbers_of",
    "repeated_bandwidth",
]


#: the default collection: these kernel families (by registry name, with their distance)
#: at :data:`N_BANDWIDTHS` bandwidths each, as MMDAgg and MMD-FUSE publish it
DEFAULT_FAMILIES: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("rbf", {}, "l2"),
    ("laplace", {"norm": "l1"}, "l1"),
)


N_BANDWIDTHS = 10


#: the bandwidth grid reads the pairwise distances of at most this many pooled points
BANDWIDTH_MAX_POINTS = 1000


#: the grid runs from half the LOW_QUANTILE to twice the HIGH_QUANTILE of the distances
LOW_QUANTILE, HIGH_QUANTILE = 0.01, 0.99


def data_order(Z: np.ndarray) -> np.ndarray:
    """Z's rows in lexicographic order: a function of the pooled multiset only, so a
    subsample taken from it does not depend on which points are called X."""
    return Z[np.lexsort(Z.T[::-1])]


def bandwidth_grid(X: np.ndarray, Y: np.ndarray, *, n_bandwidths: int = N_BANDWIDTHS, metric: str = "l2") -> np.ndarray:
    """σ_1 < ... < σ_n: a geometric grid from half the 1 % quantile to twice the 99 %
    quantile of the pooled pairwise distances (``metric`` "l2" or "l1").

    It depends on the pooled sample as a set only (above :data:`BANDWIDTH_MAX_POINTS`
    points, on evenly spaced points of its lexicographic order), so a permutation test
    with these kernels stays exact: every relabelling sees the same kernels. The
    distances are computed per magnitude group of the points, as the median heuristic's
    are, so data near float64's limits or a few gross outliers leave the ordinary pairs'
    distances exact (one scale for all would round them to 0 or overflow).
    """
    Z = data_order(np.vstack([X, Y]))
    if len(Z) > BANDWIDTH_MAX_POINTS:
        Z = Z[np.linspace(0, len(Z) - 1, BANDWIDTH_MAX_POINTS).round().astype(int)]
    D = scaled_distances(Z, Z, 1.0) if metric == "l2" else scaled_l1_distances(Z, Z, 1.0)
    upper = D[np.triu_indices(len(Z), 1)]
    upper = upper[upper > 0]
    if not len(upper):
        raise DataError(
            "The default kernel collection reads its bandwidths from the pooled pairwise distances, and all "
            "pooled points are equal (every distance is 0). Pass kernels= (or bandwidths=) explicitly."
        )
    low, high = np.quantile(upper, [LOW_QUANTILE, HIGH_QUANTILE])
    with np.errstate(over="ignore"):  # twice a distance near float64's limit: refused below
        low, high = float(low) / 2.0, float(high) * 2.0
    if not math.isfinite(high):
        raise DataError(
            f"The default kernel collection reads its bandwidths from the pooled pairwise {metric} distances, and "
            f"more than {1 - HIGH_QUANTILE:.0%} of them are beyond float64 (about {np.finfo(np.float64).max:.3g}) "
            "or twice that quantile is. Rescale the data, or pass kernels= (or bandwidths=) explicitly."
        )
    if n_bandwidths == 1:
        return np.array([math.sqrt(low) * math.sqrt(high)])
    return np.geomspace(low, high, n_bandwidths)


def default_kernels(X: np.ndarray, Y: np.ndarray, *, n_bandwidths: int = N_BANDWIDTHS, bandwidths: Sequence[float] | np.ndarray | None = None) -> list[Kernel]:
    """The published collection: for each family of :data:`DEFAULT_FAMILIES` (Gaussian with
    the Euclidean distance, Laplace with the L1 distance), kernels at ``bandwidths`` when
    given (a fixed grid, as robust aggregation needs), else at :func:`bandwidth_grid`."""
    reg = get_registry()
    kernels: list[Kernel] = []
    for name, params, metric in DEFAULT_FAMILIES:
        sigmas = bandwidths if bandwidths is not None else bandwidth_grid(X, Y, n_bandwidths=n_bandwidths, metric=metric)
        kernels.extend(reg.get_kernel(name, sigma=float(s), **params) for s in sigmas)
    return kernels


def numbers_of(values: Any) -> np.ndarray | None:
    """A flat float array of a list of numbers, or None for anything else (a string, a
    nested list, objects)."""
    if isinstance(values, (str, bytes)):
        return None
    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float64
        return None
    return out if out.ndim == 1 else None


def check_grid(n_bandwidths: Any, bandwidths: Any) -> np.ndarray | None:
    """The fixed grid as a flat array (None: read it from the data), after checking both."""
    if isinstance(n_bandwidths, bool) or not isinstance(n_bandwidths, (int, np.integer)) or n_bandwidths < 1:
        raise ParameterError(f"n_bandwidths must be an int >= 1; got {shown(n_bandwidths)}.")
    if bandwidths is None:
        return None
    b = numbers_of(bandwidths)
    if b is None or not len(b) or not np.isfinite(b).all() or (b <= 0).any():
        raise ParameterError(f"bandwidths must be a flat list of positive finite numbers; got {shown(bandwidths)}.")
    twice = repeated_bandwidth(b)
    if twice is not None:
        raise ParameterError(
            f"bandwidths lists {twice:g} more than once: a repeated kernel only doubles its "
            "weight in the aggregation (give each bandwidth once, and weights= to weigh them)."
        )
    return b


def repeated_bandwidth(bandwidths: Sequence[float] | np.ndarray) -> float | None:
    """The smallest bandwidth listed more than once, or None: a repeat only doubles its
    kernel's weight in an aggregation."""
    values, counts = np.unique(np.asarray(bandwidths, dtype=float), return_counts=True)
    return float(values[counts > 1][0]) if (counts > 1).any() else None


@attrs.frozen
class KernelFamily:
    """A kernel given by a spec without its bandwidth (``"laplace"``, ``"rbf:norm=l1"``):
    it stands for its family at the collection's bandwidths, ``bandwidths=`` when given,
    else the grid of :func:`bandwidth_grid` over the pooled distances in its own metric."""

    kernel: Kernel  # the spec's kernel, whose sigma each bandwidth replaces
    spec: str

    @property
    def metric(self) -> str:
        metric = getattr(self.kernel, "distance_metric", "l2")
        return metric if metric in ("l1", "l2") else "l2"

    def at(self, sigmas: Iterable[float]) -> list[Kernel]:
        return [type(self.kernel).from_params({**self.kernel.params(), "sigma": float(s)}) for s in sigmas]


def given_kernels(kernels: Any) -> list[Kernel | KernelFamily]:
    """The caller's collection: Kernel objects (used as they are) or specs, looked up in
    the registry; a spec of a kernel with a bandwidth ``sigma`` that does not set it is
    a :class:`KernelFamily`, as ``monkfw test --aggregate -k laplace`` reads it."""
    if isinstance(kernels, (str, Kernel)):
        kernels = [kernels]
    if isinstance(kernels, (Mapping, set, frozenset)) or not isinstance(kernels, Iterable) or (isinstance(kernels, np.ndarray) and kernels.ndim == 0):
        # a dict or a set has no order, and seeded results follow the kernels' order
        raise MonkError(f"kernels must be a list of Kernel objects or specs such as 'rbf:sigma=1'; got {shown(kernels)}.")
    reg = get_registry()
    listed = list(kernels)
    out: list[Kernel | KernelFamily] = []
    for item in listed:
        kernel = reg.resolve_kernel(item)
        if not isinstance(kernel, Kernel):
            raise MonkError(f"kernels must be Kernel objects or specs such as 'rbf:sigma=1'; got {type(kernel).__name__}.")
        if isinstance(item, str) and "sigma" in kernel.params() and "sigma" not in parse_spec(item)[1]:
            out.append(KernelFamily(kernel=kernel, spec=item))
        else:
            out.append(kernel)
    if not out:
        raise ParameterError("kernels must hold at least one kernel.")
    twice = first_repeat([k.spec if isinstance(k, KernelFamily) else k.spec() for k in out])
    if twice is not None:
        i, j = twice
        raise ParameterError(
            f"kernels {i} and {j} are the same, {listed[j]!s}: a repeated kernel only doubles its "
            "weight in the aggregation (give each kernel once, and weights= to weigh them)."
        )
    return out


def label_of(kernel: Kernel) -> str:
    """The kernel's spec as ``-k`` and ``kernels=`` take it (``rbf:sigma=0.5``), or its
    display form for a combination of kernels."""
    params = kernel.params()
    if all(isinstance(v, (int, float, str, bool)) for v in params.values()):
        return spec_label(kernel.name, params)
    return kernel.spec()


def bandwidth_of(kernel: Kernel) -> float | None:
    sigma = kernel.params().get("sigma")
    return float(sigma) if isinstance(sigma, (int, float)) and not isinstance(sigma, bool) else None


def expanded(items: Sequence[Kernel | KernelFamily], X: np.ndarray | Any, Y: np.ndarray | Any, n_bandwidths: int, grid: np.ndarray | None) -> list[Kernel]:
    """The collection: each kernel as given, each family at ``grid`` or at the grid over
    the pooled distances in its metric; a kernel that comes twice is refused."""
    out: list[Kernel] = []
    for item in items:
        if not isinstance(item, KernelFamily):
            out.append(item)
            continue
        if grid is not None:
            sigmas = grid
        elif isinstance(X, np.ndarray) and isinstance(Y, np.ndarray):
            sigmas = bandwidth_grid(X, Y, n_bandwidths=n_bandwidths, metric=item.metric)
        else:
            raise ParameterError(
                f"kernels: {item.spec!r} without sigma would read its bandwidths from distances between vectors; give it sigma=, or bandwidths=."
            )
        out.extend(item.at(sigmas))
    twice = first_repeat([k.spec() for k in out])
    if twice is not None:
        raise ParameterError(
            f"The collection holds {out[twice[1]].spec()} twice (a family's grid meets a kernel given with that sigma): "
            "a repeated kernel only doubles its weight in the aggregation. Drop one, or give weights=."
        )
    return out
