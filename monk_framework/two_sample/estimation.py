"""Estimates and embeddings, called as the tests are: the samples first, the kernel and
the estimator by keyword, objects or specs.

``estimate(X, Y, kernel="rbf:sigma=1", estimator="monk-bcd:n_blocks=21")`` is
``get_registry().get_estimator("monk-bcd", n_blocks=21).estimate(get_kernel("rbf",
sigma=1), X, Y)``. With the same seed, the number is the one ``monkfw run`` prints.
"""

from __future__ import annotations

from typing import Any

from monk_framework.core.embedding import Embedding
from monk_framework.core.errors import MonkError
from monk_framework.core.estimators import EmbeddingEstimator, MMDEstimator
from monk_framework.core.randomness import RNGLike
from monk_framework.core.resources import ProgressCallback, progress_callback
from monk_framework.core.results import MMDResult
from monk_framework.two_sample.common import previous_form, resolve_with_defaults

__all__ = ["DEFAULT_EMBEDDING", "embed", "estimate"]

#: the embedding estimator :func:`embed` uses when none is named: the empirical mean
#: embedding, the classical counterpart of the MONK estimators (Q = 1)
DEFAULT_EMBEDDING = "mean"


@previous_form("estimate", ("kernel", "estimator", "X", "Y"), "estimate(X, Y, kernel=..., estimator=...)")
def estimate(
    X: Any,
    Y: Any,
    *,
    kernel: Any = None,
    estimator: Any = None,
    rng: RNGLike = None,
    progress: ProgressCallback | None = None,
    max_memory: Any = None,
    backend: Any = None,
) -> MMDResult:
    """MMD(P, Q) estimated from X ~ P and Y ~ Q.

    Parameters
    ----------
    X, Y : array_like or sequence of str
        The samples.
    kernel : Kernel or str, optional
        An object or a spec such as ``"rbf:sigma=1"``; default ``"rbf"`` with σ by the
        median heuristic of the pooled sample (``"ssk"`` for strings).
    estimator : MMDEstimator or str, optional
        An object or a spec such as ``"monk-bcd:n_blocks=11"``; default ``"u-stat"``.
    rng, progress, max_memory, backend
        As for :meth:`MMDEstimator.estimate`: the seed, ``progress(done, total, what)``,
        the memory budget and where the Gram reductions run.

    Returns
    -------
    MMDResult
        ``mmd2``, ``mmd``, and the kernel (as fitted) and estimator used.
    """
    kern, est = resolve_with_defaults(kernel, estimator, X)
    if not isinstance(est, MMDEstimator):
        kind = " (an embedding estimator: use embed)" if isinstance(est, EmbeddingEstimator) else ""
        raise MonkError(f"estimate needs an MMD estimator, or its spec such as 'u-stat'; got {_name(est)}{kind}.")
    return est.estimate(kern, X, Y, rng=rng, max_memory=max_memory, backend=backend, progress=progress_callback(progress))


@previous_form("embed", ("kernel", "estimator", "X"), "embed(X, kernel=..., estimator=...)", positional_data=1)
def embed(
    X: Any,
    *,
    kernel: Any = None,
    estimator: Any = None,
    rng: RNGLike = None,
    progress: ProgressCallback | None = None,
    max_memory: Any = None,
) -> Embedding:
    """The mean embedding of the distribution of X, μ̂ = Σ_i w_i k(·, x_i).

    Parameters
    ----------
    X : array_like or sequence of str
        The sample.
    kernel : Kernel or str, optional
        Default ``"rbf"`` with σ by the median heuristic of X (``"ssk"`` for strings).
    estimator : EmbeddingEstimator or str, optional
        Default ``"mean"``, the empirical mean embedding; ``"monk-embedding:n_blocks=11"``
        is the paper's robust estimator (Eq. 3).
    rng, progress, max_memory
        The seed, ``progress(done, total, what)`` and the memory budget.

    Returns
    -------
    Embedding
        Evaluate it at points, take its norm, or its distance to another embedding.
    """
    kern, est = resolve_with_defaults(kernel, DEFAULT_EMBEDDING if estimator is None else estimator, X)
    if not isinstance(est, EmbeddingEstimator):
        kind = " (an MMD estimator: use estimate)" if isinstance(est, MMDEstimator) else ""
        raise MonkError(f"embed needs an embedding estimator, or its spec such as 'mean'; got {_name(est)}{kind}.")
    return est.embed(kern, X, rng=rng, max_memory=max_memory, progress=progress_callback(progress))


def _name(obj: Any) -> str:
    name = getattr(obj, "name", None)
    return repr(name) if isinstance(name, str) else f"{type(obj).__name__} {obj!r}"
