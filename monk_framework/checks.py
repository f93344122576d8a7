"""A conformance kit for plugin authors: does a kernel or an estimator keep the contract?

Call it from your own test suite::

    from monk_framework.checks import check_estimator, check_kernel

    def test_my_kernel_conforms():
        check_kernel(CauchyKernel)

Each check raises ``AssertionError`` with a message that names the plugin and the
broken rule; nothing is returned. The built-in kernels and estimators pass through the
same kit in monk_framework's own test suite.

:func:`check_kernel` calls the core methods a kernel implements (``compute_gram``, ``compute_diag``,
``compute_features``) directly, so it finds faults that the framework's own guards would
otherwise report only at run time: a Gram block of the wrong shape, an asymmetric
kernel, a ``compute_diag`` that disagrees with ``compute_gram``'s diagonal, randomness in a kernel,
a kernel declared PSD with negative eigenvalues, a broken feature map or bound.

:func:`check_estimator` checks that an estimate is reproducible from a seed and
round-trips through JSON, that a sample below the estimator's minimum size is a clear
error, and the reduction theory gives: with one block (``n_blocks=1``, no ridge) an
MMD estimator is the V-statistic and an embedding estimator the empirical mean.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from monk_framework.core.errors import DataError, MonkError
from monk_framework.core.estimators import EmbeddingEstimator, Estimator, MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.results import Embedding, MMDResult
from monk_framework.core.samples import Sample

__all__ = ["check_kernel", "check_estimator", "sample_for"]

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
#: relative tolerance of equalities that hold exactly in real arithmetic
RTOL = 1e-8


def sample_for(input_kind: str, n: int, seed: int, shift: float = 0.0) -> Any:
    """A small test sample: n points of N(shift, 0.25 I) in 3 dimensions, or n DNA-like
    strings of 3-12 letters over ACGT."""
    gen = np.random.default_rng(seed)
    if input_kind == "string":
        letters = np.array(list("ACGT"))
        return ["".join(gen.choice(letters, size=int(gen.integers(3, 13)))) for _ in range(n)]
    return gen.normal(size=(n, 3)) * 0.5 + shift


def _fail(label: str, message: str) -> None:
    raise AssertionError(f"{label}: {message}")


def _check_metadata(cls: Any, base: type, label: str) -> Any:
    if not (isinstance(cls, type) and issubclass(cls, base)):
        _fail(label, f"is not a subclass of {base.__name__}.")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not _NAME.match(name):
        _fail(label, f"name must be a kebab-case string like 'my-plugin'; got {name!r}.")
    for attr in ("summary", "formula"):
        if not isinstance(getattr(cls, attr, None), str) or not getattr(cls, attr):
            _fail(label, f"needs a non-empty class attribute {attr!r} (the docs and 'monkfw describe' show it).")
    try:
        obj = cls()
    except Exception as exc:  # noqa: BLE001 - any failure here is the plugin's
        _fail(label, f"cannot be built with its defaults: {type(exc).__name__}: {exc}. Every parameter needs a default.")
    if cls.from_params(obj.params()) != obj:
        _fail(label, "from_params(params()) does not give the same object back.")
    return obj


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    scale = max(float(np.abs(a).max(initial=0.0)), float(np.abs(b).max(initial=0.0)), 1e-300)
    return float(np.abs(a - b).max(initial=0.0)) / scale


def check_kernel(cls: type[Kernel]) -> None:
    """Check a kernel class against the contract; AssertionError on the first fault."""
    label = f"kernel {getattr(cls, 'name', cls)!r} ({getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls)})"
    kernel = _check_metadata(cls, Kernel, label)
    if cls.input_kind not in ("vector", "string"):
        _fail(label, f"input_kind must be 'vector' or 'string'; got {cls.input_kind!r}.")
    X, Y = sample_for(cls.input_kind, 30, 0), sample_for(cls.input_kind, 20, 1, shift=0.3)
    kernel = kernel.fit(X, Y)
    Xv, Yv = kernel.check_pair(X, Y)

    K = np.asarray(kernel.compute_gram(Xv, Xv), dtype=np.float64)
    if K.shape != (30, 30):
        _fail(label, f"compute_gram(X, X) returned shape {K.shape} for 30 points; it must return the whole (30, 30) block.")
    Kxy = np.asarray(kernel.compute_gram(Xv, Yv), dtype=np.float64)
    if Kxy.shape != (30, 20):
        _fail(label, f"compute_gram(X, Y) returned shape {Kxy.shape} for 30 x 20 points; it must return (30, 20).")
    d = np.asarray(kernel.compute_diag(Xv), dtype=np.float64)
    if d.shape != (30,):
        _fail(label, f"compute_diag(X) returned shape {d.shape} for 30 points; it must return (30,).")
    if not np.array_equal(K, np.asarray(kernel.compute_gram(Xv, Xv), dtype=np.float64)):
        _fail(label, "gives different values on the same input twice: a kernel must be deterministic.")
    if not (np.isfinite(K).all() and np.isfinite(Kxy).all() and np.isfinite(d).all()):
        _fail(label, "gives non-finite values on a small, well-scaled sample.")
    if _relative(K, K.T) > RTOL:
        i, j = (int(v) for v in np.unravel_index(int(np.argmax(np.abs(K - K.T))), K.shape))
        _fail(label, f"is not symmetric: k(x_{i}, x_{j}) = {K[i, j]:.6g} but k(x_{j}, x_{i}) = {K[j, i]:.6g}.")
    if _relative(np.diagonal(K), d) > 1e-6:
        i = int(np.argmax(np.abs(np.diagonal(K) - d)))
        _fail(label, f"compute_diag gives k(x_{i}, x_{i}) = {d[i]:.6g} but compute_gram's diagonal has {K[i, i]:.6g}; they must agree.")
    Kyx = np.asarray(kernel.compute_gram(Yv, Xv), dtype=np.float64)
    if Kyx.shape != (20, 30) or _relative(Kxy, Kyx.T) > RTOL:
        _fail(label, "compute_gram(Y, X) is not the transpose of compute_gram(X, Y).")
    if cls.is_psd:
        eig = np.linalg.eigvalsh((K + K.T) / 2)
        if eig.min() < -1e-8 * max(1.0, float(np.abs(eig).max())):
            _fail(label, f"is declared PSD (is_psd = True) but its Gram matrix has eigenvalue {eig.min():.3g} < 0.")
        if d.min() < -RTOL * max(1.0, float(np.abs(d).max())):
            _fail(label, "is declared PSD but k(x, x) < 0 for some x.")
    if cls.nonnegative and min(K.min(), Kxy.min()) < 0:
        _fail(label, "is declared nonnegative but gives negative values.")
    if cls.has_features:
        F, G = np.asarray(kernel.features(Xv)), np.asarray(kernel.features(Yv))
        if F.ndim != 2 or len(F) != 30 or _relative(F @ G.T, Kxy) > RTOL:
            _fail(label, "has_features is true but features(X) @ features(Y).T is not k(X, Y).")
    kappa = kernel.sup_diag()
    if kappa is not None and d.max() > kappa * (1 + 1e-12):
        _fail(label, f"declares sup_x k(x, x) = {kappa:.6g} (sup_diag) but k(x, x) reaches {d.max():.6g}.")
    # the public path agrees with the core (the framework's checks pass on it)
    try:
        public = kernel.gram(X)
    except MonkError as exc:
        _fail(label, f"gram(X) fails the framework's checks: {exc}")
    if _relative(public, K) > 1e-6:
        _fail(label, "gram(X) differs from compute_gram(X, X).")
    # a direct block Gram matrix, where the kernel has one, is W'KW of its own Gram matrix
    W = np.random.default_rng(2).normal(size=(30, 2))
    try:
        G = kernel.direct_block_gram(Xv, W, d)
    except MonkError as exc:
        _fail(label, f"compute_block_gram fails the framework's checks: {exc}")
    if G is not None and _relative(G, W.T @ public @ W) > RTOL:
        _fail(label, "compute_block_gram(X, W, diag) is not W' K W for the Gram matrix K of X.")


def _mmd_v(kernel: Kernel, X: Sample, Y: Sample) -> float:
    kxx, kyy, kxy = kernel.gram(X).mean(), kernel.gram(Y).mean(), kernel.gram(X, Y).mean()
    return float(np.sqrt(max(kxx + kyy - 2 * kxy, 0.0)))


def check_estimator(cls: type[Estimator], *, kernel: Kernel | None = None) -> None:
    """Check an estimator class against the contract; AssertionError on the first fault.

    ``kernel`` is the kernel to estimate with (default: the Gaussian kernel k(x, y) =
    exp(−‖x − y‖²/2), written here so that the check needs no plugin).
    """
    label = f"estimator {getattr(cls, 'name', cls)!r} ({getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls)})"
    est = _check_metadata(cls, Estimator, label)
    if not isinstance(est, (MMDEstimator, EmbeddingEstimator)):
        _fail(label, "must subclass MMDEstimator or EmbeddingEstimator.")
    kernel = kernel if kernel is not None else _Gaussian()
    need = max(est.min_sample_size()[0], 2)
    n = max(8 * need, 40)
    X, Y = sample_for(kernel.input_kind, n, 5), sample_for(kernel.input_kind, n + 3, 6, shift=0.5)
    if isinstance(est, MMDEstimator):
        a, b = est.estimate(kernel, X, Y, rng=11), est.estimate(kernel, X, Y, rng=11)
        if (a.mmd2, a.mmd, a.diagnostics) != (b.mmd2, b.mmd, b.diagnostics):
            _fail(label, "gives different estimates with the same seed: draw every random choice from rng.")
        if not np.isfinite(a.mmd2):
            _fail(label, "returns a non-finite MMD².")
        if MMDResult.from_json(a.to_json()) != a:
            _fail(label, "its result does not round-trip through JSON (diagnostics must be JSON values).")
    else:
        a2, b2 = est.embed(kernel, X, rng=11), est.embed(kernel, X, rng=11)
        if not np.array_equal(a2.weights, b2.weights):
            _fail(label, "gives different embeddings with the same seed: draw every random choice from rng.")
        if Embedding.from_dict(a2.to_dict(), kernel=kernel) != a2:
            _fail(label, "its embedding does not round-trip through JSON (diagnostics must be JSON values).")
    if need > 2:
        small = sample_for(kernel.input_kind, need - 1, 0)
        try:
            if isinstance(est, MMDEstimator):
                est.estimate(kernel, small, Y)
            else:
                est.embed(kernel, small)
        except DataError:
            pass
        else:
            _fail(label, f"accepts {need - 1} points although min_sample_size() says it needs {need}.")
    names = {p.name for p in cls.parameters()}
    if "n_blocks" in names:
        one = cls.from_params({"n_blocks": 1, **({"ridge": 0.0} if "ridge" in names else {})})
        if isinstance(one, MMDEstimator):
            got, want = one.estimate(kernel, X, Y, rng=3).mmd, _mmd_v(kernel.fit(X, Y), X, Y)
            if abs(got - want) > 1e-8 * max(want, 1e-12):
                _fail(label, f"with n_blocks=1 gives MMD {got:.10g}; the V-statistic is {want:.10g} (one block is the whole sample).")
        elif isinstance(one, EmbeddingEstimator):
            w = one.embed(kernel, X, rng=3).weights
            if not np.allclose(w, 1 / len(X), rtol=1e-8, atol=0):
                _fail(label, "with n_blocks=1 does not give the empirical mean embedding (weights 1/N).")


def _gaussian_kernel_class() -> type[Kernel]:
    """The Gaussian kernel with σ = 1, for estimator checks that need no plugin."""
    import attrs

    @attrs.frozen(kw_only=True)
    class Gaussian(Kernel):
        name = "conformance-gaussian"
        summary = "exp(-||x - y||^2 / 2), the conformance kit's kernel"
        formula = "k(x, y) = exp(-||x - y||^2 / 2)"
        nonnegative = True
        translation_invariant = True

        def spectral_frequencies(self, d: int, n_features: int, rng: np.random.Generator) -> np.ndarray:
            return rng.standard_normal((n_features, d))

        def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
            sq = (X**2).sum(1)[:, None] + (Y**2).sum(1)[None, :] - 2 * X @ Y.T
            return np.asarray(np.exp(-np.maximum(sq, 0.0) / 2))

        def compute_diag(self, X: Any) -> np.ndarray:
            return np.ones(len(X))

        def sup_diag(self) -> float | None:
            return 1.0

    return Gaussian


def _Gaussian() -> Kernel:
    return _gaussian_kernel_class()()

