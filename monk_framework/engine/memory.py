"""The engine's memory policy: refusals before allocation, and the sizes of tiles and batches.

Every check of a size against the machine's memory outside the application's early
refusals (a file too large to read, a grid too large to run) goes through
:func:`reserve_memory`: a plugin states what it needs and why, the engine decides.
"""

from __future__ import annotations

from fractions import Fraction

from monk_framework.core.errors import ResourceError
from monk_framework.core.resources import STORE_SHARE, Resources, available_memory, check_fits, format_bytes

__all__ = ["ALWAYS_GRANTED_BYTES", "CHUNK_BYTES", "TABLE_SHARE", "chunk_rows", "reserve_budget", "reserve_memory", "table_room"]

#: the bytes one chunk of each kind of work holds (:func:`chunk_rows`): the one place
#: where the sizes of tiles, bands and batches are set
CHUNK_BYTES: dict[str, int] = {
    # a row band of a Gram matrix, and the tiles of passes that follow a product: small
    # enough for the elementwise passes after it to stay in cache (benchmarks/bench_gram.py)
    "band": 4 * 2**20,
    # a tile of a matrix-free band (distances, exponential, products, in cache)
    "tile": 4 * 2**20,
    # a band of kernel values read twice, for two products (the sums without the diagonal)
    "double-band": 8 * 2**20,
    # a band of counts multiplied with a matrix of counts (the string kernel's feature counts)
    "count-band": 16 * 2**20,
    # a batch of relabellings: their indicator matrix E and its product K E
    "batch": 64 * 2**20,
    # a block of explicit features read in rows (the string kernel's feature tables)
    "feature-block": 128 * 2**20,
}

#: the share of the available memory that tables a computation may build to go faster
#: (the string kernel's per-string feature tables) may take: beyond it, the slower path
TABLE_SHARE = 0.25
#: what :func:`reserve_budget` grants whatever the budget: a budget of a few kB forces the
#: Gram matrices into tiles; it is not about the few lists and labels beside them
ALWAYS_GRANTED_BYTES = 64 * 2**20


def chunk_rows(
    row_bytes: int, *, work: str = "band", share: float | None = None, resources: Resources | None = None, at_least: int = 1, at_most: int | None = None
) -> int:
    """How many rows of ``row_bytes`` bytes one chunk of ``work`` holds: the one rule for
    every tile, band and batch (scikit-learn's ``get_chunk_n_rows``).

    The chunk is :data:`CHUNK_BYTES` [``work``] bytes, or, with ``share``, that share of
    the memory budget of ``resources`` (of :data:`CHUNK_BYTES` [``work``] when the budget
    is unknown): ⌊bytes / row_bytes⌋, at least ``at_least`` and at most ``at_most``. The
    kinds of ``work``: "band" (a row band of a Gram matrix), "tile" (a matrix-free tile),
    "double-band", "count-band", "batch" (a batch of relabellings), "feature-block"."""
    if work not in CHUNK_BYTES:
        raise ValueError(f"chunk_rows: work={work!r} is not one of {', '.join(map(repr, CHUNK_BYTES))}.")
    size = CHUNK_BYTES[work]
    if share is not None:
        budget = None if resources is None else resources.budget
        fraction = Fraction(share).limit_denominator(1000)
        size = (budget if budget is not None else size) * fraction.numerator // fraction.denominator
    rows = int(size // max(int(row_bytes), 1))
    return max(at_least, rows if at_most is None else min(rows, at_most))


def reserve_memory(nbytes: float, *, what: str, fix: str, store: bool = False) -> None:
    """Refuse, before anything is allocated, ``nbytes`` that the memory available now
    cannot hold: a :class:`~monk_framework.core.errors.ResourceError` reading
    "{what} about 2.0 GiB, but only 1.5 GiB (half of the 3.0 GiB free) of memory are
    available. {fix}". ``what`` says what asks for the memory, in the user's numbers and
    with its verb (``"Estimator 'rff': n_features = 10,000 random features of 5,000 points
    need"``), ``fix`` what to change (a sentence). A computation may take half of the memory available
    (``store=True``: one stored matrix, which may take 90 %). Nothing is refused when the
    available memory is unknown."""
    check_fits(
        nbytes,
        lambda need, avail, _: f"{what} about {need}, but only {avail} of memory are available. {fix}",
        share=STORE_SHARE if store else 0.5,
    )


def reserve_budget(resources: Resources, nbytes: float, *, what: str, fix: str) -> None:
    """Refuse ``nbytes`` that a computation would hold beyond the call's memory budget
    (``resources.budget``), before it starts: a
    :class:`~monk_framework.core.errors.ResourceError` reading "{what}, about 7.5 GiB,
    over the memory budget of 2.0 GiB; {fix}". Up to :data:`ALWAYS_GRANTED_BYTES` is
    granted whatever the budget. For what a user's number makes a computation keep (an
    iteration trace, the partitions it draws ahead)."""
    if nbytes > ALWAYS_GRANTED_BYTES and not resources.fits(nbytes):
        raise ResourceError(f"{what}, about {format_bytes(nbytes)}, over the memory budget of {format_bytes(resources.budget or 0)}; {fix}")


def table_room() -> float:
    """The bytes that tables built to speed a computation up (a kernel's per-string feature
    tables) may take now: :data:`TABLE_SHARE` of the memory available (infinite when it
    is unknown). A plan that needs more takes its slower path instead of failing."""
    avail = available_memory()
    return TABLE_SHARE * avail if avail is not None else float("inf")
