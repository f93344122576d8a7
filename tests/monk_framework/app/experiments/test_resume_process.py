"""A real `monkfw experiment` process killed midway, then rerun: every cell exactly once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monk_framework.app.experiments import get_experiment, run_experiment
from monk_framework.app.experiments.report import read_csv
from monk_framework.app.experiments.runner import CellStore


def _command() -> list[str]:
    exe = shutil.which("monkfw", path=str(Path(sys.executable).parent)) or shutil.which("monkfw")
    return [exe] if exe else [sys.executable, "-m", "monk_framework"]


ARGS = ["experiment", "exp1", "--quick", "--runs", "6", "--sizes", "100,150,200,250"]


@pytest.mark.slow  # 14 s: three runs of an experiment (.ci/run runs it)
def test_killed_run_resumes_to_exactly_the_full_set_of_cells(tmp_path):
    out = tmp_path / "exp1"
    journal = out / "cells.jsonl"
    proc = subprocess.Popen([*_command(), "--quiet", *ARGS, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_bytes().count(b"\n") >= 15:
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)  # no chance to clean up
    proc.wait(timeout=30)
    before = journal.read_bytes().count(b"\n")
    assert not (out / "results.csv").exists(), "the run finished before it could be killed"

    again = subprocess.run([*_command(), *ARGS, "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    exp = get_experiment("exp1", quick=True, runs=6, sizes=(100, 150, 200, 250))
    plan = {c.key for c in exp.cells()}
    keys = [json.loads(line)["key"] for line in journal.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == len(plan) and set(keys) == plan
    assert f"{len(plan) - before} computed now, {before} from an earlier run" in " ".join(again.stderr.split())

    # the same numbers as one uninterrupted run
    reference = tmp_path / "reference"
    run_experiment(exp, reference)
    got, want = read_csv(out / "results.csv"), read_csv(reference / "results.csv")
    assert [(r["setting"], r["kernel"], r["n"], r["run"], r["estimator"], r["mmd2"]) for r in got] == [
        (r["setting"], r["kernel"], r["n"], r["run"], r["estimator"], r["mmd2"]) for r in want
    ]


#: five times the cells of ARGS: on an idle machine ARGS could finish between the fifth
#: journal line and the signal (seen once in a fresh clone), leaving no run to interrupt
LONG_ARGS = [*ARGS[:3], "--runs", "30", *ARGS[5:]]


@pytest.mark.slow  # 3.6 s: two real processes interrupted (.ci/run runs them)
@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "fresh"])
def test_ctrl_c_keeps_finished_cells_and_says_how_to_resume(tmp_path, fresh):
    out = tmp_path / "exp1"
    # a shell's background job (`pytest &`) starts with SIGINT ignored, and children inherit
    # that: give the child the default disposition, as a terminal's Ctrl-C would find it
    proc = subprocess.Popen(
        [*_command(), *LONG_ARGS, "--out", str(out), *(["--fresh"] if fresh else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    journal = out / "cells.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and journal.read_bytes().count(b"\n") >= 5):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    said = " ".join(err.split())
    if fresh:  # the same command would delete what was saved: say so
        assert "run the same command again without --fresh (with it, the saved cells are deleted) to resume" in said
    else:
        assert "run the same command again to resume" in said
    assert journal.read_bytes().count(b"\n") >= 5


@pytest.mark.slow  # 2 s: one real process terminated (.ci/run runs it)
def test_sigterm_is_an_interruption_as_ctrl_c_is(tmp_path):
    # a batch scheduler's SIGTERM killed the process at once: no word of what was kept
    out = tmp_path / "exp1"
    proc = subprocess.Popen([*_command(), *LONG_ARGS, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    journal = out / "cells.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and journal.read_bytes().count(b"\n") >= 5):
        time.sleep(0.02)
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Interrupted. Every finished cell is saved in" in " ".join(err.split()) and "run the same command again to resume" in err
    kept = journal.read_bytes().count(b"\n")
    assert kept >= 5
    # what a rerun of the same command opens: the manifest matches the plan, and every
    # line kept is a whole record of one of its cells (resuming to the end is the
    # killed run's test)
    exp = get_experiment("exp1", quick=True, runs=30, sizes=(100, 150, 200, 250))
    with CellStore(out, exp.name, exp.config(), outputs=exp.outputs) as store:
        store.check_plan(exp.cells())
        assert len(store.done) == kept


@pytest.mark.slow  # 28 s: four runs on an embedded Dask cluster (.ci/run runs it)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("command", ["test", "experiment"])
def test_an_interruption_under_dask_is_one_line_and_exit_130(tmp_path, command, signum):
    # Ctrl-C reaches the whole process group of a terminal: the cluster's workers ignore it
    # (they printed about 70 lines of tracebacks), and the lost work is not logged. A batch
    # scheduler's SIGTERM reaches the whole group too, and kills the workers while this
    # process is still computing: their loss was logged as two to four errors
    pytest.importorskip("distributed")
    out = tmp_path / "exp1"
    journal = out / "cells.jsonl"
    args = (
        ["test", "-k", "rbf", "-p", "sigma=1", "-e", "u-stat", "--data-param", "n=3000", "-B", "100000"]
        if command == "test"
        else [*LONG_ARGS, "--out", str(out)]
    )
    proc = subprocess.Popen(
        [*_command(), *args, "--backend", "dask", "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    if command == "test":
        time.sleep(8)  # the cluster is up and the permutations under way
    else:
        while time.monotonic() < deadline and not (journal.exists() and journal.read_bytes().count(b"\n") >= 5):
            time.sleep(0.05)
    os.killpg(proc.pid, signum)  # as a terminal's Ctrl-C, or scancel, does: the whole group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    # progress lines ("exp1: work ...", "test: permutations ...") and notes aside
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("No data given", "exp1:", "test:"))]
    assert len(lines) == 1 and lines[0].startswith("Interrupted."), err
    if command == "experiment":
        assert journal.read_bytes().count(b"\n") >= 5  # nothing lost
