"""A command line request and its Python twin give the same numbers: ``monkfw test`` and
``monkfw run`` build the library's own call (``test_job.test_call``), with the same defaults."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import monk_framework as mf
from monk_framework.app.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pairs")
    gen = np.random.default_rng(5)
    X, Y = gen.normal(size=(60, 2)), gen.normal(0.35, 1.0, size=(50, 2))
    np.savetxt(folder / "x.csv", X, delimiter=",")
    np.savetxt(folder / "y.csv", Y, delimiter=",")
    # the samples as the command line reads them back (the same decimal text)
    return folder, mf.load_sample(folder / "x.csv"), mf.load_sample(folder / "y.csv")


#: (monkfw arguments after the files, the Python call on (X, Y)); the seed is 0 on both sides
PAIRS = [
    (["test"], lambda X, Y: mf.permutation_test(X, Y, rng=0)),
    (
        ["test", "-k", "laplace", "-e", "v-stat", "-B", "199", "--seed", "3"],
        lambda X, Y: mf.permutation_test(X, Y, kernel="laplace", estimator="v-stat", n_permutations=199, rng=3),
    ),
    (["test", "--alternative", "two-sided", "-B", "99"], lambda X, Y: mf.permutation_test(X, Y, alternative="two-sided", n_permutations=99, rng=0)),
    (
        ["test", "-e", "monk-bcd-fast", "-p", "n_blocks=5", "-B", "99"],
        lambda X, Y: mf.permutation_test(X, Y, estimator="monk-bcd-fast:n_blocks=5", n_permutations=99, rng=0),
    ),
    (["test", "--split", "--grid", "sigma=0.5,1,2", "-B", "99"], lambda X, Y: mf.split_test(X, Y, grid={"sigma": [0.5, 1, 2]}, n_permutations=99, rng=0)),
    # no kernel: rbf at the median heuristic, made robust, on both sides
    (["test", "--contamination", "3"], lambda X, Y: mf.robust_test(X, Y, contamination=3, rng=0)),
    (["test", "--contamination", "3", "-k", "rbf", "-p", "sigma=1"], lambda X, Y: mf.robust_test(X, Y, contamination=3, kernel="rbf:sigma=1", rng=0)),
    (
        ["test", "--contamination", "0.02", "-k", "quadratic", "--method", "clip", "-B", "199"],
        lambda X, Y: mf.robust_test(X, Y, contamination=0.02, kernel="quadratic", method="clip", n_permutations=199, rng=0),
    ),
    (["test", "--aggregate", "agg"], lambda X, Y: mf.aggregated_test(X, Y, rng=0)),
    # the request the audit found read two ways: a Laplace family of 10 and the quadratic kernel
    (
        ["test", "--aggregate", "agg", "-k", "laplace", "-k", "quadratic", "-B", "199"],
        lambda X, Y: mf.aggregated_test(X, Y, kernels=["laplace", "quadratic"], n_permutations=199, rng=0),
    ),
    (
        ["test", "--aggregate", "agg", "-k", "laplace", "-p", "norm=l1", "-B", "199"],
        lambda X, Y: mf.aggregated_test(X, Y, kernels=["laplace:norm=l1"], n_permutations=199, rng=0),
    ),
    (["test", "--aggregate", "fuse", "-B", "199", "--seed", "2"], lambda X, Y: mf.aggregated_test(X, Y, method="fuse", n_permutations=199, rng=2)),
    (
        ["test", "--aggregate", "agg", "--bandwidths", "0.5,1,2", "--contamination", "2", "-B", "199"],
        lambda X, Y: mf.aggregated_test(X, Y, bandwidths=[0.5, 1, 2], contamination=2, n_permutations=199, rng=0),
    ),
    (["run"], lambda X, Y: mf.estimate(X, Y, rng=0)),
    (
        ["run", "-k", "quadratic", "-e", "monk-bcd", "-p", "n_blocks=5"],
        lambda X, Y: mf.estimate(X, Y, kernel="quadratic", estimator="monk-bcd:n_blocks=5", rng=0),
    ),
]


@pytest.mark.parametrize(("arguments", "call"), PAIRS, ids=[" ".join(a) for a, _ in PAIRS])
def test_a_command_and_its_python_twin_give_the_same_numbers(files, arguments, call):
    folder, X, Y = files
    ran = runner.invoke(app, [*arguments, str(folder / "x.csv"), str(folder / "y.csv"), "--json", "-q"])
    assert ran.exit_code == 0, ran.output
    cli = json.loads(ran.stdout)
    python = call(X, Y)
    assert cli["type"] == python.kind
    if isinstance(python, mf.MMDResult):
        assert cli["mmd2"] == python.mmd2 and cli["kernel_params"] == python.kernel_params
        return
    # the same bits: one code path, the same call
    assert (cli["statistic"], cli["pvalue"], cli["reject"]) == (python.statistic, python.pvalue, python.reject)
    assert cli["kernel"] == python.kernel and cli["estimator"] == python.estimator
    if isinstance(python, mf.AggregatedTestResult):
        assert cli["kernel_specs"] == python.kernel_specs


def test_the_aggregated_families_are_read_alike_and_counted():
    gen = np.random.default_rng(1)
    X, Y = gen.normal(size=(40, 2)), gen.normal(size=(40, 2))
    result = mf.aggregated_test(X, Y, kernels=["laplace", "quadratic"], n_permutations=19, rng=0)
    grid = mf.two_sample.aggregated.bandwidth_grid(X, Y, metric="l2")
    assert len(result.kernel_specs) == 11 and result.kernel_specs[-1].startswith("quadratic")
    np.testing.assert_array_equal(result.bandwidths[:10], grid)
    assert result.collection == "laplace at 10 bandwidths and quadratic"
    mixed = mf.aggregated_test(X, Y, kernels=["laplace", "rbf:sigma=0.1"], n_permutations=19, rng=0)
    assert mixed.collection == "laplace at 10 bandwidths and rbf:sigma=0.1"
