"""Experiment 2: the split test on precomputed SSK Gram matrices, its files and checks."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import get_registry
from monk_framework.app.experiments import get_experiment, run_experiment
from monk_framework.app.experiments.exp2 import Exp2, draw_indices, exp2_cell
from monk_framework.app.experiments.report import read_csv
from monk_framework.core.errors import ParameterError
from monk_framework.core.params import parse_spec
from monk_framework.core.randomness import stable_int
from monk_framework.two_sample import split_test

TINY = dict(sizes=(36,), runs=2, n_permutations=19, grid=(("n", (2, 3)), ("lam", (0.5,))))


@pytest.fixture(scope="module")
def tiny():
    exp = Exp2(**TINY)
    return exp, exp.shared()


def test_precomputed_gram_slices_equal_the_kernel(tiny):
    exp, shared = tiny
    reg = get_registry()
    everything = shared["EI"] + shared["IE"]
    idx = np.array([0, 5, 800, 1200, 3])
    for label, K in shared["grams"].items():
        n, lam = (float(kv.split("=")[1]) for kv in label.split(","))
        kernel = reg.get_kernel("ssk", n=int(n), lam=lam)
        np.testing.assert_allclose(K[np.ix_(idx, idx)], kernel.gram([everything[i] for i in idx]), rtol=1e-12)


def test_a_cell_equals_split_tests_run_from_scratch(tiny):
    exp, shared = tiny
    reg = get_registry()
    cell = next(c.settings for c in exp.cells() if c.settings["panel"] == "EI-IE")
    rows = exp2_cell(cell, shared)
    draw = np.random.default_rng(np.random.SeedSequence(cell["seed"], spawn_key=(stable_int("EI-IE"), cell["n"], cell["run"])))
    ix, iy = draw_indices("EI-IE", cell["n"], {"EI": len(shared["EI"]), "IE": len(shared["IE"])}, draw)
    X, Y = [shared["EI"][i] for i in ix], [shared["IE"][i] for i in iy]
    for row, text in zip(rows, exp.estimators):
        name, params = parse_spec(text)
        est = reg.get_estimator(name, **params)
        ref = split_test(
            X,
            Y,
            kernel=reg.get_kernel("ssk"),
            estimator=est,
            grid=cell["grid"],
            n_permutations=19,
            rng=np.random.SeedSequence(cell["seed"], spawn_key=(stable_int("EI-IE"), cell["n"], cell["run"], 1)),
        )
        assert row["statistic"] == pytest.approx(ref.statistic, rel=1e-9, abs=1e-12)
        assert row["null_quantile"] == pytest.approx(ref.null_quantile, rel=1e-9, abs=1e-12)
        assert row["reject"] == ref.reject
        assert row["chosen"] == f"n={ref.kernel_params['n']},lam={ref.kernel_params['lam']}"


def test_intra_class_samples_are_disjoint():
    rng = np.random.default_rng(0)
    ix, iy = draw_indices("IE-IE", 300, {"EI": 762, "IE": 765}, rng)
    assert len(set(ix) | set(iy)) == 600
    ix, iy = draw_indices("EI-IE", 300, {"EI": 762, "IE": 765}, rng)
    assert len(set(ix)) == len(set(iy)) == 300 and max(ix) < 762


@pytest.mark.slow  # 5 s: a quick exp2 with its timing and figure (.ci/run runs it)
def test_quick_run_writes_results_summary_timing_and_figure(tmp_path):
    exp = get_experiment("exp2", quick=True, runs=2)
    done = run_experiment(exp, tmp_path)
    assert done.cells == 3 * len(exp.sizes) * 2
    rows = read_csv(tmp_path / "results.csv")
    assert list(rows[0]) == list(Exp2.columns)
    assert len(rows) == done.cells * len(exp.estimators)
    for r in rows:
        assert float(r["excess"]) == pytest.approx(float(r["statistic"]) - float(r["null_quantile"]))
        assert (r["reject"] == "True") == (float(r["statistic"]) > float(r["null_quantile"]))
        assert r["chosen"] in {"n=3,lam=0.5", "n=5,lam=0.5"}
    summary = read_csv(tmp_path / "summary.csv")
    for s in summary:
        group = [r for r in rows if (r["panel"], r["estimator"], r["n"]) == (s["panel"], s["estimator"], s["n"])]
        assert float(s["rejection_rate"]) == pytest.approx(np.mean([r["reject"] == "True" for r in group]))
        assert float(s["mean_excess"]) == pytest.approx(np.mean([float(r["excess"]) for r in group]))
    timing = __import__("json").loads((tmp_path / "timing.json").read_text())
    assert set(timing["seconds"]) == {"u-stat", "monk-bcd-fast:n_blocks=15"} and timing["n_x"] == 762
    assert (tmp_path / "exp2.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sizes": (400,)}, "panel EI-EI allows samples of at most 381"),
        ({"sizes": (20,)}, r"at least 10 points per sample in each third .*; the smallest size, 20, gives thirds of 6 \(use sizes of at least 30\)"),
        ({"grid": (("sigma", (1.0,)),)}, "has no parameter 'sigma'"),
        ({"grid": (("lam", (1.5,)),)}, "lam"),
        ({"kernel": "rbf"}, "takes vectors"),
        ({"panels": ("EI-XX",)}, "panels must be among"),
        ({"alpha": 1.0}, "alpha must be in"),
        ({"estimators": ("u-stat", "u-stat:root=clip")}, r"'u-stat' and 'u-stat:root=clip' are the same estimator"),
        ({"grid": (("n", (3, 5, 3)),)}, r"grid: 'n' is given twice, or one of its values is"),
        ({"grid": (("n", (3,)), ("n", (5,)))}, r"grid: 'n' is given twice"),
    ],
)
def test_bad_configurations_are_refused(overrides, message):
    with pytest.raises((ParameterError, ValueError), match=message):
        Exp2(**overrides)
