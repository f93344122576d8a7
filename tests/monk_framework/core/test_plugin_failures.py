"""Plugins that misbehave: what they write, raise, return or exit is named and contained.

Every kernel hook runs on read-only views of the data, every estimator answer is checked
before it becomes a number, and an error or a ``sys.exit`` inside a plugin becomes a
:class:`PluginFailure` naming the plugin and the method.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import types
from decimal import Decimal
from fractions import Fraction
from typing import ClassVar

import attrs
import numpy as np
import pytest

from monk_framework import EmbeddingEstimator, EmbeddingWeights, Estimate, Kernel, MMDEstimator, get_registry, hookimpl
from monk_framework.core.errors import KernelContractError, MonkError, PluginFailure
from monk_framework.two_sample import permutation_test, robust_test

REG = get_registry()


@attrs.frozen(kw_only=True)
class Scribbler(Kernel):
    """The linear kernel, computed after writing into its inputs (a plugin bug)."""

    name: ClassVar[str] = "scribbler"

    def compute_gram(self, X, Y):
        X[:] = 0.0
        return X @ Y.T

    def compute_diag(self, X):
        return np.einsum("ij,ij->i", X, X)


@attrs.frozen(kw_only=True)
class Quitter(Kernel):
    """A kernel whose code ends the process."""

    name: ClassVar[str] = "quitter"

    def compute_gram(self, X, Y):
        sys.exit(3)

    def compute_diag(self, X):
        return np.ones(len(X))


@attrs.frozen(kw_only=True)
class Crasher(Kernel):
    name: ClassVar[str] = "crasher"

    def compute_gram(self, X, Y):
        raise KeyError("bandwidth")

    def compute_diag(self, X):
        return np.ones(len(X))


@attrs.frozen(kw_only=True)
class Answer(MMDEstimator):
    """An estimator that returns the (mmd2, mmd) it is built with, after an optional scribble."""

    name: ClassVar[str] = "answer"
    mmd2: float = 0.25
    mmd: float = 0.5
    scribble: bool = False

    def compute_estimate(self, kernel, X, Y, rng, resources):
        if self.scribble:
            X[0] = 99.0
        return Estimate(mmd2=self.mmd2, mmd=self.mmd)


@attrs.frozen(kw_only=True)
class BadNull(MMDEstimator):
    """An estimator whose relabelled statistics have the wrong shape or are NaN."""

    name: ClassVar[str] = "bad-null"
    kind: str = "shape"

    def compute_estimate(self, kernel, X, Y, rng, resources):
        return Estimate(mmd2=0.0, mmd=0.0)

    def permuted_statistics(self, pool, perms, rngs):
        if self.kind == "complex":
            return np.ones(len(perms)) * (0.5 + 1j)  # numpy would keep 0.5, with a warning
        return np.zeros(len(perms) + 1) if self.kind == "shape" else np.full(len(perms), np.nan)


def _data():
    gen = np.random.default_rng(0)
    return gen.normal(size=(12, 2)), gen.normal(size=(10, 2))


def test_a_kernel_that_writes_into_its_inputs_is_named_and_the_callers_data_are_unchanged():
    X, Y = _data()
    before = X.copy(), Y.copy()
    for run in (
        lambda: Scribbler().gram(X, Y),
        lambda: REG.get_estimator("v-stat").estimate(Scribbler(), X, Y),
        lambda: permutation_test(X, Y, kernel=Scribbler(), estimator="u-stat", n_permutations=9),
    ):
        with pytest.raises(
            PluginFailure,
            match=r"kernel 'scribbler' \(.*Scribbler\): compute_gram failed: ValueError: "
            r".*read-only.*copy before writing",
        ):
            run()
    np.testing.assert_array_equal(X, before[0])
    np.testing.assert_array_equal(Y, before[1])
    assert X.flags.writeable and Y.flags.writeable  # the caller's arrays keep their flags


def test_an_estimator_that_writes_into_its_inputs_is_named():
    X, Y = _data()
    before = X.copy()
    with pytest.raises(PluginFailure, match=r"estimator 'answer' .*compute_estimate failed: ValueError: .*read-only"):
        Answer(scribble=True).estimate(REG.get_kernel("linear"), X, Y)
    np.testing.assert_array_equal(X, before)


def test_a_plugin_that_calls_sys_exit_is_contained_and_named():
    X, Y = _data()
    with pytest.raises(PluginFailure, match=r"kernel 'quitter' .*compute_gram tried to end the process \(sys.exit\(3\)\)"):
        REG.get_estimator("u-stat").estimate(Quitter(), X, Y)


def test_a_plugin_error_names_the_plugin_the_method_and_the_error():
    X, Y = _data()
    with pytest.raises(PluginFailure, match=r"kernel 'crasher' .*compute_gram failed: KeyError: 'bandwidth'") as err:
        REG.get_estimator("monk-bcd", n_blocks=3).estimate(Crasher(), X, Y)
    assert isinstance(err.value.__cause__, KeyError)  # the original, for a traceback


@pytest.mark.parametrize("stop", [ValueError("enough"), SystemExit(3)], ids=["exception", "sys.exit"])
def test_what_the_callers_progress_raises_reaches_the_caller_not_blamed_on_the_plugin(stop):
    # a progress callback that stops a long estimate on purpose was reported as
    # "estimator 'monk-bcd' ...: compute_estimate failed" (or "tried to end the process")
    def progress(done, total, what):
        raise stop

    gen = np.random.default_rng(0)
    X, Y = gen.normal(size=(40, 2)), gen.normal(size=(40, 2))
    with pytest.raises(type(stop)) as info:
        REG.get_estimator("monk-bcd", n_blocks=5).estimate(REG.get_kernel("rbf", sigma=1.0), X, Y, rng=0, progress=progress)
    assert info.value is stop


@attrs.frozen(kw_only=True)
class Interrupted(Kernel):
    """A kernel interrupted by the program's own signal handler while it computes."""

    name: ClassVar[str] = "interrupted"

    def compute_gram(self, X, Y):
        os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs before kill returns
        return X @ Y.T

    def compute_diag(self, X):
        return np.einsum("ij,ij->i", X, X)


@pytest.fixture
def timeout_handler():
    def handler(signum, frame):
        raise TimeoutError("the program's own time limit")

    previous = signal.signal(signal.SIGUSR1, handler)
    yield
    signal.signal(signal.SIGUSR1, previous)


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")
def test_what_the_programs_signal_handler_raises_reaches_it_not_blamed_on_a_plugin(timeout_handler, monkeypatch):
    # the signal.alarm timeout pattern: a TimeoutError raised by the handler inside a
    # kernel became "kernel ...: compute_gram failed: TimeoutError", and one raised during a
    # plugin's import (or numba's) was swallowed as a plugin problem: the work went on
    X, Y = _data()
    with pytest.raises(TimeoutError, match="the program's own time limit"):
        Interrupted().gram(X, Y)
    # during a plugin's hook, while the registry loads it
    from monk_framework.core.registry import Registry

    class Plugin:
        @staticmethod
        @hookimpl
        def monk_kernels():
            os.kill(os.getpid(), signal.SIGUSR1)
            return []

    with pytest.raises(TimeoutError):
        Registry().register(Plugin, name="interrupted_plugin")
    # an ordinary error of the plugin is still the plugin's
    with pytest.raises(PluginFailure, match=r"compute_gram failed: KeyError"):
        Crasher().gram(X, Y)


@pytest.mark.parametrize(
    ("mmd2", "mmd", "message"),
    [
        (0.25, -0.5, r"MMD = -0.5 with MMD\^2 = 0.25; MMD is a norm"),
        (-0.25, -0.3, r"MMD = -0.3 with MMD\^2 = -0.25"),
        (float("nan"), 0.5, r"mmd2=nan, mmd=0.5; both must be finite"),
        (0.25, float("inf"), r"mmd=inf; both must be finite"),
        # a positive MMD that is not the root of MMD^2 was passed on: the table, a test's
        # statistic and the results file then disagreed about the one number
        (0.25, 0.9, r"MMD = 0.9 with MMD\^2 = 0.25, whose root is 0.5; MMD must be the root of MMD\^2"),
        (-0.25, 0.3, r"MMD = 0.3 with MMD\^2 = -0.25, whose root is 0.5"),
        (True, True, r"mmd2=True, mmd=True; both must be finite numbers"),  # a bool is no MMD
        # an integer beyond float64 gave numpy's TypeError ("ufunc 'isfinite' not supported")
        (10**400, 0.5, r"mmd2=an int of about 10\^400 \(beyond float64\), mmd=0.5; both must be finite numbers"),
        (np.array([0.25]), 0.5, r"mmd2=array\(\[0.25\]\), mmd=0.5; both must be finite numbers"),
    ],
)
def test_an_estimators_impossible_answer_is_refused_by_name(mmd2, mmd, message):
    X, Y = _data()
    with pytest.raises(PluginFailure, match=r"estimator 'answer' .*" + message):
        Answer(mmd2=mmd2, mmd=mmd).estimate(REG.get_kernel("linear"), X, Y)


def test_a_negative_mmd_passes_as_the_signed_root_of_a_negative_mmd2():
    X, Y = _data()
    assert Answer(mmd2=-0.25, mmd=-0.5).estimate(REG.get_kernel("linear"), X, Y).mmd == -0.5
    assert Answer(mmd2=-0.25, mmd=0.0).estimate(REG.get_kernel("linear"), X, Y).mmd == 0.0  # clipped
    assert Answer(mmd2=-0.25, mmd=0.5).estimate(REG.get_kernel("linear"), X, Y).mmd == 0.5  # the root of |MMD^2|
    # a root taken in float32 is the root, to float32's rounding
    root32 = Answer(mmd2=np.float32(0.3), mmd=np.sqrt(np.float32(0.3))).estimate(REG.get_kernel("linear"), X, Y)
    assert root32.mmd == pytest.approx(np.sqrt(0.3), rel=1e-7)
    # exact numbers are numbers: a Fraction or a Decimal is read as its float
    exact = Answer(mmd2=Fraction(1, 4), mmd=Decimal("0.5")).estimate(REG.get_kernel("linear"), X, Y)
    assert (exact.mmd2, exact.mmd) == (0.25, 0.5) and type(exact.mmd2) is float
    signed = REG.get_estimator("u-stat", root="signed").estimate(REG.get_kernel("rbf", sigma=1.0), X, X[::-1] + 0.01)
    assert signed.mmd == pytest.approx(-np.sqrt(-signed.mmd2)) if signed.mmd2 < 0 else signed.mmd >= 0


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("shape", r"returned shape \(\d+,\) for \d+ relabellings"),
        ("nan", r"returned nan for relabelling 0"),
        ("complex", r"returned array\(\[0.5\+1.j.*; it must return one real MMD\^2"),
    ],
)
def test_a_tests_relabelled_statistics_are_checked_whatever_estimator_gives_them(kind, message):
    X, Y = _data()
    with pytest.raises(PluginFailure, match=r"estimator 'bad-null' .*permuted_statistics " + message):
        permutation_test(X, Y, kernel=REG.get_kernel("linear"), estimator=BadNull(kind=kind), n_permutations=9)


@attrs.frozen(kw_only=True)
class _Registered(Scribbler):
    summary: ClassVar[str] = "The linear kernel after writing into its inputs (for the test)."


@contextlib.contextmanager
def _registered(hook: str, cls: type):
    """A throwaway plugin providing ``cls`` through ``hook``, registered for the block."""
    plugin = types.ModuleType(f"throwaway-{cls.name}")
    setattr(plugin, hook, hookimpl(lambda: [cls]))
    REG.register(plugin)
    try:
        yield
    finally:
        REG.unregister(plugin)


@pytest.fixture
def scribbler_plugin():
    with _registered("monk_kernels", _Registered):
        yield


def test_the_cli_shows_a_plugin_failure_as_one_line_naming_the_plugin(scribbler_plugin):
    from typer.testing import CliRunner

    from monk_framework.app.cli import app

    result = CliRunner().invoke(app, ["run", "-k", "scribbler", "-e", "v-stat", "-d", "gauss", "--data-param", "n=20"])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: kernel 'scribbler'") and "read-only" in lines[0]
    assert "internal error" not in result.stderr


@attrs.frozen(kw_only=True)
class Chatty(MMDEstimator):
    """The V-statistic, printing as it goes; its diagnostic rows end the process."""

    name: ClassVar[str] = "chatty"
    summary: ClassVar[str] = "A V-statistic that prints (for the test)."
    leave: bool = False

    def compute_estimate(self, kernel, X, Y, rng, resources):
        print("computing ... {not json")
        v = kernel.gram(X).mean() + kernel.gram(Y).mean() - 2 * kernel.gram(X, Y).mean()
        return Estimate(mmd2=v, mmd=max(v, 0.0) ** 0.5)

    def diagnostic_rows(self, diagnostics, timings):
        if self.leave:
            sys.exit(5)
        return []


@pytest.fixture
def chatty_plugin():
    with _registered("monk_estimators", Chatty):
        yield


def test_what_a_plugin_prints_goes_to_stderr_and_the_json_stays_whole(chatty_plugin):
    import json

    from typer.testing import CliRunner

    from monk_framework.app.cli import app

    for command in (["run"], ["test", "-B", "19"]):
        result = CliRunner().invoke(app, [*command, "-k", "rbf", "-e", "chatty", "-d", "gauss", "--data-param", "n=20", "--json"])
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["estimator"] == "chatty"
        assert "computing ... {not json" in result.stderr


def test_a_sys_exit_in_a_plugins_report_is_one_line_naming_it_not_a_silent_end(chatty_plugin):
    from typer.testing import CliRunner

    from monk_framework.app.cli import app

    result = CliRunner().invoke(app, ["run", "-k", "rbf", "-e", "chatty", "-p", "leave=true", "-d", "gauss", "--data-param", "n=20"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: estimator 'chatty' (tests.monk_framework.core.test_plugin_failures.Chatty): diagnostic_rows tried to end "
        "the process (sys.exit(5)); a plugin must raise an exception instead."
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [("yes", r"shift_free_mmd\(\) returned 'yes'; it must return True or False"), (ZeroDivisionError, r"shift_free_mmd failed: ZeroDivisionError")],
)
def test_a_shift_free_declaration_that_is_not_a_bool_or_raises_is_named(answer, message):
    from monk_framework import MonkError, estimate

    class Declares(REG.get_kernel("linear").__class__):
        def shift_free_mmd(self):
            if answer is ZeroDivisionError:
                raise ZeroDivisionError("oops")
            return answer

    gen = np.random.default_rng(0)
    with pytest.raises(MonkError, match=message):
        estimate(gen.normal(size=(10, 2)), gen.normal(size=(10, 2)), kernel=Declares(), estimator="v-stat")


@attrs.frozen(kw_only=True)
class Complexer(Kernel):
    """Complex values, which numpy would cast to real with only a warning."""

    name: ClassVar[str] = "complexer"

    def compute_gram(self, X, Y):
        return X @ Y.T + 1j

    def compute_diag(self, X):
        return np.einsum("ij,ij->i", X, X)


@attrs.frozen(kw_only=True)
class BadFit(Kernel):
    """A kernel whose fit returns something else than a fitted kernel."""

    name: ClassVar[str] = "bad-fit"
    answer: str = "string"

    def fit(self, X, Y=None):
        if self.answer == "another-kernel":
            return REG.get_kernel("linear")  # would be reported and saved as bad-fit with linear's parameters
        return "fitted!" if self.answer == "string" else BadFit(answer="unfitted")

    @property
    def is_fitted(self):
        return self.answer != "unfitted"

    def compute_gram(self, X, Y):
        return X @ Y.T

    def compute_diag(self, X):
        return np.einsum("ij,ij->i", X, X)


def test_complex_kernel_values_are_refused_not_cast_to_real():
    X, Y = _data()
    with pytest.raises(KernelContractError, match=r"kernel 'complexer' .*compute_gram returned complex values"):
        REG.get_estimator("v-stat").estimate(Complexer(), X, Y)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("string", r"fit returned str 'fitted!'; it must return a Kernel"),
        ("other", r"fit returned a kernel that is not fitted"),
        (
            "another-kernel",
            r"fit returned kernel 'linear' \(monk_plugins.vector_kernels."
            r"LinearKernel\); it must return its own class",
        ),
    ],
)
def test_a_fit_that_returns_no_fitted_kernel_is_named_on_every_path(answer, message):
    X, Y = _data()
    calls = [
        lambda: REG.get_estimator("u-stat").estimate(BadFit(answer=answer), X, Y),
        lambda: REG.get_estimator("mean").embed(BadFit(answer=answer), X),
        lambda: permutation_test(X, Y, kernel=BadFit(answer=answer), estimator=REG.get_estimator("u-stat"), n_permutations=19, rng=0),
    ]
    for call in calls:
        with pytest.raises(KernelContractError, match=r"kernel 'bad-fit' .*" + message):
            call()


@attrs.frozen(kw_only=True)
class Diagnosing(MMDEstimator):
    """The V-statistic with a diagnostic that no results file can hold."""

    name: ClassVar[str] = "diagnosing"
    what: str = "function"

    def compute_estimate(self, kernel, X, Y, rng, resources):
        v = kernel.gram(X).mean() + kernel.gram(Y).mean() - 2 * kernel.gram(X, Y).mean()
        bad = {"function": lambda: 1, "set": {1, 2}, "nan": float("nan")}[self.what]
        return Estimate(mmd2=v, mmd=max(v, 0.0) ** 0.5, diagnostics={"fine": np.arange(3), "bad": bad})


@pytest.mark.parametrize(("what", "message"), [("function", "not JSON serializable"), ("set", "not JSON serializable"), ("nan", "Out of range float values")])
def test_diagnostics_a_results_file_cannot_hold_are_refused_naming_the_key(what, message):
    X, Y = _data()
    with pytest.raises(PluginFailure, match=rf"estimator 'diagnosing' .*diagnostics\['bad'\] = .*{message}"):
        Diagnosing(what=what).estimate(REG.get_kernel("linear"), X, Y)


@attrs.frozen(kw_only=True)
class Halving(EmbeddingEstimator):
    """Declares weights that sum to 1 and returns half the mean's."""

    name: ClassVar[str] = "halving"
    affine_weights: ClassVar[bool] = True
    scale: float = 0.5

    def compute_embedding(self, kernel, X, rng, resources):
        return EmbeddingWeights(weights=np.full(len(X), self.scale / len(X)))


def test_weights_declared_affine_that_do_not_sum_to_one_are_refused():
    # they are chosen on the sample moved to its median: only weights summing to 1 are
    # the embedding of the sample as given
    X, _ = _data()
    with pytest.raises(PluginFailure, match=r"estimator 'halving' .*affine_weights.*sum to 0\.5"):
        Halving().embed(REG.get_kernel("linear"), X)
    assert Halving(scale=1.0).embed(REG.get_kernel("linear"), X).weights.sum() == pytest.approx(1.0)


@attrs.frozen(kw_only=True)
class OddWeights(EmbeddingEstimator):
    """Weights of the wrong shape, non-finite, or not numbers."""

    name: ClassVar[str] = "odd-weights"
    kind: str = "short"

    def compute_embedding(self, kernel, X, rng, resources):
        n = len(X)
        weights = {
            "short": np.full(n - 1, 1 / (n - 1)),
            "column": np.full((n, 1), 1 / n),
            "nan": np.r_[np.nan, np.full(n - 1, 1 / n)],
            "text": np.array(["a"] * n),
            "shrunk": np.full(n, 0.5 / n),
            "exact": [Fraction(1, n)] * (n - 1) + [Decimal(1) / Decimal(n)],
            "kept": _KEPT_WEIGHTS.setdefault(n, np.full(n, 1 / n)),
        }[self.kind]
        return EmbeddingWeights(weights=weights)


_KEPT_WEIGHTS: dict = {}


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("short", r"weights of shape \(11,\); it must return one finite real weight per sample point \(shape \(12,\)\)"),
        ("column", r"weights of shape \(12, 1\)"),
        ("nan", r"weight nan for point 0"),
        ("text", r"weights of dtype <U1"),
    ],
)
def test_an_embedding_estimators_bad_weights_name_the_estimator_not_the_data(kind, message):
    # "An embedding needs one weight per sample point: 12; got shape (11,)" read as a
    # problem of the user's sample, and named no plugin
    X, _ = _data()
    with pytest.raises(PluginFailure, match=r"estimator 'odd-weights' .*compute_embedding returned " + message):
        OddWeights(kind=kind).embed(REG.get_kernel("linear"), X)
    # the sum is free (a shrinkage estimator's is below 1)
    assert OddWeights(kind="shrunk").embed(REG.get_kernel("linear"), X).weights.sum() == pytest.approx(0.5)


def test_exact_weights_are_read_as_floats_and_kept_weights_are_copied():
    X, _ = _data()
    exact = OddWeights(kind="exact").embed(REG.get_kernel("linear"), X)  # was refused "as weights"
    assert exact.weights.dtype == np.float64 and exact.weights == pytest.approx(np.full(12, 1 / 12), rel=1e-15)
    kept = OddWeights(kind="kept").embed(REG.get_kernel("linear"), X)
    _KEPT_WEIGHTS[12][:] = 0.0  # the plugin changes the array it returned: the embedding keeps its own
    assert kept.weights == pytest.approx(np.full(12, 1 / 12), rel=1e-15)


@attrs.frozen(kw_only=True)
class BadSpec(Kernel):
    """NaN values, and a spec() that raises while the framework words the error."""

    name: ClassVar[str] = "bad-spec"
    summary: ClassVar[str] = "A kernel whose spec() raises (for the test)."

    def spec(self):
        raise RuntimeError("spec boom")

    def compute_gram(self, X, Y):
        return np.full((len(X), len(Y)), np.nan)

    def compute_diag(self, X):
        return np.ones(len(X))


def test_an_error_escaping_a_plugins_unguarded_method_is_blamed_on_the_plugin_not_internal():
    from typer.testing import CliRunner

    from monk_framework.app.cli import app

    with _registered("monk_kernels", BadSpec):
        result = CliRunner().invoke(app, ["run", "-k", "bad-spec", "-e", "v-stat", "-d", "gauss", "--data-param", "n=20"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("Error: the plugin throwaway-bad-spec failed in spec: RuntimeError: spec boom"), result.stderr
    assert "internal error" not in result.stderr


@attrs.frozen(kw_only=True)
class BlockSums(MMDEstimator):
    """The U-statistic, with an mmd2_from_sums (what a robust mom test computes in every
    block) broken one way at a time."""

    name: ClassVar[str] = "block-sums"
    fault: str = "nan"

    def compute_estimate(self, kernel, X, Y, rng, resources):
        return REG.get_estimator("u-stat").compute_estimate(kernel, X, Y, rng, resources)

    def mmd2_from_sums(self, sums, n, m):
        values = REG.get_estimator("u-stat").mmd2_from_sums(sums, n, m)
        if self.fault == "nan":
            return values * np.nan
        if self.fault == "shape":
            return values[..., :1]
        if self.fault == "raise":
            raise ZeroDivisionError("division by zero")
        return values


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("nan", r"mmd2_from_sums returned nan for these kernel sums; an MMD\^2 must be a finite number"),
        ("shape", r"mmd2_from_sums returned shape \(1, 1\) for 1 relabelling\(s\) of \d+ blocks"),
        ("raise", r"mmd2_from_sums failed: ZeroDivisionError: division by zero"),
    ],
)
def test_a_robust_tests_block_statistics_are_checked_as_every_estimator_answer_is(fault, message):
    # a NaN counted as below the observed value: p = 5e-19 and a rejection on null data
    gen = np.random.default_rng(0)
    X, Y = gen.normal(size=(200, 2)), gen.normal(size=(200, 2))
    with pytest.raises(PluginFailure, match=r"estimator 'block-sums' .*" + message):
        robust_test(X, Y, kernel=REG.get_kernel("rbf", sigma=1.0), contamination=2, method="mom", estimator=BlockSums(fault=fault), n_permutations=50, rng=0)
    fine = robust_test(
        X, Y, kernel=REG.get_kernel("rbf", sigma=1.0), contamination=2, method="mom", estimator=BlockSums(fault="none"), n_permutations=50, rng=0
    )
    ustat = robust_test(
        X, Y, kernel=REG.get_kernel("rbf", sigma=1.0), contamination=2, method="mom", estimator=REG.get_estimator("u-stat"), n_permutations=50, rng=0
    )
    assert fine.pvalue == ustat.pvalue and not fine.reject


@attrs.frozen(kw_only=True)
class OwnPartition(type(REG.get_estimator("monk-bcd-fast"))):
    """BCD-Fast with its own fixed partition (what a within-block test relabels in),
    broken one way at a time."""

    name: ClassVar[str] = "own-partition"
    fault: str = "none"

    def fixed_partition(self, n, m, rng):
        from monk_framework.engine.partitions import Partition

        x, y = np.arange(n) % 3, np.arange(m) % 3
        if self.fault == "raise":
            raise ZeroDivisionError("division by zero")
        if self.fault == "object":
            return "blocks"
        if self.fault == "short":
            return Partition(n_blocks=3, x_labels=x[:-1], y_labels=y)
        if self.fault == "outside":
            return Partition(n_blocks=3, x_labels=x + 100, y_labels=y)
        if self.fault == "float":
            return Partition(n_blocks=3, x_labels=x.astype(float), y_labels=y)
        if self.fault == "no-y":
            return Partition(n_blocks=3, x_labels=x)
        if self.fault == "empty-block":
            return Partition(n_blocks=4, x_labels=x, y_labels=y)
        return Partition(n_blocks=3, x_labels=x, y_labels=y)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("raise", r"fixed_partition failed: ZeroDivisionError"),
        ("object", r"fixed_partition\(30, 24\) returned 'blocks', not a Partition"),
        ("short", r"returned x_labels of shape \(29,\), dtype int64, for 30 points: not one integer label each"),
        ("outside", r"returned x_labels outside 0..2 \(from 100 to 102\)"),
        ("float", r"returned x_labels of shape \(30,\), dtype float64, for 30 points"),
        ("no-y", r"returned y_labels = None, not an array of one integer label per point"),
        # an empty block's statistic is NaN (0/0): it was counted, with divide-by-zero warnings
        ("empty-block", r"returned block 3 with no point of X"),
    ],
)
def test_a_plugins_fixed_partition_is_checked_before_a_test_relabels_within_it(fault, message):
    gen = np.random.default_rng(1)
    X, Y = gen.normal(size=(30, 2)), gen.normal(size=(24, 2))
    with pytest.raises(PluginFailure, match=r"estimator 'own-partition' .*" + message):
        permutation_test(X, Y, kernel=REG.get_kernel("rbf", sigma=1.0), estimator=OwnPartition(fault=fault), n_permutations=19, relabel="within-blocks", rng=0)
    fine = permutation_test(X, Y, kernel=REG.get_kernel("rbf", sigma=1.0), estimator=OwnPartition(), n_permutations=19, relabel="within-blocks", rng=0)
    assert fine.relabel == "within-blocks" and fine.n_blocks == 3 and 0 < fine.pvalue <= 1


@attrs.frozen(kw_only=True)
class OddMinimum(MMDEstimator):
    """The V-statistic with a min_sample_size broken one way at a time."""

    name: ClassVar[str] = "odd-minimum"
    answer: str = "int"

    def compute_estimate(self, kernel, X, Y, rng, resources):
        return REG.get_estimator("v-stat").compute_estimate(kernel, X, Y, rng, resources)

    def min_sample_size(self):
        if self.answer == "raise":
            raise ZeroDivisionError("division by zero")
        return {"int": 5, "text": ("5", "why"), "fraction": (2.5, "why"), "none": None, "right": (5, "five")}[self.answer]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("int", r"min_sample_size returned 5; it must return \(count, reason\)"),
        ("text", r"min_sample_size returned \('5', 'why'\)"),
        ("fraction", r"min_sample_size returned \(2.5, 'why'\)"),
        ("none", r"min_sample_size returned None"),
        ("raise", r"min_sample_size failed: ZeroDivisionError"),
    ],
)
def test_a_plugins_minimum_size_is_checked_where_it_is_read(answer, message):
    # each of these was a TypeError from the framework's own code (an internal error)
    X, Y = _data()
    for run in (
        lambda: OddMinimum(answer=answer).estimate(REG.get_kernel("linear"), X, Y),
        lambda: permutation_test(X, Y, kernel=REG.get_kernel("linear"), estimator=OddMinimum(answer=answer), n_permutations=9),
    ):
        with pytest.raises(PluginFailure, match=r"estimator 'odd-minimum' .*" + message):
            run()
    with pytest.raises(MonkError, match=r"X has 4 point\(s\) but estimator 'odd-minimum' needs at least 5 \(five\)"):
        OddMinimum(answer="right").estimate(REG.get_kernel("linear"), X[:4], Y)


@attrs.frozen(kw_only=True)
class OddRows(MMDEstimator):
    """The V-statistic, reporting its diagnostics one wrong way at a time."""

    name: ClassVar[str] = "odd-rows"
    rows: str = "none"

    def compute_estimate(self, kernel, X, Y, rng, resources):
        return REG.get_estimator("v-stat").compute_estimate(kernel, X, Y, rng, resources)

    def diagnostic_rows(self, diagnostics, timings):
        if self.rows == "raise":
            raise ZeroDivisionError("division by zero")
        return {"none": None, "text": "rows", "numbers": [(1, 2)], "triples": [("a", "b", "c")], "right": [("blocks", "5")], "tuple": (("blocks", "5"),)}[
            self.rows
        ]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("none", r"returned None"),
        ("text", r"returned 'rows'"),
        ("numbers", r"returned \[\(1, 2\)\]"),
        ("triples", r"returned \[\('a', 'b', 'c'\)\]"),
        ("raise", r"diagnostic_rows failed: ZeroDivisionError"),
    ],
)
def test_a_plugins_report_rows_are_checked_before_a_table_shows_them(rows, message):
    # monkfw run printed a string's letters as rows, or failed with an internal error
    with pytest.raises(PluginFailure, match=r"estimator 'odd-rows' .*" + message):
        OddRows(rows=rows).report_rows({}, {})
    assert OddRows(rows="right").report_rows({}, {}) == [("blocks", "5")]
    assert OddRows(rows="tuple").report_rows({}, {}) == [("blocks", "5")]
