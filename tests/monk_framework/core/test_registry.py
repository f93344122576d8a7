"""The plugin registry: throwaway plugins, entry-point discovery, provenance and problems."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import pytest

from monk_framework import DuplicateNameError, Kernel, PluginError, PrecisionWarning, Registry, UnknownNameError, hookimpl, parameter
from monk_framework.core.params import real


@attrs.frozen(kw_only=True)
class CauchyKernel(Kernel):
    name: ClassVar[str] = "cauchy"
    summary: ClassVar[str] = "Cauchy kernel 1 / (1 + |x-y|^2 / sigma^2)."
    formula: ClassVar[str] = "k(x, y) = 1 / (1 + ||x - y||^2 / sigma^2)"
    sigma: float = parameter(1.0, doc="scale", check=real(gt=0), kind="float")

    def compute_gram(self, X, Y):
        from monk_framework.numerics.distances import squared_distances

        return 1.0 / (1.0 + squared_distances(X, Y) / self.sigma**2)

    def compute_diag(self, X):
        return np.ones(len(X))


def make_plugin(name: str = "throwaway", **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, value in hooks.items():
        setattr(module, hook_name, value)
    return module


@pytest.fixture
def registry():
    """A registry of the installed plugins, discovered afresh for each test."""
    return Registry()


@pytest.fixture
def cauchy_plugin(registry):
    plugin = make_plugin(monk_kernels=hookimpl(lambda: [CauchyKernel]))
    registry.register(plugin)
    try:
        yield plugin
    finally:
        registry.unregister(plugin)


def test_builtins_are_discovered_through_entry_points(registry):
    kernels = {e.name: e for e in registry.kernels()}
    assert set(kernels) == {"linear", "polynomial", "quadratic", "rbf", "exponential", "laplace", "energy", "ssk"}
    assert {e.name for e in registry.estimators()} >= {"v-stat", "u-stat", "mean"}
    provider = kernels["rbf"].provider
    assert provider.distribution == "monk-framework"
    assert provider.entry_point == "vector_kernels"
    assert provider.module == "monk_plugins.vector_kernels"
    assert str(provider).startswith("monk-framework==") and str(provider).endswith("[vector_kernels]")
    assert registry.problems() == []


def test_entries_carry_parameters_with_defaults(registry):
    entry = registry.entry("kernel", "polynomial")
    assert [(p.name, p.default) for p in entry.parameters] == [("degree", 3), ("scale", 1.0), ("offset", 1.0), ("normalize", False)]
    assert entry.to_dict()["input_kind"] == "vector"
    assert registry.entry("estimator", "mean").to_dict()["estimates"] == "embedding"


def test_a_throwaway_plugin_is_usable_and_removable(registry, cauchy_plugin, rng):
    kernel = registry.get_kernel("cauchy", sigma=2.0)
    X = rng.normal(size=(5, 2))
    want = 1 / (1 + ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 4)
    np.testing.assert_allclose(kernel.gram(X), want, rtol=1e-13)
    result = registry.get_estimator("u-stat").estimate(kernel, X, X + 1)
    assert result.kernel == "cauchy" and result.kernel_params == {"sigma": 2.0}
    assert str(registry.entry("kernel", "cauchy").provider) == "throwaway"
    registry.unregister(cauchy_plugin)
    with pytest.raises(UnknownNameError):
        registry.get_kernel("cauchy")
    registry.register(cauchy_plugin)  # the fixture unregisters it again


def test_unknown_names_suggest_the_closest(registry):
    with pytest.raises(UnknownNameError) as info:
        registry.get_kernel("rbff")
    assert "Did you mean 'rbf'?" in str(info.value)
    assert "laplace" in str(info.value)
    assert not str(info.value).startswith('"')  # not a quoted KeyError
    with pytest.raises(UnknownNameError, match="Did you mean 'sigma'"):
        registry.get_kernel("rbf", sigm=1.0)
    # another case is suggested first, however many letters it changes
    for get, name, closest in (
        (registry.get_kernel, "RBF", "rbf"),
        (registry.get_estimator, "U-STAT", "u-stat"),
        (registry.get_estimator, "Monk-BCD-Fast", "monk-bcd-fast"),
    ):
        with pytest.raises(UnknownNameError, match=f"Did you mean '{closest}'"):
            get(name)
    # names equally close are all suggested: 'rbff' is one letter from the kernel rbf and
    # the estimator rff (monkfw describe searches both), not only from the first found
    from monk_framework.core.errors import did_you_mean

    assert did_you_mean("rbff", ["rff", "rbf", "laplace"]).startswith(" Did you mean 'rff' or 'rbf'?")
    assert did_you_mean("lapalce", ["rff", "rbf", "laplace"]).startswith(" Did you mean 'laplace'? Known:")
    # a spec written with spaces ("Unknown kernel 'rbf sigma=1'" said nothing of the form)
    assert did_you_mean("rbf sigma=1 ", ["rbf", "laplace"]).startswith(" Did you mean 'rbf:sigma=1'? A spec is name:key=value,key=value. Known:")
    assert did_you_mean("monk-bcd n_blocks=5 n_iter=3", ["monk-bcd"]).startswith(" Did you mean 'monk-bcd:n_blocks=5,n_iter=3'?")
    assert did_you_mean("rbf 1", ["rbf", "laplace"]) == " Did you mean 'rbf'? Known: laplace, rbf."  # no key=value: no spec


@pytest.mark.parametrize("name", [3, None, b"rbf", ["rbf"]])
def test_a_name_that_is_no_string_is_named_as_such(registry, name):
    # a list reached the name table as "unhashable type: 'list'", a number as "Unknown kernel 3"
    from monk_framework import ParameterError

    with pytest.raises(ParameterError, match=rf"^A kernel name is a string, e.g. 'rbf'; got {type(name).__name__} "):
        registry.get_kernel(name)
    with pytest.raises(ParameterError, match=r"^An estimator name is a string, e.g. 'u-stat'; got "):
        registry.get_estimator(name)


def test_duplicate_name_is_rejected_naming_both_providers(registry):
    @attrs.frozen(kw_only=True)
    class FakeRBF(CauchyKernel):
        name: ClassVar[str] = "rbf"

    with pytest.raises(DuplicateNameError) as info:
        registry.register(make_plugin("shadow", monk_kernels=hookimpl(lambda: [FakeRBF])))
    message = str(info.value)
    assert "monk-framework==" in message and "shadow" in message
    assert registry.kernel_class("rbf").__module__ == "monk_plugins.vector_kernels"
    assert "shadow" not in {str(e.provider) for e in registry.kernels()}


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        ({"monk_kernel": hookimpl(lambda: [CauchyKernel])}, "unknown hook 'monk_kernel'"),
        ({"monk_kernels": lambda: [CauchyKernel]}, "mark it with @monk_framework.hookimpl"),
        ({"monk_kernels": hookimpl(lambda: [object])}, "not a subclass of Kernel"),
        ({"monk_estimators": hookimpl(lambda: [CauchyKernel])}, "not a subclass of MMDEstimator or EmbeddingEstimator"),
        ({"monk_kernels": hookimpl(lambda: 1 / 0)}, "hook monk_kernels raised ZeroDivisionError"),
        ({"monk_kernels": hookimpl(lambda bogus: [CauchyKernel])}, "invalid hook"),
    ],
)
def test_bad_plugins_are_rejected_with_a_reason(registry, hooks, message):
    with pytest.raises(PluginError, match=message):
        registry.register(make_plugin("bad", **hooks))
    assert "bad" not in {str(e.provider) for e in registry.kernels() + registry.estimators()}


def test_bad_plugin_classes_are_rejected(registry):
    @attrs.frozen(kw_only=True)
    class BadName(CauchyKernel):
        name: ClassVar[str] = "Bad_Name"

    @attrs.frozen(kw_only=True)
    class NoDefault(CauchyKernel):
        name: ClassVar[str] = "no-default"
        width: float = attrs.field(validator=real(gt=0))

    class NotAttrs(CauchyKernel):
        name: ClassVar[str] = "not-attrs"

    for cls, message in [(BadName, "kebab-case"), (NoDefault, "cannot be built with its defaults"), (NotAttrs, "attrs.frozen")]:
        with pytest.raises(PluginError, match=message):
            registry.register(make_plugin(cls.__name__, monk_kernels=hookimpl(lambda c=cls: [c])))


# -- entry-point discovery through a fake distribution --------------------------------

PLUGIN_SOURCE = """
from typing import ClassVar
import attrs, numpy as np
from monk_framework import Kernel, hookimpl

@attrs.frozen(kw_only=True)
class OnesKernel(Kernel):
    name: ClassVar[str] = "ones"
    summary: ClassVar[str] = "The constant kernel 1 (MMD is always 0)."
    formula: ClassVar[str] = "k(x, y) = 1"

    def compute_gram(self, X, Y):
        return np.ones((len(X), len(Y)))

    def compute_diag(self, X):
        return np.ones(len(X))

@hookimpl
def monk_kernels():
    return [OnesKernel]
"""


def make_distribution(root: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A minimal installed distribution: a .dist-info folder and its modules, in root."""
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[monk_framework.plugins]\n{lines}\n")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    """tmp_path on sys.path, holding three fake distributions: good, broken, duplicate."""
    make_distribution(tmp_path, "monk-ones", {"ones": "monk_ones_plugin"}, {"monk_ones_plugin": PLUGIN_SOURCE})
    make_distribution(tmp_path, "monk-broken", {"broken": "monk_broken_plugin"}, {"monk_broken_plugin": "raise RuntimeError('boom at import')\n"})
    dup = PLUGIN_SOURCE.replace('"ones"', '"rbf"').replace("OnesKernel", "ImpostorKernel")
    make_distribution(tmp_path, "aaa-impostor", {"impostor": "aaa_impostor_plugin"}, {"aaa_impostor_plugin": dup})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for module in ("monk_ones_plugin", "monk_broken_plugin", "aaa_impostor_plugin"):
        sys.modules.pop(module, None)


def test_entry_points_of_third_party_distributions(fake_site, rng):
    registry = Registry()
    ones = registry.entry("kernel", "ones")
    assert str(ones.provider) == "monk-ones==1.2.3[ones]"
    X = rng.normal(size=(4, 2))
    # a constant kernel cannot tell points apart, which the estimate says as it gives 0
    with pytest.warns(PrecisionWarning, match="ones\\(\\) cannot tell these distinct points apart"):
        got = registry.get_estimator("v-stat").estimate(registry.get_kernel("ones"), X, X + 5)
    assert got.mmd2 == pytest.approx(0.0, abs=1e-15)
    problems = {p.provider.distribution: p.message for p in registry.problems()}
    assert "RuntimeError: boom at import" in problems["monk-broken"]
    # the impostor sorts before monk-framework alphabetically, yet built-ins load first
    assert "'rbf' is provided by both monk-framework==" in problems["aaa-impostor"]
    assert registry.kernel_class("rbf").__module__ == "monk_plugins.vector_kernels"
    assert {e.name for e in registry.kernels()} >= {"rbf", "energy", "ones"}


def test_discovery_order_is_fixed(fake_site):
    from monk_framework.core.registry import discover_entry_points

    order = [(d.distribution, d.entry_point.name) for d in discover_entry_points()]
    ours = [t for t in order if t[0] == "monk-framework"]
    # our own entry points first (built-ins keep their names), each group sorted by name
    assert order[: len(ours)] == ours == sorted(ours)
    assert {"classical", "vector_kernels", "monk_mmd", "monk_embedding"} <= {t[1] for t in ours}
    rest = order[len(ours) :]
    assert rest and rest == sorted(rest, key=lambda t: (t[0].lower(), t[1]))


def test_third_party_plugin_end_to_end_in_a_real_process(fake_site):
    env_path = f"{fake_site}"
    cmd = [sys.executable, "-m", "monk_framework", "plugins", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"name": "ones"' in out.stdout and "boom at import" in out.stdout
    run = subprocess.run(
        [sys.executable, "-m", "monk_framework", "run", "--kernel", "ones", "--estimator", "u-stat", "--json"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert '"kernel": "ones"' in run.stdout
    assert "Warning: ones() cannot tell these distinct points apart" in run.stderr


def test_third_party_plugin_through_the_cli_runner(fake_site, monkeypatch):
    import json

    from typer.testing import CliRunner

    from monk_framework.app.cli import app
    from monk_framework.core import registry as registry_module

    monkeypatch.setattr(registry_module, "_default", None)  # rediscover with the fake site on sys.path
    runner = CliRunner()
    listing = runner.invoke(app, ["plugins", "--json"])
    data = json.loads(listing.stdout)
    assert "ones" in {k["name"] for k in data["kernels"]}
    assert {p["provider"]["distribution"] for p in data["problems"]} == {"monk-broken", "aaa-impostor"}
    with warnings.catch_warnings():
        warnings.simplefilter("default", PrecisionWarning)  # rendered by the CLI, as a user sees it
        run = runner.invoke(app, ["run", "--kernel", "ones", "--estimator", "v-stat", "--json"])
    assert run.exit_code == 0, run.output
    assert "Warning: ones() cannot tell these distinct points apart" in run.stderr
    assert json.loads(run.stdout)["mmd2"] == pytest.approx(0.0, abs=1e-15)
    human = runner.invoke(app, ["plugins"])
    assert "Plugin problem: monk-broken==1.2.3[broken]" in human.stderr


@pytest.mark.parametrize(
    ("choice", "loaded", "problems"),
    [
        ("ones", {"ones"}, set()),  # by entry-point name: the broken plugins are never imported
        ("monk_broken, monk-ones", {"ones"}, {"monk-broken"}),  # by distribution name, any spelling
        ("", set(), set()),  # no third-party plugin at all
    ],
)
def test_monk_load_plugins_chooses_the_third_party_plugins(fake_site, monkeypatch, choice, loaded, problems):
    monkeypatch.setenv("MONK_LOAD_PLUGINS", choice)
    registry = Registry()
    builtins = {"linear", "polynomial", "quadratic", "rbf", "exponential", "laplace", "energy", "ssk"}
    assert {e.name for e in registry.kernels()} == builtins | loaded  # the built-ins always load
    assert {p.provider.distribution for p in registry.problems()} == problems


def test_registering_an_installed_plugin_again_changes_nothing(fake_site):
    registry = Registry()
    module = __import__("monk_ones_plugin")
    before = registry.kernels()
    entries = registry.register(module)
    assert [e.name for e in entries] == ["ones"] and registry.kernels() == before


def test_estimators_are_found_by_the_role_they_declare(registry):
    # the tests built on a classical statistic ask for it by role, never by name
    from monk_framework import Estimate, MMDEstimator

    assert registry.estimator_with_role("v-statistic").name == "v-stat"
    assert registry.estimator_with_role("u-statistic", root="signed").params()["root"] == "signed"
    with pytest.raises(PluginError, match="role 'w-statistic'"):
        registry.estimator_with_role("w-statistic")

    @attrs.frozen(kw_only=True)
    class Another(MMDEstimator):
        name: ClassVar[str] = "another-v"
        summary: ClassVar[str] = "Another V-statistic, for the test."
        role: ClassVar[str | None] = "v-statistic"

        def compute_estimate(self, kernel, X, Y, rng, resources):
            return Estimate(mmd2=0.0, mmd=0.0)

    plugin = make_plugin(monk_estimators=hookimpl(lambda: [Another]))
    registry.register(plugin)
    try:  # "another-v" sorts before "v-stat": the first by name
        assert registry.estimator_with_role("v-statistic").name == "another-v"
    finally:
        registry.unregister(plugin)
    assert registry.estimator_with_role("v-statistic").name == "v-stat"


def test_an_estimator_core_without_the_resources_argument_is_refused_at_registration(registry):
    # the framework passes (kernel, X, Y, rng, resources): a core written without the last
    # one would fail deep inside an estimate; it is named when its plugin is registered
    from monk_framework import EmbeddingEstimator, EmbeddingWeights, Estimate, MMDEstimator

    @attrs.frozen(kw_only=True)
    class OldCore(MMDEstimator):
        name: ClassVar[str] = "old-core"
        summary: ClassVar[str] = "A core with four arguments, for the test."

        def compute_estimate(self, kernel, X, Y, rng):
            return Estimate(mmd2=0.0, mmd=0.0)

    @attrs.frozen(kw_only=True)
    class OldEmbedding(EmbeddingEstimator):
        name: ClassVar[str] = "old-embedding"
        summary: ClassVar[str] = "An embedding core with three arguments, for the test."

        def compute_embedding(self, kernel, X, rng):
            return EmbeddingWeights(weights=[1.0])

    @attrs.frozen(kw_only=True)
    class Flexible(MMDEstimator):
        name: ClassVar[str] = "flexible-core"
        summary: ClassVar[str] = "A core that takes what it is given, for the test."

        def compute_estimate(self, kernel, X, Y, *rest):
            return Estimate(mmd2=0.0, mmd=0.0)

    for cls, method in ((OldCore, "compute_estimate"), (OldEmbedding, "compute_embedding")):
        with pytest.raises(PluginError, match=rf"{cls.__name__}\.{method} must take \(kernel, X, .*rng, resources\)"):
            registry.register(make_plugin(monk_estimators=hookimpl(lambda cls=cls: [cls])))
        with pytest.raises(UnknownNameError):
            registry.get_estimator(cls.name)
    plugin = make_plugin(monk_estimators=hookimpl(lambda: [Flexible]))
    registry.register(plugin)
    try:
        assert registry.get_estimator("flexible-core").estimate(registry.get_kernel("rbf"), [[0.0], [1.0]], [[2.0]]).mmd == 0.0
    finally:
        registry.unregister(plugin)


def test_asking_for_a_name_when_a_plugin_failed_to_load_says_which_and_why(fake_site):
    # the user asks for the kernel where it matters, not only under `monkfw plugins`
    registry = Registry()
    with pytest.raises(UnknownNameError) as err:
        registry.get_kernel("rq")
    message = str(err.value)
    assert message.startswith("Unknown kernel 'rq'.")
    assert "2 plugins could not be loaded: " in message and ".;" not in message
    assert "monk-broken==1.2.3[broken]: failed to import 'monk_broken_plugin': RuntimeError: boom at import." in message


def test_a_plugin_that_calls_sys_exit_at_import_is_a_problem_not_an_exit(tmp_path, monkeypatch):
    make_distribution(tmp_path, "monk-quits", {"quits": "monk_quits_plugin"}, {"monk_quits_plugin": "import sys\nsys.exit(4)\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        problems = {p.provider.distribution: p.message for p in Registry().problems()}
    finally:
        sys.modules.pop("monk_quits_plugin", None)
    assert problems["monk-quits"] == "failed to import 'monk_quits_plugin': SystemExit: 4"


def test_a_name_in_monk_load_plugins_that_nothing_answers_to_is_reported(fake_site, monkeypatch):
    monkeypatch.setenv("MONK_LOAD_PLUGINS", "ones,onse")
    registry = Registry()
    assert "ones" in {e.name for e in registry.kernels()}
    (problem,) = registry.problems()
    assert problem.provider.module == "MONK_LOAD_PLUGINS"
    assert problem.message.startswith("'onse' matches no installed plugin's entry-point or distribution name.")
    assert "Did you mean 'ones'?" in problem.message
    with pytest.raises(UnknownNameError, match=r"Unknown kernel 'rq'.*could not be loaded: MONK_LOAD_PLUGINS: "):
        registry.get_kernel("rq")


def test_a_kernel_named_where_the_estimator_goes_is_said_to_be_one():
    # "Unknown estimator 'rbf'. Did you mean 'rff'?" sent the user to a look-alike estimator
    from monk_framework.core.errors import UnknownNameError
    from monk_framework.core.registry import get_registry

    reg = get_registry()
    with pytest.raises(UnknownNameError, match=r"^'rbf' is a kernel, not an estimator\. Known estimators: .*u-stat") as info:
        reg.get_estimator("rbf")
    assert "Did you mean" not in str(info.value)
    with pytest.raises(UnknownNameError, match=r"^'u-stat' is an estimator, not a kernel\. Known kernels: .*rbf"):
        reg.get_kernel("u-stat")
    with pytest.raises(UnknownNameError, match=r"^'gaussian' is a kernel"):  # an alias too
        reg.get_estimator("gaussian")
    with pytest.raises(UnknownNameError, match=r"^Unknown estimator 'u-sta'\. Did you mean 'u-stat'\?"):  # a typo as before
        reg.get_estimator("u-sta")


def test_what_a_plugins_import_changes_in_the_process_is_put_back(tmp_path, monkeypatch):
    # a module that moves the working directory at import had made every relative data
    # file "no such file" in every command; filters, numpy's error state, the streams and
    # the Ctrl-C handler are the process's too
    import signal

    source = """
    import os, signal, sys, warnings
    import numpy as np
    os.chdir("/")
    warnings.simplefilter("error")
    np.seterr(all="raise")
    sys.stdout = open(os.devnull, "w")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    """
    make_distribution(tmp_path, "monk-meddler", {"meddler": "monk_meddler_plugin"}, {"monk_meddler_plugin": source})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.chdir(tmp_path)
    before = (list(warnings.filters), np.geterr(), sys.stdout, signal.getsignal(signal.SIGINT))
    try:
        registry = Registry()
        assert "monk_meddler_plugin" in sys.modules  # it was imported, and it registers nothing
        assert not [p for p in registry.problems() if p.provider.distribution == "monk-meddler"]
        assert Path.cwd() == tmp_path
        assert (list(warnings.filters), np.geterr(), sys.stdout, signal.getsignal(signal.SIGINT)) == before
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            warnings.warn("still a warning", UserWarning, stacklevel=1)
        assert [str(w.message) for w in caught] == ["still a warning"]
    finally:
        sys.modules.pop("monk_meddler_plugin", None)
