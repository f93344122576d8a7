"""The paper's three-way split test (Algorithm 3).

Each sample is cut at
random into three parts of (nearly) equal size. Part 1 chooses the kernel's
hyperparameters: the grid value with the largest T (data-dependent rules such as
``sigma="median"`` are resolved there too, and then frozen). Part 2 gives q̂, the same
order statistic as the permutation test's, from B relabellings of its pooled sample. Part 3 gives T. The
test reports T − q̂ and rejects when T > q̂.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from monk_framework.core.errors import MonkError, ParameterError, shown
from monk_framework.core.estimators import MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import first_repeat
from monk_framework.core.randomness import RNGLike, root, seed_of, stable_int, stream
from monk_framework.core.resources import ProgressCallback, Resources, counting
from monk_framework.core.results import computed_with, jsonable
from monk_framework.core.samples import take
from monk_framework.core.test_results import SplitTestResult
from monk_framework.engine.backends import Backend
from monk_framework.engine.memory import reserve_memory
from monk_framework.engine.pooled import PooledSample
from monk_framework.engine.relabelling import check_null_memory, null_statistics, observed_mmd2
from monk_framework.two_sample.common import (
    DEFAULT_PERMUTATIONS,
    GramOf,
    check_level,
    check_test_call,
    critical_rank,
    exceedances,
    null_quantile,
    previous_form,
    signed_root,
)

__all__ = ["check_split_test", "grid_points", "split_test", "three_parts"]


def three_parts(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A random split of 0..n−1 into three parts whose sizes differ by at most one."""
    return [np.sort(p) for p in np.array_split(rng.permutation(n), 3)]


#: memory one grid point takes while it is tuned: its candidate kernel and its record
GRID_POINT_BYTES = 4096


def grid_points(grid: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    """Every combination of the grid's values ([{}] for no grid), in the given order; their
    number is checked against memory before the combinations are made."""
    if grid is None:
        return [{}]
    if not isinstance(grid, Mapping):
        raise ParameterError(f"grid must map kernel parameter names to lists of values, e.g. {{'sigma': [0.5, 1, 2]}}; got {type(grid).__name__}.")
    if not grid:
        return [{}]
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise ParameterError(f"grid[{key!r}] must be a non-empty list of values; got {values!r}.")
    keys = list(grid)
    count = math.prod(len(grid[k]) for k in keys)
    reserve_memory(
        GRID_POINT_BYTES * count,
        what=f"grid: {' x '.join(str(len(grid[k])) for k in keys)} = {count:,} combinations to tune need",
        fix="Give fewer values.",
    )
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


@previous_form("split_test", ("kernel", "estimator", "X", "Y"), "split_test(X, Y, kernel=..., estimator=..., grid=...)")
def split_test(
    X: Any,
    Y: Any,
    *,
    kernel: Kernel | str | None = None,
    estimator: MMDEstimator | str | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    alpha: float = 0.05,
    rng: RNGLike = None,
    progress: ProgressCallback | None = None,
    max_memory: Any = None,
    backend: Backend | None = None,
    return_null: bool = True,
    gram: GramOf | None = None,
) -> SplitTestResult:
    """The three-way split test of the paper's Algorithm 3 (see the module docstring).

    Parameters
    ----------
    X, Y : array_like or sequence of str
        The samples.
    kernel, estimator : object or spec, optional
        As for :func:`~monk_framework.two_sample.permutation_test` (defaults: ``"rbf"``
        at the median heuristic, ``"ssk"`` for strings; ``"u-stat"``).
    grid : dict, optional
        Kernel parameter names to candidate values, tried on part 1, e.g.
        ``{"sigma": [0.5, 1, 2]}`` or ``{"n": [3, 5], "lam": [0.5, 0.8]}``; the kernel's
        other parameters stay as given.
    n_permutations : int
        B, the relabellings of part 2 (default 1000; the paper's Experiment 2 uses 150).
    alpha, rng, progress, max_memory, backend, return_null
        As for :func:`~monk_framework.two_sample.permutation_test`; ``progress(done,
        total, what)`` counts the grid points tuned on part 1, then the relabellings.
    gram : callable, optional
        ``gram(kernel, ix, iy)``: the Gram matrix of [X[ix]; Y[iy]] for a candidate
        kernel, so that Gram matrices precomputed once over a whole data set serve every
        run (the paper's Experiment 2); data-dependent rules are then not fitted.

    Returns
    -------
    SplitTestResult
        T on part 3, q̂ from part 2, ``excess`` = T − q̂ (the paper's Figure 2) and the
        grid point chosen on part 1.
    """
    start = time.perf_counter()
    kernel, estimator, report = check_split_test(
        X,
        kernel=kernel,
        estimator=estimator,
        grid=grid,
        n_permutations=n_permutations,
        alpha=alpha,
        return_null=return_null,
        progress=progress,
        backend=backend,
        gram=gram,
    )
    alpha = check_level(alpha)  # checked above; a Decimal or a numpy float read as a float
    resources = Resources.of(max_memory)
    _, Xv, Yv = kernel.mmd_view(X, Y)
    points = grid_points(grid)
    candidates = [type(kernel).from_params({**kernel.params(), **point}) for point in points]
    twice = first_repeat([c.spec() for c in candidates])
    if twice is not None:
        raise ParameterError(f"grid gives the kernel {candidates[twice[1]].spec()} more than once; list each value once.")
    # each grid point read as every MMD is (Kernel.mmd_view: centred, or anchored far from the
    # origin; a point's parameters may decide which), unless the caller gives the Gram matrices
    views = [(c, Xv, Yv) for c in candidates] if gram is not None else [c.mmd_view(X, Y) for c in candidates]
    seq = root(rng)
    seed = seed_of(seq)
    split_rng = np.random.default_rng(stream(seq, "split"))
    px, py = three_parts(len(Xv), split_rng), three_parts(len(Yv), split_rng)
    need, why = estimator.required_size()
    for name, sample, parts in (("X", Xv, px), ("Y", Yv, py)):
        if min(map(len, parts)) < need:
            raise MonkError(
                f"The split test cuts {name} ({len(sample)} points) into three parts of at least "
                f"{min(map(len, parts))} points, but estimator {estimator.name!r} needs at least {need} per "
                f"sample{f' ({why})' if why else ''}: give {name} at least {3 * need} points."
            )
    # before any kernel evaluation: part 2's B relabellings that cannot fit are refused at once
    check_null_memory(int(n_permutations), pool_size=len(px[1]) + len(py[1]), backend=backend, listed=bool(return_null))

    # part 1: the grid point with the largest statistic (data-dependent rules fitted here)
    tick = time.perf_counter()
    tuning: list[dict[str, Any]] = []
    # a grid point's stream is named by the point, so its statistic ignores the rest of the grid
    tune_streams = [stream(seq, "tune", stable_int(jsonable(point))) for point in points]

    def pool_of(kern: Kernel, stage_index: int, view: int) -> PooledSample:
        Xs, Ys = take(views[view][1], px[stage_index]), take(views[view][2], py[stage_index])
        K = None if gram is None else gram(kern, px[stage_index], py[stage_index])
        return PooledSample(kern, Xs, Ys, gram=K, resources=resources)

    # progress counts the grid points tuned, then the relabellings of part 2
    total = len(points) + int(n_permutations)
    fits: list[Kernel] = []
    for done, (point, (cand, Xc, Yc), point_seq) in enumerate(zip(points, views, tune_streams), start=1):
        fitted = cand if gram is not None else cand.fitted(take(Xc, px[0]), take(Yc, py[0]))
        T1 = observed_mmd2(estimator, pool_of(fitted, 0, done - 1), point_seq)
        tuning.append({"params": point, "kernel_params": fitted.params(), "statistic": float(signed_root(T1))})
        fits.append(fitted)
        if report is not None:
            report(done, total, "grid points, then permutations")
    scores = [float(t["statistic"]) for t in tuning]
    best = scores.index(max(scores))  # the first of equals
    chosen = fits[best]
    tune_s = time.perf_counter() - tick

    # part 2: the null quantile from relabellings; part 3: the statistic
    tick = time.perf_counter()
    tick_null = counting(report, "grid points, then permutations", offset=len(points), total=total)
    null = signed_root(null_statistics(estimator, pool_of(chosen, 1, best), int(n_permutations), stream(seq, "calibrate"), tick_null, backend))
    calibrate_s = time.perf_counter() - tick
    tick = time.perf_counter()
    T = float(signed_root(observed_mmd2(estimator, pool_of(chosen, 2, best), stream(seq, "test"))))
    test_s = time.perf_counter() - tick
    q = null_quantile(null, alpha)
    exceed = int(exceedances(null, T))
    return SplitTestResult(
        **computed_with(estimator, kernel, chosen, len(Xv), len(Yv), seed),
        grid={k: list(v) for k, v in (grid or {}).items()},
        tuning=tuning,
        statistic=T,
        pvalue=(1 + exceed) / (1 + int(n_permutations)),
        null_quantile=q,
        excess=None if q is None else T - q,
        alpha=float(alpha),
        reject=exceed <= critical_rank(int(n_permutations), alpha),
        n_permutations=int(n_permutations),
        parts={name: {"x": px[i].tolist(), "y": py[i].tolist()} for i, name in enumerate(("tune", "calibrate", "test"))},
        null_distribution=null if return_null else None,
        timings={"tune_s": tune_s, "calibrate_s": calibrate_s, "test_s": test_s, "total_s": time.perf_counter() - start},
    )


def check_split_test(
    X: Any = None,
    *,
    kernel: Any = None,
    estimator: Any = None,
    grid: Any = None,
    n_permutations: Any = DEFAULT_PERMUTATIONS,
    alpha: Any = 0.05,
    return_null: Any = True,
    progress: Any = None,
    backend: Any = None,
    gram: Any = None,
) -> tuple[Kernel, MMDEstimator, ProgressCallback | None]:
    """Every argument of :func:`split_test` that can be checked without the data, checked
    once (the command line calls it before reading files). Returns the kernel, the
    estimator and the progress callback."""
    kernel, estimator, report = check_test_call(
        X,
        kernel=kernel,
        estimator=estimator,
        n_permutations=n_permutations,
        alpha=alpha,
        return_null=return_null,
        progress=progress,
        backend=backend,
    )
    if gram is not None and not callable(gram):
        raise ParameterError(
            f"gram must be a function gram(kernel, ix, iy) giving the Gram matrix of [X[ix]; Y[iy]] (each stage "
            f"of a split test has its own points), or None; got {shown(gram)}."
        )
    kernel = estimator.check_kernel(kernel)
    grid_points(grid)
    known = {p.name for p in kernel.parameters()}
    for key in grid or {}:
        if key not in known:
            raise ParameterError(f"grid: kernel {kernel.name!r} has no parameter {key!r} (it has {', '.join(sorted(known)) or 'none'}).")
    return kernel, estimator, report
