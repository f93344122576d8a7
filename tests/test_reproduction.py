"""docs/studies/reproduction.md stays in step with the code: a few of its table cells, recomputed.

The page's Experiment 1 table gives the median ln|MMD̂ − MMD| over 100 runs of each
setting; a cell here reruns those 100 cells of the experiment (seed 0) for one estimator
and compares the median with the page, to its two decimals. A change of the code that
moves a number fails here until the page is regenerated
(``tools/regenerate_reproduction.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monk_framework.app.experiments.exp1 import exp1_cell
from monk_framework.app.experiments.report import LOG_FLOOR

PAGE = Path(__file__).resolve().parents[1] / "docs" / "studies" / "reproduction.md"
SIZES = (400, 800, 1200, 1600, 2000)


def page_cell(panel: str, estimator: str, n: int) -> float:
    """The number the page's Experiment 1 table gives for a panel, an estimator and N."""
    current = ""
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or "N = 400" in line or line.startswith("|---"):
            continue
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if len(parts) != 7:
            continue
        current = parts[0] or current
        if current == panel and parts[1] == estimator:
            return float(parts[2 + SIZES.index(n)].strip("*").replace("\u2212", "-"))
    raise AssertionError(f"no row {panel!r} / {estimator!r} in {PAGE.name}")


def recomputed(setting: str, kernel: str, estimator: str, n: int, runs: int = 100) -> float:
    logs = []
    for run in range(runs):
        settings = {"experiment": "exp1", "seed": 0, "setting": setting, "kernel": kernel, "n": n, "run": run, "d": 1, "estimators": [estimator]}
        (row,) = exp1_cell(settings)
        logs.append(max(row["log_error"], LOG_FLOOR))
    return float(np.median(logs))


def test_a_cell_of_the_experiment_1_table_is_what_the_code_gives():
    got = recomputed("gauss", "quadratic", "u-stat:root=signed", 400)
    assert round(got, 2) == page_cell("quadratic, Gaussian", "U-Stat", 400)


@pytest.mark.slow  # 25 s: 300 MONK estimates (.ci/run runs it)
@pytest.mark.parametrize(
    ("panel", "setting", "kernel", "label", "spec", "n"),
    [
        ("quadratic, 5 outliers", "gauss-outliers", "quadratic", "BCD Q = 11", "monk-bcd:n_blocks=11", 400),
        ("RBF, Pareto(3)", "pareto", "rbf:sigma=1.0", "BCD-Fast Q = 11", "monk-bcd-fast:n_blocks=11", 400),
        ("quadratic, Pareto(3)", "pareto", "quadratic", "BCD exact Q = 21", "monk-bcd:n_blocks=21,solver=exact", 800),
    ],
)
def test_monk_cells_of_the_experiment_1_table_are_what_the_code_gives(panel, setting, kernel, label, spec, n):
    assert round(recomputed(setting, kernel, spec, n), 2) == page_cell(panel, label, n)


def embedding_cell(panel: str, n: int) -> float:
    """The number the page's opt-in mean-embedding MMD table gives for a panel and N."""
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("| panel | median ln-error, N = 400 |") :]
    for line in table.splitlines()[2:]:
        if not line.startswith("| "):
            break
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if parts[0] == panel:
            return float(parts[1 + SIZES.index(n)].replace("\u2212", "-"))
    raise AssertionError(f"no row {panel!r} in the embedding table of {PAGE.name}")


@pytest.mark.slow  # 8 s: 100 minmax embedding MMDs, each by cutting planes (.ci/run runs it)
def test_a_cell_of_the_opt_in_embedding_table_is_what_the_code_gives():
    # the table is regenerated from a separate 56-minute run; it had drifted by up to 0.33
    # unseen, so one cell (the cheapest: the quadratic kernel, N = 400) is recomputed here
    got = recomputed("gauss", "quadratic", "monk-embedding-mmd:n_blocks=11,center=minmax", 400)
    assert round(got, 2) == embedding_cell("quadratic, Gaussian", 400)


def test_the_page_reader_finds_the_rows_it_is_asked_for():
    assert embedding_cell("RBF, Pareto(3)", 2000) < 0
    with pytest.raises(AssertionError, match="no row"):
        embedding_cell("RBF, Cauchy", 400)
    assert page_cell("quadratic, Gaussian", "U-Stat", 2000) < 0
    assert page_cell("quadratic, 5 outliers", "U-Stat", 400) > 5  # the bold, ruined U-Stat
    with pytest.raises(AssertionError, match="no row"):
        page_cell("quadratic, Gaussian", "nothing", 400)


# -- the dimension study's tables ----------------------------------------------------


def _load(name: str, folder: str):
    """A module of the repository's ``folder`` (benchmarks/, tools/), which are scripts, not packages."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_repro_{name}", path)
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.path.insert(0, str(path.parent))  # the study imports its sibling journal.py
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def dimension_cell(title: str, cell: str, column: str) -> str:
    """The page's "median [q1, q3]" of the dimension study for a table title, an "N, d"
    cell and a column title."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"**{title}**")
    header = [p.strip() for p in lines[start + 2].strip().strip("|").split("|")]
    for line in lines[start + 4 :]:
        if not line.startswith("|"):
            break
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if parts[0] == cell:
            return parts[header.index(column)]
    raise AssertionError(f"no cell {cell!r} under {title!r} in {PAGE.name}")


def recomputed_dimension_cell(kernel: str, data: str, n: int, d: int, label: str) -> str:
    study = _load("dimension_study", "benchmarks")
    errors = [study.one_run({"n": n, "d": d, "kernel": kernel, "data": data, "run": run, "only": label})["errors"][label] for run in range(100)]
    q1, median, q3 = np.percentile(errors, [25, 50, 75])
    return f"{median:+.3f} [{q1:+.3f}, {q3:+.3f}]"


def test_a_cell_of_the_dimension_study_is_what_the_code_gives():
    # BCD-Fast's exact solver with the quadratic kernel and outliers: 100 estimates, 1.5 s
    got = recomputed_dimension_cell("quadratic", "outliers", 200, 2, "monk-bcd-fast:solver=exact")
    assert got == dimension_cell("quadratic, 5 outliers per sample", "200, 2", "BCD-Fast exact")


@pytest.mark.slow  # 32 s: 100 minmax embedding MMDs (.ci/run runs it)
def test_a_minmax_cell_of_the_dimension_study_is_what_the_code_gives():
    # the column that moved most with the last change of the minmax solver (+1.04 -> +0.14)
    got = recomputed_dimension_cell("quadratic", "outliers", 200, 2, "monk-embedding-mmd")
    assert got == dimension_cell("quadratic, 5 outliers per sample", "200, 2", "embedding MMD (minmax)")


def test_the_dimension_regenerator_puts_each_summary_table_in_place_of_the_pages():
    tool = _load("regenerate_reproduction", "tools")
    page = PAGE.read_text(encoding="utf-8").split("\n")
    # a summary as the study prints it: its titles, its tables (here the page's own)
    start = page.index("**quadratic, clean**")
    table = page[start + 2 : start + 15]
    assert table[0].startswith(tool.DIMENSION_HEADER) and len(table) == 13
    summary = ["Median error", "", "**quadratic, clean**", "", *table, ""]
    assert tool.dimension_tables(page, summary) == page  # the page in step: unchanged
    changed = [*table[:2], table[2].replace("| 100 |", "| 99 |", 1), *table[3:]]
    out = tool.dimension_tables(page, ["**quadratic, clean**", "", *changed])
    assert [i for i, (a, b) in enumerate(zip(page, out)) if a != b] == [start + 4] and len(out) == len(page)
    with pytest.raises(SystemExit, match="has no table for"):
        tool.dimension_tables(page, ["**quadratic, 7 outliers**", "", *table])


# -- the aggregation study -------------------------------------------------------------


def test_a_run_of_the_aggregation_study_is_what_aggregated_test_gives():
    # the study computes MMDAgg and MMD-FUSE from one set of statistics, through the
    # module's own functions, to save a second pass: its numbers must be the public test's
    from monk_framework import aggregated_test, permutation_test

    study = _load("aggregation_study", "benchmarks")
    got = study.one_run("fine", 3, n=60, n_permutations=99)
    X, Y = study.data("fine", 3, 60)
    agg = aggregated_test(X, Y, n_permutations=99, rng=3)
    fuse = aggregated_test(X, Y, method="fuse", n_permutations=99, rng=3)
    assert got["agg"] == agg.pvalue and got["fuse"] == fuse.pvalue
    assert got["singles"] == list(agg.kernel_pvalues)
    assert got["sigmas"] == list(agg.bandwidths)
    assert got["median"] == permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=99, rng=3).pvalue


def test_the_aggregation_study_at_another_size_keeps_its_runs_apart(tmp_path, capsys):
    # --n: the size travels in the task (so in the journal key) only when it is not the
    # study's N, a task runs at its size, and the summary of one size reads only its runs
    import json

    study = _load("aggregation_study", "benchmarks")
    assert all("n" not in t for t in study.tasks(False, ("fine",), 2))
    small = study.tasks(False, ("fine", "shift"), 1, n=40)
    assert sorted((t["design"], t["n"]) for t in small) == [("fine", 40), ("shift", 40)]
    records = [study.execute({**t, "kind": "two-kernels"}) for t in small]
    assert records[0][1] == study.two_kernel_run(records[0][0]["design"], 0, 40)
    journal = tmp_path / "study.jsonl"
    journal.write_text("".join(json.dumps({"task": task, "result": result}) + "\n" for task, result in records))
    study.summary(journal, 40)
    out = capsys.readouterr().out
    assert "N = M = 40" in out and "MMDAgg over the two kernels only (1 runs a design" in out
    study.summary(journal)  # at N: none of these runs
    assert "MMDAgg over the two kernels" not in capsys.readouterr().out


def test_a_two_kernel_run_of_the_aggregation_study_is_the_weighted_aggregated_test():
    from monk_framework import aggregated_test
    from monk_framework.two_sample.aggregated import default_kernels

    study = _load("aggregation_study", "benchmarks")
    got = study.two_kernel_run("fine", 3, n=60, n_permutations=99)
    X, Y = study.data("fine", 3, 60)
    oracle = default_kernels(X, Y)[study.FINE_ORACLE]
    for share in (0.3, 0.6):
        want = aggregated_test(X, Y, kernels=[oracle, "rbf:sigma=median"], weights=[share, 1 - share], n_permutations=99, rng=3)
        assert got["agg"][f"{share:g}"] == want.pvalue
        assert got["singles"] == list(want.kernel_pvalues)


def test_the_aggregation_studys_paired_gap_is_the_mean_difference_and_its_standard_error():
    # the gaps quoted in docs/studies/tests.md: runs paired, so the error is that of the per-run
    # differences of the two rejection indicators, not of two independent rates
    study = _load("aggregation_study", "benchmarks")
    reference = np.array([1, 1, 1, 0, 1, 0, 1, 1], dtype=bool)
    test = np.array([1, 0, 1, 0, 1, 1, 0, 1], dtype=bool)
    diff = np.array([0, 1, 0, 0, 0, -1, 1, 0])  # by hand
    gap, se = study.paired_gap(reference, test)
    assert gap == pytest.approx(1 / 8)
    assert se == pytest.approx(np.sqrt(np.sum((diff - 1 / 8) ** 2) / 7 / 8))
    # the same indicators on both sides: no gap and no error, however variable the rates
    assert study.paired_gap(reference, reference) == (0.0, 0.0)


def test_the_aggregation_study_sets_the_published_mmdagg_beside_ours_on_the_same_runs(tmp_path, capsys):
    # --peer runs are matched to ours by design and run: rates over the runs both made,
    # their paired difference, and how often the two decisions agree
    import json

    study = _load("aggregation_study", "benchmarks")
    ours = {0: 0.001, 1: 0.2, 2: 0.01, 3: 0.03}  # MMDAgg p-values: rejects runs 0, 2, 3
    theirs = {0: True, 1: True, 2: False}  # run 3 has no peer run: left out
    lines = [
        {"task": {"design": "fine", "run": r}, "result": {"agg": p, "fuse": 1.0, "singles": [1.0], "median": 1.0, "sigmas": [1.0], "seconds": 0.1}}
        for r, p in ours.items()
    ]
    lines += [{"task": {"design": "fine", "run": r, "kind": "peer"}, "result": {"reject": v, "seconds": 0.1}} for r, v in theirs.items()]
    journal = tmp_path / "study.jsonl"
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    study.summary(journal)
    out = capsys.readouterr().out
    # runs 0..2: ours rejects 0 and 2 (2/3), the peer 0 and 1 (2/3); they agree on run 0 only.
    # The per-run differences, published − ours, are 0, 1, −1: mean 0, sample standard
    # deviation 1, so a standard error of 1/√3 = 0.577
    assert "| fine | 3 | 0.667 | 0.667 | +0.000 (0.577) | 0.333 |" in out
