"""The journal: cells appended as they finish, resumed after an interruption, never mixed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from monk_framework.app.experiments.runner import JOURNAL, Cell, CellStore, cell_key, record_checksum, run_cells
from monk_framework.core.errors import MonkError
from monk_framework.core.randomness import stable_int


def square(settings, shared):
    return [{"i": settings["i"], "value": settings["i"] ** 2 + (shared or 0)}]


class Boom(Exception):
    pass


class FailAfter:
    """A cell function that raises once ``limit`` cells have run (an interruption)."""

    def __init__(self, limit):
        self.limit, self.calls = limit, []

    def __call__(self, settings, shared):
        if len(self.calls) == self.limit:
            raise Boom
        self.calls.append(settings["i"])
        return square(settings, shared)


CELLS = [Cell({"i": i, "seed": 7}) for i in range(12)]


def journal_keys(directory):
    return [json.loads(line)["key"] for line in (directory / JOURNAL).read_text().splitlines()]


def test_key_is_a_stable_hash_of_the_settings():
    assert cell_key({"a": 1, "b": [1, 2]}) == cell_key({"b": [1, 2], "a": 1})
    assert cell_key({"a": 1}) != cell_key({"a": 2})
    assert Cell({"a": 1}).key == cell_key({"a": 1})
    # sha256-based, so equal on every machine and in every process (unlike hash())
    assert stable_int("gauss") == int.from_bytes(__import__("hashlib").sha256(b"gauss").digest()[:4], "little")


def test_interrupted_run_resumes_without_recomputing(tmp_path):
    config = {"n": 12}
    fn = FailAfter(5)
    with CellStore(tmp_path, "toy", config) as store, pytest.raises(Boom):
        for _ in run_cells(CELLS, fn, store):
            pass
    assert len(journal_keys(tmp_path)) == 5
    again = FailAfter(10**6)
    with CellStore(tmp_path, "toy", config) as store:
        assert len(store.done) == 5
        finished = list(run_cells(CELLS, again, store, shared=0))
        rows = store.rows(CELLS)
    assert sorted(again.calls) == list(range(5, 12))  # only the missing cells ran
    assert len(finished) == 7
    keys = journal_keys(tmp_path)
    assert sorted(keys) == sorted(c.key for c in CELLS) and len(keys) == len(set(keys))
    assert rows == [{"i": i, "value": i * i} for i in range(12)]  # in plan order


def test_a_torn_last_line_is_cut_off_and_the_cell_recomputed(tmp_path):
    with CellStore(tmp_path, "toy", {}) as store:
        list(run_cells(CELLS[:3], square, store))
    path = tmp_path / JOURNAL
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"key": "abc", "rows": [{"i"')  # killed in the middle of a write
    with CellStore(tmp_path, "toy", {}) as store:
        assert len(store.done) == 3
        assert path.read_bytes() == whole  # truncated back to the last complete record
        list(run_cells(CELLS[:4], square, store))
    assert len(journal_keys(tmp_path)) == 4


def test_a_damaged_record_in_the_middle_is_reported_with_its_line(tmp_path):
    with CellStore(tmp_path, "toy", {}) as store:
        list(run_cells(CELLS[:2], square, store))
    path = tmp_path / JOURNAL
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "not json\n" + lines[1])
    with pytest.raises(MonkError, match=r"cells.jsonl', line 2: not a journal record"):
        CellStore(tmp_path, "toy", {}).open()


def test_changed_settings_never_mix_with_old_results(tmp_path):
    with CellStore(tmp_path, "toy", {"runs": 3, "sizes": [1, 2]}) as store:
        list(run_cells(CELLS[:2], square, store))
    with pytest.raises(MonkError, match=r"runs \(4 here, 3 there\).*never mixed"):
        CellStore(tmp_path, "toy", {"runs": 4, "sizes": [1, 2]}).open()
    with pytest.raises(MonkError, match="experiment 'toy', not 'other'"):
        CellStore(tmp_path, "other", {"runs": 3, "sizes": [1, 2]}).open()
    with CellStore(tmp_path, "toy", {"runs": 4, "sizes": [1, 2]}, fresh=True) as store:
        assert store.done == {}


def test_one_run_per_directory(tmp_path):
    with CellStore(tmp_path, "toy", {}):
        with pytest.raises(MonkError, match="Another run is writing"):
            CellStore(tmp_path, "toy", {}).open()
    with CellStore(tmp_path, "toy", {}):  # released on exit
        pass


def test_a_journal_without_manifest_is_not_trusted(tmp_path):
    (tmp_path / JOURNAL).write_text("")
    with pytest.raises(MonkError, match="no manifest.json"):
        CellStore(tmp_path, "toy", {}).open()


def test_duplicate_cells_in_a_plan_are_refused(tmp_path):
    with CellStore(tmp_path, "toy", {}) as store, pytest.raises(MonkError, match="same settings"):
        list(run_cells([CELLS[0], Cell({"i": 0, "seed": 7})], square, store))


def test_rows_refuses_unfinished_cells(tmp_path):
    with CellStore(tmp_path, "toy", {}) as store:
        list(run_cells(CELLS[:2], square, store))
        with pytest.raises(MonkError, match="1 of 3 cells are not finished"):
            store.rows(CELLS[:3])


# -- a damaged journal is refused with its line number, never trusted ------------------


def _journal(tmp_path, n=3):
    with CellStore(tmp_path, "toy", {}) as store:
        list(run_cells(CELLS[:n], square, store))
    path = tmp_path / JOURNAL
    return path, [json.loads(line) for line in path.read_text().splitlines()]


def _write(path, records, resign=()):
    # resign: records whose checksum is recomputed (an edit made with care, or by a tool)
    for i in resign:
        records[i]["sha"] = record_checksum(records[i])
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_an_edited_value_is_refused_by_its_checksum(tmp_path):
    path, records = _journal(tmp_path)
    records[1]["rows"][0]["value"] = 123.0
    _write(path, records)
    with pytest.raises(MonkError, match=r"line 2: its checksum does not match its contents.*not trusted"):
        CellStore(tmp_path, "toy", {}).open()


def test_rows_swapped_between_records_are_refused(tmp_path):
    path, records = _journal(tmp_path)
    records[0]["rows"], records[2]["rows"] = records[2]["rows"], records[0]["rows"]
    _write(path, records)
    with pytest.raises(MonkError, match="line 1: its checksum does not match"):
        CellStore(tmp_path, "toy", {}).open()
    _write(path, records, resign=(0, 2))  # even with fresh checksums: the rows contradict the settings
    with pytest.raises(MonkError, match=r"line 1: a row's 'i' is 2, its cell's is 0"):
        CellStore(tmp_path, "toy", {}).open()


def test_an_emptied_record_is_not_resumed_as_done(tmp_path):
    path, records = _journal(tmp_path)
    records[1]["rows"] = []
    _write(path, records, resign=(1,))
    with pytest.raises(MonkError, match="line 2: it holds no rows"):
        CellStore(tmp_path, "toy", {}).open()


def test_a_key_that_is_not_the_hash_of_its_settings_is_refused(tmp_path):
    path, records = _journal(tmp_path)
    records[2]["settings"]["seed"] = 8
    _write(path, records, resign=(2,))
    with pytest.raises(MonkError, match="line 3: its key is not the hash of its settings"):
        CellStore(tmp_path, "toy", {}).open()


def test_a_record_of_another_plan_is_refused_when_the_run_resumes(tmp_path):
    path, records = _journal(tmp_path)
    stranger = {"key": cell_key({"i": 99, "seed": 7}), "settings": {"i": 99, "seed": 7}, "rows": [{"i": 99, "value": 1.0}], "seconds": 0.1, "seq": 4}
    _write(path, [*records, stranger], resign=(3,))
    with CellStore(tmp_path, "toy", {}) as store, pytest.raises(MonkError, match="line 4: a cell that is not in this run's plan"):
        list(run_cells(CELLS, square, store))


def test_two_different_records_of_one_cell_are_refused_and_identical_ones_accepted(tmp_path):
    path, records = _journal(tmp_path)
    again = dict(records[0], seq=4)
    _write(path, [*records, again], resign=(3,))
    with CellStore(tmp_path, "toy", {}) as store:
        assert len(store.done) == 3
    changed = dict(again, seconds=99.0)
    _write(path, [*records, changed], resign=(3,))
    with pytest.raises(MonkError, match="line 4: a second, different record of the cell of line 1"):
        CellStore(tmp_path, "toy", {}).open()


def test_a_record_without_checksum_is_not_trusted(tmp_path):
    path, records = _journal(tmp_path)
    del records[0]["sha"]
    _write(path, records)
    with pytest.raises(MonkError, match="line 1: not a journal record of this version"):
        CellStore(tmp_path, "toy", {}).open()


def test_a_cell_without_rows_is_an_error_not_a_record(tmp_path):
    with CellStore(tmp_path, "toy", {}) as store, pytest.raises(MonkError, match="produced no rows"):
        list(run_cells(CELLS[:1], lambda settings, shared: [], store))


def test_fresh_removes_the_old_outputs_before_the_new_manifest(tmp_path, monkeypatch):
    import monk_framework.app.experiments.runner as runner

    with CellStore(tmp_path, "toy", {"runs": 3}, outputs=("results.csv", "fig.png")) as store:
        list(run_cells(CELLS[:2], square, store))
    for name in ("results.csv", "fig.png", "notes.txt"):
        (tmp_path / name).write_text("old")

    # interrupt the fresh start as the new manifest is written: the old outputs must be gone
    def interrupted(path, text):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "write_atomically", interrupted)
    with pytest.raises(KeyboardInterrupt):
        CellStore(tmp_path, "toy", {"runs": 4}, fresh=True, outputs=("results.csv", "fig.png")).open()
    assert not (tmp_path / "results.csv").exists() and not (tmp_path / "fig.png").exists()
    assert not (tmp_path / "manifest.json").exists() and not (tmp_path / JOURNAL).exists()
    assert (tmp_path / "notes.txt").read_text() == "old"  # not ours: never touched


def test_a_record_moved_to_another_line_is_refused(tmp_path):
    path, records = _journal(tmp_path)
    _write(path, [records[1], records[0], records[2]])  # two lines swapped, each intact
    with pytest.raises(MonkError, match=r"line 1: the record written as line 2 \(lines were moved\)"):
        CellStore(tmp_path, "toy", {}).open()


def test_records_appended_after_a_resume_continue_the_line_numbers(tmp_path):
    path, _ = _journal(tmp_path, n=2)
    with CellStore(tmp_path, "toy", {}) as store:
        list(run_cells(CELLS[:4], square, store))
    assert [json.loads(line)["seq"] for line in path.read_text().splitlines()] == [1, 2, 3, 4]
    with CellStore(tmp_path, "toy", {}) as store:
        assert len(store.done) == 4


# -- journals, manifests and folders are untrusted input: every fault is a named refusal --


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda line: line.replace('"seconds":', '"seconds":NaN,"x":', 1), "not a journal record of this version"),
        (lambda line: line.replace('"value":1', '"value":NaN', 1), "it holds a number that is not finite"),
        (lambda line: line.replace('"value":1', '"value":1e400', 1), "it holds a number that is not finite"),
        (lambda line: "[" * 100000 + "]" * 100000, "not a journal record"),
        (lambda line: '"just a string"', "not a journal record"),
        (lambda line: line.replace('"seq":2', '"seq":"2"', 1), "its line number is not a number"),
    ],
    ids=["nan-field", "nan-value", "1e400", "deeply-nested", "a-string", "text-seq"],
)
def test_a_hostile_journal_line_is_refused_by_its_line_number(tmp_path, edit, problem):
    path, _ = _journal(tmp_path)
    lines = path.read_text().splitlines()
    lines[1] = edit(lines[1])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MonkError, match=rf"cells.jsonl', line 2: {problem}"):
        CellStore(tmp_path, "toy", {}).open()


@pytest.mark.parametrize(
    "manifest",
    ["[1, 2]", '"toy"', '{"experiment": "toy"}', '{"experiment": "toy", "config": [1]}', "[" * 100000],
    ids=["list", "string", "no-config", "config-list", "deeply-nested"],
)
def test_a_manifest_of_the_wrong_shape_is_refused_by_name(tmp_path, manifest):
    _journal(tmp_path)
    (tmp_path / "manifest.json").write_text(manifest)
    with pytest.raises(MonkError, match=r"manifest.json"):
        CellStore(tmp_path, "toy", {}).open()


def test_a_lock_that_is_a_directory_or_a_read_only_folder_is_a_clear_error(tmp_path):
    import os

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".lock").mkdir()
    with pytest.raises(MonkError, match=r"Cannot write in the results directory .*its lock file .lock is a directory"):
        CellStore(tmp_path / "a", "toy", {}).open()
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    try:
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as root: a read-only folder is writable")
        with pytest.raises(MonkError, match=r"Cannot write in the results directory .*Permission denied"):
            CellStore(tmp_path / "ro", "toy", {}).open()
    finally:
        os.chmod(tmp_path / "ro", 0o755)


@pytest.mark.parametrize("fresh", [False, True])
def test_a_folder_without_manifest_keeps_the_users_own_files(tmp_path, fresh):
    (tmp_path / "results.csv").write_text("my,own\n1,2\n")
    with pytest.raises(MonkError, match=r"has no manifest.json but holds results.csv.*left alone"):
        CellStore(tmp_path, "toy", {}, fresh=fresh, outputs=("results.csv", "summary.csv")).open()
    assert (tmp_path / "results.csv").read_text() == "my,own\n1,2\n"
    assert not (tmp_path / "manifest.json").exists()
    # other files beside the outputs' names are no reason to refuse
    (tmp_path / "results.csv").unlink()
    (tmp_path / "notes.txt").write_text("mine")
    with CellStore(tmp_path, "toy", {}, fresh=fresh, outputs=("results.csv", "summary.csv")):
        pass
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_plan_beyond_memory_is_refused_before_it_is_built_or_the_folder_touched(tmp_path):
    from monk_framework.app.experiments import get_experiment, run_experiment
    from monk_framework.core.errors import ResourceError

    for name in ("exp1", "exp2"):
        exp = get_experiment(name, quick=True, runs=10**12)
        assert exp.cell_count() > 10**12
        with pytest.raises(
            ResourceError,
            match=rf"{name}: [\d,]+ cells \(1,000,000,000,000 runs \(--runs\) for each of "
            r"\d+ settings\) need about .* use --runs [\d,]+ or fewer",
        ):
            run_experiment(exp, tmp_path / name)
        assert not (tmp_path / name).exists()
        small = get_experiment(name, quick=True)
        assert small.cell_count() == len(small.cells())


def test_a_cell_that_changes_directory_cannot_move_the_journal(tmp_path, monkeypatch):
    """Cells run plugin code; one that calls os.chdir must not send the next records (or
    the report) to another folder: the store anchors its directory when it opens."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(home)
    here = Path.cwd()  # home as the system names it (tmp_path may pass through a link)

    def wandering(settings, shared):
        os.chdir(elsewhere)
        return square(settings, shared)

    with CellStore("out", "toy", {}) as store:
        list(run_cells(CELLS[:3], wandering, store))
        assert store.path("results.csv") == here / "out" / "results.csv"
        assert store.shown(store.path("results.csv")) == Path("out") / "results.csv"  # named as given
    assert len(journal_keys(home / "out")) == 3
    assert not (elsewhere / "out").exists()


def test_progress_weighs_each_cell_by_its_cost_and_carries_over_a_resume(tmp_path):
    # cells run small first: counted by cells, 11 of 12 done would read 92 % with 60 % of
    # the work left; weighted by cost, the share is the work's, and a resume starts where
    # the killed run stood
    costs = [float((c.settings["i"] + 1) ** 2) for c in CELLS]
    total = sum(costs)
    heard: list[tuple[float, float, str]] = []
    with CellStore(tmp_path, "toy", {"n": 12}) as store, pytest.raises(Boom):
        for _ in run_cells(CELLS, FailAfter(6), store, progress=lambda d, t, w: heard.append((d, t, w)), costs=costs):
            pass
    assert heard[0] == (0.0, 100.0, "work in % (cells weighted by their cost)")
    assert heard[-1][0] == pytest.approx(100 * sum(costs[:6]) / total)  # 91 of 650: 14 %, not 6 of 12
    resumed: list[float] = []
    with CellStore(tmp_path, "toy", {"n": 12}) as store:
        list(run_cells(CELLS, square, store, progress=lambda d, t, w: resumed.append(d), costs=costs))
    assert resumed[0] == pytest.approx(heard[-1][0]) and resumed[-1] == pytest.approx(100.0)
    assert all(a <= b for a, b in zip(resumed, resumed[1:]))
    counted: list[float] = []
    with CellStore(tmp_path / "plain", "toy", {"n": 12}) as store:
        list(run_cells(CELLS[:3], square, store, progress=lambda d, t, w: counted.append((d, t, w))))
    assert counted[-1] == (3, 3, "cells")  # without costs: cells
    with CellStore(tmp_path / "bad", "toy", {"n": 12}) as store, pytest.raises(MonkError, match="costs must be"):
        list(run_cells(CELLS[:2], square, store, costs=[1.0, 0.0]))


def test_saved_cells_counts_complete_lines_and_never_opens_a_pipe(tmp_path):
    from monk_framework.app.experiments.runner import saved_cells

    assert saved_cells(tmp_path) == 0
    (tmp_path / JOURNAL).write_bytes(b'{"a": 1}\n{"b": 2}\n{"torn')
    assert saved_cells(tmp_path) == 2
    piped = tmp_path / "piped"
    piped.mkdir()
    os.mkfifo(piped / JOURNAL)  # opening it would wait for a writer forever
    assert saved_cells(piped) == 0
