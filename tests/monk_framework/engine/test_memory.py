"""The engine's memory policy: one chunking rule from one table of sizes, and the refusals before allocation."""

from __future__ import annotations

import pytest

from monk_framework.core import resources as resources_module
from monk_framework.core.errors import ResourceError
from monk_framework.core.resources import Resources
from monk_framework.engine import memory
from monk_framework.engine.memory import ALWAYS_GRANTED_BYTES, CHUNK_BYTES, TABLE_SHARE, chunk_rows, reserve_budget, reserve_memory, table_room


@pytest.fixture
def available(monkeypatch):
    """Pretend the machine has ``value`` bytes free (None: unknown)."""

    def set_to(value):
        monkeypatch.setattr(resources_module, "available_memory", lambda: value)
        monkeypatch.setattr(memory, "available_memory", lambda: value)

    return set_to


@pytest.mark.parametrize("work", sorted(CHUNK_BYTES))
@pytest.mark.parametrize("row_bytes", [1, 8, 8 * 1000, 3 * 2**20 + 1])
def test_a_chunk_is_the_tables_bytes_over_a_rows_bytes_floored(work, row_bytes):
    assert chunk_rows(row_bytes, work=work) == max(1, CHUNK_BYTES[work] // row_bytes)


def test_a_share_is_of_the_calls_budget_and_of_the_tables_size_when_the_budget_is_unknown():
    budget = Resources(budget=10_000)
    assert chunk_rows(8, share=0.25, resources=budget) == 10_000 // 4 // 8
    assert chunk_rows(8, share=1 / 3, resources=budget) == 10_000 // 3 // 8  # 1/3 exactly, not 0.333...
    assert chunk_rows(8, share=0.25) == CHUNK_BYTES["band"] // 4 // 8
    assert chunk_rows(8, share=0.25, resources=Resources(budget=None)) == CHUNK_BYTES["band"] // 4 // 8
    # without a share the budget does not change the chunk: the table's sizes keep work in cache
    assert chunk_rows(8, resources=budget) == CHUNK_BYTES["band"] // 8


def test_the_bounds_hold_and_a_row_wider_than_the_chunk_still_gets_its_least():
    assert chunk_rows(CHUNK_BYTES["tile"] * 4, work="tile", at_least=64) == 64
    assert chunk_rows(CHUNK_BYTES["tile"] * 4, work="tile", at_least=0) == 0
    assert chunk_rows(8, at_most=10) == 10
    assert chunk_rows(0) == CHUNK_BYTES["band"]  # an empty row counts as one byte


def test_an_unknown_kind_of_work_is_refused_with_the_kinds():
    with pytest.raises(ValueError, match=r"work='blocks' is not one of 'band', 'tile'"):
        chunk_rows(8, work="blocks")


def test_the_table_is_what_every_chunk_reads(monkeypatch):
    monkeypatch.setitem(CHUNK_BYTES, "batch", 800)
    assert chunk_rows(8, work="batch") == 100


def test_reserve_memory_refuses_beyond_half_the_free_memory_and_a_stored_matrix_beyond_90_percent(available):
    available(1000)
    reserve_memory(500, what="x needs", fix="y.")
    with pytest.raises(
        ResourceError,
        match=r"^Estimator 'e': 600 features need about 600 bytes, but only 500 bytes \(half of the 1,000 bytes free\) of memory are available\. Use fewer\.$",
    ):
        reserve_memory(600, what="Estimator 'e': 600 features need", fix="Use fewer.")
    reserve_memory(900, what="x", fix="y", store=True)
    with pytest.raises(ResourceError, match="90% of the 1,000 bytes free"):
        reserve_memory(901, what="x", fix="y", store=True)
    available(None)
    reserve_memory(10**30, what="x", fix="y")  # unknown: nothing refused


def test_reserve_budget_grants_a_floor_and_refuses_beyond_the_budget():
    small = Resources(budget=1000)
    reserve_budget(small, ALWAYS_GRANTED_BYTES, what="a trace", fix="keep less.")
    with pytest.raises(ResourceError, match=r"^a trace, about 64\.0 MiB, over the memory budget of 1,000 bytes; keep less\.$"):
        reserve_budget(small, ALWAYS_GRANTED_BYTES + 1, what="a trace", fix="keep less.")
    reserve_budget(Resources(budget=None), 10**30, what="a trace", fix="keep less.")


def test_table_room_is_its_share_of_the_free_memory(available):
    available(4000)
    assert table_room() == TABLE_SHARE * 4000
    available(None)
    assert table_room() == float("inf")
