"""The SSK pair programme, compiled: K_1..K_n of chosen string pairs, exactly.

Why compiled code. For large alphabets (and for the DNA pairs that share a rare letter)
the kernel has to be computed pair by pair. Vectorised over pairs in numpy the dynamic
programme reads and writes three |s|×|t| arrays per level, and 1532 strings of length
60 over 26 letters took 76 s; the goal is 5 s. numba runs the sparse programme below
at a few microseconds per pair, on every core.

**Sparse programme** (after Rousu & Shawe-Taylor, JMLR 2005: only matching positions
matter). A match is a pair of positions (i, j) with s_i = t_j. With F_k(i, j) the sum,
over chains of k matches (i_1, j_1) < … < (i_k, j_k) = (i, j) strictly increasing in both
coordinates, of λ^{(i − i_1) + (j − j_1)},

    K_k(s, t) = λ² Σ_{matches} F_k(i, j).

Scaled, H_k = λ^{−(i+j)} F_k satisfies H_1(i, j) = λ^{−(i+j)} and
H_k(i, j) = Σ_{i′<i, j′<j} H_{k−1}(i′, j′), a strict dominance sum: sweep t's positions
j in order, keep the H values of earlier rows in a Fenwick tree over s's positions (one
slot per level), query every match of row j before inserting any of them. Cost
O(n · #matches · log|s|) per pair instead of O(n·|s|·|t|); every term is positive, so
there is no cancellation.

The scaling λ^{−(i+j)} overflows for long strings and small λ; those pairs take the
**dense programme** instead (Lodhi's recursion as decayed prefix sums, O(n·|s|·|t|),
with factors λ ≤ 1 only).
"""

from __future__ import annotations

import math

import numpy as np

from monk_framework.plugin import NOT_RUN, CompiledLoops, band_cores, compiled_available, reserve_memory

#: the pair programme's loops: compiled by numba on first use; where the compiled loops
#: are off or cannot run, the same loops run as plain Python (the same numbers, far slower:
#: the plan then prefers the feature products wherever they fit)
_loops = CompiledLoops(globals())

#: the sparse programme is used while (|s| + |t|) · ln(1/λ) stays below this (λ^{−(i+j)} ≤ e^600).
SCALED_EXPONENT_LIMIT = 600.0
#: measured on a 2-core machine (one thread): seconds per pair (set-up, proportional to
#: |s|·n + |t|) and per match and level. They only steer the choice of path.
PAIR_SECONDS_PER_CELL_SETUP = 1.0e-9
PAIR_SECONDS_PER_MATCH_LEVEL = 6.0e-9
#: the dense programme, per cell and level
DENSE_SECONDS_PER_CELL = 2.0e-9


#: how much slower the pair programme runs as plain Python than compiled, per thread
#: (1600 pairs of 60-letter strings over 26 letters, n = 5: 2.93 s against 8.7 ms on two
#: threads, the same sums); it only steers the plan
PLAIN_SLOWDOWN = 170.0


def pair_threads() -> int:
    """The cores the engine spreads the pair programme's bands over (each band runs on one
    thread and releases the GIL), or 1 as plain Python: what the plan expects of the
    programme's speed. numba's own threads are not used (no loop here is ``parallel``), so
    its threading layer is never loaded."""
    return band_cores() if compiled_available() else 1


def uses_sparse(ls: int, lt: int, lam: float) -> bool:
    """Whether the pair (|s|, |t|) takes the sparse programme (its scaling cannot overflow)."""
    return lam >= 1.0 or (ls + lt) * -math.log(lam) <= SCALED_EXPONENT_LIMIT


def seconds_per_pair(ls: float, lt: float, matches: float, n: int, lam: float) -> float:
    """Expected single-thread seconds for one pair of the given mean lengths and matches."""
    if uses_sparse(int(ls), int(lt), lam):
        seconds = PAIR_SECONDS_PER_CELL_SETUP * (ls * n + lt) + PAIR_SECONDS_PER_MATCH_LEVEL * matches * n
    else:
        seconds = DENSE_SECONDS_PER_CELL * ls * lt * n
    return seconds if compiled_available() else seconds * PLAIN_SLOWDOWN


def flatten(codes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated letter codes and the offsets of each string (CSR layout)."""
    offsets = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in codes], out=offsets[1:])
    flat = np.concatenate(codes).astype(np.int64) if codes else np.zeros(0, dtype=np.int64)
    return flat, offsets


def pair_levels(
    x_codes: list[np.ndarray],
    y_codes: list[np.ndarray],
    rows: np.ndarray,
    cols: np.ndarray,
    n: int,
    lam: float,
) -> np.ndarray:
    """(P, n) array: K_1..K_n of the pairs (x_codes[rows[p]], y_codes[cols[p]]).

    Codes are non-negative letter indices of one encoding of the full alphabet.
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    out = np.zeros((len(rows), n))
    if len(rows) == 0:
        return out
    xf, xo = flatten(x_codes)
    yf, yo = flatten(y_codes)
    _dense_memory_ok(np.diff(xo)[rows], np.diff(yo)[cols], lam)
    size = int(max(xf.max(initial=-1), yf.max(initial=-1))) + 1
    # pairs grouped by row string: each row builds its letter-position lists once
    order = np.argsort(rows, kind="stable")
    starts = np.searchsorted(rows[order], np.arange(len(x_codes) + 1))
    max_len = int(np.diff(yo).max(initial=0))
    args = (xf, xo, yf, yo, order, cols, starts, n, lam, max(size, 1), SCALED_EXPONENT_LIMIT, max_len, out)
    # one thread: the engine runs bands of pairs side by side (the loop holds no GIL)
    if _loops.run(lambda: _pairs(*args)) is NOT_RUN:
        _loops.plain("_pairs")(*args)
    return out


def _dense_memory_ok(ls: np.ndarray, lt: np.ndarray, lam: float) -> None:
    """The dense programme holds three |s|×|t| arrays per thread: refuse what cannot fit."""
    dense = (ls + lt) * (-math.log(lam) if lam < 1.0 else 0.0) > SCALED_EXPONENT_LIMIT
    if not dense.any():
        return
    cells = int((ls[dense] * lt[dense]).max())
    worst = int(np.flatnonzero(dense)[np.argmax(ls[dense] * lt[dense])])
    reserve_memory(
        3 * 8 * cells * pair_threads(),
        what=f"The string subsequence kernel of two strings of lengths {int(ls[worst])} and {int(lt[worst])} needs, for its dynamic programme,",
        fix="Use shorter strings or a larger decay lam.",
        store=True,
    )


@_loops.loop(nogil=True)
def _pairs(xf, xo, yf, yo, order, cols, starts, n, lam, size, limit, max_len, out):  # pragma: no cover - compiled
    log_inv = -math.log(lam) if lam < 1.0 else 0.0
    for r in range(len(starts) - 1):
        _row(xf, xo, yf, yo, order, cols, starts, r, n, lam, size, limit, max_len, log_inv, out)


@_loops.loop()
def _row(xf, xo, yf, yo, order, cols, starts, r, n, lam, size, limit, max_len, log_inv, out):  # pragma: no cover
    if starts[r] == starts[r + 1]:
        return
    s = xf[xo[r] : xo[r + 1]]
    ls = len(s)
    # first[c]: first position of letter c in s; nxt[i]: next position of s_i's letter
    first = np.full(size, -1, dtype=np.int64)
    nxt = np.full(max(ls, 1), -1, dtype=np.int64)
    for i in range(ls - 1, -1, -1):
        nxt[i] = first[s[i]]
        first[s[i]] = i
    tree = np.zeros((ls + 1, max(n - 1, 1)))
    buf_i = np.empty(max(ls, 1), dtype=np.int64)
    buf_h = np.empty((max(ls, 1), n))
    # λ^{−e} and λ^{e} for every exponent e = i + j the sparse pairs of this row can meet:
    # below ls + |t| ≤ limit / ln(1/λ), so the table stops there (beyond, λ^{−e} overflows)
    width = ls + max_len + 1
    if log_inv > 0.0:
        width = min(width, int(limit / log_inv) + 2)
    up = np.empty(width)
    down = np.empty(width)
    up[0] = down[0] = 1.0
    for e in range(1, width):
        up[e] = up[e - 1] / lam
        down[e] = down[e - 1] * lam
    for q in range(starts[r], starts[r + 1]):
        p = order[q]
        c = cols[p]
        t = yf[yo[c] : yo[c + 1]]
        if lam >= 1.0 or (ls + len(t)) * log_inv <= limit:
            _sparse_pair(s, t, first, nxt, up, down, n, tree, buf_i, buf_h, out[p])
            for k in range(n):
                out[p, k] *= lam * lam
        else:
            _dense_pair(s, t, lam, n, out[p])


@_loops.loop()
def _sparse_pair(s, t, first, nxt, up, down, n, tree, buf_i, buf_h, acc):  # noqa: C901 (a compiled loop nest, kept whole)  # pragma: no cover - compiled
    ls = len(s)
    m = n - 1  # levels kept in the tree: H_1..H_{n−1}
    tree[:, :] = 0.0
    for j in range(len(t)):
        i = first[t[j]] if t[j] < len(first) else -1
        if i < 0:
            continue
        # query every match of this row before inserting any (strict in j)
        cnt = 0
        while i >= 0:
            h = buf_h[cnt]
            h[0] = up[i + j]
            for k in range(1, n):
                h[k] = 0.0
            pos = i  # Fenwick prefix over positions < i (1-based slots 1..i)
            while pos > 0:
                for k in range(1, n):
                    h[k] += tree[pos, k - 1]
                pos -= pos & (-pos)
            scale = down[i + j]
            for k in range(n):
                acc[k] += scale * h[k]
            buf_i[cnt] = i
            cnt += 1
            i = nxt[i]
        if m == 0:
            continue
        for u in range(cnt):
            pos = buf_i[u] + 1
            h = buf_h[u]
            while pos <= ls:
                for k in range(m):
                    tree[pos, k] += h[k]
                pos += pos & (-pos)


@_loops.loop()
def _dense_pair(s, t, lam, n, acc):  # noqa: C901 (a compiled loop nest, kept whole)  # pragma: no cover - compiled
    """Lodhi's programme: G_1 = match, G_k = match ∘ D(G_{k−1}), K_k = λ² Σ G_k.

    D(X)[i, j] = Σ_{i′<i, j′<j} λ^{(i−i′)+(j−j′)} X[i′, j′], as two decayed prefix sums.
    """
    ls, lt = len(s), len(t)
    if ls == 0 or lt == 0:
        return
    G = np.zeros((ls, lt))
    for i in range(ls):
        for j in range(lt):
            if s[i] == t[j]:
                G[i, j] = 1.0
    match = G.copy()
    Y = np.zeros((ls, lt))
    lam2 = lam * lam
    for k in range(n):
        total = 0.0
        for i in range(ls):
            for j in range(lt):
                total += G[i, j]
        acc[k] += lam2 * total
        if k == n - 1:
            break
        # Y[i, j] = λ (Y[i−1, j] + G[i−1, j]); Z[i, j] = λ (Z[i, j−1] + Y[i, j−1]); G = match ∘ Z
        for j in range(lt):
            Y[0, j] = 0.0
        for i in range(1, ls):
            for j in range(lt):
                Y[i, j] = lam * (Y[i - 1, j] + G[i - 1, j])
        for i in range(ls):
            z = 0.0
            for j in range(lt):
                G[i, j] = match[i, j] * z
                z = lam * (z + Y[i, j])
