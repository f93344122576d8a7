"""Results that read well: ``repr`` a few lines (what a notebook shows), ``print`` a
summary of at most 15 lines, for every result class, whatever the sizes."""

from __future__ import annotations

import numpy as np
import pytest

import monk_framework as mf
from monk_framework.app import jobs


def _data(n: int = 400, m: int = 300, seed: int = 0):
    gen = np.random.default_rng(seed)
    return gen.normal(size=(n, 2)), gen.normal(0.3, 1.0, size=(m, 2))


def _embeddings():
    return jobs.run(jobs.prepare("rbf:sigma=1", "mean", x=None, dataset="gauss", data_params=["n=40"]))


#: every result class, each computed in its own test (not while the tests are collected)
RESULTS = {
    "mmd": lambda X, Y: mf.estimate(X, Y, rng=0),
    "embedding": lambda X, Y: mf.embed(X),
    "embeddings": lambda X, Y: _embeddings(),
    "permutation": lambda X, Y: mf.permutation_test(X, Y, n_permutations=2000, rng=0),
    "within-blocks": lambda X, Y: mf.permutation_test(X, Y, estimator="monk-bcd:n_blocks=11", n_permutations=99, rng=0, report_estimate=True),
    "split": lambda X, Y: mf.split_test(X, Y, grid={"sigma": [0.5, 1, 2, 4]}, n_permutations=199, rng=0),
    "dc": lambda X, Y: mf.robust_test(X, Y, contamination=3, kernel="rbf:sigma=1", rng=0),
    "clip": lambda X, Y: mf.robust_test(X, Y, contamination=3, kernel="quadratic", method="clip", rng=0),
    "agg": lambda X, Y: mf.aggregated_test(X, Y, rng=0),
    "fuse": lambda X, Y: mf.aggregated_test(X, Y, method="fuse", rng=0),
    "robust agg": lambda X, Y: mf.aggregated_test(X, Y, bandwidths=[0.25, 0.5, 1, 2, 4, 8], contamination=2, rng=0),
}


@pytest.mark.parametrize("name", list(RESULTS))
def test_repr_is_a_few_lines_and_print_a_summary(name):
    result = RESULTS[name](*_data())
    text, summary = repr(result), str(result)
    assert len(text.splitlines()) <= 10 and len(text) <= 1000, text
    assert text.startswith(type(result).__name__ + "(") and text.endswith(")")
    assert len(summary.splitlines()) <= 15, summary
    assert "-1" not in summary.split()  # no sentinel numbers


def test_a_null_distribution_is_elided_in_repr_and_whole_in_the_result():
    X, Y = _data(60, 50)
    result = mf.permutation_test(X, Y, n_permutations=5000, rng=0)
    assert "shape=(5000,)" in repr(result) and len(result.null_distribution) == 5000


def test_an_aggregated_summary_names_its_collection_and_the_kernel_that_matters():
    X, Y = _data()
    result = mf.aggregated_test(X, Y, rng=0)
    summary = str(result)
    assert "rbf and laplace at 10 bandwidths each (20 kernels)" in summary
    best = result.most_significant
    assert best in result.kernel_specs and f"{best.split(':')[0]}:sigma=" in summary
    assert "most significant" in summary and "its own p = " in summary
    assert "6.9" not in summary  # no log(B + 1) score posing as a statistic


def test_a_robust_result_that_does_not_reject_says_so_without_a_number():
    gen = np.random.default_rng(1)
    X, Y = gen.normal(size=(60, 1)), gen.normal(size=(60, 1))
    result = mf.robust_test(X, Y, contamination=5, kernel="rbf:sigma=1", rng=0)
    assert not result.reject and result.certificate is None
    assert "certificate  not rejected" in str(result)
    assert mf.RobustTestResult.from_json(result.to_json()) == result
    old = {**result.to_dict(), "certificate": -1}  # a file written before 0.2
    assert mf.RobustTestResult.from_dict(old).certificate is None


def test_an_estimates_table_shows_its_numbers_and_the_estimators_rows_after_them():
    X, Y = _data(60, 50)
    result = mf.estimate(X, Y, kernel="rbf:sigma=1", estimator="monk-bcd:n_blocks=5", rng=0)
    diagnostics, timings = result.estimator_record()
    assert diagnostics is result.diagnostics and timings is result.timings
    title, rows = result.report_table([("extra", "row")])
    labels = [label for label, _ in rows]
    assert title == "monk-bcd with rbf" and dict(rows)["MMD^2"] == f"{result.mmd2:.10g}"
    assert labels.index("extra") > labels.index("MMD")


def test_the_embeddings_table_shows_the_norms_and_distance_and_the_estimators_record_for_x():
    result = _embeddings()
    assert result.estimator_record() == (result.x.diagnostics, result.x.timings)
    title, rows = result.report_table()
    shown = dict(rows)
    assert title == "mean with rbf"
    assert float(shown["||mu_X||"]) == pytest.approx(result.x.norm(), rel=1e-9)
    assert float(shown["||mu_X - mu_Y||"]) == pytest.approx(result.x.distance(result.y), rel=1e-9)
