"""What every experiment is: its configuration, cells and report, and how a run goes."""

from __future__ import annotations

import numbers
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from monk_framework.app.experiments.runner import Cell, CellStore, run_cells
from monk_framework.core.errors import ParameterError, shown
from monk_framework.core.estimators import MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import LARGEST_INT, first_repeat, parse_spec
from monk_framework.core.registry import get_registry
from monk_framework.core.resources import check_fits, progress_callback
from monk_framework.engine.backends import Backend

__all__ = [
    "Experiment",
    "ExperimentRun",
    "check_distinct",
    "check_sizes",
    "sizes_tuple",
    "mmd_estimator",
    "named_kernel",
    "run_experiment",
]


def mmd_estimator(text: str, experiment: str) -> MMDEstimator:
    """The MMD estimator a spec names (an embedding estimator is refused by name)."""
    name, params = parse_spec(text)
    estimator = get_registry().get_estimator(name, **params)
    if not isinstance(estimator, MMDEstimator):
        raise ParameterError(f"{experiment} needs MMD estimators; {name!r} estimates an embedding.")
    return estimator


def check_distinct(texts: Sequence[str], experiment: str, what: str, resolve: Callable[[str], Any]) -> None:
    """Refuse a kernel or an estimator listed twice, also under two spellings (``u-stat``
    and ``u-stat:root=clip``): its cells would be computed twice, and its rows read twice
    by the summary. ``resolve`` turns a spec into the plugin object it names."""
    specs = [resolve(text).spec() for text in texts]
    twice = first_repeat(specs)
    if twice is None:
        return
    first, second = texts[twice[0]], texts[twice[1]]
    if first == second:
        raise ParameterError(f"{experiment}: {what} {first!r} is listed twice; list it once.")
    raise ParameterError(f"{experiment}: {first!r} and {second!r} are the same {what}, {specs[twice[1]]}; list it once.")


def sizes_tuple(value: Any) -> tuple[Any, ...]:
    """The sizes as given, numpy ints made ints (nothing rounded: 2.5 stays 2.5, for
    :func:`check_sizes` to refuse); one number is a tuple of one."""
    values = (value,) if isinstance(value, numbers.Number) or isinstance(value, str) else tuple(value)
    return tuple(int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v for v in values)


def check_sizes(sizes: Any, experiment: str) -> None:
    """Sample sizes an experiment can run: at least one, each an int >= 1, none twice
    (two cells with the same settings would be one cell)."""
    values = list(sizes)
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ParameterError(f"{experiment} sizes must be positive sample sizes (ints); got {shown(values)}.")
    if max(values) > LARGEST_INT:
        raise ParameterError(f"{experiment} sizes are at most 2^63 - 1 = {LARGEST_INT:,}, numpy's largest integer; got {shown(max(values))}.")
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ParameterError(f"{experiment} sizes list {', '.join(map(str, twice))} more than once; give each size once.")


def named_kernel(text: str, experiment: str, input_kind: str) -> Kernel:
    """The kernel a spec names, checked to take the experiment's kind of data."""
    name, params = parse_spec(text)
    kernel = get_registry().get_kernel(name, **params)
    if kernel.input_kind != input_kind:
        raise ParameterError(f"{experiment} compares {input_kind}s; kernel {name!r} takes {kernel.input_kind}s.")
    return kernel


#: memory one planned cell takes: its settings (450 bytes measured), its journal record and
#: the rows the report reads (about 1 kB per estimator), with room
CELL_BYTES = 16 * 1024


@attrs.frozen(kw_only=True)
class Experiment:
    """An experiment: its configuration (the attrs fields), its cells, and its report."""

    name: ClassVar[str] = "experiment"
    #: the columns of the tidy results file, in order
    columns: ClassVar[tuple[str, ...]] = ()
    #: the fields that ``--quick`` overrides (a reduced grid, done in seconds)
    QUICK: ClassVar[dict[str, Any]] = {}
    #: the files :meth:`report` writes, which ``fresh`` deletes before anything else
    outputs: ClassVar[tuple[str, ...]] = ()

    def config(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def cells(self) -> list[Cell]:
        raise NotImplementedError

    def cell_count(self) -> int:
        """len(self.cells()), without building them."""
        raise NotImplementedError

    def check_plan_size(self) -> None:
        """Refuse a plan whose cells (a product of ``runs`` and the grid, numbers the user
        typed) cannot be held in memory with their results, before building it."""
        count = self.cell_count()
        runs = int(getattr(self, "runs", 1))
        groups = max(1, count // runs)
        check_fits(
            count * CELL_BYTES,
            lambda need, avail, avail_bytes: (
                f"{self.name}: {count:,} cells ({runs:,} runs (--runs) for each of {groups:,} settings) need about "
                f"{need} to plan and to hold their results, but only {avail} of memory are available; use --runs "
                f"{max(1, int(0.5 * avail_bytes) // (CELL_BYTES * groups)):,} or fewer."
            ),
        )

    @staticmethod
    def cell_fn(settings: dict[str, Any], shared: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def cell_cost(self, settings: dict[str, Any]) -> float:
        """How much work a cell is, relative to the others (its time left is weighted by
        it): N² for the paper's experiments, whose cells are dominated by Gram matrices
        and their passes; 1 by default."""
        n = settings.get("n")
        return float(n) ** 2 if isinstance(n, int) and n > 0 else 1.0

    def shared(self) -> Any:
        """What every cell reads (computed once, sent once to each worker)."""
        return None

    def report(self, rows: list[dict[str, Any]], store: CellStore) -> list[Path]:
        """Write the results file, summaries and figures; return the paths written."""
        raise NotImplementedError


@attrs.frozen(kw_only=True)
class ExperimentRun:
    """What a call of :func:`run_experiment` did."""

    experiment: str
    directory: Path
    cells: int
    computed: int
    resumed: int
    files: list[Path]
    seconds: float


def run_experiment(
    experiment: Experiment,
    out: Path | str,
    *,
    backend: Backend | None = None,
    fresh: bool = False,
    progress: Callable[[float, float, str], None] | None = None,
) -> ExperimentRun:
    """Run (or resume) ``experiment`` in directory ``out``, then write its report there.
    ``progress(done, total, what)`` hears the work done in percent, each cell weighted by
    :meth:`Experiment.cell_cost`, finished cells of an earlier run included."""
    start = time.perf_counter()
    report = progress_callback(progress)
    experiment.check_plan_size()  # before the cells are built or the directory touched
    cells = experiment.cells()
    with CellStore(out, experiment.name, experiment.config(), fresh=fresh, outputs=experiment.outputs) as store:
        resumed = sum(c.key in store.done for c in cells)
        todo = len(cells) - resumed
        shared = experiment.shared() if todo else None
        costs = [experiment.cell_cost(c.settings) for c in cells]
        for _ in run_cells(cells, type(experiment).cell_fn, store, backend=backend, shared=shared, progress=report, costs=costs):
            pass
        files = [store.shown(path) for path in experiment.report(store.rows(cells), store)]
    return ExperimentRun(
        experiment=experiment.name,
        directory=Path(out),
        cells=len(cells),
        computed=todo,
        resumed=resumed,
        files=files,
        seconds=time.perf_counter() - start,
    )
