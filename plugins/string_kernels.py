"""Kernels on strings: the string subsequence kernel (SSK) of Lodhi et al. (2002).

The algorithms are in :mod:`monk_plugins.ssk_core`; this module is the plugin (the
kernel's parameters, the choice of algorithm, normalisation) and its registration.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from monk_framework import DataError, DataWarning, Kernel, ParameterError, as_strings, hookimpl, parameter
from monk_framework.plugin import BandRunner, boolean, chunk_rows, in_turn, integer, real, reserve_memory, run_on_cores, table_room

from . import ssk_core as core
from . import ssk_pairs as pairs_ssk


@attrs.frozen
class Plan:
    """How one SSK Gram matrix is computed: which letters get features, which pairs the DP."""

    main: list[str]
    rare: list[str]
    #: seconds the choice expects (feature products, pair programme); for diagnostics
    feature_s: float
    pair_s: float

    @property
    def path(self) -> str:
        if not self.main:
            return "pairs"
        return "features" + (f" + pairs for rare letters {''.join(self.rare)!r}" if self.rare else "")


def plan(X: Sequence[str], Y: Sequence[str] | None, levels: Sequence[int], lam: float) -> Plan:
    """Choose the main alphabet (features) and the rare letters (pair programme) by cost.

    Letters are tried as rare from the one in the fewest strings up; a letter is worth
    making rare when the pairs of strings that share it cost less in the pair programme
    than its share of the feature products. The all-pairs programme is the fallback
    when no feature alphabet fits in memory or beats it.
    """
    sym = Y is None
    Ys = X if Y is None else Y
    letters = core.alphabet_of(X, Ys)
    n_x, n_y = len(X), len(Ys)
    pairs = n_x * (n_x + 1) / 2 if sym else n_x * n_y
    if not letters:
        return Plan([], [], 0.0, 0.0)
    Cx = _counts(X, letters)
    Cy = Cx if sym else _counts(Ys, letters)
    Hx, Hy = (Cx > 0).astype(np.float64), (Cy > 0).astype(np.float64)
    # expected matching positions of a pair: Σ_c (mean count of c in X)(mean count of c in Y)
    mean_x, mean_y = Cx.mean(axis=0), Cy.mean(axis=0)
    ls, lt = float(mean_x.sum()), float(mean_y.sum())
    pair_per_pair = pairs_ssk.seconds_per_pair(ls, lt, float(mean_x @ mean_y), max(levels), lam)
    pair_per_pair /= pairs_ssk.pair_threads()
    all_pairs = Plan([], letters, 0.0, pairs * pair_per_pair)
    count = dict(zip(letters, Hx.sum(axis=0) + (0 if sym else Hy.sum(axis=0))))
    by_rarity = sorted(letters, key=lambda c: (count[c], c))
    budget = table_room()
    codes_len = [list(map(len, X)) + ([] if sym else list(map(len, Ys)))]
    best = all_pairs
    for r in range(len(letters)):
        rare = by_rarity[:r]
        main = sorted(by_rarity[r:])
        size = len(main)
        table_bytes = core.feature_bytes_for_lengths(codes_len[0], size, levels)
        if table_bytes > budget:
            continue
        feature_s = pairs * sum(size**k for k in set(levels)) * core.FEATURE_SECONDS_PER_MAC
        # pairs that share a rare letter: they get the pair programme
        mask = np.zeros(len(letters), dtype=bool)
        mask[[letters.index(c) for c in rare]] = True
        shared = _shared_count(Hx[:, mask], Hy[:, mask], sym) if rare else 0
        candidate = Plan(main, rare, feature_s, shared * pair_per_pair)
        if candidate.feature_s + candidate.pair_s < best.feature_s + best.pair_s:
            best = candidate
        if candidate.pair_s >= best.feature_s + best.pair_s:
            break  # more rare letters only add shared pairs: no later choice can win
    return best


def _shared_count(Hx: np.ndarray, Hy: np.ndarray, sym: bool) -> int:
    """How many pairs share a letter of the membership columns (i ≤ j if sym).

    Only strings holding one of the letters can share one, so the product runs on them.
    """
    ix = np.flatnonzero(Hx.any(axis=1))
    iy = ix if sym else np.flatnonzero(Hy.any(axis=1))
    if not len(ix) or not len(iy):
        return 0
    A, B = Hx[ix], Hy[iy]
    # in row bands: the count needs no len(ix) x len(iy) matrix (3.7 GB for 20 000 strings)
    step = chunk_rows(8 * len(iy), work="count-band")
    total = 0
    for start in range(0, len(ix), step):
        shared = (A[start : start + step] @ B.T) > 0
        if sym:  # pairs i <= j: the band's rows are start.., its columns 0..
            shared &= np.arange(len(iy))[None, :] >= np.arange(start, start + len(shared))[:, None]
        total += int(shared.sum())
    return total


def _counts(sample: Sequence[str], letters: Sequence[str]) -> np.ndarray:
    """(len(sample), len(letters)) matrix: how often string i holds letter j."""
    index = {c: j for j, c in enumerate(letters)}
    out = np.zeros((max(len(sample), 1), len(letters)))
    for i, s in enumerate(sample):
        for c, m in Counter(s).items():
            out[i, index[c]] = m
    return out


def _membership(sample: Sequence[str], letters: Sequence[str]) -> np.ndarray:
    """(len(sample), len(letters)) float matrix: does string i contain letter j."""
    sets = [set(s) for s in sample]
    return np.array([[c in s for c in letters] for s in sets], dtype=np.float64).reshape(len(sets), len(letters))


def _shared_mask(Hx: np.ndarray, Hy: np.ndarray, sym: bool) -> np.ndarray:
    """Pairs whose strings share a letter of the given membership columns (upper triangle if sym)."""
    shared = (Hx @ Hy.T) > 0
    return np.triu(shared) if sym else shared


def _shared_pairs(X: Sequence[str], Y: Sequence[str] | None, rare: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) that share a rare letter (i ≤ j when Y is None)."""
    if not rare:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    Hx = _membership(X, sorted(rare))
    Hy = Hx if Y is None else _membership(Y, sorted(rare))
    rows, cols = np.nonzero(_shared_mask(Hx, Hy, Y is None))
    return rows.astype(np.int64), cols.astype(np.int64)


def ssk_levels(X: Sequence[str], Y: Sequence[str] | None, levels: Sequence[int], lam: float) -> tuple[dict[int, np.ndarray], Plan]:
    """Unnormalised Gram matrices K_k(X, Y) for each k in ``levels``, exactly.

    One plan serves every level, so a grid over n (or the cumulative kernel) reuses
    the per-string tables and the pair programme (which yields every level ≤ n at once).
    """
    grams, p, _ = _ssk_levels(X, Y, levels, lam, with_self=False)
    return grams, p


def ssk_levels_with_self(
    X: Sequence[str], Y: Sequence[str], levels: Sequence[int], lam: float, run_bands: BandRunner = in_turn
) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], dict[int, np.ndarray]]:
    """K_k(X, Y) and the self-values K_k(s, s) of X and of Y, from the same per-string
    tables: what a normalised rectangular Gram matrix needs, with each string's tables
    built once (they are most of the cost for long strings). The pair programme runs in
    bands of rows of X through ``run_bands``."""
    grams, _, selves = _ssk_levels(X, Y, levels, lam, with_self=True, run_bands=run_bands)
    assert selves is not None
    return grams, selves[0], selves[1]


#: pairs of strings per band of the pair programme in a Gram matrix, at most (each band is
#: one step of the progress the engine shows, and one task the engine runs on a core)
PAIRS_PER_BAND = 20_000
#: bands of the pair programme at least, where the rows allow: enough for the engine to
#: keep every core busy until the end (the bands' costs differ with their strings)
PAIR_BANDS = 16


def _ssk_levels(
    X: Sequence[str],
    Y: Sequence[str] | None,
    levels: Sequence[int],
    lam: float,
    *,
    with_self: bool,
    run_bands: BandRunner = in_turn,
) -> tuple[dict[int, np.ndarray], Plan, tuple[dict[int, np.ndarray], dict[int, np.ndarray]] | None]:
    """The work of :func:`ssk_levels`: the pair programme runs in bands of rows of X
    through ``run_bands`` (the engine's runner counts them as they finish)."""
    levels = sorted(set(levels))
    sym = Y is None
    n_x, n_y = len(X), len(X) if Y is None else len(Y)
    reserve_memory(
        8.0 * n_x * n_y * max(1, len(levels)),
        what=f"The string subsequence kernel's {max(1, len(levels))} Gram matrices of {n_x:,} x {n_y:,} strings need",
        fix="Use fewer strings, or a matrix-free estimator (monk-bcd-fast).",
        store=True,
    )
    p = plan(X, Y, levels, lam)
    letters = core.alphabet_of(X, X if Y is None else Y)
    Tx = Ty = None
    tables_told = False
    if p.main:
        rows, cols = _shared_pairs(X, Y, set(p.rare))
        # without pairs for the pair programme, X's table batches are the work to count
        tables_told = not len(rows)
        Tx = core.FeatureTables(core.encode(X, p.main), len(p.main), levels, lam, run_bands if tables_told else in_turn)
        Ty = None if sym else core.FeatureTables(core.encode(Y, p.main), len(p.main), levels, lam)  # type: ignore[arg-type]
        grams = core.feature_gram_levels(Tx, Ty, levels)
    else:
        grams = {k: np.zeros((n_x, n_y)) for k in levels}
        if sym:
            rows, cols = np.triu_indices(n_x)
        else:
            rows, cols = (a.ravel() for a in np.meshgrid(np.arange(n_x), np.arange(n_y), indexing="ij"))
    cx = cy = None
    if len(rows):
        # exact values (full alphabet) for the pairs the features cannot see in full
        cx = core.encode(X, letters)
        cy = cx if sym else core.encode(Y, letters)  # type: ignore[arg-type]
        values = _pair_values(cx, cy, rows, cols, max(levels), lam, run_bands, n_x)
        for k in levels:
            grams[k][rows, cols] = values[:, k - 1]
            if sym:
                grams[k][cols, rows] = values[:, k - 1]
    elif not tables_told:
        run_bands(lambda start, stop: None, [(0, n_x)])  # all done at once: one band
    if not with_self:
        return grams, p, None
    rare = set(p.rare) if p.main else set(letters)
    selves = (
        _self_levels(X, Tx, cx, rare, letters, levels, lam),
        _self_levels(X if Y is None else Y, Tx if Y is None else Ty, cy, rare, letters, levels, lam),
    )
    return grams, p, selves


def _pair_values(
    cx: core.Codes,
    cy: core.Codes,
    rows: np.ndarray,
    cols: np.ndarray,
    n: int,
    lam: float,
    run_bands: BandRunner,
    n_rows: int,
) -> np.ndarray:
    """``pair_levels`` of the pairs, in bands of consecutive rows of about
    :data:`PAIRS_PER_BAND` pairs, run by ``run_bands`` (a band's rows are whole)."""
    order = np.argsort(rows, kind="stable")
    firsts = np.searchsorted(rows[order], np.arange(n_rows + 1))  # pairs of rows < r
    per_band = max(1, min(PAIRS_PER_BAND, -(-len(rows) // PAIR_BANDS)))
    bands: list[tuple[int, int]] = []
    start = 0
    while start < n_rows:
        stop = int(np.searchsorted(firsts, firsts[start] + per_band, side="left"))
        stop = min(max(stop, start + 1), n_rows)
        bands.append((start, stop))
        start = stop

    def band(start: int, stop: int) -> np.ndarray:
        picked = order[firsts[start] : firsts[stop]]
        return pairs_ssk.pair_levels(cx, cy, rows[picked], cols[picked], n, lam)

    values = np.empty((len(rows), n))
    for (start, stop), part in zip(bands, run_bands(band, bands)):
        values[order[firsts[start] : firsts[stop]]] = part
    return values


def ssk_self_levels(X: Sequence[str], levels: Sequence[int], lam: float) -> dict[int, np.ndarray]:
    """K_k(s, s) for every string, without a Gram matrix (row norms of the features)."""
    levels = sorted(set(levels))
    letters = core.alphabet_of(X)
    p = plan(X, None, levels, lam)
    T = core.FeatureTables(core.encode(X, p.main), len(p.main), levels, lam) if p.main else None
    return _self_levels(X, T, None, set(p.rare) if p.main else set(letters), letters, levels, lam)


def _self_levels(
    X: Sequence[str],
    T: core.FeatureTables | None,
    codes: core.Codes | None,
    rare: set[str],
    letters: Sequence[str],
    levels: Sequence[int],
    lam: float,
) -> dict[int, np.ndarray]:
    """K_k(s, s): the feature row norms of ``T`` (the main alphabet's tables, if any), and
    the pair programme for the strings holding a letter in ``rare`` (``codes``: X already
    encoded over ``letters``, or None)."""
    out = {k: np.zeros(len(X)) for k in levels}
    if T is not None:
        for k in levels:
            out[k] = core.feature_row_norms(T, k)
    idx = [i for i, s in enumerate(X) if not rare.isdisjoint(s)]
    if idx:
        picked = [codes[i] for i in idx] if codes is not None else core.encode([X[i] for i in idx], letters)
        same = np.arange(len(idx))
        values = pairs_ssk.pair_levels(picked, picked, same, same, max(levels), lam)
        for k in levels:
            out[k][idx] = values[:, k - 1]
    return out


@attrs.frozen(kw_only=True)
class SubsequenceKernel(Kernel):
    """String subsequence kernel K_n(s, t) = Σ_{u ∈ Σⁿ} φ_u(s) φ_u(t), φ_u(s) = Σ_{i: s[i]=u} λ^{l(i)}."""

    name: ClassVar[str] = "ssk"
    summary: ClassVar[str] = "String subsequence kernel (Lodhi et al. 2002): gapped common subsequences of length n, decayed by lam per spanned letter; exact."
    formula: ClassVar[str] = (
        "K_n(s, t) = sum_{u in A^n} phi_u(s) phi_u(t), phi_u(s) = sum_{i: s[i] = u} lam^(i_n - i_1 + 1); "
        "normalize: K(s,t)/sqrt(K(s,s) K(t,t)); cumulative: K_1 + ... + K_n before normalising"
    )
    input_kind: ClassVar[str] = "string"
    # φ_u(s) >= 0 for every subsequence u, so every value is >= 0
    nonnegative: ClassVar[bool] = True

    n: int = parameter(5, doc="subsequence length n >= 1", check=integer(ge=1), kind="int")
    lam: float = parameter(0.5, doc="decay lambda in (0, 1] per letter spanned", check=real(gt=0, le=1), kind="float")
    normalize: bool = parameter(
        True,
        doc="divide by sqrt(K(s,s) K(t,t)) (a string with no subsequence of length n gets 0)",
        check=boolean(),
    )
    cumulative: bool = parameter(
        False,
        doc="sum K_1..K_n before normalising (shogun's convention)",
        check=boolean(),
    )

    def __attrs_post_init__(self) -> None:
        # the weight of a contiguous match in K_n(s, s) is lam^(2n): if it underflows,
        # every value is 0 (and the normalised kernel 0 too), a wrong number, not a small one
        smallest = np.finfo(np.float64).tiny
        if self.lam ** (2 * self.n) < smallest:
            need = smallest ** (1.0 / (2 * self.n))
            # the largest n this lam allows: lam^(2n) >= tiny
            most = int(math.log(smallest) / (2 * math.log(self.lam))) if self.lam < 1 else self.n
            shorter = f"n <= {most:,} (longer subsequences than the strings count nothing anyway) or " if most >= 1 else ""
            raise ParameterError(
                f"SubsequenceKernel with n = {self.n:,} and lam = {self.lam:g}: lam^(2n) underflows float64 and every "
                f"kernel value would be 0. Use {shorter}lam >= {need:.7g}."
            )

    def check_sample(self, X: Any, *, name: str = "X") -> Any:
        """A valid string sample, refused when every string is shorter than the shortest
        subsequence length counted: all its feature vectors are 0, so every kernel value
        with it (and any MMD against it) would be 0 whatever the strings say."""
        Xs = super().check_sample(X, name=name)
        need = min(self.levels)
        longest = max(len(x) for x in Xs)
        if longest == 0:
            # no n helps: "Use n <= 0" would name a value the kernel refuses
            raise DataError(
                f"Every string of {name} is empty: they have no subsequences, so every kernel value with "
                f"{name} would be 0. Check how {name} was made (a column of empty cells?)."
            )
        if longest < need:
            raise ParameterError(
                f"The 'n' parameter of SubsequenceKernel is {self.n}, but every string of {name} is shorter "
                f"(the longest has {longest} character{'s' if longest != 1 else ''}): they have no subsequence "
                f"of length {need}, so every kernel value with {name} would be 0. Use n <= {longest}."
            )
        short = [len(x) for x in Xs if len(x) < need]
        if short:
            # such a string's features are all 0: every short string is the same point to the
            # kernel, k = 0 with everything, whatever its letters
            many = len(short) != 1
            warnings.warn(
                DataWarning(
                    f"{len(short):,} of the {len(Xs):,} strings of {name} {'are' if many else 'is'} shorter than n = {need} "
                    f"(the shortest has {min(short)} character{'s' if min(short) != 1 else ''}): with no subsequence of that "
                    + (
                        "length, they get the feature 0: the kernel sees them as one and the same point, orthogonal to every "
                        "string (k = 0), whatever their letters."
                        if many
                        else "length, it gets the feature 0: the kernel sees it as orthogonal to every string (k = 0), whatever its letters."
                    )
                    + " Use a smaller n, cumulative=True (which counts every length up to n), or drop "
                    + ("them." if many else "it.")
                ),
                stacklevel=2,
            )
        return Xs

    @property
    def levels(self) -> list[int]:
        return list(range(1, self.n + 1)) if self.cumulative else [self.n]

    def _combine(self, grams: dict[int, np.ndarray]) -> np.ndarray:
        K = grams[self.levels[0]]
        for k in self.levels[1:]:
            K = K + grams[k]
        return K

    def _unnormalised(self, X: Sequence[str], Y: Sequence[str] | None, run_bands: BandRunner) -> np.ndarray:
        grams, _, _ = _ssk_levels(X, Y, self.levels, self.lam, with_self=False, run_bands=run_bands)
        return self._combine(grams)

    def _self_values(self, X: Sequence[str]) -> np.ndarray:
        return self._combine(ssk_self_levels(X, self.levels, self.lam))

    def symmetric_gram(self, X: Any, *, run_bands: BandRunner | None = None) -> np.ndarray:
        # the feature products run at once; the pair programme runs in bands of rows
        # through run_bands, the engine's (on its cores, counted for its progress)
        K = self._unnormalised(X, None, run_bands or run_on_cores)
        if self.normalize:
            d = np.diag(K).copy()
            K = _normalise(K, d, d)
            K = np.triu(K, 1)
            K += K.T  # exactly symmetric (the two products round differently)
            np.fill_diagonal(K, (d > 0).astype(np.float64))
        return self.check_finite(K)

    def rectangular_gram(self, X: Any, Y: Any, *, run_bands: BandRunner | None = None) -> np.ndarray:
        # as symmetric_gram: the pair programme's bands of rows go through run_bands
        return self._rectangular(X, Y, run_bands or run_on_cores)

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        if X is Y:  # k(Z, Z), as the contract check asks: each string's tables once
            return self.symmetric_gram(X)
        return self._rectangular(X, Y, run_on_cores)

    def _rectangular(self, X: Any, Y: Any, run_bands: BandRunner) -> np.ndarray:
        if not self.normalize:
            return self.check_finite(self._unnormalised(X, Y, run_bands))
        grams, self_x, self_y = ssk_levels_with_self(X, Y, self.levels, self.lam, run_bands)
        K = _normalise(self._combine(grams), self._combine(self_x), self._combine(self_y))
        return self.check_finite(K)

    def sup_diag(self) -> float | None:
        """1 when normalised (k(s, s) is 1, or 0 for a string shorter than n); unbounded otherwise."""
        return 1.0 if self.normalize else None

    def compute_diag(self, X: Any) -> np.ndarray:
        if self.normalize:
            # k(s, s) is 1 where s has a subsequence of the shortest length counted (it is
            # > 0 then: its contiguous one alone gives lam^(2n), which the init checks
            # does not underflow), else 0; no dynamic programme needed for that
            need = min(self.levels)
            return np.array([1.0 if len(x) >= need else 0.0 for x in X])
        return self._self_values(X)

    def plan(self, X: Sequence[str], Y: Sequence[str] | None = None) -> Plan:
        """Which algorithm a Gram matrix of these samples would use (for diagnostics)."""
        Xs = as_strings(X, name="X", user=f"kernel {self.name!r}")
        Ys = None if Y is None else as_strings(Y, name="Y", user=f"kernel {self.name!r}")
        return plan(Xs, Ys, self.levels, self.lam)


def _normalise(K: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """K / √(dx dyᵀ), with 0 where a string has no subsequence of length n (norm 0)."""
    sx = np.where(dx > 0, 1.0 / np.sqrt(np.where(dx > 0, dx, 1.0)), 0.0)
    sy = np.where(dy > 0, 1.0 / np.sqrt(np.where(dy > 0, dy, 1.0)), 0.0)
    return K * sx[:, None] * sy[None, :]


@hookimpl
def monk_kernels() -> list[type[Kernel]]:
    return [SubsequenceKernel]
