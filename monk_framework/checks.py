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
a kernel declared PSD with negative eigenvalues, a broken feature map or bound, an output
buffer reused across calls (which threads calling at once would share). Every
optional hook the engine may call is checked against its definition: ``sup_diag`` bounds
every value, ``feature_diameter`` every distance between feature vectors,
``translation_invariant`` holds under a shift, ``spectral_frequencies`` give the kernel
by Bochner's theorem (Monte Carlo on 100 pairs), ``gaussian_expectation`` matches
20 000 draws, ``compute_block_gram`` is WᵀKW, overrides of ``symmetric_gram`` and
``rectangular_gram`` give ``compute_gram``'s matrices, ``anchored`` gives
k(a + u, a + v) − k(a + u, a) − k(a, a + v) + k(a, a) (values, diagonal, features; anchored
twice, at a + b).

:func:`check_estimator` checks that an estimate is reproducible from a seed and
round-trips through JSON, that a sample below the estimator's minimum size is a clear
error, and the reduction theory gives: with one block (``n_blocks=1``, no ridge) an
MMD estimator is the V-statistic and an embedding estimator the empirical mean. The
hooks a test calls are checked against the estimator's own core: ``permuted_statistics``
is ``compute_estimate`` on each relabelled pair with the same randomness,
``mmd2_from_sums`` and a declared ``role`` give the estimate, a ``fixed_partition``
covers the samples and its ``partition_statistics`` are finite and reproducible, and
``diagnostic_rows`` are pairs of strings.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

import numpy as np

from monk_framework.core.embedding import Embedding
from monk_framework.core.errors import DataError, MonkError
from monk_framework.core.estimators import EmbeddingEstimator, Estimator, MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.resources import Resources
from monk_framework.core.results import MMDResult
from monk_framework.core.samples import Sample
from monk_framework.engine.partitions import Partition
from monk_framework.engine.pooled import PooledSample, sample_sums, u_statistic, v_statistic

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


def _fail(label: str, message: str) -> NoReturn:
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
    plugin: Any = cls  # a Configurable subclass from here on
    try:
        obj = plugin()
    except Exception as exc:  # noqa: BLE001 - any failure here is the plugin's
        _fail(label, f"cannot be built with its defaults: {type(exc).__name__}: {exc}. Every parameter needs a default.")
    if plugin.from_params(obj.params()) != obj:
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
    kernel = kernel.fitted(*kernel.check_pair(X, Y))
    Xv, Yv = kernel.check_pair(X, Y)
    K, Kxy, d = _check_core_blocks(kernel, label, Xv, Yv)
    _check_declared_properties(kernel, label, Xv, Yv, K, Kxy, d)
    public = _check_public_path(kernel, label, X, Y, Xv, K, Kxy, d)
    _check_bounds(kernel, label, public, Kxy, d)
    _check_invariances(kernel, label, Xv, Yv, Kxy)
    _check_pair_values(kernel, label, Xv, Yv, Kxy)
    _check_anchored(kernel, label, Xv, Yv, Kxy)
    _check_spectral_frequencies(kernel, label, Xv, Yv, Kxy)
    _check_gaussian_expectation(kernel, label)


def _check_core_blocks(kernel: Kernel, label: str, Xv: Sample, Yv: Sample) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """compute_gram and compute_diag on 30 and 20 points: shapes, determinism, fresh
    arrays, finiteness, symmetry, the diagonal against compute_diag, k(Y, X) = k(X, Y)ᵀ.
    Returns k(X, X), k(X, Y) and k(x, x)."""
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
    _check_fresh_arrays(kernel, label, Xv, Yv)
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
    return K, Kxy, d


def _check_declared_properties(kernel: Kernel, label: str, Xv: Sample, Yv: Sample, K: np.ndarray, Kxy: np.ndarray, d: np.ndarray) -> None:
    """What the class declares holds on the sample: is_psd (no negative eigenvalue, k(x, x)
    ≥ 0), nonnegative, its features (and their count), sup_diag on the diagonal."""
    cls = type(kernel)
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
        count = kernel.feature_count(Xv) if isinstance(Xv, np.ndarray) else F.shape[1]
        if count != F.shape[1]:
            _fail(label, f"compute_feature_count({np.asarray(Xv).shape[1]}) gives {count}, but features(X) has {F.shape[1]} columns.")
    kappa = kernel.sup_diag()
    if kappa is not None and d.max() > kappa * (1 + 1e-12):
        _fail(label, f"declares sup_x k(x, x) = {kappa:.6g} (sup_diag) but k(x, x) reaches {d.max():.6g}.")


def _check_public_path(kernel: Kernel, label: str, X: Any, Y: Any, Xv: Sample, K: np.ndarray, Kxy: np.ndarray, d: np.ndarray) -> np.ndarray:
    """gram(X) and gram(X, Y), the framework's checked path (and any override of
    symmetric_gram or rectangular_gram), agree with the core; a direct block Gram matrix,
    where the kernel has one, is W'KW. Returns gram(X)."""
    try:
        public = kernel.gram(X)
    except MonkError as exc:
        _fail(label, f"gram(X) fails the framework's checks: {exc}")
    if _relative(public, K) > 1e-6:
        _fail(label, "gram(X) differs from compute_gram(X, X).")
    try:
        public_xy = kernel.gram(X, Y)
    except MonkError as exc:
        _fail(label, f"gram(X, Y) fails the framework's checks: {exc}")
    if public_xy.shape != Kxy.shape or _relative(public_xy, Kxy) > 1e-6:
        _fail(label, "gram(X, Y) differs from compute_gram(X, Y) (an override of rectangular_gram must give the same matrix).")
    W = np.random.default_rng(2).normal(size=(30, 2))
    try:
        G = kernel.direct_block_gram(Xv, W, d)
    except MonkError as exc:
        _fail(label, f"compute_block_gram fails the framework's checks: {exc}")
    if G is not None and _relative(G, W.T @ public @ W) > RTOL:
        _fail(label, "compute_block_gram(X, W, diag) is not W' K W for the Gram matrix K of X.")
    return public


def _check_invariances(kernel: Kernel, label: str, Xv: Sample, Yv: Sample, Kxy: np.ndarray) -> None:
    """translation_invariant survives a common shift of the points, and shift_free_mmd a
    common shift of the data's MMD (the framework reads such a kernel's MMD on centred data)."""
    cls = type(kernel)
    if cls.input_kind != "vector":
        return
    shift = np.asarray(Xv)[:1] * 0.0 + 0.37
    if cls.translation_invariant:
        moved = np.asarray(kernel.compute_gram(np.asarray(Xv) + shift, np.asarray(Yv) + shift), dtype=np.float64)
        if _relative(moved, Kxy) > 1e-6:
            _fail(label, "declares translation_invariant = True but k(x + c, y + c) differs from k(x, y).")
    if kernel.shift_free_mmd():
        here, there = _mmd_v(kernel, Xv, Yv), _mmd_v(kernel, np.asarray(Xv) + shift, np.asarray(Yv) + shift)
        if abs(there - here) > 1e-6 * max(here, 1e-12):
            _fail(label, f"declares shift_free_mmd() but a common shift of the data moves its MMD from {here:.6g} to {there:.6g}.")


def _check_fresh_arrays(kernel: Kernel, label: str, X: Sample, Y: Sample) -> None:
    """A later call leaves what an earlier call returned alone: the framework calls
    ``compute_gram`` and ``compute_diag`` from several threads at once and keeps a tile
    while the next is computed, so an output buffer reused across calls would be written
    by one call while another's values are still being read."""
    others = kernel.check_pair(sample_for(kernel.input_kind, len(X), 11, shift=1.0), sample_for(kernel.input_kind, len(Y), 12, shift=-1.0))
    for method, first_args, then_args in (("compute_gram", (X, Y), others), ("compute_diag", (X,), others[:1])):
        hook = getattr(kernel, method)
        first = hook(*first_args)
        kept = np.array(first, dtype=np.float64, copy=True)
        hook(*then_args)
        if not np.array_equal(np.asarray(first, dtype=np.float64), kept):
            _fail(
                label,
                f"{method} wrote into the array it had returned before (a reused output buffer?): the "
                f"framework calls {method} from several threads at once and keeps what it returns, so each "
                "call must return a new array.",
            )


def _check_pair_values(kernel: Kernel, label: str, X: Sample, Y: Sample, Kxy: np.ndarray) -> None:
    """compute_pair_values(A, B), where a kernel has it (the incomplete U-statistic reads
    its pairs from it), is the diagonal of k(A, B)."""
    if type(kernel).compute_pair_values is Kernel.compute_pair_values:
        return
    A, B = X[:20], Y[:20]
    try:
        got = kernel.pair_values(A, B)
    except MonkError as exc:
        _fail(label, f"compute_pair_values fails the framework's checks: {exc}")
    if _relative(got, np.diagonal(Kxy[:20, :20])) > RTOL:
        _fail(label, "compute_pair_values(A, B) is not the diagonal of k(A, B): k(a_l, b_l) for each pair l.")


def _check_bounds(kernel: Kernel, label: str, K: np.ndarray, Kxy: np.ndarray, d: np.ndarray) -> None:
    """sup_diag bounds every value (Cauchy–Schwarz), and feature_diameter every distance
    ‖φ(x) − φ(x′)‖ = √(k(x, x) + k(x′, x′) − 2k(x, x′)) between points of the sample: a
    robust test's guarantee is computed from them."""
    kappa = kernel.sup_diag()
    if kappa is not None and max(np.abs(K).max(), np.abs(Kxy).max()) > kappa * (1 + 1e-9):
        _fail(label, f"declares sup_diag() = {kappa:.6g} but a value k(x, y) reaches {max(np.abs(K).max(), np.abs(Kxy).max()):.6g}.")
    diameter = kernel.feature_diameter()
    if kappa is None and diameter is not None:
        _fail(label, "declares a feature_diameter but no sup_diag: a bounded feature map has bounded k(x, x).")
    if diameter is not None:
        dist2 = d[:, None] + d[None, :] - 2.0 * K
        reached = float(np.sqrt(max(float(dist2.max()), 0.0)))
        if reached > diameter * (1 + 1e-9) + 1e-12:
            _fail(label, f"declares feature_diameter() = {diameter:.6g} but two points are {reached:.6g} apart in feature space.")


#: frequencies drawn to check spectral_frequencies: the Monte-Carlo error of each value is
#: at most 1/√(2 · 40 000) ≈ 0.0035 (a cosine's variance is at most 1/2)
SPECTRAL_DRAWS = 40000


def _check_anchored(kernel: Kernel, label: str, X: Sample, Y: Sample, Kxy: np.ndarray) -> None:
    """The anchored kernel (:meth:`Kernel.anchored`), which every MMD path uses on data far
    from the origin: on the data moved by −a its values, diagonal and features are
    k(a + u, a + v) − k(a + u, a) − k(a, a + v) + k(a, a), and anchoring it again at b
    anchors at a + b. Checked at a point near the sample, where the four values keep
    their digits."""
    if kernel.input_kind != "vector":
        return
    X, Y = np.asarray(X), np.asarray(Y)
    a = X[0] + 0.25
    try:
        anchored = kernel.checked_anchored(a)
    except MonkError as exc:
        _fail(label, f"anchored fails the framework's checks: {exc}")
    if anchored is None:
        return
    if anchored.params() != kernel.params():
        _fail(label, f"anchored(a) changes the parameters ({anchored.params()} vs {kernel.params()}); the anchor is no parameter.")
    A = a[None, :]

    def about(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        return (
            np.asarray(kernel.compute_gram(P, Q))
            - np.asarray(kernel.compute_gram(P, A))
            - np.asarray(kernel.compute_gram(A, Q))
            + np.asarray(kernel.compute_gram(A, A))
        )

    want, scale = about(X, Y), max(float(np.abs(Kxy).max()), 1e-300)
    _check_anchored_values(anchored, label, X, Y, a, want, np.diagonal(about(X, X)), scale)
    _check_anchored_twice(kernel, anchored, label, X, Y, a, scale)


def _check_anchored_values(
    anchored: Kernel, label: str, X: np.ndarray, Y: np.ndarray, a: np.ndarray, want: np.ndarray, want_diag: np.ndarray, scale: float
) -> None:
    """The anchored kernel's values, diagonal and features on the moved data are the four-term expressions."""
    got = np.asarray(anchored.compute_gram(X - a, Y - a), dtype=np.float64)
    if got.shape != want.shape or np.abs(got - want).max() > RTOL * scale:
        _fail(label, "anchored(a).compute_gram(X - a, Y - a) is not k(x, y) - k(x, a) - k(a, y) + k(a, a).")
    diag = np.asarray(anchored.compute_diag(X - a), dtype=np.float64)
    if diag.shape != (len(X),) or np.abs(diag - want_diag).max() > RTOL * scale:
        _fail(label, "anchored(a).compute_diag(X - a) is not k(x, x) - 2 k(x, a) + k(a, a).")
    if type(anchored).has_features:
        F, G = np.asarray(anchored.features(X - a)), np.asarray(anchored.features(Y - a))
        if F.shape[0] != len(X) or np.abs(F @ G.T - want).max() > RTOL * scale:
            _fail(label, "anchored(a).features(X - a) @ anchored(a).features(Y - a).T is not the anchored kernel.")


def _check_anchored_twice(kernel: Kernel, anchored: Kernel, label: str, X: np.ndarray, Y: np.ndarray, a: np.ndarray, scale: float) -> None:
    """Anchoring again at b anchors at a + b."""
    b = np.full_like(a, -0.5)
    twice = anchored.checked_anchored(b)
    once = kernel.checked_anchored(a + b)
    if twice is None or once is None:
        _fail(label, "anchored(a).anchored(b) or anchored(a + b) is None where anchored(a) is a kernel.")
    moved_x, moved_y = X - (a + b), Y - (a + b)
    if np.abs(np.asarray(twice.compute_gram(moved_x, moved_y)) - np.asarray(once.compute_gram(moved_x, moved_y))).max() > RTOL * scale:
        _fail(label, "anchored(a).anchored(b) is not anchored(a + b): anchoring again must add the anchors.")


def _check_spectral_frequencies(kernel: Kernel, label: str, X: Sample, Y: Sample, Kxy: np.ndarray) -> None:
    """Bochner: k(x, y) = k(x, x) · E_ω cos(ωᵀ(x − y)) for the frequencies a
    translation-invariant kernel draws; checked by Monte Carlo on 10 × 10 pairs (the
    random Fourier features of ``rff`` are built from them)."""
    try:
        omega = kernel.spectral_frequencies(np.asarray(X).shape[1], SPECTRAL_DRAWS, np.random.default_rng(7)) if kernel.input_kind == "vector" else None
    except MonkError:
        return  # not available for these parameters (e.g. a fitted bandwidth missing)
    if omega is None:
        return
    omega = np.asarray(omega, dtype=np.float64)
    d = np.asarray(X).shape[1]
    if omega.shape != (SPECTRAL_DRAWS, d) or not np.isfinite(omega).all():
        _fail(
            label,
            f"spectral_frequencies(d={d}, n_features={SPECTRAL_DRAWS}) must return {SPECTRAL_DRAWS} finite rows of {d} frequencies; got shape {omega.shape}.",
        )
    again = np.asarray(kernel.spectral_frequencies(d, SPECTRAL_DRAWS, np.random.default_rng(7)))
    if not np.array_equal(omega, again):
        _fail(label, "spectral_frequencies gives different frequencies from the same rng: draw them from rng only.")
    A, B = np.asarray(X)[:10], np.asarray(Y)[:10]
    diffs = (A[:, None, :] - B[None, :, :]).reshape(-1, d)
    scale = float(np.asarray(kernel.compute_diag(A[:1]))[0])
    approx = scale * np.cos(diffs @ omega.T).mean(axis=1).reshape(10, 10)
    worst = float(np.abs(approx - Kxy[:10, :10]).max())
    # 0.025 is seven Monte-Carlo standard errors of one value
    if worst > 0.025 * max(scale, 1e-300):
        _fail(
            label,
            f"spectral_frequencies do not give the kernel: k(x, x) E cos(w'(x - y)) differs from k(x, y) by "
            f"up to {worst:.3g} over 100 pairs (Bochner's theorem; random Fourier features would be biased).",
        )


def _check_gaussian_expectation(kernel: Kernel, label: str) -> None:
    """E k(x, y) for x ~ N(m1, c1), y ~ N(m2, c2) against a Monte-Carlo mean of 20 000
    pairs, within five of its standard errors (the built-in data sets' true MMD comes
    from it)."""
    if kernel.input_kind != "vector":
        return
    m1, m2 = np.array([0.1, -0.2]), np.array([0.6, 0.3])
    c1, c2 = np.array([[1.0, 0.3], [0.3, 0.8]]), np.array([[0.5, 0.0], [0.0, 1.2]])
    try:
        closed = float(kernel.gaussian_expectation(m1, c1, m2, c2))
    except MonkError:
        return  # no closed form: nothing claimed
    gen = np.random.default_rng(8)
    x, y = gen.multivariate_normal(m1, c1, 20000), gen.multivariate_normal(m2, c2, 20000)
    values = kernel.pair_values(x, y)
    mean, err = float(values.mean()), float(values.std() / np.sqrt(len(values)))
    if not np.isfinite(closed) or abs(closed - mean) > 5 * err + 1e-12 * max(1.0, abs(mean)):
        _fail(label, f"gaussian_expectation gives E k(x, y) = {closed:.6g}, but 20 000 draws give {mean:.6g} +/- {err:.2g}.")


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
    try:
        need = max(est.required_size()[0], 2)
    except MonkError as exc:
        _fail(label, f"min_sample_size fails the framework's checks: {exc}")
    n = max(8 * need, 40)
    X, Y = sample_for(kernel.input_kind, n, 5), sample_for(kernel.input_kind, n + 3, 6, shift=0.5)
    if isinstance(est, MMDEstimator):
        _check_mmd_estimates(est, kernel, X, Y, label)
    else:
        _check_embeddings(est, kernel, X, label)
    if need > 2:
        _check_refuses_too_few(est, kernel, Y, need, label)
    if "n_blocks" in {p.name for p in cls.parameters()}:
        _check_one_block(cls, kernel, X, Y, label)


def _check_mmd_estimates(est: MMDEstimator, kernel: Kernel, X: Sample, Y: Sample, label: str) -> None:
    """One seed, one estimate; a finite MMD²; a JSON round trip; diagnostic rows of
    strings; and the hooks a test calls (:func:`_check_test_hooks`)."""
    a, b = est.estimate(kernel, X, Y, rng=11), est.estimate(kernel, X, Y, rng=11)
    if (a.mmd2, a.mmd, a.diagnostics) != (b.mmd2, b.mmd, b.diagnostics):
        _fail(label, "gives different estimates with the same seed: draw every random choice from rng.")
    if not np.isfinite(a.mmd2):
        _fail(label, "returns a non-finite MMD².")
    if MMDResult.from_json(a.to_json()) != a:
        _fail(label, "its result does not round-trip through JSON (diagnostics must be JSON values).")
    rows = est.diagnostic_rows(a.diagnostics, a.timings)
    if not (isinstance(rows, list) and all(isinstance(r, tuple) and len(r) == 2 and all(isinstance(t, str) for t in r) for r in rows)):
        _fail(label, "diagnostic_rows must return a list of (label, text) pairs of strings.")
    _check_test_hooks(est, kernel, X, Y, a.mmd2, label)


def _check_embeddings(est: EmbeddingEstimator, kernel: Kernel, X: Sample, label: str) -> None:
    """One seed, one embedding; a JSON round trip."""
    a, b = est.embed(kernel, X, rng=11), est.embed(kernel, X, rng=11)
    if not np.array_equal(a.weights, b.weights):
        _fail(label, "gives different embeddings with the same seed: draw every random choice from rng.")
    if Embedding.from_dict(a.to_dict(), kernel=kernel) != a:
        _fail(label, "its embedding does not round-trip through JSON (diagnostics must be JSON values).")


def _check_refuses_too_few(est: Estimator, kernel: Kernel, Y: Sample, need: int, label: str) -> None:
    """A sample one point below ``min_sample_size()`` is refused with a DataError."""
    small = sample_for(kernel.input_kind, need - 1, 0)
    try:
        if isinstance(est, MMDEstimator):
            est.estimate(kernel, small, Y)
        elif isinstance(est, EmbeddingEstimator):
            est.embed(kernel, small)
    except DataError:
        return
    _fail(label, f"accepts {need - 1} points although min_sample_size() says it needs {need}.")


def _check_one_block(cls: type[Estimator], kernel: Kernel, X: Sample, Y: Sample, label: str) -> None:
    """With ``n_blocks=1`` (and no ridge) an estimator is its classical counterpart: the
    V-statistic MMD, or the empirical mean embedding."""
    names = {p.name for p in cls.parameters()}
    one = cls.from_params({"n_blocks": 1, **({"ridge": 0.0} if "ridge" in names else {})})
    if isinstance(one, MMDEstimator):
        got, want = one.estimate(kernel, X, Y, rng=3).mmd, _mmd_v(kernel.fit(X, Y), X, Y)
        if abs(got - want) > 1e-8 * max(want, 1e-12):
            _fail(label, f"with n_blocks=1 gives MMD {got:.10g}; the V-statistic is {want:.10g} (one block is the whole sample).")
    elif isinstance(one, EmbeddingEstimator):
        w = one.embed(kernel, X, rng=3).weights
        if not np.allclose(w, 1 / len(X), rtol=1e-8, atol=0):
            _fail(label, "with n_blocks=1 does not give the empirical mean embedding (weights 1/N).")


def _check_test_hooks(est: MMDEstimator, kernel: Kernel, X: Sample, Y: Sample, mmd2: float, label: str) -> None:
    """The hooks a test calls, against the estimator's own core: the MMD² of a
    relabelling from ``permuted_statistics`` is ``compute_estimate`` on the relabelled
    samples with the same randomness; ``mmd2_from_sums`` of the samples' kernel sums is the
    estimate; a declared ``role`` is that classical statistic; a fixed partition covers
    the samples and its ``partition_statistics`` are finite and reproducible."""
    resources = Resources.of()
    Xv, Yv = kernel.check_pair(X, Y)
    fitted = kernel.fitted(Xv, Yv)
    pool = PooledSample(fitted, Xv, Yv, resources=resources)
    n, m = len(Xv), len(Yv)
    gen = np.random.default_rng(4)
    perms = np.vstack([np.arange(n + m), gen.permutation(n + m)])  # the identity, and one relabelling
    seeds = [np.random.SeedSequence(20 + b) for b in range(len(perms))]

    def streams() -> list[np.random.Generator]:
        return [np.random.default_rng(seed) for seed in seeds]

    got = np.asarray(est.permuted_statistics(pool, perms, streams()), dtype=np.float64)
    want = np.array([est.compute_estimate(fitted, *pool.relabelled(p), rng, resources).mmd2 for p, rng in zip(perms, streams())])
    if got.shape != want.shape or _relative(got, want) > 1e-8:
        _fail(
            label,
            "permuted_statistics(pool, perms, rngs) differs from compute_estimate on the relabelled samples "
            "with the same rng: a permutation test would not test this estimator.",
        )
    if not 1 <= int(est.permutation_batch(pool)):
        _fail(label, "permutation_batch(pool) must be at least 1.")
    sums = sample_sums(pool, perms[:1])
    _check_sums_and_role(est, sums, n, m, mmd2, label)
    partition = est.fixed_partition(n, m, np.random.default_rng(9))
    if partition is not None:
        sizes = None if not isinstance(partition, Partition) or partition.y_labels is None else (len(partition.x_labels), len(partition.y_labels))
        if sizes != (n, m):
            _fail(label, f"fixed_partition({n}, {m}, rng) must return a Partition of the {n} + {m} points.")
        first = np.asarray(est.partition_statistics(pool, partition, perms, streams()), dtype=np.float64)
        again = np.asarray(est.partition_statistics(pool, partition, perms, streams()), dtype=np.float64)
        if first.shape != (len(perms),) or not np.isfinite(first).all() or not np.array_equal(first, again):
            _fail(label, "partition_statistics must give one finite MMD^2 per relabelling, the same from the same rngs.")


def _check_sums_and_role(est: MMDEstimator, sums: Any, n: int, m: int, mmd2: float, label: str) -> None:
    """``mmd2_from_sums`` of the samples' kernel sums, where given, is the estimate, and a
    declared ``role`` is that classical statistic."""
    from_sums = est.mmd2_from_sums(sums, n, m)
    if from_sums is not None and abs(float(np.asarray(from_sums).ravel()[0]) - mmd2) > 1e-8 * max(abs(mmd2), 1e-12):
        _fail(
            label,
            f"mmd2_from_sums of the samples' kernel sums gives {float(np.asarray(from_sums).ravel()[0]):.10g}, "
            f"but the estimate is {mmd2:.10g}; robust tests compute it inside every block.",
        )
    if est.role is None:
        return
    classical = {"v-statistic": v_statistic, "u-statistic": u_statistic}.get(est.role)
    if classical is None:
        _fail(label, f"role must be 'v-statistic', 'u-statistic' or None; got {est.role!r}.")
    expected = float(np.asarray(classical(sums, n, m)).ravel()[0])
    if abs(expected - mmd2) > 1e-8 * max(abs(expected), 1e-12):
        _fail(
            label,
            f"declares role {est.role!r} but estimates MMD^2 = {mmd2:.10g} where that statistic is {expected:.10g}; tests built on the role would use it.",
        )


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

        def compute_pair_values(self, A: Any, B: Any) -> np.ndarray:
            # one difference a pair: the incomplete U-statistic's 10^5 pairs in milliseconds
            diff = np.asarray(A) - np.asarray(B)
            return np.asarray(np.exp(-np.einsum("ij,ij->i", diff, diff) / 2))

        def sup_diag(self) -> float | None:
            return 1.0

    return Gaussian


def _Gaussian() -> Kernel:
    return _gaussian_kernel_class()()
