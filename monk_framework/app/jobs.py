"""What the ``monkfw`` commands do, as library calls that return result objects.

Each command is one call here: :func:`prepare` looks up the kernel and the estimator,
routes ``key=value`` parameters to them and loads the samples (files or a built-in
data set), the same way for ``run`` and ``test``; :func:`run` estimates MMD or the mean
embeddings; :mod:`~monk_framework.app.test_job` prepares and runs ``monkfw test``. The command line
only parses options, calls these, renders the results and maps errors to exit codes,
so anything it prints can be had in Python::

    job = prepare("quadratic", "monk-bcd", dataset="gauss-outliers", seed=3)
    result = run(job)            # an MMDResult: the same as monkfw run ... --seed 3
    job.payload(result)          # the JSON that monkfw run --json prints

:func:`load_result` reads back any result the library wrote.
"""

from __future__ import annotations

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
from monk_framework.core.params import Configurable, parse_spec, parse_value
from monk_framework.core.randomness import root, stream
from monk_framework.core.registry import Registry, get_registry
from monk_framework.core.results import MMDResult, Result, jsonable
from monk_framework.core.samples import Sample
from monk_framework.io.loading import DATA_SUFFIXES, first_data_line, holds_numbers, load_sample
from monk_framework.two_sample.common import DEFAULT_ESTIMATOR, DEFAULT_KERNELS

__all__ = [
    "Job",
    "EmbeddingsResult",
    "data_kind",
    "prepare",
    "route_params",
    "parse_assignment",
    "parse_grid",
    "run",
    "with_defaults",
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
    #: ``monkfw test``'s options, checked (:class:`monk_framework.app.test_job.TestOptions`); None for ``run``
    test_options: Any = None

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
    return _dataset_samples(kernel, dataset, data_params, seed)


def _dataset_samples(kernel: Kernel, dataset: str | None, data_params: Sequence[str], seed: int) -> tuple[Any, Any, dict[str, Any], tuple[str, ...]]:
    """The samples of a built-in data set (the kernel's input kind's default one, said in a
    note, when none is named), drawn with ``seed``."""
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
