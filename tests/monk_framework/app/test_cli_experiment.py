"""`monkfw experiment` and the backend options, through typer's runner."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from monk_framework.app.cli import app
from monk_framework.app.experiments.report import read_csv

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.slow  # 3.5 s: two runs of exp2 --quick (.ci/run runs it; test_runner covers resuming)
def test_experiment_quick_writes_files_then_resumes(tmp_path):
    out = tmp_path / "e2"
    args = ("experiment", "exp2", "--quick", "--runs", "1", "--sizes", "60", "--out", str(out))
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    files = first.stdout.split()
    assert [p.rsplit("/", 1)[1] for p in files] == ["results.csv", "summary.csv", "timing.json", "exp2.png"]
    assert "3 cells (3 computed now, 0 from an earlier run)" in " ".join(first.stderr.split())
    assert len(read_csv(out / "results.csv")) == 3 * 2
    second = invoke(*args)
    assert "3 cells (0 computed now, 3 from an earlier run)" in " ".join(second.stderr.split())


def test_experiment_estimator_option_replaces_the_list(tmp_path):
    out = tmp_path / "e1"
    done = invoke("experiment", "exp1", "--quick", "--runs", "1", "--sizes", "40", "-e", "v-stat", "-e", "monk-bcd:n_blocks=3", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert {r["estimator"] for r in read_csv(out / "results.csv")} == {"v-stat", "monk-bcd:n_blocks=3"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["estimators"] == ["v-stat", "monk-bcd:n_blocks=3"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("experiment", "exp9"), "Unknown experiment 'exp9'"),
        (("experiment", "exp1", "--quick", "--sizes", "200,x"), "--sizes takes comma-separated integers"),
        (("experiment", "exp1", "--quick", "--sizes", "30,40,30"), "Experiment 1 sizes list 30 more than once"),
        (("experiment", "exp2", "--quick", "--sizes", "60,60"), "Experiment 2 sizes list 60 more than once"),
        (("experiment", "exp1", "--quick", "-e", "monk-bcd:n_blocks"), "expected key=value"),
        (("experiment", "exp1", "--quick", "--workers", "2"), "--workers sizes the embedded Dask cluster"),
        (("experiment", "exp1", "--quick", "--backend", "spark"), "Unknown backend 'spark'"),
        (("test", "-k", "rbf", "-e", "u-stat", "--scheduler", "tcp://h:1"), "needs the Dask backend"),
    ],
)
def test_experiment_errors_are_one_line(args, message, tmp_path):
    done = runner.invoke(app, [*args, *(["--out", str(tmp_path / "x")] if args[0] == "experiment" and len(args) > 2 else [])])
    assert done.exit_code == 2, done.output
    assert message in " ".join(done.stderr.split())
    assert done.stderr.strip().count("\n") == 0


def test_mixing_settings_is_refused_with_the_difference(tmp_path):
    out = str(tmp_path / "e1")
    assert invoke("experiment", "exp1", "--quick", "--runs", "1", "--sizes", "40", "-e", "v-stat", "--out", out).exit_code == 0
    done = runner.invoke(app, ["experiment", "exp1", "--quick", "--runs", "2", "--sizes", "40", "-e", "v-stat", "--out", out])
    assert done.exit_code == 1
    assert "runs (2 here, 1 there)" in " ".join(done.stderr.split())
    fresh = invoke("experiment", "exp1", "--quick", "--runs", "2", "--sizes", "40", "-e", "v-stat", "--out", out, "--fresh")
    assert fresh.exit_code == 0 and len(read_csv(tmp_path / "e1" / "results.csv")) == 2 * 6


def test_a_failure_part_way_says_where_the_finished_cells_are_and_that_the_command_resumes(tmp_path, monkeypatch):
    # the third cell meets a lost Dask worker: the error is one line, then where the two
    # finished cells are; the same command then resumes to the full set
    from monk_framework.app.experiments.exp1 import Exp1
    from monk_framework.engine.backends import ClusterError

    original, calls = Exp1.cell_fn, []

    def failing(settings, shared):
        calls.append(1)
        if len(calls) == 3:
            raise ClusterError("The embedded Dask cluster lost a worker during this work.")
        return original(settings, shared)

    monkeypatch.setattr(Exp1, "cell_fn", staticmethod(failing))
    out = tmp_path / "e1"
    args = ["experiment", "exp1", "--quick", "--runs", "1", "--sizes", "40", "-e", "v-stat", "--out", str(out)]
    done = runner.invoke(app, args)
    assert done.exit_code == 1, done.output
    lines = done.stderr.strip().splitlines()
    assert lines[-2] == "Error: The embedded Dask cluster lost a worker during this work."
    assert " ".join(lines[-1:]) == f"The 2 finished cells are saved in {out / 'cells.jsonl'}; once the error is fixed, the same command again resumes."
    monkeypatch.setattr(Exp1, "cell_fn", staticmethod(original))
    again = invoke(*args)
    assert again.exit_code == 0 and "(4 computed now, 2 from an earlier run)" in " ".join(again.stderr.split())
    # a failure before any cell is finished says nothing of saved cells
    monkeypatch.setattr(Exp1, "cell_fn", staticmethod(lambda settings, shared: (_ for _ in ()).throw(ClusterError("lost."))))
    first = runner.invoke(app, [*args[:-1], str(tmp_path / "other")])
    assert first.exit_code == 1 and first.stderr.strip().splitlines() == ["Error: lost."]
