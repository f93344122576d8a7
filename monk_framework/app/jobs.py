"""What the ``monkfw`` commands do, as library calls that return result objects.

Each command is one call here: :func:`prepare` looks up the kernel and the estimator,
routes ``key=value`` parameters to them and loads the samples (files or a built-in
data set), the same way for ``run`` and ``test``; :func:`run` estimates MMD or the mean
embeddings; :func:`test` runs a permutation, split or robust test. The command line
only parses options, calls these, renders the results and maps errors to exit codes,
so anything it prints can be had in Python::

    job = prepare("quadratic", "monk-bcd", dataset="gauss-outliers", seed=3)
    result = run(job)            # an MMDResult: the same as monkfw run ... --seed 3
    job.payload(result)          # the JSON that monkfw run --json prints

:func:`load_result` reads back any result the library wrote.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from monk_framework.app.datasets import DATASETS, default_dataset, get_dataset
from monk_framework.core.embedding import EmbeddingsResult
from monk_framework.core.errors import DataFileError, MonkError, ParameterError, UnknownNameError, shown
from monk_framework.core.estimators import EmbeddingEstimator, Estimator, MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.load import load_result
from monk_framework.core.params import Configurable, first_repeat, parse_spec, parse_value, spec_label
from monk_framework.core.randomness import root, stream
from monk_framework.core.registry import Registry, get_registry
from monk_framework.core.results import MMDResult, Result, TestResult, jsonable
from monk_framework.core.samples import Sample
from monk_framework.io.loading import DATA_SUFFIXES, first_data_line, holds_numbers, load_sample
from monk_framework.two_sample import permutation_test, split_test
from monk_framework.two_sample.aggregated import METHODS as AGGREGATIONS
from monk_framework.two_sample.aggregated import N_BANDWIDTHS, aggregated_test, check_aggregated_test, repeated_bandwidth
from monk_framework.two_sample.common import DEFAULT_ESTIMATOR, DEFAULT_KERNELS, DEFAULT_PERMUTATIONS, check_level
from monk_framework.two_sample.permutation import check_permutation_test
from monk_framework.two_sample.robust import check_robust_test, robust_test
from monk_framework.two_sample.split import check_split_test

__all__ = [
    "Job",
    "EmbeddingsResult",
    "prepare",
    "route_params",
    "parse_assignment",
    "parse_grid",
    "run",
    "prepare_test",
    "test",
    "test_call",
    "contamination_value",
    "load_result",
]


def parse_assignment(text: str, option: str) -> tuple[str, Any]:
    """``key=value`` as (key, parsed value); ``option`` names the option in errors."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ParameterError(f"{option} expects key=value; got {shown(text)}.")
    return key.strip(), parse_value(value, f"{option} {key.strip()}")


#: one key=value of a spec's list, as `-p n_blocks=61,solver=exact` joins them
_ASSIGNMENT = re.compile(r"^\s*[A-Za-z_][\w.]*\s*=")


def _each_assignment(assignments: Sequence[str]) -> list[str]:
    """The ``key=value`` items of ``--param`` options; one option may join several with
    commas, as a spec does (``-p n_blocks=61,solver=exact``), when every part is one (a
    value with a comma of its own, ``-p sigma=1,2``, stays whole and is refused as a value)."""
    items: list[str] = []
    for text in assignments:
        parts = text.split(",") if isinstance(text, str) else [text]
        items.extend(parts if len(parts) > 1 and all(_ASSIGNMENT.match(part) for part in parts) else [text])
    return items


def _route(params: dict[str, Any], key: str, value: Any) -> None:
    if key in params:
        raise ParameterError(f"--param {key} is given twice; give each parameter once.")
    params[key] = value


def route_params(assignments: Sequence[str], kernel_cls: type[Configurable], estimator_cls: type[Configurable]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Send each ``key=value`` to the kernel or the estimator by parameter name.

    ``kernel.key=value`` / ``estimator.key=value`` choose explicitly when both have the
    parameter; an unknown key is an error listing the valid ones.
    """
    kernel_keys = {p.name for p in kernel_cls.parameters()}
    estimator_keys = {p.name for p in estimator_cls.parameters()}
    routed: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    for text in _each_assignment(assignments):
        key, value = parse_assignment(text, "--param")
        target, _, bare = key.rpartition(".")
        if target:
            if target not in ("kernel", "estimator"):
                raise ParameterError(f"--param {key}: the prefix must be 'kernel.' or 'estimator.'.")
            keys = kernel_keys if target == "kernel" else estimator_keys
            owner = kernel_cls if target == "kernel" else estimator_cls
            if bare not in keys:
                raise UnknownNameError(f"parameter of {target} {owner.name!r}:", bare, keys)
            _route(routed[target == "estimator"], bare, value)
        elif key in kernel_keys and key in estimator_keys:
            raise ParameterError(
                f"--param {key} is a parameter of both kernel {kernel_cls.name!r} and estimator "
                f"{estimator_cls.name!r}; write kernel.{key}=... or estimator.{key}=...."
            )
        elif key in kernel_keys or key in estimator_keys:
            _route(routed[key in estimator_keys], key, value)
        else:
            known = sorted(kernel_keys | estimator_keys)
            raise UnknownNameError(f"parameter for kernel {kernel_cls.name!r} and estimator {estimator_cls.name!r}:", key, known)
    return routed


def parse_grid(assignments: Sequence[str], kernel_cls: type[Configurable]) -> dict[str, list[Any]]:
    """``key=v1,v2,...`` (repeatable) as {key: [values]}, keys checked against the kernel."""
    known = {p.name for p in kernel_cls.parameters()}
    grid: dict[str, list[Any]] = {}
    for text in assignments:
        key, sep, values = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ParameterError(f"--grid expects key=v1,v2,...; got {shown(text)}.")
        target, _, bare = key.rpartition(".")
        if target == "estimator":
            raise ParameterError(f"--grid {key}: the split test tunes kernel parameters only; give the estimator's with --param {bare}=....")
        if target == "kernel":  # the prefix --param takes, accepted here too
            key = bare
        elif target:
            raise ParameterError(f"--grid {key}: the prefix may only be 'kernel.'.")
        if key not in known:
            raise UnknownNameError(f"parameter of kernel {kernel_cls.name!r} (in --grid):", key, known)
        if key in grid:
            raise ParameterError(f"--grid {key} is given twice; list all its values once: {key}=v1,v2,....")
        items = values.split(",")
        if any(not v.strip() for v in items):
            raise ParameterError(f"--grid {key}: empty value in {shown(values)}.")
        grid[key] = [parse_value(v, f"--grid {key}") for v in items]
    return grid


@attrs.frozen(kw_only=True)
class Job:
    """A kernel, an estimator and the two samples, ready for :func:`run` or :func:`test`.

    ``data`` says where the samples came from (the ``data`` section of the CLI's JSON);
    ``notes`` are what a user should be told (e.g. that the default data set was used);
    ``grid`` holds the split test's candidate kernel parameters; ``aggregated_specs`` the
    ``-k`` specs of an aggregated test (empty: the default collection).
    """

    kernel: Kernel = attrs.field(validator=attrs.validators.instance_of(Kernel))
    estimator: Estimator = attrs.field(validator=attrs.validators.instance_of(Estimator))
    X: Sample = attrs.field(validator=attrs.validators.instance_of((np.ndarray, list)))
    Y: Sample | None = attrs.field(validator=attrs.validators.optional(attrs.validators.instance_of((np.ndarray, list))))
    seed: int = attrs.field(validator=attrs.validators.and_(attrs.validators.instance_of(int), attrs.validators.ge(0)))
    data: dict[str, Any] = attrs.field(factory=dict, validator=attrs.validators.instance_of(dict))
    grid: dict[str, list[Any]] = attrs.field(factory=dict, validator=attrs.validators.instance_of(dict))
    notes: tuple[str, ...] = attrs.field(default=(), validator=attrs.validators.instance_of(tuple))
    aggregated_specs: tuple[str, ...] = attrs.field(default=(), validator=attrs.validators.instance_of(tuple))

    def payload(self, result: Result) -> dict[str, Any]:
        """The JSON form of a result of this job: the result, and where its data came from."""
        return {**result.to_dict(), "data": jsonable(self.data)}


def _load_samples(
    kernel: Kernel,
    x: Path | str | None,
    y: Path | str | None,
    dataset: str | None,
    data_params: Sequence[str],
    seed: int,
    needs_y: bool,
    case_sensitive: bool,
    progress: Any = None,
) -> tuple[Any, Any, dict[str, Any], tuple[str, ...]]:
    if dataset is not None and (x is not None or y is not None):
        raise ParameterError("Give either --dataset or --x/--y files, not both.")
    if x is None and y is not None:
        raise ParameterError("--y needs --x as well.")
    if data_params and x is not None:
        raise ParameterError("--data-param applies to --dataset only, not to --x/--y files.")
    fasta = [p for p in (x, y) if p is not None and Path(p).suffix.lower() in (".fa", ".fasta")]
    if case_sensitive and not fasta:
        # only FASTA is upper-cased when read: elsewhere the option would change nothing
        raise ParameterError("--case-sensitive keeps the case of FASTA files (.fa, .fasta); none is given here.")
    if x is not None:
        if needs_y and y is None:
            raise ParameterError("This estimator compares two samples: give Y as well as X (a second file, or --y).")
        kind = kernel.input_kind
        X = load_sample(x, case_sensitive=case_sensitive, kind=kind, progress=progress)
        Y = load_sample(y, case_sensitive=case_sensitive, kind=kind, progress=progress) if y is not None else None
        return X, Y, {"source": "files", "x": str(x), "y": None if y is None else str(y)}, ()
    notes: tuple[str, ...] = ()
    implicit = dataset is None
    if dataset is None:
        dataset = default_dataset(kernel.input_kind)
        if dataset is None:
            raise ParameterError(f"No built-in data set gives {kernel.input_kind}s yet; pass --x and --y files.")
    assigned = [parse_assignment(t, "--data-param") for t in data_params]
    twice = sorted({key for key, _ in assigned if sum(k == key for k, _ in assigned) > 1})
    if twice:
        raise ParameterError(f"--data-param {twice[0]} is given twice; give each data set parameter once.")
    ds = get_dataset(dataset, **dict(assigned))
    if ds.input_kind != kernel.input_kind:
        fitting = [e.name for e in get_registry().kernels() if e.details.get("input_kind") == ds.input_kind]
        hint = f"; use a kernel for {ds.input_kind}s ({', '.join(fitting)})" if fitting else ""
        raise ParameterError(f"Data set {dataset!r} gives {ds.input_kind}s but kernel {kernel.name!r} takes {kernel.input_kind}s{hint}.")
    if implicit:
        notes = (f"No data given: using the built-in data set {ds.spec()} with seed {seed}.",)
    X, Y = ds.sample(seed)
    return X, Y, {"source": "dataset", "name": ds.name, "params": ds.params(), "seed": seed}, notes


def data_kind(x: Path | str | None, dataset: str | None, y: Path | str | None = None) -> str:
    """Whether the samples a command names are vectors or strings, before reading them: a
    data set's kind, FASTA for strings, a ``.txt`` file by its first data line (numbers
    or not), any other file vectors; no data: the default data set's vectors.

    Files ``x`` and ``y`` of different kinds are refused here, each named with the reason
    for its kind: the default kernel would take one of them for what it is not."""
    if dataset is not None:
        cls = DATASETS.get(dataset)
        return cls.input_kind if cls is not None else "vector"
    if x is None:
        return "vector"
    kind, why = _file_kind(x)
    if y is not None:
        other, why_other = _file_kind(y)
        # a file of a type the loader does not read (seqs.fa.gz) is refused by its type there
        if other != kind and _readable_type(x) and _readable_type(y):
            raise ParameterError(
                f"X ({x}) reads as {kind}s{why} but Y ({y}) as {other}s{why_other}; the two samples must be of one "
                "kind. Fix the file that is not what you meant (or name a kernel with -k: it reads every .txt file as "
                "its own kind)."
            )
    return kind


def _readable_type(path: Path | str) -> bool:
    return Path(path).suffix.lower() in DATA_SUFFIXES


def _file_kind(path: Path | str) -> tuple[str, str]:
    """A data file's kind, and why, for a message: FASTA and ``.txt`` files of text are
    strings, ``.txt`` files of numbers and every other file vectors."""
    suffix = Path(path).suffix.lower()
    if suffix in (".fa", ".fasta"):
        return "string", " (a FASTA file)"
    if suffix != ".txt":
        return "vector", ""
    try:
        if holds_numbers(path):
            return "vector", " (its first data line is numbers)"
        line = first_data_line(path)
    except (OSError, DataFileError):
        return "vector", ""  # the loader names the problem
    if line is None:
        return "vector", ""  # no data at all: the loader says so
    start = line if len(line) <= 40 else line[:37] + "..."
    return "string", f" (a .txt file is strings, one a line, unless its first data line is numbers: {start!r} is not)"


def with_defaults(
    kernel: str | None,
    estimator: str | None,
    x: Path | str | None,
    dataset: str | None,
    *,
    y: Path | str | None = None,
    need_estimator: bool = True,
) -> tuple[str, str | None, tuple[str, ...]]:
    """The kernel and estimator names to use, and a note for each default taken
    (``need_estimator=False``: a missing estimator stays None, a robust test chooses)."""
    notes: list[str] = []
    if kernel is None:
        kind = data_kind(x, dataset, y)
        kernel = DEFAULT_KERNELS[kind]
        rule = " with sigma by the median heuristic" if kernel == "rbf" else ""
        notes.append(f"No kernel given: {kernel}{rule} (for {kind}s; choose one with -k).")
    if estimator is None and need_estimator:
        estimator = DEFAULT_ESTIMATOR
        notes.append(f"No estimator given: {estimator}, the unbiased U-statistic (choose one with -e).")
    return kernel, estimator, tuple(notes)


def prepare(
    kernel: str,
    estimator: str,
    *,
    params: Sequence[str] = (),
    x: Path | str | None = None,
    y: Path | str | None = None,
    dataset: str | None = None,
    data_params: Sequence[str] = (),
    seed: int = 0,
    case_sensitive: bool = False,
    trace: bool = False,
    grid: Sequence[str] = (),
    needs_y: bool | None = None,
    registry: Registry | None = None,
    check: Callable[[Kernel, Estimator], None] | None = None,
    progress: Any = None,
) -> Job:
    """Look up the kernel and the estimator by name, route ``params`` (``key=value``) to
    them, and load the samples: files ``x``/``y``, the built-in ``dataset`` drawn from
    ``seed``'s data stream, or the default data set of the kernel's input kind.

    ``trace`` asks an iterative estimator to record its objective; ``grid`` gives the
    split test's candidate kernel parameters (``key=v1,v2``). ``needs_y``: whether Y is
    required (default: for MMD estimators). ``check(kernel, estimator)`` runs before the
    data are read, to refuse early what cannot work. ``progress(done, total, what)``
    hears how far the reading of a large table of numbers has come.
    """
    reg = registry or get_registry()
    # -k and -e take specs as Python does ("rbf:sigma=1"); -p adds to them
    kernel, kernel_spec = parse_spec(kernel)
    estimator, estimator_spec = parse_spec(estimator)
    kernel_cls = reg.kernel_class(kernel)
    estimator_cls = reg.estimator_class(estimator)
    kernel_params, estimator_params = route_params(params, kernel_cls, estimator_cls)
    for given, routed, what in ((kernel_spec, kernel_params, "kernel"), (estimator_spec, estimator_params, "estimator")):
        for key in given.keys() & routed.keys():
            raise ParameterError(f"The {what} parameter {key!r} is given in its spec and by --param; keep one.")
        routed.update(given)
    if trace:
        if "trace" not in {p.name for p in estimator_cls.parameters()}:
            raise ParameterError(f"--trace: estimator {estimator!r} is not iterative (it has no 'trace' parameter).")
        estimator_params["trace"] = True
    grid_values = parse_grid(grid, kernel_cls)
    for key in grid_values:
        if key in kernel_params:
            raise ParameterError(f"Kernel parameter {key!r} is given by both --param and --grid; keep one.")
    kern = kernel_cls.from_params(kernel_params)
    est = estimator_cls.from_params(estimator_params)
    if check is not None:
        check(kern, est)
    if needs_y is None:
        needs_y = isinstance(est, MMDEstimator)
    X, Y, data, notes = _load_samples(kern, x, y, dataset, data_params, seed, needs_y, case_sensitive, progress)
    return Job(kernel=kern, estimator=est, X=X, Y=Y, seed=seed, data=data, grid=grid_values, notes=notes)


def run(job: Job, *, max_memory: Any = None, backend: Any = None, progress: Any = None) -> MMDResult | EmbeddingsResult:
    """``monkfw run``: the MMD estimate, or the mean embeddings of X and Y. A ``backend``
    (e.g. Dask) spreads the Gram reductions of an MMD estimate over its workers;
    ``progress(done, total, what)`` hears how long work advances.

    An MMD estimate draws from the seed's estimate stream (the same statistic as
    ``estimator.estimate(kernel, X, Y, rng=seed)``). Embeddings use one kernel fitted
    on X ∪ Y; X's embedding draws from the seed's estimate stream, Y's from its
    ``second`` stream.
    """
    est = job.estimator
    if isinstance(est, MMDEstimator):
        return est.estimate(job.kernel, job.X, job.Y, rng=job.seed, max_memory=max_memory, backend=backend, progress=progress)
    if not isinstance(est, EmbeddingEstimator):  # pragma: no cover - the registry admits only these two kinds
        raise MonkError(f"Estimator {est.name!r} is neither an MMD nor an embedding estimator.")
    fitted = job.kernel.fitted(job.X, job.Y)
    emb_x = est.embed(fitted, job.X, rng=job.seed, max_memory=max_memory, progress=progress)
    if job.Y is None:
        return EmbeddingsResult(x=emb_x, seed=job.seed, timings={"total_s": emb_x.timings["total_s"]})
    emb_y = est.embed(fitted, job.Y, rng=stream(root(job.seed), "second"), max_memory=max_memory, progress=progress)
    return EmbeddingsResult(
        x=emb_x,
        y=emb_y,
        distance=emb_x.distance(emb_y, max_memory=max_memory, progress=progress),
        seed=job.seed,
        timings={"total_s": emb_x.timings["total_s"] + emb_y.timings["total_s"]},
    )


def contamination_value(text: str | int | float) -> int | float:
    """``"10"`` is a count, ``"0.02"`` a fraction of N + M."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return text
    try:
        return int(str(text))
    except ValueError:
        pass
    try:
        return float(str(text))
    except ValueError:
        raise ParameterError(f"--contamination takes a count (e.g. 10) or a fraction below 0.5 (e.g. 0.02); got {shown(text)}.") from None


def bandwidth_values(text: str | None) -> list[float] | None:
    """``--bandwidths 0.5,1,2``: positive numbers, or a one-line error naming the option."""
    if text is None:
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise ParameterError(f"--bandwidths takes comma-separated numbers, e.g. 0.5,1,2; got {shown(text)}.") from None
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise ParameterError(f"--bandwidths takes positive finite numbers; got {shown(text)}.")
    twice = repeated_bandwidth(values)
    if twice is not None:
        raise ParameterError(f"--bandwidths lists {twice:g} more than once; give each bandwidth once.")
    return values


def check_test_options(
    *,
    alpha: float,
    robust: bool,
    split: bool,
    grid: bool,
    method: str,
    blocks: int | None,
    aggregate: str | None = None,
    bandwidths: str | None = None,
    clip: float | None = None,
    relabel: str = "auto",
    alternative: str = "greater",
) -> None:
    """Refuse combinations of test options that do not make one test."""
    check_level(alpha, name="--alpha")
    if alternative != "greater" and (robust or split or aggregate is not None):
        test = "--contamination" if robust else ("--split" if split else "--aggregate")
        raise ParameterError(
            f"--alternative {alternative} is for the permutation test; {test} runs a test whose decision is one-sided "
            "(a large MMD speaks against H0): leave --alternative out."
        )
    if grid and not split:
        raise ParameterError("--grid chooses hyperparameters on part 1 of the split test: add --split.")
    if robust and split:
        raise ParameterError("--contamination and --split are different tests; choose one.")
    if relabel != "auto" and (robust or split):
        raise ParameterError(
            f"--relabel chooses how the permutation test relabels; {'--contamination' if robust else '--split'} runs "
            "another test, which relabels as its proof needs."
        )
    if aggregate is not None:
        if aggregate not in AGGREGATIONS:
            raise ParameterError(f"--aggregate must be one of {', '.join(AGGREGATIONS)}; got {shown(aggregate)}.")
        if split:
            raise ParameterError("--aggregate and --split are different tests; choose one.")
        if method != "auto" or blocks is not None or clip is not None:
            raise ParameterError(
                "--method, --blocks and --clip choose a one-kernel robust test; --aggregate with --contamination is robust by itself."
                if robust
                else "--method, --blocks and --clip choose a one-kernel robust test (with --contamination); --aggregate does not use them."
            )
        if relabel != "auto":
            raise ParameterError(
                "--relabel chooses how a one-kernel permutation test relabels; --aggregate relabels the pooled "
                "sample globally (every kernel must see the same relabellings)."
            )
        bandwidth_values(bandwidths)
        if robust and aggregate != "agg":
            raise ParameterError(
                "--contamination with --aggregate is supported by agg (each kernel's threshold moves by "
                "its own 2R delta); MMD-FUSE's normalisers are not bounded under corruption."
            )
        return
    if bandwidths is not None:
        raise ParameterError("--bandwidths sets the kernels of an aggregated test: add --aggregate agg (or fuse).")
    if not robust and (method != "auto" or blocks is not None or clip is not None):
        raise ParameterError("--method, --blocks and --clip choose the robust test: add --contamination R.")


def prepare_test(
    kernel: str | Sequence[str] | None,
    estimator: str | None,
    *,
    contamination: str | int | float | None = None,
    split: bool = False,
    method: str = "auto",
    blocks: int | None = None,
    alpha: float = 0.05,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    alternative: str = "greater",
    relabel: str = "auto",
    grid: Sequence[str] = (),
    aggregate: str | None = None,
    bandwidths: str | None = None,
    clip: float | None = None,
    **load: Any,
) -> Job:
    """:func:`prepare` for ``monkfw test``: the options are checked, and what can be refused
    without the data (a bad relabelling, a robust test that cannot be run) is refused
    before any file is read. ``kernel`` may be several specs (``-k`` repeated): the
    collection of an aggregated test."""
    kernels = [kernel] if isinstance(kernel, str) else list(kernel or [])
    if len(kernels) > 1 and aggregate is None:
        raise ParameterError(
            f"-k was given {len(kernels)} times ({', '.join(kernels)}): a test uses one kernel. Several kernels make an "
            "aggregated test: add --aggregate agg (or fuse)."
        )
    robust = contamination is not None
    check_test_options(
        alpha=alpha,
        robust=robust,
        split=split,
        grid=bool(grid),
        method=method,
        blocks=blocks,
        aggregate=aggregate,
        bandwidths=bandwidths,
        clip=clip,
        relabel=relabel,
        alternative=alternative,
    )
    if aggregate is not None:
        return _prepare_aggregated(
            kernels, estimator, bandwidths=bandwidths, contamination=contamination, method=aggregate, n_permutations=n_permutations, alpha=alpha, **load
        )
    kernel = kernels[0] if kernels else None
    kernel, estimator, notes = with_defaults(kernel, estimator, load.get("x"), load.get("dataset"), y=load.get("y"), need_estimator=not robust)
    reg = load.pop("registry", None) or get_registry()
    if not issubclass(reg.estimator_class(parse_spec(estimator or "v-stat")[0]), MMDEstimator):
        raise ParameterError(f"Estimator {estimator!r} estimates mean embeddings, not MMD: a two-sample test needs an MMD estimator.")

    def check(kern: Kernel, est: Estimator) -> None:
        # the library's own validation entrance of the test, before any file is read
        assert isinstance(est, MMDEstimator)
        if contamination is not None:
            check_robust_test(
                kernel=kern,
                contamination=contamination_value(contamination),
                method=method,
                estimator=est if estimator is not None else None,
                n_permutations=n_permutations,
                alpha=alpha,
                clip=clip,
                n_blocks="auto" if blocks is None else blocks,
            )
        elif split:
            check_split_test(kernel=kern, estimator=est, n_permutations=n_permutations, alpha=alpha)
        else:
            check_permutation_test(kernel=kern, estimator=est, n_permutations=n_permutations, alpha=alpha, alternative=alternative, relabel=relabel)

    job = prepare(kernel, estimator or "v-stat", grid=grid, needs_y=True, registry=reg, check=check, **load)
    return attrs.evolve(job, notes=notes + job.notes)


def _prepare_aggregated(
    kernels: Sequence[str],
    estimator: str | None,
    *,
    bandwidths: str | None,
    contamination: str | int | float | None,
    method: str,
    n_permutations: int,
    alpha: float,
    **load: Any,
) -> Job:
    """The job of ``monkfw test --aggregate``: the data (read as the collection's kernels
    read them), the kernels' specs as given (``aggregated_specs``), and a note saying
    which kernels the test will use. Each ``-k`` without a sigma of its own stands for its
    family at ``--bandwidths``, or at the published grid over the pooled distances."""
    reg = load.pop("registry", None) or get_registry()
    notes: list[str] = []
    twice = first_repeat([reg.get_kernel(name, **given).spec() for name, given in map(parse_spec, kernels)])
    if twice is not None:
        # said in the words typed: expanded, a repeat read "kernels 0 and 10 are the same kernel"
        raise ParameterError(f"-k {kernels[twice[1]]} repeats -k {kernels[twice[0]]}: give each kernel once.")
    if not kernels:
        kind = data_kind(load.get("x"), load.get("dataset"), load.get("y"))
        if kind != "vector":
            raise ParameterError(
                "--aggregate's default kernels (Gaussian and Laplace) are for vectors; for strings give the kernels, e.g. -k ssk:n=3 -k ssk:n=5."
            )
        if contamination is not None and bandwidths is None:
            raise ParameterError(
                "--aggregate with --contamination needs --bandwidths fixed before seeing the data (e.g. 0.25,0.5,1,2,4): "
                "corrupted points would move a grid read from the pooled distances."
            )
        grid = "at the given --bandwidths" if bandwidths is not None else "at 10 bandwidths each over the pooled distances"
        notes.append(f"No kernel given: Gaussian and Laplace (L1) kernels {grid}, as MMDAgg and MMD-FUSE publish them.")
    families = []
    for spec in kernels:
        name, given = parse_spec(spec)
        cls = reg.kernel_class(name)
        if "sigma" not in {p.name for p in cls.parameters()}:
            if len(kernels) == 1:
                # --bandwidths sets sigma: without one there is no collection to make from this kernel
                other = (
                    "give several string kernels, e.g. -k ssk:n=3 -k ssk:n=5"
                    if cls.input_kind == "string"
                    else "drop -k for the default collection (Gaussian and Laplace kernels), or give several -k"
                )
                raise ParameterError(
                    f"--aggregate over -k {name}: kernel {name!r} has no bandwidth (sigma) for --bandwidths to vary. "
                    f"Drop --aggregate for a test with this one kernel; {other}."
                )
        elif "sigma" in given:
            if len(kernels) == 1:
                raise ParameterError(
                    f"--aggregate over -k {spec} is one kernel: drop --aggregate for a test with it, give sigma by --bandwidths, or give several -k."
                )
        else:
            if contamination is not None and bandwidths is None:
                raise ParameterError(
                    f"--aggregate with --contamination needs the bandwidths fixed before seeing the data: give -k {name} "
                    "a sigma, or --bandwidths (e.g. 0.25,0.5,1,2,4); corrupted points would move a grid read from the "
                    "pooled distances."
                )
            families.append(spec)
    if kernels and not families and bandwidths is not None:
        raise ParameterError("--bandwidths sets the sigma of each -k given without one; every -k here fixes its own or has none: drop --bandwidths.")
    if families and bandwidths is None:
        notes.append(
            f"-k {', '.join(families)} without sigma: {N_BANDWIDTHS} bandwidths each over the pooled distances, as "
            "MMDAgg's grid (fix them with --bandwidths or sigma=)."
        )
    if estimator is None:
        estimator = "v-stat" if contamination is not None else DEFAULT_ESTIMATOR
    if not issubclass(reg.estimator_class(parse_spec(estimator)[0]), MMDEstimator):
        raise ParameterError(f"Estimator {estimator!r} estimates mean embeddings, not MMD: a two-sample test needs an MMD estimator.")
    # a kernel parameter the collection would not use is refused, not dropped
    name, _ = parse_spec(kernels[0] if kernels else DEFAULT_KERNELS["vector"])
    try:
        routed, _ = route_params(load.get("params", ()), reg.kernel_class(name), reg.estimator_class(parse_spec(estimator)[0]))
    except (ParameterError, UnknownNameError):
        if len(kernels) < 2:
            raise
        names = ", ".join(p.split("=")[0] for p in load.get("params", ()))
        raise ParameterError(f"--param {names}: with several -k, give each kernel's parameters in its spec (e.g. -k laplace:norm=l1).") from None
    if not kernels and routed:
        raise ParameterError(
            f"--param {', '.join(sorted(routed))}: --aggregate without -k uses the default collection (Gaussian and "
            "Laplace kernels at their bandwidths); set those with --bandwidths, or give -k with its parameters."
        )
    if len(kernels) > 1 and routed:
        raise ParameterError(f"--param {', '.join(sorted(routed))}: with several -k, give each kernel's parameters in its spec (e.g. -k laplace:norm=l1).")
    if "sigma" in routed:
        raise ParameterError("--aggregate takes the kernel's sigma from --bandwidths or from each -k; leave it out of --param.")
    specs = list(kernels)
    if specs and routed:  # the one -k with its --param: one spec, as Python's kernels= takes it
        first, given = parse_spec(specs[0])
        specs[0] = spec_label(first, {**given, **routed})
    # the library's own validation entrance, before any file is read
    check_aggregated_test(
        kernels=specs or None,
        method=method,
        estimator=estimator,
        n_permutations=n_permutations,
        alpha=alpha,
        bandwidths=bandwidth_values(bandwidths),
        contamination=0 if contamination is None else contamination_value(contamination),
    )
    job = prepare(kernels[0] if kernels else DEFAULT_KERNELS["vector"], estimator, needs_y=True, registry=reg, **load)
    return attrs.evolve(job, notes=tuple(notes) + job.notes, aggregated_specs=tuple(specs))


def test_call(
    job: Job,
    *,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    alpha: float = 0.05,
    alternative: str = "greater",
    relabel: str = "auto",
    contamination: str | int | float | None = None,
    method: str = "auto",
    blocks: int | None = None,
    split: bool = False,
    estimator_given: bool = True,
    return_null: bool = False,
    aggregate: str | None = None,
    bandwidths: str | None = None,
    clip: float | None = None,
) -> tuple[Callable[..., TestResult], dict[str, Any]]:
    """The library call ``monkfw test`` makes: the test function and its keywords, the
    samples first, exactly as a Python user writes it (``test(job.X, job.Y, **keywords)``).
    The command line adds only ``progress``, ``backend`` and ``max_memory``."""
    common: dict[str, Any] = dict(n_permutations=n_permutations, alpha=alpha, rng=job.seed, return_null=return_null)
    assert isinstance(job.estimator, MMDEstimator)
    if aggregate is not None:
        return aggregated_test, dict(
            kernels=list(job.aggregated_specs) or None,
            bandwidths=bandwidth_values(bandwidths),
            method=aggregate,
            estimator=job.estimator,
            contamination=0 if contamination is None else contamination_value(contamination),
            **common,
        )
    if contamination is not None:
        if blocks is not None and method == "auto":
            method = "mom"  # --blocks is the number of blocks of mom: asking for it chooses mom
        return robust_test, dict(
            kernel=job.kernel,
            contamination=contamination_value(contamination),
            method=method,
            estimator=job.estimator if estimator_given else None,
            clip=clip,
            n_blocks=blocks if blocks is not None else "auto",
            **common,
        )
    if split:
        return split_test, dict(kernel=job.kernel, estimator=job.estimator, grid=job.grid, **common)
    # the estimate monkfw run gives for this seed, next to a within-block test's own T
    return permutation_test, dict(kernel=job.kernel, estimator=job.estimator, alternative=alternative, relabel=relabel, report_estimate=True, **common)


def test(
    job: Job,
    *,
    progress: Any = None,
    backend: Any = None,
    max_memory: Any = None,
    **options: Any,
) -> TestResult:
    """``monkfw test``: an aggregated test with ``aggregate``, a robust test with
    ``contamination``, the split test with ``split``, else the permutation test, on the
    job's data with its seed (:func:`test_call` says which call, with which keywords)."""
    function, keywords = test_call(job, **options)
    return function(job.X, job.Y, progress=progress, backend=backend, max_memory=max_memory, **keywords)
