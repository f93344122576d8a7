"""The kernel contract: the checks every value a kernel plugin computes passes.

Whichever path asks for a plugin's values (a tile, a diagonal, a whole matrix of its own,
features, declared bounds), these functions hold them to the contract before anything
is summed: shape and finiteness, the diagonal of ``compute_gram`` against
``compute_diag``, symmetry, Cauchy–Schwarz on diagonal blocks, declared bounds against
the data, and the warnings for data a kernel cannot resolve. The :class:`Kernel` methods
of the same names call them; a fault raises :class:`KernelContractError` (or
:class:`KernelOverflowError`) naming the plugin.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from monk_framework.core.errors import KernelContractError, KernelOverflowError, PrecisionWarning, plugin_code, shown
from monk_framework.core.samples import Sample, take

if TYPE_CHECKING:
    from monk_framework.core.kernels import Kernel

__all__ = [
    "CONTRACT_CHECK_POINTS",
    "CONTRACT_RTOL",
    "DIAG_RTOL",
    "RESOLUTION_LIMIT",
    "RESOLUTION_POINTS",
    "VALUE_LIMIT",
    "WHOLE_CHECK_PAIRS",
    "check_declared",
    "check_diagonal_block",
    "check_finite",
    "check_squared_norm",
    "check_whole_symmetric",
    "checked_feature_diameter",
    "far_from_origin",
    "fits_float64",
    "lower_median",
    "overflow_cause",
    "scaled_norm",
    "warn_if_blind",
    "warn_if_far_from_origin",
    "warn_if_unresolved",
]

#: the largest |k(x, y)| the library takes: sums of up to 2^40 such values stay within
#: float64 (whose largest number is about 2^1024)
VALUE_LIMIT = 2.0**983
#: relative round-off allowed before a value is taken as proof that a kernel is not PSD
#: or not symmetric: 1e-9 of the scale of the terms it came from (float64 sums of
#: thousands of terms stay near 1e-13; a wrong kernel is off by orders of magnitude)
CONTRACT_RTOL = 1e-9
#: the same for comparisons of k(x, x) computed two ways (the distance identities used by
#: compute_gram round differently from compute_diag, by about 1e-16 times ‖x‖²/σ² for RBF)
DIAG_RTOL = 1e-6
#: points of each diagonal Gram block whose pairs are checked (symmetry, Cauchy–Schwarz)
CONTRACT_CHECK_POINTS = 64
#: sampled pairs on which a plugin's whole k(X, X) (an override of symmetric_gram) is
#: checked for exact symmetry and Cauchy–Schwarz, beyond its leading block
WHOLE_CHECK_PAIRS = 4096
#: pooled points whose feature distances to the first one measure a kernel's resolution
RESOLUTION_POINTS = 4096
#: the smallest squared feature distance, relative to the kernel's values, below which an
#: MMD² carries a relative round-off above 10⁻⁶ (ε / 10⁻⁶, ε = 2⁻⁵²)
RESOLUTION_LIMIT = float(np.finfo(np.float64).eps) / 1e-6


def warn_if_far_from_origin(kernel: Kernel, X: Sample, Y: Sample, *, clipped: bool = False) -> None:
    """The check behind :meth:`Kernel.warn_if_far_from_origin` (the bound it warns of is
    stated there): warn once ε ρ² exceeds 10⁻⁶ for a kernel whose values move with the origin."""
    found = far_from_origin(kernel, X, Y, clipped=clipped)
    if found is None:
        return
    rho, round_off = found
    what = "its clipped features depend" if clipped else f"{kernel.spec()} depends"
    warnings.warn(
        PrecisionWarning(
            f"The data lie {rho:.3g} spreads from the origin, and {what} on the origin: the MMD carries a relative "
            f"round-off of about {min(round_off, 1e300):.1g}, more when the two distributions are close. Subtract a "
            "reference point chosen without these data, or "
            "use a kernel that keeps its digits here (rbf, laplace, linear, energy; polynomial and quadratic without "
            "normalize, which are read about a point of the data)."
        ),
        stacklevel=4,
    )


def far_from_origin(kernel: Kernel, X: Sample, Y: Sample, *, clipped: bool = False, limit: float = 1e-6) -> tuple[float, float] | None:
    """(ρ, ε ρ²) when ε ρ² exceeds ``limit`` for a kernel whose values move with the
    origin (:meth:`warn_if_far_from_origin` says so beyond 10⁻⁶), else None."""
    if not (isinstance(X, np.ndarray) and isinstance(Y, np.ndarray)) or type(kernel).translation_invariant:
        return None
    shift_free = kernel.checked_shift_free()
    if shift_free and not clipped:
        return None
    Z = np.concatenate([X, Y])
    centre = np.median(Z, axis=0)
    with np.errstate(over="ignore", invalid="ignore"):
        deviations = np.median(np.abs(Z - centre), axis=0)
    spread, distance = scaled_norm(deviations), scaled_norm(centre)
    if not (spread > 0 and math.isfinite(spread) and math.isfinite(distance)):
        return None
    rho = distance / spread
    round_off = rho * rho * float(np.finfo(np.float64).eps)
    if round_off <= limit:
        return None
    if not shift_free:
        # the kernel's own values on a few points, and on them moved to the centre (a
        # data-dependent hyperparameter resolved first, as the estimate will)
        fitted = kernel if kernel.is_fitted else kernel.fitted(X, Y)
        A = Z[:8]
        with np.errstate(over="ignore", invalid="ignore"):
            here, moved = fitted.gram_tile(A, A, check=False), fitted.gram_tile(A - centre, A - centre, check=False)
        if np.all(np.isfinite(here)) and np.allclose(here, moved, rtol=1e-6, atol=1e-12 * float(np.abs(here).max())):
            return None  # values that ignore the origin (a translation-invariant plugin that does not say so)
    return rho, round_off


def warn_if_blind(kernel: Kernel, Z: Sample, block: np.ndarray, diag: np.ndarray) -> None:
    """Warn (:class:`PrecisionWarning`) when a kernel on vectors is exactly 0 between every
    two distinct points of the contract check while k(z, z) > 0, and those points are
    mostly distinct: rbf or laplace at a bandwidth far below the data's scale (at
    σ = 10⁻⁵ on data of spread 1, exp(−5·10⁹) underflows to 0), with which an MMD sees
    only how often the same values recur; on distinct points that is the diagonal
    alone, whatever the distributions. On data with few distinct values (one-hot
    categories, counts) such a kernel compares the frequencies of the values, a
    meaningful MMD (the linear kernel on one-hot vectors, or any kernel of a point with
    itself only): no warning while the checked points hold at most half as many
    distinct values as points. Only PSD kernels on vectors are checked (a string kernel
    is 0 between strings that share no subsequence of its length, rightly), and only
    when the checked points hold a distinct pair."""
    if not kernel.is_psd or not isinstance(Z, np.ndarray) or len(Z) < 2 or not np.any(diag > 0):
        return
    flat = Z.reshape(len(Z), -1)
    equal = np.all(flat[:, None, :] == flat[None, :, :], axis=-1)
    if equal.all() or np.any(block[~equal] != 0.0):
        return
    # the first index of each point's value: how many distinct values the points hold
    distinct = int(np.count_nonzero(np.argmax(equal, axis=1) == np.arange(len(Z))))
    if 2 * distinct <= len(Z):
        return
    warnings.warn(
        PrecisionWarning(
            f"{kernel.spec()} is 0 between every two distinct points of the {len(Z)} checked ({distinct} distinct "
            "values): an MMD with it counts equal points only, so on data without repeated values it sees the "
            "diagonal k(z, z) alone, whatever the distributions (a bandwidth far below the data's scale makes every "
            "value between points underflow). Choose its parameters for the data's scale (for a bandwidth, "
            "sigma=median), or rescale the data."
        ),
        stacklevel=3,
    )


def warn_if_unresolved(kernel: Kernel, X: Sample, Y: Sample | None, known: int, row: np.ndarray, diag: np.ndarray) -> None:
    """Warn (:class:`PrecisionWarning`) when the kernel barely varies on the data, so
    that round-off swamps every MMD computed from its values.

    An MMD² is a sum of kernel values of size up to K = max |k|, so it carries an
    absolute round-off of about ε K (ε = 2⁻⁵²), while it is at most the squared feature
    diameter D² = max ‖φ(z) − φ(z′)‖². With δ² = max_j ‖φ(z₁) − φ(z_j)‖² (one row of
    kernel values, on the leading RESOLUTION_POINTS pooled points; D² ≤ 4δ² by the
    triangle inequality), the relative round-off is at least ε K / D² ≥ ε K / (4δ²).
    Said when δ² < 2.2·10⁻¹⁰ K (a round-off above 10⁻⁶), and only when the points
    differ: a bandwidth far beyond the data's scale (rbf at σ = 10⁸ on data of spread 1
    gives MMD² = 0), an offset that dwarfs ⟨x, y⟩. Kernels not declared PSD are not
    checked (their ‖φ(z) − φ(z′)‖² is not a distance), nor one sample of a kernel whose
    MMD ignores the origin (an embedding: :meth:`Embedding.distance` reads it centred,
    as every MMD path reads the pair, :meth:`mmd_view`).

    ``row`` and ``diag`` are the contract check's first Gram row and diagonal, on the
    leading ``known`` points of X and of Y; the row is extended to the rest here."""
    if not kernel.is_psd or (Y is None and kernel.checked_shift_free()):
        return
    half = RESOLUTION_POINTS if Y is None else RESOLUTION_POINTS // 2
    parts = [X[:known], X[known:half]] if Y is None else [X[:known], Y[:known], X[known:half], Y[known:half]]
    if isinstance(X, np.ndarray):
        Z: Sample = np.concatenate(parts)
        distinct = bool(np.any(Z != Z[:1]))
    else:
        Z = [z for part in parts for z in part]
        distinct = any(z != Z[0] for z in Z)
    if not distinct:
        return  # one point repeated: every MMD is 0, rightly
    rest = Z[len(diag) :]
    if len(rest):
        row = np.concatenate([row, kernel.gram_tile(Z[:1], rest)[0]])
        diag = np.concatenate([diag, kernel.diag_tile(rest)])
    scale = max(float(np.abs(row).max()), float(np.abs(diag).max()))
    spread = float(np.max(diag[0] + diag - 2.0 * row))
    if spread > RESOLUTION_LIMIT * scale:
        return
    if Y is not None and far_from_origin(kernel, X, Y) is not None:
        return  # said already, with its cause (warn_if_far_from_origin)
    if spread <= 0.0:
        what = "cannot tell these distinct points apart: every MMD comes out 0 (or round-off) whatever the data"
    else:
        what = (
            f"varies by only {spread / scale:.1g} of its values (up to {scale:.3g}) between these points: "
            f"an MMD² carries a relative round-off of at least {RESOLUTION_LIMIT * 1e-6 * scale / (4 * spread):.1g}"
        )
    warnings.warn(
        PrecisionWarning(f"{kernel.spec()} {what}. Choose its parameters for the data's scale (for a bandwidth, sigma=median), or rescale the data."),
        stacklevel=3,
    )


def check_diagonal_block(kernel: Kernel, block: np.ndarray, diag: np.ndarray, offset: int) -> None:
    """Cheap checks on a diagonal block k(X_b, X_b), the one place where ``compute_gram`` and
    ``compute_diag`` meet (the mirroring and the diagonal fill would hide a fault otherwise):

    * symmetry, k(x, x′) = k(x′, x);
    * ``compute_gram``'s diagonal equals ``compute_diag`` (to 1e-6 of the block's scale: the
      distance identities round differently from k(x, x) itself);
    * Cauchy–Schwarz, |k(x, x′)|² ≤ k(x, x) k(x′, x′), which every PSD kernel obeys.

    The pairwise checks look at the block's leading CONTRACT_CHECK_POINTS points only,
    so they stay a small fraction of the Gram matrix's cost (a plugin's fault is
    systematic, not confined to some pairs).
    """
    if not block.size:
        return
    label = kernel.plugin_label()
    off = np.abs(np.diagonal(block) - diag)
    scale = max(float(np.abs(np.diagonal(block)).max()), float(np.abs(diag).max()), 1e-300)
    if off.max() > DIAG_RTOL * scale:
        i = int(np.argmax(off))
        raise KernelContractError(
            f"{label}: compute_diag gives k(x_{offset + i}, x_{offset + i}) = {diag[i]:.6g} but compute_gram gives {block[i, i]:.6g}; the two must agree."
        )
    block, diag = block[:CONTRACT_CHECK_POINTS, :CONTRACT_CHECK_POINTS], diag[:CONTRACT_CHECK_POINTS]
    scale = max(float(np.abs(block).max()), scale)
    gap = np.abs(block - block.T)
    if gap.max() > CONTRACT_RTOL * scale:
        i, j = (int(v) for v in np.unravel_index(int(np.argmax(gap)), gap.shape))
        raise KernelContractError(
            f"{label} is not symmetric: k(x_{offset + i}, x_{offset + j}) = {block[i, j]:.6g} but k(x_{offset + j}, x_{offset + i}) = {block[j, i]:.6g}."
        )
    if kernel.is_psd:
        root = np.sqrt(np.maximum(diag, 0.0))
        excess = np.abs(block) - np.outer(root, root)
        np.fill_diagonal(excess, 0.0)
        if excess.max() > DIAG_RTOL * scale:
            i, j = (int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
            raise KernelContractError(
                f"{label} is not positive semi-definite: |k(x_{offset + i}, x_{offset + j})| = "
                f"{abs(block[i, j]):.6g} exceeds sqrt(k(x, x) k(x', x')) = {root[i] * root[j]:.6g} "
                "(Cauchy-Schwarz holds for every PSD kernel)."
            )


def check_whole_symmetric(kernel: Kernel, K: np.ndarray, X: Sample) -> None:
    """A plugin's whole k(X, X): exactly symmetric (every estimator reads one triangle or
    the other), checked on its leading block and on WHOLE_CHECK_PAIRS sampled pairs,
    and its diagonal ``compute_diag``'s."""
    n = len(K)
    diag = kernel.diag_tile(X)
    kernel.check_diagonal_block(K[:CONTRACT_CHECK_POINTS, :CONTRACT_CHECK_POINTS], diag[:CONTRACT_CHECK_POINTS], 0)
    gen = np.random.default_rng(n)  # the same pairs for the same size: a reproducible check
    i, j = gen.integers(0, n, size=(2, WHOLE_CHECK_PAIRS)) if n else (np.zeros(0, int), np.zeros(0, int))
    gap = np.abs(K[i, j] - K[j, i])
    if gap.size and gap.max() > 0:
        w = int(np.argmax(gap))
        raise KernelContractError(
            f"{kernel.plugin_label()} is not symmetric: its symmetric_gram gives k(x_{i[w]}, x_{j[w]}) = {K[i[w], j[w]]:.6g} "
            f"but k(x_{j[w]}, x_{i[w]}) = {K[j[w], i[w]]:.6g}; the matrix must be exactly symmetric."
        )
    off = np.abs(np.diagonal(K) - diag)
    scale = max(float(np.abs(diag).max(initial=0.0)), 1e-300)
    if off.size and off.max() > DIAG_RTOL * scale:
        w = int(np.argmax(off))
        raise KernelContractError(
            f"{kernel.plugin_label()}: compute_diag gives k(x_{w}, x_{w}) = {diag[w]:.6g} but symmetric_gram gives {K[w, w]:.6g}; the two must agree."
        )
    root = np.sqrt(np.maximum(diag, 0.0))
    excess = np.abs(K[i, j]) - root[i] * root[j]
    if kernel.is_psd and excess.size and excess.max() > CONTRACT_RTOL * max(scale, float(np.abs(K[i, j]).max())):
        w = int(np.argmax(excess))
        raise KernelContractError(
            f"{kernel.plugin_label()} is not positive semi-definite: |k(x_{i[w]}, x_{j[w]})| = {abs(K[i[w], j[w]]):.6g} "
            f"exceeds sqrt(k(x, x) k(x', x')) = {root[i[w]] * root[j[w]]:.6g} (Cauchy-Schwarz holds for every PSD "
            "kernel)."
        )


def check_finite(kernel: Kernel, values: np.ndarray, *, sums: bool = False) -> np.ndarray:
    """``values`` if every one is finite and, for kernel values, at most
    :data:`VALUE_LIMIT` in magnitude (so that the sums the library takes of them stay
    within float64); else :class:`KernelOverflowError`, naming the kernel. A kernel
    that computes its own Gram matrix (overriding :meth:`symmetric_gram`) passes its
    result through this. ``sums=True``: the values are sums of kernel values (a
    matrix-free product's), checked for finiteness only."""
    # a kernel value that overflowed (or a plugin's NaN) must never become a number; the
    # largest and smallest value say it in two passes (max and min propagate NaN)
    hi, lo = (float(values.max()), float(values.min())) if values.size else (0.0, 0.0)
    if not (math.isfinite(hi) and math.isfinite(lo)):
        if sums:
            raise KernelOverflowError(
                f"Kernel {kernel.spec()} ({type(kernel).__module__}.{type(kernel).__qualname__}): the sums of its values "
                "over these data are not finite: a NaN or inf from the kernel's code, or values so large (above "
                f"{VALUE_LIMIT:.3g}) that their sums overflow float64; rescale the data or the kernel."
            )
        if np.isnan(values).any():
            # NaN is not a size: say what it can come from, and whose code made it
            raise KernelOverflowError(
                f"Kernel {kernel.spec()} ({type(kernel).__module__}.{type(kernel).__qualname__}) gives non-finite "
                "values on these data: NaN, the result of an undefined operation (0/0, inf - inf, or a "
                "value that overflowed and was then combined) in the kernel's code."
            )
        raise KernelOverflowError(
            f"Kernel {kernel.spec()} gives non-finite values on these data: inf, a value beyond float64 (overflow){overflow_cause(values)}"
        )
    if not sums:
        top = max(hi, -lo)
        if top > VALUE_LIMIT:
            raise KernelOverflowError(
                f"Kernel {kernel.spec()} gives values up to {top:.3g} on these data: the library sums up to 2^40 of "
                f"them, so values above {VALUE_LIMIT:.3g} are refused (their sums would overflow float64). "
                "Rescale the data or change the kernel's parameters."
            )
    return values


def checked_feature_diameter(kernel: Kernel, Z: Sample | None = None) -> float | None:
    """:meth:`feature_diameter` as robust tests may trust it: the declared bounds
    (``sup_diag`` and ``feature_diameter``) must be None or finite numbers ≥ 0, and on
    a validated sample Z (the pooled data) no k(z, z) may exceed κ and no feature
    distance ‖φ(z_i) − φ(z_j)‖ of 2·|Z| pairs (each point with the next, and with the
    point of the largest k(z, z)) may exceed D. A robust test's certificate is computed
    from D, so a bound these data already break is refused, naming the plugin.
    """
    with plugin_code(kernel, "sup_diag"):
        kappa = kernel.sup_diag()
    check_declared(kernel, "sup_diag", kappa)
    with plugin_code(kernel, "feature_diameter"):
        diameter = kernel.feature_diameter()
    check_declared(kernel, "feature_diameter", diameter)
    if diameter is None:
        return None
    D = float(diameter)
    if Z is None or len(Z) < 2:
        return D
    diag = kernel.diag_tile(Z)
    if kappa is not None and diag.max() > float(kappa) * (1 + 1e-9):
        i = int(np.argmax(diag))
        raise KernelContractError(
            f"{kernel.plugin_label()} declares sup_diag() = {float(kappa):.6g}, but k(z, z) = {diag[i]:.6g} at "
            f"point {i} of the pooled sample (X first); a robust test's guarantee would be computed from a bound that does not hold."
        )
    index = np.arange(len(Z))
    for partner in (np.roll(index, 1), np.full(len(Z), int(np.argmax(diag)))):
        dist2 = diag + diag[partner] - 2.0 * kernel.pair_values(Z, take(Z, partner))
        worst = int(np.argmax(dist2))
        reached = math.sqrt(max(float(dist2[worst]), 0.0))
        if reached > D * (1 + 1e-9) + 1e-12:
            raise KernelContractError(
                f"{kernel.plugin_label()} declares feature_diameter() = {D:.6g}, but points {worst} and "
                f"{int(partner[worst])} of the pooled sample (X first) are {reached:.6g} apart in feature space; a robust test's "
                "guarantee would be computed from a bound that does not hold."
            )
    return D


def check_declared(kernel: Kernel, name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real) or not fits_float64(value) or value < 0):
        raise KernelContractError(f"{kernel.plugin_label()}: {name}() must return None or a finite number >= 0; got {shown(value)}.")


def fits_float64(value: numbers.Real) -> bool:
    """A finite real number within float64's range (an integer of 400 digits is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def lower_median(Z: np.ndarray) -> np.ndarray:
    """The coordinate-wise lower median of the points of Z: a data value, which gross
    outliers do not drag away from the ordinary points."""
    return cast(np.ndarray, np.partition(Z, (len(Z) - 1) // 2, axis=0)[(len(Z) - 1) // 2])


def scaled_norm(v: np.ndarray) -> float:
    """‖v‖ without squaring a coordinate beyond float64 (1e200 data): scaled by max |v_j|."""
    top = float(np.max(np.abs(v), initial=0.0))
    if top == 0.0 or not math.isfinite(top):
        return top
    return top * math.sqrt(float(np.sum((v / top) ** 2)))


def overflow_cause(values: np.ndarray) -> str:
    """The end of an overflow's message. Where a few points (at most a fifth of the
    block's) hold every infinite value (their rows of features or entries of a diagonal;
    their rows and columns of a block of kernel values, each mostly infinite), they are
    far larger than the others, and no rescaling of the whole sample helps; otherwise
    rescaling does."""
    infinite = np.isinf(values)
    few, total = int(infinite.sum()), infinite.size
    if values.ndim == 2 and values.size:
        n, m = values.shape
        total = n if n == m else n + m  # a diagonal block's rows and columns are the same points
        heavy_rows, heavy_cols = infinite.mean(axis=1) > 0.5, infinite.mean(axis=0) > 0.5
        covered = bool(((infinite & (heavy_rows[:, None] | heavy_cols[None, :])) == infinite).all())
        few = (int(heavy_rows.sum()) if n == m else int(heavy_rows.sum() + heavy_cols.sum())) if covered else 0
        if not 0 < few <= total // 5 and n >= 20:  # features: the far points' rows, whatever their share of infs
            few, total = int(infinite.any(axis=1).sum()), n
    if 0 < few <= total // 5:
        return (
            f", and only at {few} of the {total} points in this block: points far larger than the others (gross "
            "outliers?), which no rescaling of the whole sample brings within float64. Remove them, or use a "
            "bounded kernel (rbf, laplace), or a robust test with clipped features (--contamination R --method clip)."
        )
    return "; rescale the data or change the kernel's parameters."


def check_squared_norm(kernel: Kernel, value: float, scale: float, what: str) -> float:
    """Return ``value``, a squared RKHS norm ‖Σ c_i φ(z_i)‖² = cᵀKc, after checking it is not negative.

    A PSD kernel gives cᵀKc ≥ 0 for every c, so a value below −CONTRACT_RTOL · ``scale``
    (``scale``: the size of the terms it was summed from, e.g. Σ|c_i||c_j||K_ij|) proves
    that ``kernel`` is not PSD on these points. ``what`` names the quantity (e.g. "the
    V-statistic MMD^2"). Cheap checks for estimators that already hold such a value.
    """
    if kernel.is_psd and value < -CONTRACT_RTOL * max(abs(scale), 1e-300):
        raise KernelContractError(
            f"{kernel.plugin_label()} is not positive semi-definite on these data: {what} is {value:.6g} < 0, which no PSD kernel can give."
        )
    return value
