"""The hooks through which plugins add kernels and estimators.

A plugin is any importable module (or object) with functions marked by
:data:`hookimpl` whose names are hooks declared here. Third-party packages declare
the module as an entry point of group ``monk_framework.plugins``::

    [project.entry-points."monk_framework.plugins"]
    my_kernels = "my_package.kernels"

and the registry loads it; the built-in kernels and estimators are declared in
exactly the same way in monk_framework's own ``pyproject.toml``.

Every hook name starts with ``monk_``; a marked function whose name is not a hook
below (a misspelling) makes the registry reject the plugin and report why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from monk_framework.core.estimators import Estimator
    from monk_framework.core.kernels import Kernel

__all__ = ["PROJECT", "ENTRY_POINT_GROUP", "hookspec", "hookimpl", "monk_kernels", "monk_estimators"]

PROJECT = "monk_framework"
ENTRY_POINT_GROUP = "monk_framework.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
#: mark a plugin's hook implementations with ``@hookimpl``.
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def monk_kernels() -> list[type[Kernel]]:  # type: ignore[empty-body]
    """Return the kernel classes this plugin provides.

    Called once, when the registry loads the plugin. Each returned class must be a
    subclass of :class:`monk_framework.Kernel` decorated with
    ``@attrs.frozen(kw_only=True)``, with class attributes ``name`` (kebab-case, unique
    across all installed plugins: the name used by ``get_kernel`` and
    ``monkfw run --kernel``), ``summary`` (one line), ``formula`` and ``input_kind``
    ("vector" or "string"), every hyperparameter declared with
    :func:`monk_framework.core.params.parameter` and a default, and the core methods
    ``compute_gram(X, Y)`` and ``compute_diag(X)``.

    :return: a list of kernel classes (empty if the plugin provides none).
    """


@hookspec
def monk_estimators() -> list[type[Estimator]]:  # type: ignore[empty-body]
    """Return the estimator classes this plugin provides.

    Called once, when the registry loads the plugin. Each returned class must be a
    subclass of :class:`monk_framework.MMDEstimator` (implementing
    ``compute_estimate(kernel, X, Y, rng, resources)``) or
    :class:`monk_framework.EmbeddingEstimator` (implementing
    ``compute_embedding(kernel, X, rng, resources)``; ``resources`` is the call's
    :class:`monk_framework.core.resources.Resources`, to pass on to the engine), decorated with
    ``@attrs.frozen(kw_only=True)``, with class attributes ``name`` (kebab-case, unique
    across all installed plugins: the name used by ``get_estimator`` and
    ``monkfw run --estimator``), ``summary`` and ``formula``, and every setting declared
    with :func:`monk_framework.core.params.parameter` and a default.

    :return: a list of estimator classes (empty if the plugin provides none).
    """
