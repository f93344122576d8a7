"""The ``monkfw`` command line: a thin shell over the library.

stdout carries data (tables, or JSON with ``--json``); messages go to stderr. Exit
codes: 0 success, 1 a library error (bad data, a file that cannot be read, a
computation that cannot be done), 2 a usage error (unknown name, bad option or
parameter), 130 interrupted. No traceback unless ``--debug``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from monk_framework.app import jobs
from monk_framework.app.datasets import DATASETS
from monk_framework.app.experiments import get_experiment, run_experiment
from monk_framework.app.experiments.runner import saved_cells
from monk_framework.app.files import check_writable, directory_name_problem
from monk_framework.app.progress_bar import ProgressBar
from monk_framework.app.render import (
    anchored,
    deliver,
    describe_dict,
    entries_tables,
    print_description,
    print_json,
    result_table,
    tell,
)
from monk_framework.app.terminal import STATE, MonkGroup, plugin_prints_to_stderr, stdout
from monk_framework.app.test_job import TestOptions, prepare_test
from monk_framework.app.test_job import test as run_test
from monk_framework.core.errors import ParameterError, UnknownNameError, shown
from monk_framework.core.params import LARGEST_INT, parse_spec
from monk_framework.core.registry import get_registry
from monk_framework.core.resources import parse_memory, reuse_freed_memory
from monk_framework.core.version import __version__
from monk_framework.engine.backends import check_backend_options, get_backend
from monk_framework.two_sample.common import DEFAULT_PERMUTATIONS

__all__ = ["app", "main"]


app = typer.Typer(
    cls=MonkGroup,
    name="monkfw",
    help="Outlier-robust kernel mean embeddings and MMD by median-of-means (MONK).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"monkfw {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Hide notes and progress on stderr.")] = False,
) -> None:
    """Outlier-robust kernel mean embeddings and MMD by median-of-means (MONK)."""
    STATE.debug = debug
    STATE.quiet = quiet
    reuse_freed_memory()  # one command, large arrays of the same sizes again and again


def _samples(files: list[Path] | None, x: Path | None, y: Path | None) -> tuple[Path | None, Path | None]:
    """--x and --y, or the files given as arguments (``monkfw test X.csv Y.csv``)."""
    if not files:
        return x, y
    if x is not None or y is not None:
        raise ParameterError("Give the samples either as arguments or with --x/--y, not both.")
    if len(files) > 2:
        raise ParameterError(f"Give at most two sample files (X and Y); got {len(files)}: {' '.join(map(str, files))}.")
    return files[0], (files[1] if len(files) == 2 else None)


def _quiet(quiet: bool, debug: bool = False) -> None:
    """-q and --debug after the subcommand do what they do before it (an error's "rerun
    with --debug" is most often followed by adding it at the end of the command)."""
    if quiet:
        STATE.quiet = True
    if debug:
        STATE.debug = True


def _complete(kind: str) -> Any:
    """Shell completion of kernel, estimator, data set (or all) names."""

    def complete(incomplete: str) -> list[str]:
        try:
            reg = get_registry()
        except Exception:  # completion must never break the shell
            return []
        names = {
            "kernel": [e.name for e in reg.kernels()],
            "estimator": [e.name for e in reg.estimators()],
            "dataset": list(DATASETS),
        }.get(kind, reg.names() + list(DATASETS))
        return sorted(n for n in names if n.startswith(incomplete))

    return complete


def _path(text: str) -> Path:
    """A path option's value; an empty one (an unset shell variable, say) is refused
    rather than read as the current directory."""
    if not text.strip():
        raise typer.BadParameter("is empty; give a path (an unset shell variable?).")
    return Path(text)


def _spec_text(text: str) -> str:
    """A kernel or estimator option's value: an empty one (an unset shell variable, say)
    is refused by the option's name, before any plugin is looked up."""
    if not text.strip():
        raise typer.BadParameter("is empty; give a name, listed by monkfw plugins.")
    return text


def _file_path(text: str) -> Path:
    """:func:`_path` for a file to write: ``out/`` names a directory, which ``Path``
    would read as the file ``out``."""
    path = _path(text)
    problem = directory_name_problem(text)
    if problem is not None:
        raise typer.BadParameter(problem)
    return path


# options shared by the commands that take two samples (run, test)
KernelOption = Annotated[
    str | None,
    typer.Option(
        "--kernel",
        "-k",
        parser=_spec_text,
        help="Kernel name (see 'monkfw plugins'); default: rbf for vectors (sigma by the median heuristic), ssk for strings.",
        autocompletion=_complete("kernel"),
        show_default=False,
    ),
]
EstimatorOption = Annotated[
    str, typer.Option("--estimator", "-e", parser=_spec_text, help="Estimator name (see 'monkfw plugins').", autocompletion=_complete("estimator"))
]
XOption = Annotated[Path | None, typer.Option("--x", "-x", parser=_path, help="Sample X: .npy, .csv, .tsv or .txt (vectors), .txt or FASTA (strings).")]
YOption = Annotated[Path | None, typer.Option("--y", "-y", parser=_path, help="Sample Y, in the same formats as --x.")]
SamplesArgument = Annotated[list[Path] | None, typer.Argument(parser=_path, help="The files of X and Y (the same as --x X --y Y).", show_default=False)]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Hide notes and progress on stderr (as monkfw -q).")]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors (as monkfw --debug).")]
CaseOption = Annotated[
    bool,
    typer.Option(
        "--case-sensitive", help="Keep the case of FASTA sequences (by default they are upper-cased: lowercase marks soft-masked residues, not other letters)."
    ),
]
DatasetOption = Annotated[str | None, typer.Option("--dataset", "-d", help="Built-in data set (see 'monkfw datasets').", autocompletion=_complete("dataset"))]
ParamOption = Annotated[
    list[str] | None, typer.Option("--param", "-p", help="key=value for the kernel or estimator (repeatable); prefix kernel. or estimator. to choose.")
]
DataParamOption = Annotated[list[str] | None, typer.Option("--data-param", help="key=value for the data set, e.g. n=500 (repeatable).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
MaxMemoryOption = Annotated[
    str | None,
    typer.Option(
        "--max-memory",
        help="Memory the work may hold beyond the data, e.g. 2GB or 512MiB (default: half the "
        "available memory); over it Gram matrices are computed in tiles, with the same numbers.",
        show_default=False,
    ),
]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", parser=_file_path, help="Also save the JSON result to this file (written atomically).")]


# -- monkfw plugins -----------------------------------------------------------------


@app.command()
def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """List the installed kernels and estimators with their providers, and plugin problems."""
    _quiet(quiet, debug)
    reg = get_registry()
    if as_json:
        print_json(
            {
                "kernels": [e.to_dict() for e in reg.kernels()],
                "estimators": [e.to_dict() for e in reg.estimators()],
                "problems": [p.to_dict() for p in reg.problems()],
            }
        )
        return
    for table in entries_tables("Kernels", reg.kernels()) + entries_tables("Estimators", reg.estimators()):
        stdout.print(table)
    for problem in reg.problems():
        tell(f"Plugin problem: {problem.provider}: {problem.message}")


# -- monkfw datasets ----------------------------------------------------------------


@app.command()
def datasets(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """List the built-in data sets (generated from --seed)."""
    _quiet(quiet, debug)
    if as_json:
        print_json([describe_dict(cls, "monk-framework") for cls in DATASETS.values()])
        return
    table = Table(title="Data sets", title_justify="left")
    for column in ("name", "summary"):
        table.add_column(column, overflow="fold")
    for cls in DATASETS.values():
        table.add_row(escape(cls.name), escape(cls.summary))
    stdout.print(table)


# -- monkfw describe ----------------------------------------------------------------


@app.command()
def describe(
    name: Annotated[str, typer.Argument(help="A kernel, estimator or data set name (or a spec, e.g. rbf:sigma=2).", autocompletion=_complete("any"))],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Show a kernel's, estimator's or data set's formula, parameters and defaults."""
    _quiet(quiet, debug)
    reg = get_registry()
    spec = name
    if ":" in spec or "(" in spec or ")" in spec:  # a spec, as -k and -e take them: its plugin is described
        name = parse_spec(spec)[0]
    found = [describe_dict(e.cls, str(e.provider)) for e in reg.find(name)]
    if name in DATASETS:
        found.append(describe_dict(DATASETS[name], "monk-framework (built-in data set)"))
    if not found:
        # an experiment's name is no plugin's: say where it is described ("Unknown ... 'exp1'" left it there)
        try:
            get_experiment(name)
            note = f" {name!r} is an experiment: 'monkfw experiment {name} --help'."
        except UnknownNameError:
            note = ""
        raise UnknownNameError("kernel, estimator or data set", name, reg.names() + list(DATASETS), note=note)
    if spec != name:
        tell(f"{spec!r} is {name!r} with parameters; here is {name!r} with all of its parameters.")
    if as_json:
        print_json(found if len(found) > 1 else found[0])
        return
    for info in found:
        print_description(info)


# -- monkfw run ---------------------------------------------------------------------


@app.command()
def run(
    files: SamplesArgument = None,
    kernel: KernelOption = None,
    estimator: Annotated[
        str | None,
        typer.Option(
            "--estimator",
            "-e",
            parser=_spec_text,
            help="Estimator name (see 'monkfw plugins'); default: u-stat.",
            autocompletion=_complete("estimator"),
            show_default=False,
        ),
    ] = None,
    x: XOption = None,
    y: YOption = None,
    case_sensitive: CaseOption = False,
    dataset: DatasetOption = None,
    param: ParamOption = None,
    data_param: DataParamOption = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every random choice (data set draw, blocks).")] = 0,
    as_json: JsonOption = False,
    output: OutputOption = None,
    max_memory: MaxMemoryOption = None,
    trace: Annotated[
        bool, typer.Option("--trace", help="Record the objective at every iteration (estimators with a 'trace' parameter, e.g. monk-bcd).")
    ] = False,
    backend: BackendOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Estimate MMD (or mean embeddings) with any kernel and any estimator.

    Without --x/--y or --dataset, runs on the default built-in data set and says which.
    """
    _quiet(quiet, debug)
    x, y = _samples(files, x, y)
    if output is not None:
        check_writable(output, what="--output", inputs=(x, y))  # before the work, not after it
    target = anchored(output)
    budget = None if max_memory is None else parse_memory(max_memory)  # a bad size is refused before any data is read
    check_backend_options(backend, scheduler, workers)
    with plugin_prints_to_stderr():
        kernel, estimator, notes = jobs.with_defaults(kernel, estimator, x, dataset, y=y)
        assert estimator is not None
        with ProgressBar("data") as reading:  # a large table of numbers takes seconds to read
            job = jobs.prepare(
                kernel,
                estimator,
                params=param or [],
                x=x,
                y=y,
                dataset=dataset,
                data_params=data_param or [],
                seed=seed,
                case_sensitive=case_sensitive,
                trace=trace,
                progress=reading,
            )
        for note in (*notes, *job.notes):
            tell(note)
        with _backend(backend, scheduler, workers) as runner, ProgressBar("estimate") as bar:
            result = jobs.run(job, max_memory=budget, backend=runner, progress=bar)
        # the estimator's diagnostic_rows are plugin code too: read while its prints go to stderr
        title, rows = result.report_table(job.estimator.report_rows(*result.estimator_record()))
    deliver(job.payload(result), output, as_json, result_table(title, rows), target=target)


# -- monkfw test --------------------------------------------------------------------


BackendOption = Annotated[
    str,
    typer.Option("--backend", help="Where the work runs: 'local' (this process) or 'dask' (dask.distributed; an embedded LocalCluster unless --scheduler)."),
]
SchedulerOption = Annotated[
    str | None,
    typer.Option("--scheduler", help="With --backend dask: the address of an existing cluster's scheduler, e.g. tcp://host:8786.", show_default=False),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        max=LARGEST_INT,
        help="With --backend dask and no --scheduler: worker processes of the LocalCluster (default: one per core).",
        show_default=False,
    ),
]


def _backend(name: str, scheduler: str | None, workers: int | None) -> Any:
    return get_backend(name, scheduler=scheduler, n_workers=workers)


ContaminationOption = Annotated[
    str | None,
    typer.Option(
        "--contamination",
        help="A robust test whose level holds with up to R corrupted points of X and Y (a count, e.g. 10, "
        "or a fraction below 0.5, e.g. 0.02); reports the certificate c: the rejection stays valid if up to c points were corrupted.",
        show_default=False,
    ),
]


@app.command("test")
def test_command(
    files: SamplesArgument = None,
    kernel: Annotated[
        list[str] | None,
        typer.Option(
            "--kernel",
            "-k",
            parser=_spec_text,
            help="Kernel name (see 'monkfw plugins'); default: rbf "
            "for vectors (sigma by the median heuristic), ssk for strings. With --aggregate, repeat it for a collection: a -k "
            "without sigma stands for its family at --bandwidths (or at 10 over the pooled distances).",
            autocompletion=_complete("kernel"),
            show_default=False,
        ),
    ] = None,
    estimator: Annotated[
        str | None,
        typer.Option(
            "--estimator",
            "-e",
            parser=_spec_text,
            help="MMD estimator (see 'monkfw plugins'); default: u-stat (with --contamination: v-stat, as dc and clip need).",
            autocompletion=_complete("estimator"),
            show_default=False,
        ),
    ] = None,
    x: XOption = None,
    y: YOption = None,
    case_sensitive: CaseOption = False,
    dataset: DatasetOption = None,
    param: ParamOption = None,
    data_param: DataParamOption = None,
    permutations: Annotated[int, typer.Option("--permutations", "-B", min=1, max=LARGEST_INT, help="Number of permutations B.")] = DEFAULT_PERMUTATIONS,
    alpha: Annotated[float, typer.Option("--alpha", help="Level of the test, in (0, 1).")] = 0.05,
    alternative: Annotated[
        str,
        typer.Option(
            "--alternative",
            help="Permutation test: 'greater' (a large MMD speaks against "
            "H0), 'less' (samples more alike than relabellings: duplicated or stratified data) or 'two-sided'.",
        ),
    ] = "greater",
    relabel: Annotated[
        str,
        typer.Option(
            "--relabel", help="Permutation test: 'auto' (within the blocks of a MONK estimator's fixed partition, else global), 'within-blocks' or 'global'."
        ),
    ] = "auto",
    contamination: ContaminationOption = None,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="With --contamination: 'auto', 'dc' (dcMMD, bounded kernels), 'clip' "
            "(dcMMD on clipped features, any kernel) or 'mom' (median of block p-values, any kernel).",
        ),
    ] = "auto",
    clip: Annotated[
        float | None,
        typer.Option(
            "--clip",
            help="With --contamination and clip: the radius c of the clipped "
            "features, in sqrt(k(x, x)) units, fixed without these data (default: the median pooled norm, "
            "accounted for in the guarantee).",
            show_default=False,
        ),
    ] = None,
    aggregate: Annotated[
        str | None,
        typer.Option(
            "--aggregate",
            help="An aggregated test over many kernels: 'agg' (MMDAgg) or "
            "'fuse' (MMD-FUSE); default kernels: Gaussian and Laplace at 10 bandwidths each. With --contamination: "
            "robust aggregation (agg, fixed --bandwidths).",
            show_default=False,
        ),
    ] = None,
    bandwidths: Annotated[
        str | None,
        typer.Option(
            "--bandwidths",
            help="With --aggregate: the bandwidths sigma, e.g. 0.25,0.5,1,2 (of each -k kernel without sigma, or of the default Gaussian and Laplace kernels).",
            show_default=False,
        ),
    ] = None,
    blocks: Annotated[
        int | None,
        typer.Option(
            "--blocks",
            min=1,
            max=LARGEST_INT,
            help="With --contamination and mom: the number of blocks Q (default: about 2 sqrt(min(N, M)), at least 4R + 1).",
            show_default=False,
        ),
    ] = None,
    split: Annotated[
        bool, typer.Option("--split", help="The paper's three-way split test (Algorithm 3): tune on part 1, null quantile on part 2, statistic on part 3.")
    ] = False,
    grid: Annotated[
        list[str] | None, typer.Option("--grid", help="With --split: kernel hyperparameter values to try on part 1, key=v1,v2,... (repeatable).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every random choice (data set draw, split, permutations, blocks).")] = 0,
    null: Annotated[bool, typer.Option("--null", help="Include the B permuted statistics in the JSON result.")] = False,
    as_json: JsonOption = False,
    output: OutputOption = None,
    backend: BackendOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    max_memory: MaxMemoryOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Two-sample test of P = Q: a permutation test with any kernel and MMD estimator.

    The p-value is (1 + #{T_b >= T}) / (1 + B) over B relabellings of the pooled
    sample (within the blocks of a MONK estimator's partition). With --contamination R,
    a robust test whose level holds with up to R corrupted points; with --split, the
    paper's three-way split test.
    """
    _quiet(quiet, debug)
    x, y = _samples(files, x, y)
    if output is not None:
        check_writable(output, what="--output", inputs=(x, y))  # before the work, not after it
    target = anchored(output)
    check_backend_options(backend, scheduler, workers)
    budget = None if max_memory is None else parse_memory(max_memory)
    options = TestOptions(
        contamination=contamination,
        split=split,
        method=method,
        blocks=blocks,
        alpha=alpha,
        n_permutations=permutations,
        relabel=relabel,
        aggregate=aggregate,
        bandwidths=bandwidths,
        clip=clip,
        alternative=alternative,
        grid=grid or (),
        estimator_given=estimator is not None,
        return_null=null,
    )
    with plugin_prints_to_stderr():
        with ProgressBar("data") as reading:  # a large table of numbers takes seconds to read
            job = prepare_test(
                kernel,
                estimator,
                options,
                params=param or [],
                x=x,
                y=y,
                dataset=dataset,
                data_params=data_param or [],
                seed=seed,
                case_sensitive=case_sensitive,
                progress=reading,
            )
        for note in job.notes:
            tell(note)
        # the library names each stage: permutations; kernels x permutations (L·B relabelled
        # statistics); grid points, then permutations
        with _backend(backend, scheduler, workers) as runner, ProgressBar("test") as bar:
            result = run_test(job, progress=bar, backend=runner, max_memory=budget)

    title, rows = result.report_table()
    deliver(job.payload(result), output, as_json, result_table(title, rows), footer=result.decision, target=target)


def _int_list(text: str | None, option: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ParameterError(f"{option} takes comma-separated integers, e.g. 200,400,600; got {shown(text)}.") from None
    return values


@app.command("experiment")
def experiment_command(
    name: Annotated[str, typer.Argument(help="exp1 (paper Figure 1: estimation error) or exp2 (Figure 2: split test on splice DNA).", show_default=False)],
    quick: Annotated[bool, typer.Option("--quick", help="A reduced grid that runs in well under a minute.")] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", parser=_path, help="Directory of the results, journal and figures (default: monk-results/NAME, or NAME-quick).", show_default=False
        ),
    ] = None,
    runs: Annotated[
        int | None,
        typer.Option("--runs", min=1, max=LARGEST_INT, help="Monte-Carlo runs per setting (default: 100 for exp1, 400 for exp2).", show_default=False),
    ] = None,
    sizes: Annotated[str | None, typer.Option("--sizes", help="Sample sizes N, comma-separated (per sample).", show_default=False)] = None,
    estimators: Annotated[
        list[str] | None,
        typer.Option(
            "--estimator",
            "-e",
            parser=_spec_text,
            help="An estimator spec, e.g. monk-bcd:n_blocks=21 (repeatable; replaces the default list).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Master seed: every cell's seed derives from it and the cell's settings.")] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help="Delete the results already in --out and start over (otherwise a run resumes).")] = False,
    backend: BackendOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Reproduce one of the paper's experiments: a tidy results.csv, summary.csv and PNG figures.

    Each Monte-Carlo cell is saved in OUT/cells.jsonl the moment it finishes. If a run is
    interrupted, the same command resumes it: finished cells are never recomputed.
    """
    _quiet(quiet, debug)
    check_backend_options(backend, scheduler, workers)
    overrides: dict[str, Any] = {"runs": runs, "sizes": _int_list(sizes, "--sizes"), "seed": seed}
    if estimators:
        overrides["estimators"] = tuple(estimators)
    exp = get_experiment(name, quick=quick, **overrides)
    directory = out if out is not None else Path("monk-results") / (f"{name}-quick" if quick else name)
    with _backend(backend, scheduler, workers) as runner, ProgressBar(name) as bar, plugin_prints_to_stderr():
        again = "the same command again without --fresh (with it, the saved cells are deleted)" if fresh else "the same command again"
        try:
            done = run_experiment(exp, directory, backend=runner, fresh=fresh, progress=bar)
        except KeyboardInterrupt:
            bar.progress.stop()
            tell(f"Interrupted. Every finished cell is saved in {directory / 'cells.jsonl'}; run {again} to resume.")
            STATE.interrupted_said = True
            raise typer.Exit(130) from None
        except Exception:
            finished = saved_cells(directory)
            if finished:
                # a failure part-way (a lost Dask worker, memory): what is done is kept
                STATE.after_error = (
                    f"The {finished:,} finished cell{'s are' if finished != 1 else ' is'} saved in "
                    f"{directory / 'cells.jsonl'}; once the error is fixed, {again} resumes."
                )
            raise
    tell(f"{name}: {done.cells} cells ({done.computed} computed now, {done.resumed} from an earlier run) in {done.seconds:.1f} s on the {runner.name} backend.")
    for path in done.files:
        stdout.print(str(path), markup=False)


def main() -> NoReturn:
    """Entry point of the ``monkfw`` console script."""
    app()
    raise SystemExit(0)  # pragma: no cover - app() always exits
