"""Estimates and embeddings by spec, as the tests take them.

``estimate("rbf:sigma=1", "monk-bcd:n_blocks=21", X, Y)`` is
``get_registry().get_estimator("monk-bcd", n_blocks=21).estimate(get_kernel("rbf",
sigma=1), X, Y)``: the same kernel and estimator arguments as
:func:`~monk_framework.two_sample.permutation_test`, either objects or specs
(``"name:key=value,..."``) looked up in the registry of installed plugins. With the same
seed, the number is the one ``monkfw run`` prints.
"""

from __future__ import annotations

from typing import Any

from monk_framework.core.errors import MonkError
from monk_framework.core.estimators import EmbeddingEstimator, MMDEstimator
from monk_framework.core.randomness import RNGLike
from monk_framework.core.results import Embedding, MMDResult
from monk_framework.two_sample.common import resolve

__all__ = ["embed", "estimate"]


def estimate(
    kernel: Any, estimator: Any, X: Any, Y: Any, *, rng: RNGLike = None, max_memory: Any = None, backend: Any = None,
    progress: Any = None,
) -> MMDResult:
    """MMD(P, Q) estimated from X ~ P and Y ~ Q by ``estimator`` with ``kernel`` (objects
    or specs such as ``"rbf:sigma=1"``, ``"u-stat"``); ``rng``, ``max_memory``,
    ``backend`` and ``progress`` as for :meth:`MMDEstimator.estimate`."""
    kern, est = resolve(kernel, estimator, form="estimate(kernel, estimator, X, Y)")
    if not isinstance(est, MMDEstimator):
        kind = " (an embedding estimator: use embed)" if isinstance(est, EmbeddingEstimator) else ""
        raise MonkError(f"estimate needs an MMD estimator, or its spec such as 'u-stat'; got {_name(est)}{kind}.")
    return est.estimate(kern, X, Y, rng=rng, max_memory=max_memory, backend=backend, progress=progress)


def embed(
    kernel: Any, estimator: Any, X: Any, *, rng: RNGLike = None, max_memory: Any = None, progress: Any = None
) -> Embedding:
    """The mean embedding of the distribution of X by ``estimator`` with ``kernel`` (objects
    or specs, e.g. ``embed("rbf", "monk-embedding:n_blocks=11", X)``)."""
    kern, est = resolve(kernel, estimator, form="embed(kernel, estimator, X)")
    if not isinstance(est, EmbeddingEstimator):
        kind = " (an MMD estimator: use estimate)" if isinstance(est, MMDEstimator) else ""
        raise MonkError(f"embed needs an embedding estimator, or its spec such as 'mean'; got {_name(est)}{kind}.")
    return est.embed(kern, X, rng=rng, max_memory=max_memory, progress=progress)


def _name(obj: Any) -> str:
    name = getattr(obj, "name", None)
    return repr(name) if isinstance(name, str) else f"{type(obj).__name__} {obj!r}"
