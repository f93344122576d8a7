"""Compiled loops for the products of kernel tiles with many weight columns, with their numpy twins.

:func:`add_tile_product` is a tile's product with the hundred-odd weight columns of a
matrix-free permutation test, which BLAS runs below its square-matrix rate. It
reassociates its sums (each a vector of partial sums), so it agrees with BLAS to
round-off. :func:`add_indicator_product` multiplies a tile by 0/1 columns packed four
points to a byte (:func:`pack_patterns`), adding its values up by subset sums.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from monk_framework.numerics import reference
from monk_framework.numerics.compiled import NOT_RUN, CompiledLoops

if TYPE_CHECKING:
    from llvmlite import ir

__all__ = ["PATTERN_POINTS", "add_indicator_product", "add_tile_product", "every_point_patterns", "pack_patterns"]

_loops = CompiledLoops(globals())
_loop = _loops.loop
_run = _loops.run


# -- the product of a tile with many weight columns ------------------------------------------


@_loop(nogil=True, boundscheck=False, fastmath={"contract", "reassoc"})
def _tile_product(out: np.ndarray, T: np.ndarray, WT: np.ndarray, offset: int) -> None:  # noqa: C901 (a compiled loop nest, kept whole)  # pragma: no cover - compiled
    # Each running sum is a dot product along a row of T and a row of WT, both contiguous:
    # the loop over j vectorises (reassociation lets each sum run as 8 partial sums), and
    # every value loaded is used 4 or 6 times from a register. The unsigned indices spare
    # numba's test for negative ones, which keeps the loop from vectorising. The block of
    # 6 rows × 4 weight columns (24 sums) was measured on AVX-512: 6 × 4 and 4 × 6 run at
    # 51-52 GFLOP/s on one core, 4 × 4 at 44, 8 × 3 at 50, 2 × 8 at 33.
    rows, n = T.shape
    q = WT.shape[0]
    zero, size, u = np.uint64(0), np.uint64(n), np.uint64(offset)
    full_rows = rows - rows % 6
    full_cols = q - q % 4
    for i in range(0, full_rows, 6):
        for b in range(0, full_cols, 4):
            a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = a20 = a21 = a22 = a23 = 0.0
            a30 = a31 = a32 = a33 = a40 = a41 = a42 = a43 = a50 = a51 = a52 = a53 = 0.0
            for j in range(zero, size):
                k0, k1, k2, k3, k4, k5 = T[i, j], T[i + 1, j], T[i + 2, j], T[i + 3, j], T[i + 4, j], T[i + 5, j]
                w0, w1, w2, w3 = WT[b, u + j], WT[b + 1, u + j], WT[b + 2, u + j], WT[b + 3, u + j]
                a00, a01, a02, a03 = a00 + k0 * w0, a01 + k0 * w1, a02 + k0 * w2, a03 + k0 * w3
                a10, a11, a12, a13 = a10 + k1 * w0, a11 + k1 * w1, a12 + k1 * w2, a13 + k1 * w3
                a20, a21, a22, a23 = a20 + k2 * w0, a21 + k2 * w1, a22 + k2 * w2, a23 + k2 * w3
                a30, a31, a32, a33 = a30 + k3 * w0, a31 + k3 * w1, a32 + k3 * w2, a33 + k3 * w3
                a40, a41, a42, a43 = a40 + k4 * w0, a41 + k4 * w1, a42 + k4 * w2, a43 + k4 * w3
                a50, a51, a52, a53 = a50 + k5 * w0, a51 + k5 * w1, a52 + k5 * w2, a53 + k5 * w3
            sums = (a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33, a40, a41, a42, a43, a50, a51, a52, a53)
            for r in range(6):
                for c in range(4):
                    out[i + r, b + c] += sums[4 * r + c]
        for b in range(full_cols, q):
            a0 = a1 = a2 = a3 = a4 = a5 = 0.0
            for j in range(zero, size):
                w = WT[b, u + j]
                a0, a1, a2 = a0 + T[i, j] * w, a1 + T[i + 1, j] * w, a2 + T[i + 2, j] * w
                a3, a4, a5 = a3 + T[i + 3, j] * w, a4 + T[i + 4, j] * w, a5 + T[i + 5, j] * w
            edge = (a0, a1, a2, a3, a4, a5)
            for r in range(6):
                out[i + r, b] += edge[r]
    for i in range(full_rows, rows):
        for b in range(0, full_cols, 4):
            a0 = a1 = a2 = a3 = 0.0
            for j in range(zero, size):
                k = T[i, j]
                a0, a1 = a0 + k * WT[b, u + j], a1 + k * WT[b + 1, u + j]
                a2, a3 = a2 + k * WT[b + 2, u + j], a3 + k * WT[b + 3, u + j]
            last = (a0, a1, a2, a3)
            for c in range(4):
                out[i, b + c] += last[c]
        for b in range(full_cols, q):
            a = 0.0
            for j in range(zero, size):
                a += T[i, j] * WT[b, u + j]
            out[i, b] += a


def add_tile_product(out: np.ndarray, T: np.ndarray, WT: np.ndarray, offset: int = 0) -> bool:
    """out += T · W[offset : offset + m] for a tile T (r × m) of a Gram matrix and the
    transposed weights WT = Wᵀ (q × n), in place; True if done, False (nothing done) when
    an array is not laid out for it, so that the caller multiplies through BLAS instead.

    The relabelling products of a matrix-free permutation test, R [E, 1] for each tile R
    (docs/performance.md): q is about B + 2 there, a thin product that OpenBLAS runs at
    about 45 GFLOP/s a core, repacking every tile for a hundred columns. This loop reads
    the tile in place and keeps a 6 × 4 block of sums in registers (51-52 GFLOP/s on
    AVX-512). It adds in another order than BLAS, so the sums agree to round-off.

    Needs C-ordered float64 arrays ``out`` (r × q, writable), ``T`` and ``WT`` (W's
    columns contiguous, i.e. W in Fortran order), and ``0 <= offset <= n − m``.
    """
    arrays = (out, T, WT)
    if not all(isinstance(a, np.ndarray) and a.ndim == 2 and a.dtype == np.float64 and a.flags.c_contiguous for a in arrays):
        return False
    if not out.flags.writeable or out.shape != (T.shape[0], WT.shape[0]):
        return False
    if not 0 <= offset <= WT.shape[1] - T.shape[1]:
        raise ValueError(f"add_tile_product: columns {offset}:{offset + T.shape[1]} outside the {WT.shape[1]} weight rows")
    if _run(lambda: _tile_product(out, T, WT, int(offset))) is NOT_RUN:
        reference.add_tile_product(out, T, WT, int(offset))
    return True


# -- the relabelling products by subset sums -------------------------------------------------
#
# A relabelling's column of the indicator matrix E holds only 0s and 1s, so the product of
# a tile with E adds up chosen tile values and multiplies nothing. Four points at a time:
# the 16 sums of every subset of four consecutive tile rows are tabulated once (11
# additions and 16 stores per lane), and each of the B columns then takes its subset's
# sum with one load and one addition, where a multiply-add product spends four
# multiply-adds (the method of Four Russians, Arlazarov, Dinic, Kronrod and Faradzev
# 1970, over the reals). The tables are written and read as vectors of 8 doubles in
# LLVM IR of our own: numba's loop vectoriser keeps scalar code for a lookup whose
# address depends on the loaded pattern.
#
# For the next maintainer of this hand-written IR:
# - What it computes: out[b, i] += Σ_j KT[j, i] · E[offset + j, b], E the 0/1 matrix whose
#   rows ``patterns`` packs four to a byte (add_indicator_product's docstring).
# - Its reference: monk_framework.numerics.reference.add_indicator_product, one BLAS
#   product of the unpacked E; both run on every test of this routine.
# - How to check it: tests/monk_framework/numerics/test_compiled_twins.py (against the reference
#   and against E's product, remainders of lanes, columns and groups included),
#   tests/monk_framework/numerics/test_compiled.py (exact integer sums at the tests' shapes), the same
#   with NUMBA_CPU_NAME=generic (no AVX: the 8-double vectors are split by LLVM), and
#   benchmarks/bench_products.py for its speed.
# - Why it stays: on its benchmark it must beat the best plain-numba loop for the same
#   product (add_tile_product, the register-blocked multiply-add loop; a plain-numba
#   subset-sum loop stayed scalar and ran at 0.3-0.8 of that) by 1.3x or more; it runs at
#   2.6-3.5x (102 and 1001 columns, docs/performance.md). The IR gives element types explicitly, so it is the
#   same with llvmlite's typed and opaque pointers.

#: points per pattern: bit t of a pattern byte says whether a relabelling calls point
#: 4g + t of group g an X point
PATTERN_POINTS = 4
#: lanes (result rows) of one vector
_VECTOR = 8
#: result columns whose sums stay in registers through a run of lookups (with two
#: vectors of lanes, 16 registers of AVX-512's 32)
_COLUMN_BLOCK = 8
#: groups of four points whose tables are built before their lookups: 16 groups × 16
#: subsets × 16 lanes × 8 bytes, 32 KB, stay in the L1 cache while every column reads them
_GROUP_BLOCK = 16


def _vector_type() -> ir.VectorType:  # pragma: no cover - compile time
    from llvmlite import ir

    return ir.VectorType(ir.DoubleType(), _VECTOR)


def _vector_pointer(builder: ir.IRBuilder, base: ir.Value, offset: ir.Value) -> ir.Value:  # pragma: no cover - compile time
    from llvmlite import ir

    # element types given explicitly, so that the IR is the same with typed and with opaque pointers
    return builder.bitcast(builder.gep(base, [offset], source_etype=ir.DoubleType()), _vector_type().as_pointer())


def _subset_tables_typing(vectors: int) -> Any:
    """tables(tab, KT, stride, j, lane, base): for the lanes lane:lane + 8·vectors of the
    four rows j..j+3 of KT (rows ``stride`` doubles apart), the sum over every subset p of
    them at tab[base + (p·vectors + v)·8 : … + 8] (bit t of p: row j + t)."""

    def typing(typingctx: object, tab: Any, KT: Any, stride: Any, j: Any, lane: Any, base: Any) -> tuple[object, object]:  # pragma: no cover
        from llvmlite import ir
        from numba import types

        sig = types.void(tab, KT, types.int64, types.int64, types.int64, types.int64)

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
            tab_data = context.make_array(signature.args[0])(context, builder, args[0]).data
            kt_data = context.make_array(signature.args[1])(context, builder, args[1]).data
            stride, j, lane, base = args[2:]
            i64 = ir.IntType(64)
            zero = ir.Constant(ir.VectorType(ir.DoubleType(), _VECTOR), [0.0] * _VECTOR)
            for v in range(vectors):
                column = builder.add(lane, ir.Constant(i64, _VECTOR * v))
                x = [
                    builder.load(
                        _vector_pointer(builder, kt_data, builder.add(builder.mul(builder.add(j, ir.Constant(i64, t)), stride), column)),
                        align=8,
                        typ=_vector_type(),
                    )
                    for t in range(PATTERN_POINTS)
                ]
                sums = [zero]
                for t in range(PATTERN_POINTS):  # subsets with top bit t: row j + t plus a smaller subset
                    sums += [x[t] if p == 0 else builder.fadd(sums[p], x[t]) for p in range(1 << t)]
                for p, value in enumerate(sums):
                    builder.store(value, _vector_pointer(builder, tab_data, builder.add(base, ir.Constant(i64, (p * vectors + v) * _VECTOR))), align=8)
            return context.get_dummy_value()

        return sig, codegen

    return typing


def _subset_lookups_typing(columns: int, vectors: int) -> Any:
    """lookups(out, out_stride, tab, P, P_stride, group, b, count, lane): for ``count``
    groups from ``group`` (tables from tab[0], 16·vectors·8 doubles a group) and the
    result columns b..b+columns−1, the sum of the tables' entries that the patterns
    P[group + g, b + c] pick, added to out[b + c, lane : lane + 8·vectors]."""

    def typing(
        typingctx: object, out: Any, out_stride: Any, tab: Any, P: Any, p_stride: Any, group: Any, b: Any, count: Any, lane: Any
    ) -> tuple[object, object]:  # pragma: no cover - compile time
        from llvmlite import ir
        from numba import types

        sig = types.void(out, types.int64, tab, P, types.int64, types.int64, types.int64, types.int64, types.int64)

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
            out_data = context.make_array(signature.args[0])(context, builder, args[0]).data
            tab_data = context.make_array(signature.args[2])(context, builder, args[2]).data
            p_data = context.make_array(signature.args[3])(context, builder, args[3]).data
            out_stride, p_stride, group, b, count, lane = args[1], *args[4:]
            i64 = ir.IntType(64)
            zero = ir.Constant(ir.VectorType(ir.DoubleType(), _VECTOR), [0.0] * _VECTOR)
            entry = builder.block
            loop = builder.append_basic_block("subset.lookups")
            done = builder.append_basic_block("subset.done")
            builder.cbranch(builder.icmp_signed(">", count, ir.Constant(i64, 0)), loop, done)
            builder.position_at_end(loop)
            g = builder.phi(i64)
            g.add_incoming(ir.Constant(i64, 0), entry)
            sums = []
            for _ in range(columns * vectors):
                s = builder.phi(zero.type)
                s.add_incoming(zero, entry)
                sums.append(s)
            row = builder.add(builder.mul(builder.add(group, g), p_stride), b)
            table = builder.mul(g, ir.Constant(i64, 16 * vectors * _VECTOR))
            added = []
            for c in range(columns):
                byte = builder.gep(p_data, [builder.add(row, ir.Constant(i64, c))], source_etype=ir.IntType(8))
                pattern = builder.zext(builder.load(byte, typ=ir.IntType(8)), i64)
                entry_at = builder.add(table, builder.mul(pattern, ir.Constant(i64, vectors * _VECTOR)))
                for v in range(vectors):
                    value = builder.load(_vector_pointer(builder, tab_data, builder.add(entry_at, ir.Constant(i64, v * _VECTOR))), align=8, typ=_vector_type())
                    added.append(builder.fadd(sums[c * vectors + v], value))
            following = builder.add(g, ir.Constant(i64, 1))
            g.add_incoming(following, loop)
            for s, a in zip(sums, added):
                s.add_incoming(a, loop)
            builder.cbranch(builder.icmp_signed("<", following, count), loop, done)
            builder.position_at_end(done)
            totals = []  # a block's phi nodes come before its other instructions
            for a in added:
                total = builder.phi(zero.type)
                total.add_incoming(zero, entry)
                total.add_incoming(a, loop)
                totals.append(total)
            for c in range(columns):
                at = builder.add(builder.mul(builder.add(b, ir.Constant(i64, c)), out_stride), lane)
                for v in range(vectors):
                    pointer = _vector_pointer(builder, out_data, builder.add(at, ir.Constant(i64, v * _VECTOR)))
                    builder.store(builder.fadd(builder.load(pointer, align=8, typ=_vector_type()), totals[c * vectors + v]), pointer, align=8)
            return context.get_dummy_value()

        return sig, codegen

    return typing


#: numba's intrinsics of the tables and the lookups, made when the loops are first needed
#: (tables of 2 or 1 vectors of lanes; lookups of 8 or 1 columns by 2 or 1 vectors)
_INTRINSICS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "_tables_2": (_subset_tables_typing, (2,)),
    "_tables_1": (_subset_tables_typing, (1,)),
    "_lookups_8x2": (_subset_lookups_typing, (_COLUMN_BLOCK, 2)),
    "_lookups_1x2": (_subset_lookups_typing, (1, 2)),
    "_lookups_8x1": (_subset_lookups_typing, (_COLUMN_BLOCK, 1)),
    "_lookups_1x1": (_subset_lookups_typing, (1, 1)),
}
_tables_2: Any = None
_tables_1: Any = None
_lookups_8x2: Any = None
_lookups_1x2: Any = None
_lookups_8x1: Any = None
_lookups_1x1: Any = None


def _intrinsic(factory: Callable[..., Any], arguments: tuple[int, ...], numba: Any) -> Any:
    return numba.extending.intrinsic(factory(*arguments))


for name, (factory, arguments) in _INTRINSICS.items():
    _loops.bind(name, partial(_intrinsic, factory, arguments))
del name, factory, arguments


@_loop(nogil=True, boundscheck=False)
def _single_points(out: np.ndarray, KT: np.ndarray, P: np.ndarray, offset: int, a: int, b: int) -> None:  # pragma: no cover - compiled
    # rows a:b of KT one by one (points offset + a … of the patterns): outside whole groups
    q, lanes = out.shape
    for j in range(a, b):
        point = offset + j
        g, bit = point // 4, np.uint8(1 << (point % 4))
        values = KT[j]
        for c in range(q):
            if P[g, c] & bit:
                row = out[c]
                for i in range(lanes):
                    row[i] += values[i]


@_loop(nogil=True, boundscheck=False)
def _indicator_product(out: np.ndarray, KT: np.ndarray, P: np.ndarray, offset: int, tab: np.ndarray) -> None:  # pragma: no cover - compiled
    # out (q × lanes, rows contiguous) += the product of KT's transpose with the indicator
    # columns of points offset…, lanes a multiple of 8 (the caller pads): whole groups of four points by
    # subset sums, the points before the first whole group and after the last one by one
    points, lanes = KT.shape
    q = out.shape[0]
    o_stride, k_stride, p_stride = out.strides[0] // 8, KT.strides[0] // 8, P.strides[0]
    lead = min((-offset) % 4, points)
    groups = (points - lead) // 4
    first = (offset + lead) // 4
    full = q - q % _COLUMN_BLOCK
    _single_points(out, KT, P, offset, 0, lead)
    lane = 0
    while lane < lanes:
        wide = lanes - lane >= 16
        for g0 in range(0, groups, _GROUP_BLOCK):
            count = min(_GROUP_BLOCK, groups - g0)
            for g in range(count):
                if wide:
                    _tables_2(tab, KT, k_stride, lead + 4 * (g0 + g), lane, 256 * g)
                else:
                    _tables_1(tab, KT, k_stride, lead + 4 * (g0 + g), lane, 128 * g)
            for b in range(0, full, _COLUMN_BLOCK):
                if wide:
                    _lookups_8x2(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
                else:
                    _lookups_8x1(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
            for b in range(full, q):
                if wide:
                    _lookups_1x2(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
                else:
                    _lookups_1x1(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
        lane += 16 if wide else 8
    _single_points(out, KT, P, offset, lead + 4 * groups, points)


def add_indicator_product(out: np.ndarray, KT: np.ndarray, patterns: np.ndarray, offset: int = 0) -> bool:
    """out[b, i] += Σ_j KT[j, i] · E[offset + j, b] for a 0/1 matrix E given by its
    ``patterns`` (:func:`~monk_framework.engine.pooled.indicator_patterns`: E's rows packed four
    to a byte), in place; True if done, False (nothing done) when an array is not laid out
    for it, so that the caller multiplies through BLAS or :func:`add_tile_product`.

    The relabelling products of a permutation test, Rᵀ E for a tile Rᵀ = KT of the Gram
    matrix (K is symmetric): each column of E only picks tile values, so this adds
    subset sums tabulated four points at a time instead of multiplying (a 256 × 2048
    tile and 102 columns on one AVX-512 core: 1.65 ms, against 2.66 for the multiply-add
    loop and for OpenBLAS; benchmarks/bench_products.py). The sums are added in another
    order than a product's, so they agree with it to round-off.

    Needs ``out`` C-ordered float64 (q × r, writable), ``KT`` float64 with contiguous
    rows (m × r; lanes beyond a multiple of 8 are copied into one padded vector),
    ``patterns`` C-ordered uint8 (q columns) and
    ``0 <= offset <= 4·len(patterns) − m``. Points before the first whole group of four
    (``offset`` not a multiple of 4) and after the last are added one by one.
    """
    if not _laid_out_for_subset_sums(out, KT, patterns):
        return False
    points, lanes = KT.shape
    if not 0 <= offset <= PATTERN_POINTS * patterns.shape[0] - points:
        raise ValueError(f"add_indicator_product: points {offset}:{offset + points} outside the {PATTERN_POINTS * patterns.shape[0]} of the patterns")
    if not (points and lanes and len(out)):
        return True
    tables = _aligned_tables()
    whole = lanes - lanes % _VECTOR
    if whole:
        head, KT_head = out[:, :whole], KT[:, :whole]
        if _run(lambda: _indicator_product(head, KT_head, patterns, int(offset), tables)) is NOT_RUN:
            reference.add_indicator_product(head, KT_head, patterns, int(offset))
    if whole < lanes:
        # the last lanes through one padded vector
        rest = np.zeros((points, _VECTOR))
        rest[:, : lanes - whole] = KT[:, whole:]
        sums = np.zeros((len(out), _VECTOR))
        if _run(lambda: _indicator_product(sums, rest, patterns, int(offset), tables)) is NOT_RUN:
            reference.add_indicator_product(sums, rest, patterns, int(offset))
        out[:, whole:] += sums[:, : lanes - whole]
    return True


def _laid_out_for_subset_sums(out: Any, KT: Any, patterns: Any) -> bool:
    """Whether the arrays of :func:`add_indicator_product` are laid out as its loop reads them."""
    if not (isinstance(out, np.ndarray) and isinstance(KT, np.ndarray) and isinstance(patterns, np.ndarray)):
        return False
    if out.ndim != 2 or KT.ndim != 2 or patterns.ndim != 2 or out.dtype != np.float64 or KT.dtype != np.float64:
        return False
    if patterns.dtype != np.uint8 or not patterns.flags.c_contiguous or not out.flags.c_contiguous or not out.flags.writeable:
        return False
    points, lanes = KT.shape
    if out.shape != (patterns.shape[1], lanes):
        return False
    # (an empty array's strides say nothing about a layout)
    return not (points and lanes and (KT.strides[1] != 8 or KT.strides[0] % 8))


def _aligned_tables() -> np.ndarray:
    # the tables of one block of groups on a 64-byte boundary: each vector of 8 doubles
    # then lies in one cache line
    buffer = np.empty(_GROUP_BLOCK * 16 * 16 + _VECTOR)
    skip = (-buffer.ctypes.data % 64) // 8
    return buffer[skip : skip + _GROUP_BLOCK * 16 * 16]


def every_point_patterns(size: int) -> np.ndarray:
    """The patterns of a column that picks all ``size`` points: ⌈size/4⌉ bytes, 0b1111
    for each whole group of four and the low bits of a last partial group."""
    whole, rest = divmod(size, PATTERN_POINTS)
    every = np.full(-(-size // PATTERN_POINTS), (1 << PATTERN_POINTS) - 1, dtype=np.uint8)
    if rest:
        every[whole] = (1 << rest) - 1
    return every


@_loop(nogil=True, boundscheck=False)
def _pack_patterns(P: np.ndarray, perms: np.ndarray, n: int) -> None:  # pragma: no cover - compiled
    for b in range(perms.shape[0]):
        for k in range(n):
            i = perms[b, k]
            P[i >> 2, b] |= np.uint8(1 << (i & 3))


def pack_patterns(P: np.ndarray, perms: np.ndarray, n: int) -> None:
    """P[i // 4, b] |= 1 << (i % 4) for the first ``n`` points i of each row b of ``perms``
    (int64, every point in 0..4·len(P) − 1: checked by the caller,
    :func:`~monk_framework.engine.pooled.indicator_patterns`), P uint8 and C-ordered, in place."""
    if P.dtype != np.uint8 or P.ndim != 2 or not P.flags.c_contiguous or P.shape[1] < len(perms):
        raise ValueError(f"pack_patterns needs a C-ordered uint8 array with {len(perms)} columns or more, got {P.dtype} {P.shape}")
    perms = np.asarray(perms, dtype=np.int64)
    if _run(lambda: _pack_patterns(P, perms, int(n))) is NOT_RUN:
        reference.pack_patterns(P, perms, int(n))
