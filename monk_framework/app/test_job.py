"""``monkfw test`` as library calls: its options checked once, the job prepared, the test called.

:class:`TestOptions` holds the options that choose the test and refuses, when made, a
combination that does not make one test; :func:`prepare_test` reads the data as
:func:`~monk_framework.app.jobs.prepare` does after the test's own validation entrance
(``check_permutation_test``, ``check_split_test``, ``check_robust_test``,
``check_aggregated_test``) has seen the kernel and the estimator; :func:`test_call` is
the call a Python user would write, and :func:`test` makes it::

    options = TestOptions(contamination=5, method="dc")
    job = prepare_test("rbf:sigma=1", None, options, dataset="gauss-outliers")
    result = test(job)           # robust_test(job.X, job.Y, kernel=..., contamination=5, method="dc", rng=0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from monk_framework.app.jobs import Job, data_kind, prepare, route_params, with_defaults
from monk_framework.core.errors import ParameterError, UnknownNameError, shown
from monk_framework.core.estimators import Estimator, MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import first_repeat, parse_spec, spec_label
from monk_framework.core.registry import get_registry
from monk_framework.core.results import TestResult
from monk_framework.two_sample import permutation_test, split_test
from monk_framework.two_sample.aggregated import METHODS as AGGREGATIONS
from monk_framework.two_sample.aggregated import N_BANDWIDTHS, aggregated_test, check_aggregated_test, repeated_bandwidth
from monk_framework.two_sample.common import DEFAULT_ESTIMATOR, DEFAULT_KERNELS, DEFAULT_PERMUTATIONS, check_level
from monk_framework.two_sample.permutation import check_permutation_test
from monk_framework.two_sample.robust import check_robust_test, robust_test
from monk_framework.two_sample.split import check_split_test

__all__ = ["TestOptions", "bandwidth_values", "contamination_value", "prepare_test", "test", "test_call"]


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


@attrs.frozen(kw_only=True)
class TestOptions:
    """The options of ``monkfw test`` that choose the test and its settings, checked once
    when made: a combination that does not make one test is refused, in the options'
    words, before any file is read."""

    contamination: str | int | float | None = None
    split: bool = False
    method: str = "auto"
    blocks: int | None = None
    alpha: float = 0.05
    n_permutations: int = DEFAULT_PERMUTATIONS
    alternative: str = "greater"
    relabel: str = "auto"
    aggregate: str | None = None
    bandwidths: str | None = None
    clip: float | None = None
    #: the split test's grid, as given (``key=v1,v2``, repeatable)
    grid: tuple[str, ...] = attrs.field(default=(), converter=lambda values: tuple(values or ()))
    #: whether an estimator was given (a robust test chooses its own otherwise)
    estimator_given: bool = True
    #: whether the result keeps the B relabelled statistics
    return_null: bool = False

    @property
    def robust(self) -> bool:
        return self.contamination is not None

    def __attrs_post_init__(self) -> None:
        check_level(self.alpha, name="--alpha")
        robust, split = self.robust, self.split
        if self.alternative != "greater" and (robust or split or self.aggregate is not None):
            test = "--contamination" if robust else ("--split" if split else "--aggregate")
            raise ParameterError(
                f"--alternative {self.alternative} is for the permutation test; {test} runs a test whose decision is one-sided "
                "(a large MMD speaks against H0): leave --alternative out."
            )
        if self.grid and not split:
            raise ParameterError("--grid chooses hyperparameters on part 1 of the split test: add --split.")
        if robust and split:
            raise ParameterError("--contamination and --split are different tests; choose one.")
        if self.relabel != "auto" and (robust or split):
            raise ParameterError(
                f"--relabel chooses how the permutation test relabels; {'--contamination' if robust else '--split'} runs "
                "another test, which relabels as its proof needs."
            )
        if self.aggregate is not None:
            self._check_aggregate()
            return
        if self.bandwidths is not None:
            raise ParameterError("--bandwidths sets the kernels of an aggregated test: add --aggregate agg (or fuse).")
        if not robust and self._chooses_a_robust_test:
            raise ParameterError("--method, --blocks and --clip choose the robust test: add --contamination R.")

    @property
    def _chooses_a_robust_test(self) -> bool:
        return self.method != "auto" or self.blocks is not None or self.clip is not None

    def _check_aggregate(self) -> None:
        """The options of an aggregated test: a known method, none of a one-kernel test's."""
        if self.aggregate not in AGGREGATIONS:
            raise ParameterError(f"--aggregate must be one of {', '.join(AGGREGATIONS)}; got {shown(self.aggregate)}.")
        if self.split:
            raise ParameterError("--aggregate and --split are different tests; choose one.")
        if self._chooses_a_robust_test:
            raise ParameterError(
                "--method, --blocks and --clip choose a one-kernel robust test; --aggregate with --contamination is robust by itself."
                if self.robust
                else "--method, --blocks and --clip choose a one-kernel robust test (with --contamination); --aggregate does not use them."
            )
        if self.relabel != "auto":
            raise ParameterError(
                "--relabel chooses how a one-kernel permutation test relabels; --aggregate relabels the pooled "
                "sample globally (every kernel must see the same relabellings)."
            )
        bandwidth_values(self.bandwidths)
        if self.robust and self.aggregate != "agg":
            raise ParameterError(
                "--contamination with --aggregate is supported by agg (each kernel's threshold moves by "
                "its own 2R delta); MMD-FUSE's normalisers are not bounded under corruption."
            )


def prepare_test(kernel: str | Sequence[str] | None, estimator: str | None, options: TestOptions, **load: Any) -> Job:
    """:func:`~monk_framework.app.jobs.prepare` for ``monkfw test``: with the ``options``
    checked when they were made, what can be refused without the data (a bad relabelling,
    a robust test that cannot be run) is refused by the test's own validation entrance
    before any file is read. ``kernel`` may be several specs (``-k`` repeated): the
    collection of an aggregated test. The job holds the options for :func:`test`."""
    kernels = [kernel] if isinstance(kernel, str) else list(kernel or [])
    if len(kernels) > 1 and options.aggregate is None:
        raise ParameterError(
            f"-k was given {len(kernels)} times ({', '.join(kernels)}): a test uses one kernel. Several kernels make an "
            "aggregated test: add --aggregate agg (or fuse)."
        )
    job = _prepare(kernels, estimator, options, **load)
    return attrs.evolve(job, test_options=options)


def _prepare(kernels: list[str], estimator: str | None, options: TestOptions, **load: Any) -> Job:
    contamination, split, method, blocks = options.contamination, options.split, options.method, options.blocks
    alpha, n_permutations, alternative, relabel = options.alpha, options.n_permutations, options.alternative, options.relabel
    aggregate, bandwidths, clip, grid = options.aggregate, options.bandwidths, options.clip, options.grid
    robust = options.robust
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
    notes = _collection_notes(kernels, reg, contamination=contamination, bandwidths=bandwidths, load=load)
    if estimator is None:
        estimator = "v-stat" if contamination is not None else DEFAULT_ESTIMATOR
    if not issubclass(reg.estimator_class(parse_spec(estimator)[0]), MMDEstimator):
        raise ParameterError(f"Estimator {estimator!r} estimates mean embeddings, not MMD: a two-sample test needs an MMD estimator.")
    routed = _routed_collection_params(kernels, estimator, reg, load.get("params", ()))
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


def _collection_notes(kernels: Sequence[str], reg: Any, *, contamination: Any, bandwidths: str | None, load: dict[str, Any]) -> list[str]:
    """The ``-k`` of an aggregated test checked (no repeat; each either fixes its sigma, has
    none, or stands for its family), and what the user should be told of the collection."""
    notes: list[str] = []
    twice = first_repeat([reg.get_kernel(name, **given).spec() for name, given in map(parse_spec, kernels)])
    if twice is not None:
        # said in the words typed: expanded, a repeat read "kernels 0 and 10 are the same kernel"
        raise ParameterError(f"-k {kernels[twice[1]]} repeats -k {kernels[twice[0]]}: give each kernel once.")
    if not kernels:
        notes.append(_default_collection_note(load, contamination=contamination, bandwidths=bandwidths))
    families = [spec for spec in kernels if _is_a_family(spec, reg, single=len(kernels) == 1, contamination=contamination, bandwidths=bandwidths)]
    if kernels and not families and bandwidths is not None:
        raise ParameterError("--bandwidths sets the sigma of each -k given without one; every -k here fixes its own or has none: drop --bandwidths.")
    if families and bandwidths is None:
        notes.append(
            f"-k {', '.join(families)} without sigma: {N_BANDWIDTHS} bandwidths each over the pooled distances, as "
            "MMDAgg's grid (fix them with --bandwidths or sigma=)."
        )
    return notes


def _default_collection_note(load: dict[str, Any], *, contamination: Any, bandwidths: str | None) -> str:
    """What the default collection is, refused for strings and, robust, without fixed bandwidths."""
    kind = data_kind(load.get("x"), load.get("dataset"), load.get("y"))
    if kind != "vector":
        raise ParameterError("--aggregate's default kernels (Gaussian and Laplace) are for vectors; for strings give the kernels, e.g. -k ssk:n=3 -k ssk:n=5.")
    if contamination is not None and bandwidths is None:
        raise ParameterError(
            "--aggregate with --contamination needs --bandwidths fixed before seeing the data (e.g. 0.25,0.5,1,2,4): "
            "corrupted points would move a grid read from the pooled distances."
        )
    grid = "at the given --bandwidths" if bandwidths is not None else "at 10 bandwidths each over the pooled distances"
    return f"No kernel given: Gaussian and Laplace (L1) kernels {grid}, as MMDAgg and MMD-FUSE publish them."


def _is_a_family(spec: str, reg: Any, *, single: bool, contamination: Any, bandwidths: str | None) -> bool:
    """Whether ``-k spec`` stands for its family at the collection's bandwidths (a kernel
    with a sigma it does not set); refuses a lone -k that makes no collection."""
    name, given = parse_spec(spec)
    cls = reg.kernel_class(name)
    if "sigma" not in {p.name for p in cls.parameters()}:
        if single:
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
        return False
    if "sigma" in given:
        if single:
            raise ParameterError(
                f"--aggregate over -k {spec} is one kernel: drop --aggregate for a test with it, give sigma by --bandwidths, or give several -k."
            )
        return False
    if contamination is not None and bandwidths is None:
        raise ParameterError(
            f"--aggregate with --contamination needs the bandwidths fixed before seeing the data: give -k {name} "
            "a sigma, or --bandwidths (e.g. 0.25,0.5,1,2,4); corrupted points would move a grid read from the "
            "pooled distances."
        )
    return True


def _routed_collection_params(kernels: Sequence[str], estimator: str, reg: Any, params: Sequence[str]) -> dict[str, Any]:
    """``--param`` of an aggregated test: the one -k's parameters, refused where the
    collection would not use them (never dropped)."""
    name, _ = parse_spec(kernels[0] if kernels else DEFAULT_KERNELS["vector"])
    try:
        routed, _ = route_params(params, reg.kernel_class(name), reg.estimator_class(parse_spec(estimator)[0]))
    except (ParameterError, UnknownNameError):
        if len(kernels) < 2:
            raise
        names = ", ".join(p.split("=")[0] for p in params)
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
    return dict(routed)


def test_call(job: Job) -> tuple[Callable[..., TestResult], dict[str, Any]]:
    """The library call ``monkfw test`` makes for a job of :func:`prepare_test`: the test
    function and its keywords, the samples first, exactly as a Python user writes it
    (``test(job.X, job.Y, **keywords)``). The command line adds only ``progress``,
    ``backend`` and ``max_memory``."""
    o: TestOptions = job.test_options
    if not isinstance(o, TestOptions):
        raise ParameterError("test_call takes a job of prepare_test (its test options are checked there).")
    common: dict[str, Any] = dict(n_permutations=o.n_permutations, alpha=o.alpha, rng=job.seed, return_null=o.return_null)
    assert isinstance(job.estimator, MMDEstimator)
    if o.aggregate is not None:
        return aggregated_test, dict(
            kernels=list(job.aggregated_specs) or None,
            bandwidths=bandwidth_values(o.bandwidths),
            method=o.aggregate,
            estimator=job.estimator,
            contamination=0 if o.contamination is None else contamination_value(o.contamination),
            **common,
        )
    if o.contamination is not None:
        # --blocks is the number of blocks of mom: asking for it chooses mom
        method = "mom" if o.blocks is not None and o.method == "auto" else o.method
        return robust_test, dict(
            kernel=job.kernel,
            contamination=contamination_value(o.contamination),
            method=method,
            estimator=job.estimator if o.estimator_given else None,
            clip=o.clip,
            n_blocks=o.blocks if o.blocks is not None else "auto",
            **common,
        )
    if o.split:
        return split_test, dict(kernel=job.kernel, estimator=job.estimator, grid=job.grid, **common)
    # the estimate monkfw run gives for this seed, next to a within-block test's own T
    return permutation_test, dict(kernel=job.kernel, estimator=job.estimator, alternative=o.alternative, relabel=o.relabel, report_estimate=True, **common)


def test(job: Job, *, progress: Any = None, backend: Any = None, max_memory: Any = None) -> TestResult:
    """``monkfw test``: an aggregated test with ``aggregate``, a robust test with
    ``contamination``, the split test with ``split``, else the permutation test, on the
    job's data with its seed and its checked options (:func:`test_call` says which call,
    with which keywords)."""
    function, keywords = test_call(job)
    return function(job.X, job.Y, progress=progress, backend=backend, max_memory=max_memory, **keywords)
