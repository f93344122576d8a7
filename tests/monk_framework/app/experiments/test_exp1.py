"""Experiment 1: its cells against independent computations, its files, its checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monk_framework import get_registry
from monk_framework.app.datasets import get_dataset
from monk_framework.app.experiments import get_experiment, run_experiment
from monk_framework.app.experiments.exp1 import Exp1, exp1_cell
from monk_framework.app.experiments.report import read_csv
from monk_framework.core.errors import ParameterError
from monk_framework.core.randomness import stable_int

SMALL = dict(sizes=(40, 60), runs=2, estimators=("u-stat:root=signed", "monk-bcd:n_blocks=5", "monk-bcd-fast:n_blocks=5", "v-stat"))


def test_a_cell_equals_each_estimator_run_from_scratch():
    """The shared-Gram path of a cell gives each estimator's own estimate on the same data."""
    exp = Exp1(**SMALL)
    reg = get_registry()
    for cell in exp.cells()[:: len(exp.cells()) // 5]:
        s = cell.settings
        rows = exp1_cell(s)
        data = get_dataset(s["setting"], n=s["n"])
        seq = np.random.SeedSequence(s["seed"], spawn_key=(stable_int(s["setting"]), s["n"], s["run"]))
        X, Y = data.sample(np.random.default_rng(seq))
        name, _, params = s["kernel"].partition(":")
        kernel = reg.get_kernel(name, **({"sigma": 1.0} if params else {}))
        assert rows[0]["true_mmd"] == pytest.approx(data.true_mmd(kernel), rel=1e-12)
        by = {r["estimator"]: r for r in rows}
        u = reg.get_estimator("u-stat").estimate(kernel, X, Y)
        assert by["u-stat:root=signed"]["mmd2"] == pytest.approx(u.mmd2, rel=1e-10, abs=1e-12)
        v = reg.get_estimator("v-stat").estimate(kernel, X, Y)
        assert by["v-stat"]["mmd2"] == pytest.approx(v.mmd2, rel=1e-10, abs=1e-12)
        # MONK: same partition stream as the cell, from scratch
        stream = np.random.SeedSequence(s["seed"], spawn_key=(stable_int(s["setting"]), s["n"], s["run"], stable_int("monk-bcd:n_blocks=5")))
        bcd = reg.get_estimator("monk-bcd", n_blocks=5).estimate(kernel, X, Y, rng=np.random.default_rng(stream))
        assert by["monk-bcd:n_blocks=5"]["mmd2"] == pytest.approx(bcd.mmd2, rel=1e-9, abs=1e-12)
        for r in rows:
            assert r["mmd_hat"] == pytest.approx(math.copysign(math.sqrt(abs(r["mmd2"])), r["mmd2"]))
            assert r["abs_error"] == pytest.approx(abs(r["mmd_hat"] - r["true_mmd"]))
            assert r["log_error"] == pytest.approx(math.log(r["abs_error"]))


def test_cells_share_data_across_kernels_and_are_reproducible():
    exp = Exp1(**SMALL, settings=("gauss-outliers",))
    quad, rbf = [c.settings for c in exp.cells() if c.settings["n"] == 40 and c.settings["run"] == 1]
    assert quad["kernel"] == "quadratic" and rbf["kernel"].startswith("rbf")
    a, b = exp1_cell(quad), exp1_cell(quad)
    assert [r["mmd2"] for r in a] == [r["mmd2"] for r in b]
    # the outliers at 2000/4000 ruin the U-statistic with the quadratic kernel only
    assert a[0]["abs_error"] > 1e4 > 1.0 > exp1_cell(rbf)[0]["abs_error"]


@pytest.mark.slow  # 3 s: exp1 --quick with its figure (.ci/run runs it)
def test_quick_run_writes_results_summary_and_figure(tmp_path):
    exp = get_experiment("exp1", quick=True, runs=2, sizes=(200, 400))
    done = run_experiment(exp, tmp_path)
    assert done.cells == 2 * 6 * 2 and done.computed == done.cells
    rows = read_csv(tmp_path / "results.csv")
    assert list(rows[0]) == list(Exp1.columns)
    assert len(rows) == done.cells * len(exp.estimators)
    assert {r["setting"] for r in rows} == {"gauss", "gauss-outliers", "pareto"}
    assert {r["kernel"] for r in rows} == {"quadratic", "rbf:sigma=1.0"}
    assert {r["n"] for r in rows} == {"200", "400"}
    for r in rows:
        assert float(r["log_error"]) == pytest.approx(math.log(abs(float(r["mmd_hat"]) - float(r["true_mmd"]))))
        if r["setting"] == "pareto":
            assert float(r["true_mmd"]) == 0.0
    summary = read_csv(tmp_path / "summary.csv")
    assert len(summary) == 6 * 2 * len(exp.estimators)
    for s in summary:
        logs = sorted(float(r["log_error"]) for r in rows if all(r[k] == s[k] for k in ("setting", "kernel", "estimator", "n")))
        assert float(s["median_log_error"]) == pytest.approx(np.median(logs))
        assert float(s["q25_log_error"]) <= float(s["median_log_error"]) <= float(s["q75_log_error"])
    png = (tmp_path / "exp1.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    again = run_experiment(exp, tmp_path)  # everything is in the journal
    assert again.computed == 0 and again.resumed == done.cells
    assert [r["mmd2"] for r in read_csv(tmp_path / "results.csv")] == [r["mmd2"] for r in rows]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"settings": ("gauss", "laplace")}, "settings must be among"),
        ({"kernels": ("ssk",)}, "compares vectors; kernel 'ssk' takes strings"),
        ({"estimators": ("mean",)}, "needs MMD estimators"),
        ({"estimators": ("monk-bcd:n_blocks=21",), "sizes": (30,)}, "at least 42 points"),
        ({"estimators": ("u-stat", "u-stat")}, "estimator 'u-stat' is listed twice; list it once"),
        # two spellings of one estimator: its cells were computed twice, its rows doubled
        (
            {"estimators": ("u-stat", "u-stat:root=clip")},
            r"'u-stat' and 'u-stat:root=clip' are the same estimator, "
            r"u-stat\(root='clip'\); list it once",
        ),
        ({"kernels": ("rbf:sigma=1", "gaussian:sigma=1.0")}, r"'rbf:sigma=1' and 'gaussian:sigma=1.0' are the same kernel"),
        ({"runs": 0}, "runs"),
        ({"kernels": ("rbf:sigma=-1",)}, "sigma"),
    ],
)
def test_bad_configurations_are_refused(overrides, message):
    with pytest.raises((ParameterError, ValueError), match=message):
        Exp1(**overrides)


def test_sizes_that_cannot_fit_are_refused_before_the_results_directory_is_touched(tmp_path, monkeypatch):
    from monk_framework import ResourceError
    from monk_framework.app.experiments import get_experiment

    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 2**30)
    with pytest.raises(ResourceError, match=r"--sizes\): N = 100,000 needs a 200,000 x 200,000 pooled Gram"):
        get_experiment("exp1", sizes=(200, 100_000))
    assert not any(tmp_path.iterdir())


def test_figure_names_estimators_readably_and_keeps_an_off_scale_curve_out():
    from monk_framework.app.experiments.report import _off_scale, readable

    assert readable("monk-bcd-fast:n_blocks=21,solver=exact") == "BCD-Fast, Q = 21, exact solver"
    assert readable("u-stat:root=signed") == "U-Stat" and readable("my-estimator:alpha=2") == "my-estimator, alpha = 2"
    # the U-statistic with outliers sits ~13 above the MONK curves: drawn, it would flatten them
    curves = {"u": [12.0, 10.0], "a": [-1.0, -2.0], "b": [-0.5, -1.5]}
    lows = {"u": [11.0, 9.5], "a": [-2.0, -3.0], "b": [-1.0, -2.0]}
    assert _off_scale(curves, lows) == {"u"}
    assert _off_scale({"a": [-1.0], "b": [0.5]}, {"a": [-2.0], "b": [0.0]}) == set()
