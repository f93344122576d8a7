"""The results of the two-sample tests: permutation, split, robust and aggregated.

Each is a :class:`~monk_framework.core.results.TestResult` (statistic, p-value, decision,
the null distribution) with what its test adds: the quantile and the estimate of a
split test, the certificate and sensitivity of a robust test, the kernels and their
p-values of an aggregated test.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from monk_framework.core.errors import DataError
from monk_framework.core.results import (
    TestResult,
    array_eq,
    call_text,
    certificate_value,
    count,
    count_text,
    dict_field,
    finite,
    jsonable,
    more_permutations,
    null_field,
    optional_count,
    optional_finite,
    optional_float,
    optional_floats,
    spec_text,
    whole,
)

__all__ = ["AggregatedTestResult", "PermutationTestResult", "RobustTestResult", "SplitTestResult"]


@attrs.frozen(kw_only=True, repr=False)
class PermutationTestResult(TestResult):
    """The outcome of a permutation two-sample test of H₀: P = Q.

    ``statistic`` is T = sign(MMD²)√|MMD²| of the estimator on (X, Y);
    ``null_distribution`` holds the B values on relabellings;
    ``null_quantile`` is q̂ with ``reject == (statistic > null_quantile) == (pvalue <= alpha)``.
    ``relabel`` says how the relabellings were drawn ("global" or "within-blocks"),
    ``n_blocks`` the number of blocks of a within-block test's partition.
    """

    kind: ClassVar[str] = "permutation-test"
    repr_fields: ClassVar[tuple[str, ...]] = (*TestResult.repr_fields, "alternative", "null_distribution")
    title: ClassVar[str] = "Permutation test"

    statistic_mmd2: float = attrs.field(converter=float, validator=finite)
    null_quantile: float | None = attrs.field(converter=optional_float, validator=optional_finite)
    relabel: str = attrs.field(default="global", validator=attrs.validators.in_(("global", "within-blocks")))
    n_blocks: int | None = attrs.field(default=None, validator=optional_count)
    #: a within-block test's estimator MMD estimate with the same seed (``report_estimate=True``)
    estimate: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)

    @property
    def decision(self) -> str:
        """The decision in words."""
        side = {"greater": "exceeds", "less": "is below"}.get(self.alternative)
        against = "" if self.alternative == "greater" else f" ({self.alternative})"
        if self.reject:
            beyond = (
                f"; the statistic {self.statistic:.6g} {side} the null quantile {self.null_quantile:.6g}"
                if side is not None and self.null_quantile is not None
                else ""
            )
            return f"Reject H0 (same distribution) at level {self.alpha:g}{against}: p = {self.pvalue:.4g} <= {self.alpha:g}{beyond}."
        smallest = (2 if self.alternative == "two-sided" else 1) / (self.n_permutations + 1)
        if smallest > self.alpha * (1 + 1e-9):
            return (
                f"Cannot reject at level {self.alpha:g}{against} with {count_text(self.n_permutations, 'permutation')}: the "
                f"smallest attainable p-value is {2 if self.alternative == 'two-sided' else 1}/{self.n_permutations + 1}; "
                f"{more_permutations(self.alpha / (2 if self.alternative == 'two-sided' else 1))}."
            )
        if (too_few := self._too_few_points()) is not None:
            return too_few
        quantile = f", null quantile {self.null_quantile:.6g}" if self.null_quantile is not None else ""
        return (
            f"No evidence of a difference at level {self.alpha:g}{against}: p = {self.pvalue:.4g} > {self.alpha:g} (statistic {self.statistic:.6g}{quantile})."
        )

    def report_table(self) -> tuple[str, list[tuple[str, str]]]:
        test = "permutation"
        if self.relabel == "within-blocks":
            test += f", relabelled within {self.n_blocks} blocks"
        rows = [
            ("test", test),
            ("estimator", spec_text(self.estimator, self.estimator_params)),
            ("kernel", spec_text(self.kernel, self.kernel_params)),
            ("N, M", f"{self.n_x}, {self.n_y}"),
            ("statistic T", f"{self.statistic:.6g}"),
            (
                "null quantile",
                "none (two-sided: two quantiles)"
                if self.alternative == "two-sided"
                else "none (too few permutations)"
                if self.null_quantile is None
                else f"{self.null_quantile:.6g}",
            ),
        ]
        if self.relabel == "within-blocks" and self.estimate is not None:
            # T is the test-time form on the fixed blocks; the estimate is what monkfw run reports
            rows.insert(5, ("MMD estimate (run)", f"{self.estimate:.6g}"))
        rows.append(("p-value", f"{self.pvalue:.4g}"))
        return f"Two-sample test: {self.estimator} with {self.kernel}", self._timed(rows)


@attrs.frozen(kw_only=True, repr=False)
class SplitTestResult(TestResult):
    """The outcome of the three-way split test (paper Algorithm 3).

    ``parts`` lists the indices of X and Y in each stage ("tune", "calibrate", "test");
    ``tuning`` the statistic of every grid point on part 1; ``kernel_params`` the
    hyperparameters chosen there (data-dependent rules resolved on part 1).
    ``statistic`` is T on part 3, ``null_quantile`` q̂ from part 2's relabellings and
    ``excess`` T − q̂ (the paper's Figure 2); ``pvalue`` = (1 + #{T_b ≥ T}) / (1 + B) is
    T's rank among them, so that ``reject == (T > q̂) == (pvalue <= alpha)``.
    """

    kind: ClassVar[str] = "split-test"
    repr_fields: ClassVar[tuple[str, ...]] = (*TestResult.repr_fields, "null_quantile", "null_distribution")
    title: ClassVar[str] = "Split test (the paper's Algorithm 3)"

    grid: dict[str, list[Any]] = dict_field()
    tuning: list[dict[str, Any]] = attrs.field(converter=jsonable, validator=attrs.validators.instance_of(list))
    null_quantile: float | None = attrs.field(converter=optional_float, validator=optional_finite)
    excess: float | None = attrs.field(converter=optional_float, validator=optional_finite)
    parts: dict[str, dict[str, list[int]]] = dict_field()

    @property
    def decision(self) -> str:
        chosen = call_text(self.kernel, self.kernel_params)
        if self.null_quantile is None:
            return f"Cannot reject at level {self.alpha:g} with {count_text(self.n_permutations, 'permutation')} ({more_permutations(self.alpha)})."
        verdict = "Reject H0 (same distribution)" if self.reject else "No evidence of a difference"
        return (
            f"{verdict} at level {self.alpha:g}: T - q = {self.excess:.6g} (T = {self.statistic:.6g} on part 3, "
            f"q = {self.null_quantile:.6g} from part 2; kernel {chosen} chosen on part 1)."
        )

    def report_table(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [
            ("test", "three-way split (Algorithm 3)"),
            ("estimator", spec_text(self.estimator, self.estimator_params)),
            ("kernel", spec_text(self.kernel, self.kernel_params)),
            ("N, M", f"{self.n_x}, {self.n_y}"),
            ("statistic T", f"{self.statistic:.6g}"),
            ("null quantile", "none (too few permutations)" if self.null_quantile is None else f"{self.null_quantile:.6g}"),
            ("T - q", "n/a" if self.excess is None else f"{self.excess:.6g}"),
        ]
        for item in self.tuning:
            rows.append((f"part 1: {item['params'] or 'no grid'}", f"T = {item['statistic']:.6g}"))
        return f"Two-sample test: {self.estimator} with {self.kernel}", self._timed(rows)


@attrs.frozen(kw_only=True, repr=False)
class RobustTestResult(TestResult):
    """The outcome of a robust two-sample test of H₀: P = Q under contamination.

    ``statistic`` and ``pvalue`` follow scipy's convention (the result unpacks as
    ``statistic, pvalue = result``): for "dc" the V-statistic MMD and the permutation
    p-value of MMD − 2rΔ; for "clip" the same with the clipped kernel and its margin
    2s(r) in place of 2rΔ (``threshold`` = q̂ + 2s(r)); for "mom" the median block p-value p_(k) and
    P(Binomial(Q, p_(k)) ≥ k − r). ``pvalue`` is valid when at most ``contamination``
    points are corrupted, and ``reject == (pvalue <= alpha)``. ``certificate`` c is the
    largest budget under which this test still rejects (None: it does not reject): the
    rejection stays valid if up to c points were corrupted, and rerunning with the same
    ``n_blocks`` (reported for "mom", also when it was chosen by "auto") and any
    ``contamination`` r ≤ c rejects.
    """

    kind: ClassVar[str] = "robust-test"
    repr_fields: ClassVar[tuple[str, ...]] = (*TestResult.repr_fields, "method", "contamination", "certificate")
    title: ClassVar[str] = "Robust two-sample test"

    method: str = attrs.field(validator=attrs.validators.in_(("dc", "clip", "mom")))
    contamination: int = attrs.field(converter=whole, validator=count)
    certificate: int | None = attrs.field(default=None, converter=certificate_value, validator=optional_count)
    #: "dc": the sensitivity Δ, the permutation quantile q̂ and the threshold q̂ + 2rΔ
    sensitivity: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    null_quantile: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    threshold: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    #: "clip": the radius c of the clipped features, and how far r corrupted points could
    #: have moved it (0 for a radius given by the caller)
    clip_radius: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    clip_slack: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    #: "dc" with the median heuristic: the bandwidths the uncorrupted data's (snapped) median
    #: heuristic could give; the test rejects only when it rejects at each of them
    bandwidths: list[float] | None = attrs.field(default=None, converter=optional_floats)
    #: "mom": the number of blocks Q, the order k of the median and every block's p-value
    n_blocks: int | None = attrs.field(default=None, validator=optional_count)
    order: int | None = attrs.field(default=None, validator=optional_count)
    block_pvalues: np.ndarray | None = null_field()

    def _kernel_text(self) -> str:
        if self.bandwidths is None:
            return super()._kernel_text()
        count = len(self.bandwidths)
        return (
            f"{call_text(self.kernel, self.kernel_params)} (sigma by the median heuristic made robust; "
            f"{'the one candidate' if count == 1 else f'rejects only at each of {count} candidates'})"
        )

    def summary_rows(self) -> list[tuple[str, str]]:
        return [
            *super().summary_rows(),
            ("method", f"{self.method}, valid with up to {self.contamination} corrupted point{'s' if self.contamination != 1 else ''}"),
            ("certificate", "not rejected" if self.certificate is None else f"valid with up to {count_text(self.certificate, 'corrupted point')}"),
        ]

    @property
    def decision(self) -> str:
        """The decision in words, with the certificate."""
        r = self.contamination
        guard = f"with up to {r} corrupted point{'s' if r != 1 else ''}" if r else "without corruption"
        if self.reject:
            survives = f"the rejection stays valid if up to {self.certificate} point{'s were' if self.certificate != 1 else ' was'} corrupted"
            return f"Reject H0 (same distribution) at level {self.alpha:g}, valid {guard} ({self.method}: p = {self.pvalue:.4g}); {survives}."
        if self.method != "mom" and (too_few := self._too_few_points()) is not None:
            return too_few
        if self.certificate is not None:
            return (
                f"No evidence of a difference at level {self.alpha:g} {guard} ({self.method}: p = "
                f"{self.pvalue:.4g}); the test would reject with at most {self.certificate} corrupted "
                f"point{'s' if self.certificate != 1 else ''}."
            )
        return f"No evidence of a difference at level {self.alpha:g} ({self.method}: p = {self.pvalue:.4g}); the test does not reject even without corruption."

    def report_table(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [
            ("method", {"dc": "dcMMD (bounded kernel)", "clip": "dcMMD on clipped features", "mom": "median of block p-values"}[self.method]),
            ("estimator", self.estimator),
            ("kernel", spec_text(self.kernel, self.kernel_params)),
            ("N, M", f"{self.n_x}, {self.n_y}"),
            ("contamination R", str(self.contamination)),
        ]
        if self.method == "clip":
            slack = f" (moves at most {self.clip_slack:.4g} under R corrupted points)" if self.clip_slack else " (given)"
            rows.append(("clip radius c", f"{self.clip_radius:.6g}{slack}"))
        if self.method in ("dc", "clip"):
            rows += [
                ("MMD (V-statistic)", f"{self.statistic:.6g}"),
                ("sensitivity", f"{self.sensitivity:.6g} per corrupted point"),
                ("null quantile", "none (too few permutations)" if self.null_quantile is None else f"{self.null_quantile:.6g}"),
                ("threshold q + margin" if self.method == "clip" else "threshold q + 2R delta", "n/a" if self.threshold is None else f"{self.threshold:.6g}"),
            ]
        else:
            rows += [("blocks Q, order k", f"{self.n_blocks}, {self.order}"), ("median block p-value", f"{self.statistic:.4g}")]
        rows += [
            ("p-value", f"{self.pvalue:.4g}"),
            ("certificate", "does not reject" if self.certificate is None else count_text(self.certificate, "corrupted point")),
        ]
        return f"Robust two-sample test ({self.method}) with {self.kernel}", self._timed(rows)


def _text_list(value: Any) -> list[str]:
    return [str(v) for v in value]


def _float_list(value: Any) -> list[float | None]:
    return [None if v is None else float(v) for v in value]


def _flag_array(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=bool).reshape(-1)


@attrs.frozen(kw_only=True, repr=False)
class AggregatedTestResult(TestResult):
    """The outcome of an aggregated two-sample test over a collection of kernels.

    ``method`` "agg" (MMDAgg): ``statistic`` is S = max_l log(L·w_l / p_l), p_l kernel
    l's permutation p-value among the B + 1 relabellings (the identity included), and
    ``pvalue`` the permutation p-value of S: the smallest α at which the test rejects
    (up to the 1/(B + 1) grid). Kernel l rejects when log(L·w_l / p_l) exceeds the
    null quantile q̂ of S, i.e. when p_l < L·w_l·exp(−q̂) (``kernel_levels``), and the
    test rejects exactly when one kernel does. ``method`` "fuse" (MMD-FUSE):
    ``statistic`` is its authors' log Σ_l w_l exp(λ·MMD²_l / N_l) (λ = n(n − 1),
    n = min(N, M); N_l in ``kernel_scales``) and
    ``pvalue`` its permutation p-value; it makes no per-kernel decision
    (``kernel_rejects`` is None).

    ``kernel_specs``, ``bandwidths`` (σ of each kernel, None for a kernel without
    one), ``weights``, ``kernel_statistics`` (each kernel's statistic on the samples as
    given) and ``kernel_pvalues`` (each kernel's own permutation p-value) are in the
    order of the collection. With ``contamination`` r > 0 ("agg" over bounded kernels)
    ``kernel_pvalues`` are each kernel's dcMMD p-value at budget r, kernel l rejects when
    its p-value is at most α·w_l (``kernel_levels``), ``statistic`` is max_l log(w_l / p_l)
    and ``pvalue`` = min(1, min_l p_l / w_l), valid under any r corrupted points (there is
    no null distribution to return); ``certificate`` is the largest r under which it still
    rejects (None: it does not reject).
    """

    kind: ClassVar[str] = "aggregated-test"
    repr_fields: ClassVar[tuple[str, ...]] = (
        "statistic",
        "pvalue",
        "reject",
        "alpha",
        "method",
        "kernel_specs",
        "kernel_pvalues",
        "estimator",
        "n_x",
        "n_y",
        "n_permutations",
    )
    title: ClassVar[str] = "Aggregated two-sample test"

    method: str = attrs.field(validator=attrs.validators.in_(("agg", "fuse")))
    kernel_specs: list[str] = attrs.field(converter=_text_list)
    bandwidths: list[float | None] = attrs.field(converter=_float_list)
    weights: np.ndarray = null_field()
    kernel_statistics: np.ndarray = null_field()
    kernel_pvalues: np.ndarray = null_field()
    kernel_rejects: np.ndarray | None = attrs.field(default=None, converter=_flag_array, eq=attrs.cmp_using(eq=array_eq))
    kernel_levels: np.ndarray | None = null_field()
    null_quantile: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    #: "fuse": each kernel's permutation-invariant scale N_l and the inverse temperature λ
    kernel_scales: np.ndarray | None = null_field()
    temperature: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    contamination: int = attrs.field(default=0, converter=whole, validator=count)
    certificate: int | None = attrs.field(default=None, converter=certificate_value, validator=optional_count)
    #: kernel l's sensitivity Δ_l (robust aggregation)
    sensitivities: np.ndarray | None = null_field()

    def __attrs_post_init__(self) -> None:
        sizes = {len(self.kernel_specs), len(self.bandwidths), len(self.weights), len(self.kernel_statistics), len(self.kernel_pvalues)}
        if len(sizes) != 1:
            raise DataError(f"An aggregated test result needs one entry per kernel in each list; got lengths {sorted(sizes)}.")

    @property
    def rejecting_kernels(self) -> list[str]:
        """The specs of the kernels that rejected ("agg"); empty for "fuse"."""
        if self.kernel_rejects is None:
            return []
        return [spec for spec, flag in zip(self.kernel_specs, self.kernel_rejects) if flag]

    @property
    def collection(self) -> str:
        """The collection in words: "rbf and laplace at 10 bandwidths each"."""
        groups: dict[str, list[str]] = {}
        names = [spec.split(":")[0] for spec in self.kernel_specs]
        for spec, name, sigma in zip(self.kernel_specs, names, self.bandwidths):
            # a family by its name; a kernel without a bandwidth by its name when no other has it
            groups.setdefault(name if sigma is not None or names.count(name) == 1 else spec, []).append(spec)
        parts, sizes = [], set()
        for name, specs in groups.items():
            if len(specs) > 1:
                parts.append(name)
                sizes.add(len(specs))
            else:
                parts.append(name if self.bandwidths[self.kernel_specs.index(specs[0])] is None else specs[0])
                sizes.add(0)
        if len(sizes) == 1 and (size := sizes.pop()) > 0:
            joined = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
            return f"{joined} at {size} bandwidths{' each' if len(parts) > 1 else ''}"
        described = [f"{part} at {len(specs)} bandwidths" if len(specs) > 1 else part for part, specs in zip(parts, groups.values())]
        return described[0] if len(described) == 1 else f"{', '.join(described[:-1])} and {described[-1]}"

    @property
    def most_significant(self) -> str:
        """The spec of the kernel with the smallest p-value relative to its weight (for
        MMDAgg, the kernel that drives the decision; the first of equals)."""
        return self.kernel_specs[int(np.argmin(self.kernel_pvalues / self.weights))]

    def _kernel_text(self) -> str:
        return f"{self.collection} ({self._over()})"

    def _over(self) -> str:
        count = len(self.kernel_specs)
        return f"{count} kernel{'s' if count != 1 else ''}"

    def summary_rows(self) -> list[tuple[str, str]]:
        name = "MMDAgg" if self.method == "agg" else "MMD-FUSE"
        best = int(np.argmin(self.kernel_pvalues / self.weights))
        statistic = "MMD" if self.contamination else "signed MMD"
        spec, sigma = self.kernel_specs[best], self.bandwidths[best]
        if sigma is not None:  # σ to 4 digits here; to_dict() has every digit
            family, _, params = spec.partition(":")
            spec = f"{family}:{','.join(f'sigma={sigma:.4g}' if p.startswith('sigma=') else p for p in params.split(','))}"
        rows = [("most significant", f"{spec}: {statistic} {self.kernel_statistics[best]:.4g}, its own p = {self.kernel_pvalues[best]:.4g}")]
        if self.method == "fuse":
            rows.append(("FUSE statistic", f"{self.statistic:.6g}"))
        rows += [
            ("p-value", f"{self.pvalue:.4g} ({name}, for the whole collection; {count_text(self.n_permutations, 'relabelling')})"),
            ("decision", self.decision),
        ]
        if self.contamination:
            rows.append(("certificate", "not rejected" if self.certificate is None else f"valid with up to {count_text(self.certificate, 'corrupted point')}"))
        return rows

    @property
    def decision(self) -> str:
        """The decision in words."""
        name = "MMDAgg" if self.method == "agg" else "MMD-FUSE"
        r = self.contamination
        guard = f", valid with up to {r} corrupted point{'s' if r != 1 else ''}" if r else ""
        if self.reject:
            which = ""
            if self.method == "agg":
                which = f"; rejected by {len(self.rejecting_kernels)} of {len(self.kernel_specs)} kernels"
            cert = ""
            if self.contamination:
                cert = f"; the rejection stays valid if up to {self.certificate} point{'s were' if self.certificate != 1 else ' was'} corrupted"
            return f"Reject H0 (same distribution) at level {self.alpha:g}{guard} ({name} over {self._over()}: p = {self.pvalue:.4g}){which}{cert}."
        if self.contamination and float(np.max(self.weights)) * self.alpha * (self.n_permutations + 1) < 1:
            return (
                f"Cannot reject at level {self.alpha:g}{guard} with {count_text(self.n_permutations, 'permutation')}: a kernel "
                f"rejects when its p-value is at most alpha·w_l = {self.alpha * float(np.max(self.weights)):.3g}, "
                f"below the smallest attainable 1/{self.n_permutations + 1}; "
                f"{more_permutations(self.alpha * float(np.max(self.weights)))}."
            )
        if self.null_quantile is None and not self.contamination:
            return (
                f"Cannot reject at level {self.alpha:g} with {count_text(self.n_permutations, 'permutation')}: the smallest "
                f"attainable p-value is 1/{self.n_permutations + 1}; {more_permutations(self.alpha)}."
            )
        # with a budget, a kernel rejects at its share α·w_l
        share = self.alpha * float(np.max(self.weights)) if self.contamination else None
        if (too_few := self._too_few_points(share)) is not None:
            return too_few
        return f"No evidence of a difference at level {self.alpha:g}{guard} ({name} over {self._over()}: p = {self.pvalue:.4g} > {self.alpha:g})."

    def report_table(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [("estimator", self.estimator), ("N, M", f"{self.n_x}, {self.n_y}")]
        for ell, spec in enumerate(self.kernel_specs):
            mark = " *" if self.kernel_rejects is not None and self.kernel_rejects[ell] else ""
            sigma = self.bandwidths[ell]
            if sigma is not None:  # the table shows σ to 4 digits; --json has every digit
                name, _, params = spec.partition(":")
                rounded = [f"sigma={sigma:.4g}" if p.startswith("sigma=") else p for p in params.split(",")]
                spec = f"{name}:{','.join(rounded)}"
            rows.append((spec, f"statistic {self.kernel_statistics[ell]:.4g}, p = {self.kernel_pvalues[ell]:.4g}{mark}"))
        rows += [("statistic", f"{self.statistic:.6g}"), ("p-value", f"{self.pvalue:.4g}")]
        if self.method == "agg" and self.reject:
            rows.append(("rejected by (*)", f"{len(self.rejecting_kernels)} of {len(self.kernel_specs)} kernels"))
        if self.contamination:
            rows.append(("certificate", "does not reject" if self.certificate is None else count_text(self.certificate, "corrupted point")))
        name = "MMDAgg" if self.method == "agg" else "MMD-FUSE"
        r = self.contamination
        robust = f", robust to {count_text(r, 'corrupted point')}" if r else ""
        count = len(self.kernel_specs)
        return f"Aggregated two-sample test ({name}{robust}) over {count_text(count, 'kernel')}", self._timed(rows)
