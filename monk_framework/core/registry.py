"""The plugin registry: the only module that talks to pluggy.

Loading is forgiving and registration is strict. The registry finds the entry points
of group ``monk_framework.plugins`` itself, in a fixed order (monk_framework's own
built-ins first, then by distribution and entry-point name), imports each, and
registers it. A plugin that fails to import, implements a misspelled hook, returns
something that is not a kernel or estimator class, or reuses a name another provider
already registered, is rejected as a whole and recorded as a :class:`PluginProblem`
that names it (and, for a duplicate, both providers); everything else keeps working.
Registering a plugin from a script with :meth:`Registry.register` raises instead.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.metadata as metadata
import inspect
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, cast

import attrs
import numpy as np
import pluggy

from monk_framework.core import hookspecs
from monk_framework.core.errors import (
    DuplicateNameError,
    ParameterError,
    PluginError,
    UnknownNameError,
    did_you_mean,
    from_signal_handler,
    shown,
)
from monk_framework.core.estimators import EmbeddingEstimator, Estimator, MMDEstimator
from monk_framework.core.kernels import COMPOSITES, Kernel
from monk_framework.core.params import Configurable, ParameterInfo, parse_spec

__all__ = [
    "Provider",
    "PluginEntry",
    "PluginProblem",
    "Registry",
    "get_registry",
    "discover_entry_points",
    "LOAD_PLUGINS_ENV",
    "load_plugins_choice",
]

OWN_DISTRIBUTION = "monk-framework"
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_HOOKS: dict[str, type[Configurable]] = {"monk_kernels": Kernel, "monk_estimators": Estimator}


#: the core methods an estimator implements, with the arguments the framework passes
_CORE_SIGNATURES = {
    "compute_estimate": ("kernel", "X", "Y", "rng", "resources"),
    "compute_embedding": ("kernel", "X", "rng", "resources"),
}


def _accepts(method: Any, n_args: int) -> bool:
    """Whether ``method`` (a function on the class) takes self and ``n_args`` positional arguments."""
    try:
        inspect.signature(method).bind(*([None] * (n_args + 1)))
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): let the call decide
        return True
    return True


def _normalize(dist_name: str) -> str:
    return re.sub(r"[-_.]+", "-", dist_name).lower()


@attrs.frozen
class Provider:
    """Where a plugin comes from: a distribution's entry point, or a script."""

    module: str
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None

    def __str__(self) -> str:
        if self.distribution is None:
            return self.module
        return f"{self.distribution}=={self.version}[{self.entry_point}]"

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "label": str(self)}


@attrs.frozen
class PluginEntry:
    """One registered kernel or estimator: what ``monkfw plugins`` lists."""

    name: str
    plugin_type: str
    summary: str
    formula: str
    parameters: tuple[ParameterInfo, ...]
    provider: Provider
    cls: type[Configurable] = attrs.field(repr=False, eq=False)

    @property
    def details(self) -> dict[str, str]:
        """Kind-specific facts: a kernel's input kind, what an estimator estimates."""
        if self.plugin_type == "kernel":
            return {"input_kind": self.cls.input_kind}  # type: ignore[attr-defined]
        return {"estimates": self.cls.estimates}  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.plugin_type,
            "summary": self.summary,
            "formula": self.formula,
            **self.details,
            "parameters": [p.to_dict() for p in self.parameters],
            "provider": self.provider.to_dict(),
        }


@attrs.frozen
class PluginProblem:
    """A plugin that could not be registered, and why."""

    provider: Provider
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider.to_dict(), "message": self.message}


@attrs.frozen
class DiscoveredEntryPoint:
    """An entry point of group ``monk_framework.plugins`` with its distribution."""

    distribution: str
    version: str
    entry_point: metadata.EntryPoint

    @property
    def provider(self) -> Provider:
        return Provider(
            module=self.entry_point.value,
            distribution=self.distribution,
            version=self.version,
            entry_point=self.entry_point.name,
        )


def discover_entry_points(group: str = hookspecs.ENTRY_POINT_GROUP) -> list[DiscoveredEntryPoint]:
    """All entry points of ``group``, one per (distribution, name), in a fixed order.

    A distribution found twice on ``sys.path`` counts once (the first, as import
    would). The order is monk_framework's own entry points first, then by normalised
    distribution name and entry-point name, so a third-party plugin can never take a
    built-in's name.
    """
    found: dict[str, DiscoveredEntryPoint] = {}
    seen_dists: set[str] = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        norm = _normalize(name)
        if norm in seen_dists:
            continue
        seen_dists.add(norm)
        for ep in dist.entry_points:
            if ep.group == group:
                found[f"{norm}\0{ep.name}"] = DiscoveredEntryPoint(name, dist.version, ep)
    return sorted(
        found.values(),
        key=lambda d: (_normalize(d.distribution) != OWN_DISTRIBUTION, _normalize(d.distribution), d.entry_point.name),
    )


#: the environment variable that chooses the third-party plugins to load
LOAD_PLUGINS_ENV = "MONK_LOAD_PLUGINS"


def load_plugins_choice() -> set[str] | None:
    """The third-party plugins ``MONK_LOAD_PLUGINS`` allows (entry-point or distribution
    names), or None when it is not set (all load)."""
    value = os.environ.get(LOAD_PLUGINS_ENV)
    if value is None:
        return None
    return {v.strip() for v in value.split(",") if v.strip()}


def _chosen(found: DiscoveredEntryPoint, chosen: set[str]) -> bool:
    dist = _normalize(found.distribution)
    return dist == OWN_DISTRIBUTION or found.entry_point.name in chosen or dist in {_normalize(c) for c in chosen}


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """Around a third-party plugin's import: what its module-level code changes in the
    process as a whole is put back, so that it cannot change how every other command
    reads its arguments or reports: the working directory (relative data files would be
    "no such file"), the warning filters, numpy's floating-point error state, the
    standard streams, and the handlers of Ctrl-C and SIGTERM."""
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # the directory was removed under the process: nothing to put back
        cwd = None
    filters = list(warnings.filters)
    errors = np.geterr()
    streams = sys.stdout, sys.stderr
    main = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if cwd is not None and os.getcwd() != cwd:
                os.chdir(cwd)
        warnings.filters[:] = filters  # type: ignore[index]  # a list at run time
        mutated = getattr(warnings, "_filters_mutated", None)  # the cache of what the filters decided
        if mutated is not None:
            mutated()
        np.seterr(**errors)
        sys.stdout, sys.stderr = streams
        for number, handler in handlers.items():
            if handler is not None and signal.getsignal(number) is not handler:
                signal.signal(number, handler)


class Registry:
    """Kernels and estimators from every installed plugin, queryable by name.

    ``Registry()`` loads every entry point; ``Registry(discover=False)`` starts empty
    (for tests and embedding applications), and :meth:`register` adds plugins.
    """

    def __init__(self, *, discover: bool = True) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._entries: dict[str, dict[str, PluginEntry]] = {"kernel": {}, "estimator": {}}
        #: other names of registered plugins (``Configurable.aliases``) -> their names
        self._aliases: dict[str, dict[str, str]] = {"kernel": {}, "estimator": {}}
        self._plugin_entries: dict[str, list[PluginEntry]] = {}
        self._problems: list[PluginProblem] = []
        if discover:
            self.load_entry_points()

    # -- loading ---------------------------------------------------------------------

    def load_entry_points(self, group: str = hookspecs.ENTRY_POINT_GROUP) -> None:
        """Import and register every entry point of ``group``; record failures as problems.

        The environment variable :data:`LOAD_PLUGINS_ENV` (``MONK_LOAD_PLUGINS``), when set,
        chooses the third-party plugins that load: a comma-separated list of entry-point
        or distribution names (empty: none). The built-ins always load.
        """
        chosen = load_plugins_choice()
        discovered = discover_entry_points(group)
        if chosen:
            # a name in MONK_LOAD_PLUGINS that nothing installed answers to (a typo) is a problem
            names = {f.entry_point.name for f in discovered} | {_normalize(f.distribution) for f in discovered}
            for wanted in sorted(chosen):
                if wanted not in names and _normalize(wanted) not in names:
                    self._problems.append(
                        PluginProblem(
                            Provider(module=LOAD_PLUGINS_ENV),
                            f"{wanted!r} matches no installed plugin's entry-point or distribution name.{did_you_mean(wanted, sorted(names))}",
                        )
                    )
        for found in discovered:
            provider = found.provider
            if self._pm.has_plugin(str(provider)):
                continue
            if chosen is not None and not _chosen(found, chosen):
                continue
            try:
                with _process_state_kept():
                    plugin = found.entry_point.load()
            except (Exception, SystemExit) as exc:  # any import failure of third-party code is a problem, not a crash
                if from_signal_handler(exc):
                    raise  # the program's own timeout, which happened to interrupt an import
                self._problems.append(PluginProblem(provider, f"failed to import {provider.module!r}: {type(exc).__name__}: {exc}"))
                continue
            try:
                self._add(plugin, provider)
            except PluginError as exc:
                self._problems.append(PluginProblem(provider, str(exc)))

    def register(self, plugin: object, *, name: str | None = None) -> list[PluginEntry]:
        """Register a plugin object (usually a module) from a script; raise on any problem.

        Returns the entries it added. Use :meth:`unregister` to remove it again.
        """
        label = name or getattr(plugin, "__name__", None) or repr(plugin)
        known = self._pm.get_name(plugin)
        if known is not None:
            # already loaded (e.g. through its entry point once its package is installed):
            # registering it again changes nothing
            return list(self._plugin_entries.get(known, []))
        return self._add(plugin, Provider(module=label))

    def unregister(self, plugin: object) -> None:
        """Remove a plugin registered with :meth:`register` and all it provided."""
        name = self._pm.get_name(plugin)
        if name is None:
            raise PluginError(f"{plugin!r} is not registered.")
        self._pm.unregister(plugin)
        for entry in self._plugin_entries.pop(name, []):
            del self._entries[entry.plugin_type][entry.name]
            for alias in entry.cls.aliases:
                self._aliases[entry.plugin_type].pop(alias, None)

    def _add(self, plugin: object, provider: Provider) -> list[PluginEntry]:
        plugin_name = str(provider)
        try:
            self._pm.register(plugin, name=plugin_name)
        except ValueError as exc:  # pluggy: the same plugin or name registered twice
            raise PluginError(f"Plugin {plugin_name} cannot be registered: {exc}") from None
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"Plugin {plugin_name} has an invalid hook: {exc}") from None
        try:
            self._check_hook_names(plugin, plugin_name)
            entries = self._collect(plugin, provider)
            self._check_duplicates(entries)
        except Exception:
            self._pm.unregister(plugin)
            raise
        for entry in entries:
            self._entries[entry.plugin_type][entry.name] = entry
            for alias in entry.cls.aliases:
                self._aliases[entry.plugin_type][alias] = entry.name
        self._plugin_entries[plugin_name] = entries
        return entries

    def _check_hook_names(self, plugin: object, plugin_name: str) -> None:
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"Plugin {plugin_name}: {exc}") from None
        hooks = list(_HOOKS)
        marker = f"{hookspecs.PROJECT}_impl"  # the attribute pluggy's HookimplMarker sets
        for attr_name, value in vars(plugin).items() if hasattr(plugin, "__dict__") else []:
            # an unmarked monk_* function would be silently ignored by pluggy
            if attr_name.startswith("monk_") and inspect.isfunction(value) and not hasattr(value, marker):
                close = difflib.get_close_matches(attr_name, hooks, n=1)
                hint = f"did you mean {close[0]!r}?" if close and close[0] != attr_name else "mark it with @monk_framework.hookimpl."
                raise PluginError(
                    f"Plugin {plugin_name} defines {attr_name!r}, which is not a registered "
                    f"monk_framework hook implementation; {hint} Hooks: {', '.join(hooks)}."
                )

    def _collect(self, plugin: object, provider: Provider) -> list[PluginEntry]:
        entries: list[PluginEntry] = []
        for hook_name, base in _HOOKS.items():
            for impl in getattr(self._pm.hook, hook_name).get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                try:
                    classes = impl.function()
                except Exception as exc:
                    if from_signal_handler(exc):
                        raise
                    raise PluginError(f"Plugin {provider}: hook {hook_name} raised {type(exc).__name__}: {exc}") from None
                for cls in classes or []:
                    entries.append(self._entry(cls, base, hook_name, provider))
        return entries

    @staticmethod
    def _entry(cls: Any, base: type[Configurable], hook_name: str, provider: Provider) -> PluginEntry:
        where = f"Plugin {provider}, hook {hook_name}"
        allowed = (MMDEstimator, EmbeddingEstimator) if base is Estimator else (Kernel,)
        if not (inspect.isclass(cls) and issubclass(cls, allowed)):
            names = " or ".join(a.__name__ for a in allowed)
            raise PluginError(f"{where}: returned {cls!r}, which is not a subclass of {names}.")
        if "__attrs_attrs__" not in cls.__dict__:  # decorated itself, not only its base
            raise PluginError(f"{where}: {cls.__name__} must be decorated with @attrs.frozen(kw_only=True).")
        if not isinstance(cls.name, str) or not _NAME_RE.match(cls.name):
            raise PluginError(f"{where}: {cls.__name__}.name must be a kebab-case name like 'my-kernel'; got {cls.name!r}.")
        if not cls.summary:
            raise PluginError(f"{where}: {cls.__name__} ({cls.name!r}) needs a one-line summary.")
        input_kind = getattr(cls, "input_kind", None)
        if base is Kernel and input_kind not in ("vector", "string"):
            raise PluginError(f"{where}: {cls.__name__}.input_kind must be 'vector' or 'string'; got {input_kind!r}.")
        for method, args in _CORE_SIGNATURES.items():
            if base is Estimator and hasattr(cls, method) and not _accepts(getattr(cls, method), len(args)):
                raise PluginError(
                    f"{where}: {cls.__name__}.{method} must take ({', '.join(args)}); the last one, "
                    "resources, is what the call lets the engine use (pass it on to the engine's "
                    "functions, or ignore it)."
                )
        try:
            cls()
        except Exception as exc:
            if from_signal_handler(exc):
                raise
            raise PluginError(
                f"{where}: {cls.__name__} ({cls.name!r}) cannot be built with its defaults "
                f"({type(exc).__name__}: {exc}); every parameter needs a valid default."
            ) from None
        return PluginEntry(
            name=cls.name,
            plugin_type=base.plugin_type,
            summary=cls.summary,
            formula=cls.formula,
            parameters=cls.parameters(),
            provider=provider,
            cls=cls,
        )

    def _check_duplicates(self, entries: list[PluginEntry]) -> None:
        seen: dict[tuple[str, str], PluginEntry] = {}
        for entry in entries:
            for name in (entry.name, *entry.cls.aliases):
                key = (entry.plugin_type, name)
                table = self._entries[entry.plugin_type]
                other = table.get(name) or table.get(self._aliases[entry.plugin_type].get(name, "")) or seen.get(key)
                if other is not None:
                    raise DuplicateNameError(
                        f"The {entry.plugin_type} name {name!r} is provided by both "
                        f"{other.provider} and {entry.provider}; the first one keeps it and "
                        f"the plugin {entry.provider} is not loaded."
                    )
                seen[key] = entry

    # -- queries ---------------------------------------------------------------------

    def kernels(self) -> list[PluginEntry]:
        """Every registered kernel, sorted by name."""
        return sorted(self._entries["kernel"].values(), key=lambda e: e.name)

    def estimators(self) -> list[PluginEntry]:
        """Every registered estimator, sorted by name."""
        return sorted(self._entries["estimator"].values(), key=lambda e: e.name)

    def problems(self) -> list[PluginProblem]:
        """Plugins that were found but could not be registered."""
        return list(self._problems)

    def provider_of(self, module: str) -> Provider | None:
        """The third-party plugin whose code ``module`` (a module's ``__name__``) is: the
        module of one of its entry points or classes, or a submodule of it; None for the
        framework's own modules and its built-in plugins. The CLI names it when an error
        escapes a plugin's code through a method the framework does not guard."""
        for entry in (*self._entries["kernel"].values(), *self._entries["estimator"].values()):
            if entry.provider.distribution == OWN_DISTRIBUTION:
                continue
            for home in {entry.provider.module, entry.cls.__module__}:
                if module == home or module.startswith(home + "."):
                    return entry.provider
        return None

    def entry(self, plugin_type: str, name: str) -> PluginEntry:
        """The entry of a kernel or estimator; unknown names list the known ones."""
        if not isinstance(name, str):
            article, example = ("An", "u-stat") if plugin_type == "estimator" else ("A", "rbf")
            raise ParameterError(f"{article} {plugin_type} name is a string, e.g. {example!r}; got {type(name).__name__} {shown(name)}.")
        table = self._entries[plugin_type]
        name = self._aliases[plugin_type].get(name, name)
        if name not in table:
            other = "estimator" if plugin_type == "kernel" else "kernel"
            # a kernel given where the estimator goes (or the other way): say so, rather than
            # guess a look-alike ("Did you mean 'rff'?" for the kernel 'rbf')
            role = other if name in self._entries[other] or name in self._aliases[other] else None
            raise UnknownNameError(plugin_type, name, [*table, *self._aliases[plugin_type]], note=self._problems_note(), is_a=role)
        return table[name]

    def _problems_note(self) -> str:
        """What an unknown name's message adds when some plugin failed to load: it may be
        the one that would have provided the name."""
        if not self._problems:
            return ""
        listed = "; ".join(f"{p.provider}: {p.message.rstrip('.')}" for p in self._problems[:3])
        more = f" (and {len(self._problems) - 3} more)" if len(self._problems) > 3 else ""
        count = len(self._problems)
        return f" {count} plugin{'s' if count > 1 else ''} could not be loaded: {listed}{more}."

    def kernel_class(self, name: str) -> type[Kernel]:
        return self.entry("kernel", name).cls  # type: ignore[return-value]

    def estimator_class(self, name: str) -> type[Estimator]:
        return self.entry("estimator", name).cls  # type: ignore[return-value]

    def estimator_with_role(self, role: str, /, **params: Any) -> MMDEstimator:
        """The first registered MMD estimator (in name order) whose class declares ``role``
        (:attr:`MMDEstimator.role`, e.g. "v-statistic"), with settings ``params``."""
        for entry in sorted(self.estimators(), key=lambda e: e.name):
            if issubclass(entry.cls, MMDEstimator) and entry.cls.role == role:
                estimator = entry.cls.from_params(params)
                assert isinstance(estimator, MMDEstimator)
                return estimator
        raise PluginError(f"No installed estimator declares the role {role!r} (MMDEstimator.role); the built-in plugins do.")

    def get_kernel(self, name: str, /, **params: Any) -> Kernel:
        """A kernel by name with hyperparameters, e.g. ``get_kernel("rbf", sigma=1.0)``."""
        return self.kernel_class(name).from_params(params)

    def get_estimator(self, name: str, /, **params: Any) -> Estimator:
        """An estimator by name with settings, e.g. ``get_estimator("u-stat")``."""
        return self.estimator_class(name).from_params(params)

    def kernel_from_spec(self, name: str, params: Mapping[str, Any]) -> Kernel:
        """A kernel from its JSON form (a name and parameters): a registered kernel, or a
        combination (``sum``, ``product``, ``scaled``) whose parts are rebuilt the same way."""
        if name in COMPOSITES:
            parts = {
                key: self.kernel_from_spec(value["name"], value.get("params", {})) if isinstance(value, Mapping) and "name" in value else value
                for key, value in params.items()
            }
            return COMPOSITES[name](**parts)
        return self.get_kernel(name, **params)

    def resolve_kernel(self, kernel: Any) -> Kernel:
        """A kernel as given, or by spec: ``"rbf"``, ``"rbf:sigma=2"``, ``"gaussian"``."""
        if isinstance(kernel, str):
            name, params = parse_spec(kernel)
            return self.get_kernel(name, **params)
        return cast("Kernel", kernel)

    def resolve_estimator(self, estimator: Any) -> Estimator:
        """An estimator as given, or by spec: ``"u-stat"``, ``"monk-bcd:n_blocks=21"``."""
        if isinstance(estimator, str):
            name, params = parse_spec(estimator)
            return self.get_estimator(name, **params)
        return cast("Estimator", estimator)

    def find(self, name: str) -> list[PluginEntry]:
        """Every kernel and estimator called ``name`` (one of each at most)."""
        found = []
        for kind, table in self._entries.items():
            key = self._aliases[kind].get(name, name)
            if key in table:
                found.append(table[key])
        return found

    def names(self) -> list[str]:
        return sorted({n for t in self._entries.values() for n in t})


_default: Registry | None = None


def get_registry(*, refresh: bool = False) -> Registry:
    """The default registry of every installed plugin, built once and cached.

    ``refresh=True`` discovers the entry points again (after installing a plugin).
    """
    global _default
    if _default is None or refresh:
        _default = Registry()
    return _default


def kernel_from_spec(name: str, params: Mapping[str, Any], *, registry: Registry | None = None) -> Kernel:
    """A kernel from its name and parameters, in ``registry`` (default: the installed
    plugins' registry): see :meth:`Registry.kernel_from_spec`."""
    return (registry or get_registry()).kernel_from_spec(name, params)
