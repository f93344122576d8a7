"""The string subsequence kernel (Lodhi et al. 2002), computed exactly two ways.

Definitions (Lodhi et al., JMLR 2002, Def. 2): for u ∈ Σⁿ,
φ_u(s) = Σ_{i : s[i] = u} λ^{l(i)} with l(i) = i_n − i_1 + 1 the span of the index
tuple i_1 < … < i_n, and K_n(s, t) = Σ_u φ_u(s) φ_u(t).

**Feature path (small alphabets).** Split u = v·w with |v| = n₁ = n − ⌊n/2⌋ and
|w| = n₂ = ⌊n/2⌋ at the gap between i_{n₁} = j and i_{n₁+1} = j′. The span weight
factorises, λ^{i_n−i_1+1} = λ^{j−i_1} · λ^{j′−j} · λ^{i_n−j′+1}, so

    φ_{vw}(s) = Σ_{j<j′} E_{n₁}[j, v] λ^{j′−j} S_{n₂}[j′, w] = (E_{n₁}ᵀ M)[v, w],

with E_k[j, ·] the tuples of length k *ending* at position j (weight λ^{j−i_1}) and
M[j] = Σ_{j′>j} λ^{j′−j} S[j′] the decayed sum of the tuples *starting* after j.
E_k follows from E_{k−1} by one decayed prefix sum over positions; M is the same
computation on the reversed string. So the whole |Σ|ⁿ feature vector of a string is one
small matrix product (|Σ|^{n₁} × L) · (L × |Σ|^{n₂}), and the Gram matrix is one
symmetric product of the feature matrix (in column chunks to bound memory).

**Pair path (large alphabets, and pairs that share a rare letter).** A compiled
programme over the matching positions of each pair, every level k ≤ n at once; see
``ssk_pairs``.

A letter is *rare* when treating it with the pair path (for the few pairs of strings that
both contain it) is cheaper than growing the feature alphabet: positions holding a rare
letter match no feature, and every pair that shares a rare letter gets its exact value
from the pair path.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np

from monk_framework.plugin import NOT_RUN, BandRunner, CompiledLoops, chunk_rows, in_turn

#: table cells (positions × features) of one batch of strings in the feature path.
TABLE_BATCH_CELLS = 4_000_000
#: measured seconds per multiply-add of the feature matrix product (2-core machine; it
#: only steers the choice of path, against ssk_pairs.PAIR_SECONDS_*).
FEATURE_SECONDS_PER_MAC = 2.5e-11

Codes = list[np.ndarray]


def alphabet_of(*samples: Sequence[str]) -> list[str]:
    """The sorted distinct letters of the samples."""
    letters: set[str] = set()
    for sample in samples:
        for s in sample:
            letters.update(s)
    return sorted(letters)


def encode(sample: Sequence[str], letters: Sequence[str]) -> Codes:
    """Each string as an int array of letter indices; letters not listed become −1.

    Read as code points (UTF-32) and looked up in the sorted code points of ``letters``:
    one vectorised pass a string, where a Python loop over 20 000-letter strings took
    longer than the kernel's features."""
    if not letters:
        return [np.full(len(s), -1, dtype=np.int64) for s in sample]
    by_point = sorted(range(len(letters)), key=lambda i: ord(letters[i]))
    points = np.array([ord(letters[i]) for i in by_point], dtype=np.uint32)
    index = np.array(by_point, dtype=np.int64)
    out: Codes = []
    for s in sample:
        cp = np.frombuffer(s.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        at = np.minimum(np.searchsorted(points, cp), len(points) - 1)
        out.append(np.where(points[at] == cp, index[at], -1))
    return out


# -- feature path ---------------------------------------------------------------------


#: the decayed prefix sum, compiled by numba on first use (see :func:`decayed_prefix`)
_loops = CompiledLoops(globals())


def decayed_prefix(X: np.ndarray, lam: float) -> np.ndarray:
    """R[j] = Σ_{j′<j} λ^{j−j′} X[j′] along axis 0 (strictly before position j), by the
    recursion R[0] = 0, R[j] = (R[j−1] + X[j−1])·λ.

    The recursion runs over every position of the longest string: as numpy operations on
    one position's row at a time it costs a Python step a position (28 s of a 49 s SSK
    estimate on 80 strings of 20 000 letters), so it runs as a compiled loop, with the
    same two roundings a value in the same order (the same bits). Without the compiled
    loops the numpy recursion below is the reference."""
    R = np.empty_like(X)
    if not X.shape[0]:
        return R
    flat_x = np.ascontiguousarray(X).reshape(X.shape[0], -1)
    flat_r = R.reshape(X.shape[0], -1)
    if _loops.run(lambda: _decayed_prefix_loop(flat_x, lam, flat_r)) is NOT_RUN:
        return decayed_prefix_reference(X, lam)
    return R


def decayed_prefix_reference(X: np.ndarray, lam: float) -> np.ndarray:
    """:func:`decayed_prefix` as numpy operations, one position at a time."""
    R = np.empty_like(X)
    if not X.shape[0]:
        return R
    R[0] = 0.0
    for j in range(1, X.shape[0]):
        np.add(R[j - 1], X[j - 1], out=R[j])
        R[j] *= lam
    return R


@_loops.loop()
def _decayed_prefix_loop(X, lam, R):  # pragma: no cover - compiled
    R[0, :] = 0.0
    for j in range(1, X.shape[0]):
        for c in range(X.shape[1]):
            R[j, c] = (R[j - 1, c] + X[j - 1, c]) * lam


def ending_prefix_sums(codes: np.ndarray, size: int, k_max: int, lam: float) -> list[np.ndarray]:
    """R_k for k = 1..k_max (index k of the list) on a padded batch of strings.

    ``codes`` is (L, B): position-major, −1 for padding and rare letters. With E_k[j, b, v]
    = Σ over tuples of length k ending exactly at position j of string b with letters v
    of λ^{j−i_1} (v indexed lexicographically), R_k[j] = Σ_{j′<j} λ^{j−j′} E_k[j′]:
    the tuples of length k that end before j, decayed to j. E_1 is the one-hot code and
    E_{k+1}[j] = R_k[j] ⊗ onehot(s_j): a tuple ending at j extends one ending before j.
    """
    L, B = codes.shape
    jj, bb = np.nonzero(codes >= 0)
    cc = codes[jj, bb]
    E = np.zeros((L, B, size))
    E[jj, bb, cc] = 1.0
    R: list[np.ndarray] = [np.empty(0)]
    for k in range(1, k_max + 1):
        R.append(decayed_prefix(E, lam))
        if k < k_max:
            # R_k[j] ⊗ onehot(s_j) written where it is not 0: the letter c = s_j's slot
            # of every v (a product by 1 or 0 would give the same values, at size× the work)
            E4 = np.zeros((L, B, size**k, size))
            E4[jj, bb, :, cc] = R[k][jj, bb]
            E = E4.reshape(L, B, size ** (k + 1))
    return R


def ending_tables(codes: np.ndarray, size: int, lengths: Sequence[int], lam: float) -> dict[int, np.ndarray]:
    """E_k for each k in ``lengths``, as (B, size^k, L), the layout the feature products
    read: tuples of length k ending exactly at each position (see
    :func:`ending_prefix_sums`, run once for the longest)."""
    L, B = codes.shape
    jj, bb = np.nonzero(codes >= 0)
    cc = codes[jj, bb]
    R = ending_prefix_sums(codes, size, max(lengths) - 1, lam)
    out = {}
    for k in lengths:
        if k == 1:
            E = np.zeros((B, size, L))
            E[bb, cc, jj] = 1.0
        else:
            E = np.zeros((B, size ** (k - 1), size, L))
            E[bb, :, cc, jj] = R[k - 1][jj, bb]
        out[k] = E.reshape(B, size**k, L)
    return out


def split(n: int) -> tuple[int, int]:
    """(n₁, n₂): the lengths of the prefix v and suffix w of u = v·w."""
    return n - n // 2, n // 2


class FeatureTables:
    """The per-string tables of the feature path, for the given levels n.

    Strings are processed in order of length (``self.order``), in batches padded to
    their longest string; the feature rows come out in that order.

    When the whole feature matrices fit in one feature block (DNA up to n = 8
    for thousands of strings), each batch's tables are turned into its feature rows at
    once and dropped: the memory is then one batch's tables and the features, not every
    string's tables (8 bytes × letters × |Σ|^⌈n/2⌉ each, 1 GB for 80 strings of 20 000
    letters at n = 5). Otherwise the tables are kept and :meth:`features` computes
    the columns asked for, chunk by chunk.
    """

    def __init__(self, codes: Codes, size: int, levels: Sequence[int], lam: float, run_bands: BandRunner = in_turn):
        """``run_bands(work, [(start, stop)])`` is called for each batch in turn (positions in
        ``self.order``): the engine's runner counts them for its progress display."""
        self.size, self.lam, self.levels = size, lam, sorted(set(levels))
        self.n = len(codes)
        prefixes = sorted({split(k)[0] for k in self.levels})
        suffixes = sorted({split(k)[1] for k in self.levels} - {0})
        self.order = np.argsort([len(c) for c in codes], kind="stable")
        longest = max((len(c) for c in codes), default=1)
        widest = size ** max(prefixes + suffixes)
        batch_rows = max(1, int(TABLE_BATCH_CELLS // max(1, longest * widest)))
        #: every level's feature rows (in ``self.order``), when they fit; then no tables are kept
        self.full: dict[int, np.ndarray] | None = None
        if features_fit(self.n, size, self.levels):
            self.full = {k: np.empty((self.n, size**k)) for k in self.levels}
        #: per batch: (first row, E_{n1} as (B, size^n1, L) per n1, M_{n2} as (B, L, size^n2) per n2)
        self.batches: list[tuple[int, dict[int, np.ndarray], dict[int, np.ndarray]]] = []
        for start in range(0, self.n, batch_rows):
            run_bands(lambda a, b: self._batch(codes, a, b, prefixes, suffixes), [(start, min(start + batch_rows, self.n))])

    def _batch(self, codes: Codes, start: int, stop: int, prefixes: list[int], suffixes: list[int]) -> None:
        """The tables of the strings at positions start:stop of ``self.order``: kept, or
        turned into their feature rows at once."""
        size, lam = self.size, self.lam
        rows = self.order[start:stop]
        width = max(1, max(len(codes[i]) for i in rows))
        padded = np.full((width, len(rows)), -1, dtype=np.int64)
        for r, i in enumerate(rows):
            padded[: len(codes[i]), r] = codes[i]
        E = ending_tables(padded, size, prefixes, lam)
        M: dict[int, np.ndarray] = {}
        if suffixes:
            # M_{n2}[j] = λ Σ_{j′>j} λ^{j′−j−1}·(tuples of length n2 starting at j′, weight
            # λ^{end−j′}) = λ R^rev_{n2}[L−1−j], on the reversed string (w read backwards)
            Rrev = ending_prefix_sums(padded[::-1], size, suffixes[-1], lam)
            M = {n2: (lam * Rrev[n2][::-1]).transpose(1, 0, 2).copy() for n2 in suffixes}
        if self.full is None:
            self.batches.append((start, E, M))
            return
        for k in self.levels:
            n1, n2 = split(k)
            self._batch_features(k, E[n1], M.get(n2), slice(None), self.full[k][start : start + len(rows)])

    def prefix_count(self, k: int) -> int:
        return self.size ** split(k)[0]

    def _batch_features(self, k: int, E: np.ndarray, M: np.ndarray | None, prefixes: slice, out: np.ndarray) -> None:
        """One batch's rows of Φ_k on the prefixes v in ``prefixes`` (see the module's docstring)."""
        Eb = E[:, prefixes]
        B, c = Eb.shape[0], Eb.shape[1]
        if M is None:  # k = 1: λ × letter counts
            np.multiply(Eb.sum(axis=2), self.lam, out=out)
        else:
            np.matmul(Eb, M, out=out.reshape(B, c, -1))

    def features(self, k: int, prefixes: slice, out: np.ndarray | None = None) -> np.ndarray:
        """Rows of Φ_k (in ``self.order``) restricted to the prefixes v in ``prefixes``.

        Columns are ordered (v, reversed w); :func:`lexicographic_order` maps them to
        the lexicographic order of u. ``out`` is a reusable buffer of at least the size
        of the result (a fresh large allocation costs page faults each time).
        """
        n1, n2 = split(k)
        first, stop, step = prefixes.indices(self.size**n1)
        c = len(range(first, stop, step))
        width = c * self.size**n2
        if out is None:
            out = np.empty((self.n, width))
        out = out.reshape(-1)[: self.n * width].reshape(self.n, width)
        if self.full is not None:
            assert step == 1, "features are asked for in contiguous chunks of prefixes"
            np.copyto(out, self.full[k][:, first * self.size**n2 : stop * self.size**n2])
            return out
        for start, E, M in self.batches:
            rows = out[start : start + E[n1].shape[0]]
            self._batch_features(k, E[n1], M.get(n2), prefixes, rows)
        return out


def features_fit(count: int, size: int, levels: Sequence[int]) -> bool:
    """Whether the feature matrices of ``count`` strings, every level, fit in one chunk."""
    return chunk_rows(8 * sum(size**k for k in set(levels)), work="feature-block", at_least=0) >= count


def lexicographic_order(size: int, k: int) -> np.ndarray:
    """Column permutation taking the (v, reversed w) order of :meth:`FeatureTables.features` to u's."""
    n1, n2 = split(k)
    if n2 == 0:
        return np.arange(size**k)
    # our column of u = v·w is index(v)·size^n2 + index(reversed w)
    rev = np.array([sum(d * size**i for i, d in enumerate(w)) for w in product(range(size), repeat=n2)])
    return (np.arange(size**n1)[:, None] * size**n2 + rev[None, :]).ravel()


def unsort(K: np.ndarray, row_order: np.ndarray, col_order: np.ndarray) -> np.ndarray:
    """A matrix computed on rows/columns in the given orders, back in the original order."""
    out = np.empty_like(K)
    out[np.ix_(row_order, col_order)] = K
    return out


def feature_gram_levels(X: FeatureTables, Y: FeatureTables | None, levels: Sequence[int]) -> dict[int, np.ndarray]:
    """K_k = Φ_k(X) Φ_k(Y)ᵀ for each level, in column chunks of the feature matrices."""
    out: dict[int, np.ndarray] = {}
    n_y = X.n if Y is None else Y.n
    for k in levels:
        K = np.zeros((X.n, n_y))
        n1, n2 = split(k)
        per_prefix = 8 * (X.n if Y is None else X.n + n_y) * X.size**n2
        step = chunk_rows(per_prefix, work="feature-block")
        total = X.size**n1
        step = -(-total // -(-total // step))  # equal chunks
        buf_x = np.empty(X.n * min(step, total) * X.size**n2)
        buf_y = None if Y is None else np.empty(n_y * min(step, total) * X.size**n2)
        for start in range(0, total, step):
            chunk = slice(start, min(start + step, total))
            Fx = X.features(k, chunk, out=buf_x)
            if Y is None:
                K += Fx @ Fx.T  # numpy runs a symmetric rank-k update for A @ A.T
            else:
                K += Fx @ Y.features(k, chunk, out=buf_y).T
        if Y is None:
            K = np.triu(K) + np.triu(K, 1).T  # exactly symmetric
        out[k] = unsort(K, X.order, X.order if Y is None else Y.order)
    return out


def feature_bytes_for_lengths(lengths: Sequence[int], size: int, levels: Sequence[int]) -> float:
    """Bytes the feature path holds for strings of these lengths: every string's tables,
    or, when the feature matrices fit (:func:`features_fit`), one batch's tables and the
    features."""
    k1 = max(split(k)[0] for k in levels)
    k2 = max(split(k)[1] for k in levels)
    per_cell = 8.0 * (size**k1 + (size**k2 if k2 else 0))
    if features_fit(len(lengths), size, levels):
        longest = max(lengths, default=1)
        widest = size ** max(k1, k2)
        rows = max(1, int(TABLE_BATCH_CELLS // max(1, longest * widest)))
        batch = sorted(lengths)[-rows:]  # the longest strings make the largest batch
        features = 8.0 * len(lengths) * sum(size**k for k in set(levels))
        # the batch's tables, and as much again for the prefix sums they are built from
        return 2.0 * per_cell * longest * len(batch) + features
    return per_cell * float(sum(lengths))


def feature_row_norms(T: FeatureTables, k: int) -> np.ndarray:
    """‖Φ_k(s)‖² = K_k(s, s) for every string (original order), in feature chunks."""
    n1, n2 = split(k)
    total = T.size**n1
    step = chunk_rows(8 * T.n * T.size**n2, work="feature-block")
    buf = np.empty(T.n * min(step, total) * T.size**n2)
    norms = np.zeros(T.n)
    for start in range(0, total, step):
        F = T.features(k, slice(start, min(start + step, total)), out=buf)
        norms += np.einsum("ij,ij->i", F, F)
    out = np.empty(T.n)
    out[T.order] = norms
    return out
