"""Explicit finite features where they make the classical kernel sums cheap.

A kernel with a finite feature map Φ (``has_features``: linear, polynomial, quadratic)
has K = ΦΦᵀ, so every sum the V- and U-statistics need is a product of feature sums:

    Σ_ij k(x_i, x_j) = ‖Σ_i φ(x_i)‖²,   Σ_ij k(x_i, y_j) = ⟨Σ_i φ(x_i), Σ_j φ(y_j)⟩,

and a relabelling b of the pooled sample Z, with indicator e_b of its X points, has
e_bᵀ K e_b = ‖Φᵀ e_b‖² and e_bᵀ K 1 = ⟨Φᵀ e_b, Φᵀ 1⟩. With D features a point, an
estimate costs O((N + M) D) instead of the (N + M)² kernel values of its Gram matrix,
and B relabellings O((N + M) D B) instead of O((N + M)² B). The features are used when
D is at most 1/:data:`FEATURES_PAY` of the points and they fit in the memory budget;
then they are first held to the kernel's own values on the points the kernel contract
checks (a plugin whose features disagree with its kernel is refused, never trusted).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from monk_framework.core.errors import KernelContractError
from monk_framework.core.kernels import CONTRACT_CHECK_POINTS, Kernel
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample

__all__ = ["FEATURES_PAY", "FEATURE_TOLERANCE", "paying_features"]

#: the features replace the Gram matrix when there are at least this many points for each
#: feature: below, N² kernel values at the rate of a GEMM are no dearer than N·D products
FEATURES_PAY = 16

#: |⟨φ(a), φ(b)⟩ − k(a, b)| allowed, relative to √(k(a, a) k(b, b)): round-off, not a fault
FEATURE_TOLERANCE = 1e-9


def paying_features(kernel: Kernel, parts: Sequence[Sample], resources: Resources) -> list[np.ndarray] | None:
    """Φ of each sample in ``parts`` (the same kernel, vectors), or None when the kernel
    has no finite feature map, its D features a point are more than 1/FEATURES_PAY of the
    points, or the feature matrices would not fit in the budget of ``resources``."""
    arrays = [p for p in parts if isinstance(p, np.ndarray) and p.ndim == 2]
    if not kernel.has_features or len(arrays) != len(parts) or not any(len(p) for p in arrays):
        return None
    size = sum(len(p) for p in arrays)
    first = next(p for p in arrays if len(p))
    D = kernel.feature_count(first)
    if D * FEATURES_PAY > size or not resources.fits(8.0 * size * D):
        return None
    features = [kernel.features(p) for p in arrays]
    _check_against_values(kernel, arrays, features)
    return features


def _check_against_values(kernel: Kernel, parts: Sequence[np.ndarray], features: Sequence[np.ndarray]) -> None:
    """Φ(A) Φ(A)ᵀ against k(A, A) on the leading points of each part (those the kernel
    contract checks): a plugin's features that are not its kernel's would give another
    MMD without a word."""
    half = max(1, CONTRACT_CHECK_POINTS // len(parts))
    A = np.vstack([p[:half] for p in parts])
    F = np.vstack([f[:half] for f in features])
    # each checked point by its sample and index: x_3, y_0 (z_i beyond two samples)
    letters = "xy" if len(parts) == 2 else "z" * len(parts)
    names = [f"{letters[k]}_{i}" for k, p in enumerate(parts) for i in range(min(half, len(p)))]
    values = kernel.gram_tile(A, A)
    scale = np.sqrt(np.abs(np.diag(values)))
    gap = np.abs(F @ F.T - values) - FEATURE_TOLERANCE * np.outer(scale, scale)
    if np.any(gap > 0):
        i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
        a, b = names[i], names[j]
        raise KernelContractError(
            f"{kernel.plugin_label()}: its features disagree with its kernel values: <features({a}), features({b})> = "
            f"{float(F[i] @ F[j]):.6g} where k({a}, {b}) = {float(values[i, j]):.6g}. compute_features must give "
            "features(X) @ features(Y).T = k(X, Y) (or has_features must be False)."
        )
