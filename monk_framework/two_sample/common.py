"""What every two-sample test shares: the statistic's scale, the rejection rule with its
ties, and the checks of a test's parameters, each written once.

**Statistic.** Every test uses the estimator's MMD² estimate through the signed root
T = sign(MMD²)·√|MMD²|, monotone in MMD² (so p-values are those of MMD²).

**Rejection.** With B relabelled statistics, p = (1 + #{b : T_b ≥ T}) / (1 + B) and the
test rejects when p ≤ α, that is when T > q̂ for the order statistic
q̂ = T_(B−k), k = ⌊α(B + 1)⌋ − 1 (none when k < 0).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from monk_framework.core.errors import MonkDeprecationWarning, MonkError, ParameterError, PluginFailure, plugin_code, shown
from monk_framework.core.estimators import Estimator, MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import check_choice, check_flag, finite_real
from monk_framework.core.registry import get_registry
from monk_framework.core.resources import check_backend, outside_stacklevel, progress_callback
from monk_framework.engine.partitions import Partition

__all__ = [
    "ALTERNATIVES",
    "DEFAULT_ESTIMATOR",
    "DEFAULT_KERNELS",
    "DEFAULT_PERMUTATIONS",
    "RELABEL",
    "TIE_RTOL",
    "GramOf",
    "check_estimator",
    "check_level",
    "check_permutations",
    "check_relabel",
    "check_test_call",
    "check_test_params",
    "choose_partition",
    "critical_rank",
    "default_kernel",
    "exceedances",
    "null_quantile",
    "permutation_pvalue",
    "previous_form",
    "resolve_with_defaults",
    "sample_kind",
    "shortfalls",
    "signed_root",
]

#: the kernel every test and estimate uses when none is named, by the kind of the samples:
#: the Gaussian kernel at the median heuristic for vectors (as hyppo and alibi-detect), the
#: string subsequence kernel for strings. ``monkfw`` uses the same.
DEFAULT_KERNELS = {"vector": "rbf", "string": "ssk"}
#: the estimator every test and estimate uses when none is named: the unbiased U-statistic
DEFAULT_ESTIMATOR = "u-stat"
#: the relabellings of every permutation-calibrated test when none are named (``-B`` too)
DEFAULT_PERMUTATIONS = 1000

_F = TypeVar("_F", bound=Callable[..., Any])


def sample_kind(X: Any) -> str:
    """ "string" for a sequence of Python strings (or a numpy array of text), else
    "vector": which default kernel reads the sample."""
    if isinstance(X, (list, tuple)) and X and isinstance(X[0], str):
        return "string"
    if isinstance(X, np.ndarray) and X.dtype.kind in "US":
        return "string"
    return "vector"


def default_kernel(X: Any) -> Kernel:
    """The kernel of :data:`DEFAULT_KERNELS` for samples like ``X``, from the registry."""
    return get_registry().get_kernel(DEFAULT_KERNELS[sample_kind(X)])


def resolve_with_defaults(kernel: Any, estimator: Any, X: Any, *, default_estimator: bool = True) -> tuple[Any, Any]:
    """The kernel and the estimator of a call, objects or specs looked up in the registry;
    None takes the default (:data:`DEFAULT_KERNELS` by the kind of ``X``,
    :data:`DEFAULT_ESTIMATOR`; with ``default_estimator=False`` a None estimator stays
    None, for a test that chooses it by its method)."""
    for what, given in (("kernel", kernel), ("estimator", estimator)):
        if _looks_like_data(given):
            raise ParameterError(
                f"{what} must be a {what} object or a spec such as "
                f"{'rbf:sigma=1' if what == 'kernel' else 'u-stat'!r}; got {_data_kind(given)}, which looks like a sample "
                "(the samples come first: f(X, Y, kernel=..., estimator=...))."
            )
    reg = get_registry()
    kern = default_kernel(X) if kernel is None else reg.resolve_kernel(kernel)
    if estimator is None:
        est = reg.resolve_estimator(DEFAULT_ESTIMATOR) if default_estimator else None
    else:
        est = reg.resolve_estimator(estimator)
    return kern, est


def check_test_call(
    X: Any,
    *,
    kernel: Any,
    estimator: Any,
    n_permutations: Any,
    alpha: Any,
    return_null: Any,
    progress: Any,
    backend: Any,
) -> tuple[Any, MMDEstimator, Any]:
    """What every permutation-calibrated test checks first: the progress callback (in the
    one signature), the backend, the kernel and the estimator with their defaults, B, α and
    ``return_null``. Returns the kernel, the estimator and the progress callback."""
    report = progress_callback(progress)
    check_backend(backend)  # a name such as 'dask' would run here, silently
    kernel, estimator = resolve_with_defaults(kernel, estimator, X)
    return kernel, check_test_params(estimator, n_permutations, alpha, return_null), report


def _names_a_model(obj: Any) -> bool:
    """A kernel or an estimator (an object or its spec): never a sample."""
    return isinstance(obj, (str, Kernel, Estimator))


def previous_form(
    name: str, old: Sequence[str], new: str, *, positional_data: int = 2, when: Callable[[tuple[Any, ...]], bool] | None = None
) -> Callable[[_F], _F]:
    """Accept, for one release, the call form before 0.2, with a DeprecationWarning naming
    the new one; the numbers are the same.

    ``old`` names the previous positional parameters in order (e.g. ``("kernel",
    "estimator", "X", "Y")``); the previous form is recognised by ``when(args)``, by
    default a first positional argument that is a kernel or an estimator (an object or a
    spec string), which no sample can be. ``new`` is the call to write instead."""
    detect = when or (lambda args: bool(args) and _names_a_model(args[0]))

    def decorate(func: _F) -> _F:
        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not detect(args):
                return func(*args, **kwargs)
            if len(args) > len(old):
                raise ParameterError(f"{name} takes at most {positional_data} positional arguments (the samples); got {len(args)}. Write {new}.")
            given = dict(zip(old, args))
            for key in given:
                if key in kwargs:
                    raise ParameterError(f"{name} got {key} both by position and by keyword; write {new}.")
            why = "everything after the samples goes by keyword" if old[0] == "X" else "the samples come first, everything else by keyword"
            warnings.warn(
                f"{name}({', '.join(old[: len(args)])}, ...) is deprecated and will be removed in the release after 0.2: {why}. Write {new}.",
                MonkDeprecationWarning,
                stacklevel=outside_stacklevel(),
            )
            return func(**given, **kwargs)

        return call  # type: ignore[return-value]

    return decorate


#: how a permutation test relabels: "auto" (within blocks for estimators with a fixed
#: partition, else globally), "within-blocks" or "global".
RELABEL = ("auto", "within-blocks", "global")

#: gram(kernel, ix, iy): the Gram matrix of [X[ix]; Y[iy]] (precomputed Gram matrices).
GramOf = Callable[[Kernel, np.ndarray, np.ndarray], np.ndarray]


def signed_root(mmd2: Any) -> Any:
    """sign(MMD²)·√|MMD²|: the test statistic on the MMD scale (monotone in MMD²)."""
    return np.sign(mmd2) * np.sqrt(np.abs(mmd2))


def critical_rank(n_permutations: int, alpha: float) -> int:
    """k = ⌊α(B + 1)⌋ − 1: the test rejects when at most k null values are ≥ T (−1: never)."""
    # the tolerance keeps e.g. 0.05 · 1000 = 50.000000000000007 or 0.29 · 100 at their exact value
    return int(math.floor(alpha * (n_permutations + 1) + 1e-9)) - 1


#: relabelled statistics within this relative distance of T count as ties, T_b ≥ T: a tie
#: in exact arithmetic (a relabelling that repeats X's set, or Y's when N = M, or rounded
#: data) then counts whatever the order of the additions (stored, matrix-free, tiles on
#: workers), and the p-value never depends on round-off. Round-off moves T by about
#: 1e-13 relative (it was 8e-11 at most in a 300-test comparison of two summation
#: orders); a real difference below 1e-9 of T means nothing statistically.
TIE_RTOL = 1e-9


def exceedances(null: np.ndarray, threshold: float, axis: int | None = None) -> Any:
    """#{b : T_b ≥ threshold}, ties up to :data:`TIE_RTOL` of |threshold| included."""
    return np.count_nonzero(null >= threshold - TIE_RTOL * abs(threshold), axis=axis)


#: the alternatives of :func:`~monk_framework.two_sample.permutation_test`, in scipy's words
ALTERNATIVES = ("greater", "less", "two-sided")


def shortfalls(null: np.ndarray, threshold: float) -> Any:
    """#{b : T_b ≤ threshold}, ties up to :data:`TIE_RTOL` of |threshold| included."""
    return np.count_nonzero(null <= threshold + TIE_RTOL * abs(threshold))


def permutation_pvalue(null: np.ndarray, T: float, alternative: str) -> float:
    """The permutation p-value of T against its B relabelled values, as scipy's
    ``permutation_test`` defines it: (1 + #{T_b ≥ T}) / (1 + B) for "greater" (a large
    MMD speaks against H₀), (1 + #{T_b ≤ T}) / (1 + B) for "less" (the samples are more
    alike than relabellings: duplicated or stratified data), and min(1, twice the smaller
    of the two) for "two-sided"."""
    B = len(null)
    greater = (1 + int(exceedances(null, T))) / (1 + B)
    if alternative == "greater":
        return greater
    less = (1 + int(shortfalls(null, T))) / (1 + B)
    if alternative == "less":
        return less
    return min(1.0, 2.0 * min(greater, less))


def null_quantile(null: np.ndarray, alpha: float) -> float | None:
    """q̂ = T_(B−k): T > q̂ exactly when the p-value is at most α (None when it never is)."""
    k = critical_rank(len(null), alpha)
    if k < 0:
        return None
    return float(np.sort(null)[len(null) - 1 - k])


def check_level(alpha: Any, *, name: str = "alpha") -> float:
    """α as a float in (0, 1); else a ParameterError naming it (``name``: how the caller
    spells it, e.g. "--alpha")."""
    value = finite_real(alpha)
    if value is None or not 0 < value < 1:
        raise ParameterError(f"{name} must be a number in (0, 1); got {shown(alpha)}.")
    return value


def check_estimator(estimator: Any) -> MMDEstimator:
    """An MMD estimator object, else a MonkError naming what was given."""
    if not isinstance(estimator, MMDEstimator):
        raise MonkError(
            f"estimator must be an MMD estimator (e.g. 'u-stat' or get_registry().get_estimator('u-stat')); got "
            f"{getattr(estimator, 'name', None) or shown(estimator)!s}."
        )
    return estimator


def check_permutations(n_permutations: Any, *, name: str = "n_permutations") -> int:
    """B as an int ≥ 1; else a ParameterError naming it."""
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, (int, np.integer)) or n_permutations < 1:
        raise ParameterError(f"{name} must be an int >= 1; got {shown(n_permutations)}.")
    return int(n_permutations)


def check_test_params(estimator: Any, n_permutations: Any, alpha: Any, return_null: Any = True) -> MMDEstimator:
    """The estimator of a test (an MMD estimator), B, α and ``return_null``, checked."""
    if not isinstance(estimator, MMDEstimator):
        raise MonkError(
            f"A two-sample test needs an MMD estimator (e.g. get_registry().get_estimator('u-stat')); "
            f"got {getattr(estimator, 'name', type(estimator).__name__)!r}."
        )
    check_flag(return_null, "return_null")
    check_permutations(n_permutations)
    check_level(alpha)
    return estimator


def check_relabel(estimator: MMDEstimator, relabel: str) -> None:
    """Refuse an unknown ``relabel``, or "within-blocks" for an estimator without fixed blocks."""
    check_choice(relabel, "relabel", RELABEL)
    has_blocks = type(estimator).fixed_partition is not MMDEstimator.fixed_partition
    if relabel == "within-blocks" and (not has_blocks or getattr(estimator, "n_blocks", None) == "auto"):
        _no_fixed_partition(estimator)


def _no_fixed_partition(estimator: MMDEstimator) -> None:
    raise ParameterError(
        f"relabel='within-blocks' needs an estimator with a fixed partition into blocks; "
        f"{estimator.spec()} has none (a classical estimator, or n_blocks='auto', which chooses "
        "Q from the data). Give n_blocks a number, or use relabel='global'."
    )


def choose_partition(estimator: MMDEstimator, relabel: str, n: int, m: int, seq: np.random.SeedSequence) -> Partition | None:
    """The fixed partition of a within-block test, or None for global relabelling."""
    check_relabel(estimator, relabel)
    if relabel == "global":
        return None
    with plugin_code(estimator, "fixed_partition"):
        partition = estimator.fixed_partition(n, m, np.random.default_rng(seq))
    if partition is None:
        if relabel == "within-blocks":
            _no_fixed_partition(estimator)
        return None
    _check_partition(estimator, partition, n, m)
    return partition


def _check_partition(estimator: MMDEstimator, partition: Any, n: int, m: int) -> None:
    """A plugin's fixed partition, checked before a test relabels within it: paired blocks
    0..Q−1 that cover both samples, each with points of X and of Y (a block without
    either has no mean). A test on anything else would fail deep in the engine, or count
    an empty block's NaN statistic."""
    what = _partition_fault(partition, n, m)
    if what is not None:
        raise PluginFailure(
            f"{estimator.plugin_label()}: fixed_partition({n}, {m}) returned {what}; a test relabels within paired blocks "
            "that cover both samples, each holding points of X and of Y."
        )


def _partition_fault(partition: Any, n: int, m: int) -> str | None:
    """What is wrong with a plugin's partition of n and m points, or None."""
    if not isinstance(partition, Partition):
        return f"{shown(partition)}, not a Partition"
    Q = partition.n_blocks
    if not isinstance(Q, (int, np.integer)) or isinstance(Q, bool) or Q < 1:
        return f"n_blocks = {shown(Q)}, not a count >= 1"
    for name, labels, size in (("x_labels", partition.x_labels, n), ("y_labels", partition.y_labels, m)):
        if not isinstance(labels, np.ndarray):
            return f"{name} = {shown(labels)}, not an array of one integer label per point"
        if labels.dtype.kind not in "iu" or labels.shape != (size,):
            return f"{name} of shape {labels.shape}, dtype {labels.dtype}, for {size} points: not one integer label each"
        if size and (labels.min() < 0 or labels.max() >= Q):
            return f"{name} outside 0..{Q - 1} (from {labels.min()} to {labels.max()})"
        empty = np.flatnonzero(np.bincount(labels, minlength=Q) == 0)
        if len(empty):
            return f"block {int(empty[0])} with no point of {'X' if name == 'x_labels' else 'Y'}"
    return None


def _looks_like_data(obj: Any) -> bool:
    """An array, a data frame or a sequence: never a kernel or an estimator (which are
    objects or spec strings)."""
    return isinstance(obj, (np.ndarray, list, tuple)) or (hasattr(obj, "__array__") and not isinstance(obj, str))


def _data_kind(obj: Any) -> str:
    name = type(obj).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    shape = getattr(obj, "shape", None)
    if shape is not None:
        return f"{article} {name} of shape {tuple(shape)}"
    return f"{article} {name} of {len(obj)} items"
