"""``monkfw test``: the permutation and split tests from the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from monk_framework import get_registry
from monk_framework.app.cli import app
from monk_framework.app.datasets import get_dataset
from monk_framework.two_sample import permutation_test

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_permutation_test_states_the_decision_and_matches_the_library():
    result = invoke("test", "-k", "rbf", "-e", "u-stat", "--permutations", "199", "--seed", "3")
    assert result.exit_code == 0, result.stderr
    assert "p-value" in result.stdout and "Reject H0" in result.stdout  # the gauss data set differs
    data = json.loads(invoke("test", "-k", "rbf", "-e", "u-stat", "-B", "199", "--seed", "3", "--json", "--null").stdout)
    X, Y = get_dataset("gauss").sample(3)
    reg = get_registry()
    direct = permutation_test(X, Y, kernel=reg.get_kernel("rbf"), estimator=reg.get_estimator("u-stat"), n_permutations=199, rng=3)
    assert data["type"] == "permutation-test" and data["pvalue"] == direct.pvalue
    assert data["statistic"] == pytest.approx(direct.statistic, rel=1e-14)
    assert len(data["null_distribution"]) == 199 and data["data"]["name"] == "gauss"
    assert data["decision"].startswith("Reject H0")


def test_a_monk_test_on_strings_keeps_quiet_about_equal_classes(tmp_path):
    out = tmp_path / "result.json"
    result = invoke(
        "test",
        "-k",
        "ssk",
        "-p",
        "n=3",
        "-e",
        "monk-bcd-fast",
        "-p",
        "n_blocks=5",
        "-d",
        "splice-ei-ei",
        "--data-param",
        "n=120",
        "--data-param",
        "m=120",
        "-B",
        "60",
        "--json",
        "--output",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    saved = json.loads(out.read_text())
    assert saved == json.loads(result.stdout)
    assert saved["estimator"] == "monk-bcd-fast" and saved["kernel_params"]["n"] == 3


def test_split_test_with_a_grid():
    result = invoke(
        "test",
        "-k",
        "rbf",
        "-e",
        "u-stat",
        "--split",
        "--grid",
        "sigma=0.5,1,2",
        "-B",
        "99",
        "--json",
        "--data-param",
        "n=300",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["type"] == "split-test" and [t["params"]["sigma"] for t in data["tuning"]] == [0.5, 1, 2]
    assert set(data["parts"]) == {"tune", "calibrate", "test"}
    # the prefix --param takes works here too
    prefixed = invoke("test", "-k", "rbf", "-e", "u-stat", "--split", "--grid", "kernel.sigma=0.5,1,2", "-B", "99", "--json", "--data-param", "n=300")
    assert json.loads(prefixed.stdout)["tuning"] == data["tuning"]
    table = invoke("test", "-k", "rbf", "-e", "u-stat", "--split", "--grid", "sigma=0.5,1", "-B", "99")
    assert "T - q" in table.stdout and "part 1" in table.stdout and "chosen on part 1" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grid", "sigma=1,2"], "--grid chooses hyperparameters on part 1 of the split test: add --split."),
        (["--split", "--grid", "bandwidth=1,2"], "Unknown parameter of kernel 'rbf' (in --grid)"),
        (["--split", "--grid", "sigma"], "--grid expects key=v1,v2,...; got 'sigma'."),
        (["--split", "--grid", "sigma=1,,2"], "empty value"),
        (["--split", "--grid", "sigma=1", "--grid", "sigma=2"], "given twice"),
        (["--split", "--grid", "estimator.n_blocks=3,5"], "the split test tunes kernel parameters only; give the estimator's with --param"),
        (["--split", "--grid", "model.sigma=1,2"], "the prefix may only be 'kernel.'"),
        (["--case-sensitive"], "--case-sensitive keeps the case of FASTA files (.fa, .fasta); none is given here."),
        (["--split", "--grid", "sigma=1,2", "-p", "sigma=3"], "given by both --param and --grid"),
        (["--alpha", "1.5"], "--alpha must be a number in (0, 1); got 1.5."),
        (["--permutations", "0"], "Invalid value for '--permutations'"),
        (["-e", "mean"], "a two-sample test needs an MMD estimator"),
        (["--relabel", "inside"], "relabel must be one of"),
        (["-e", "u-stat", "--relabel", "within-blocks"], "needs an estimator with a fixed partition"),
        (["--method", "mom"], "--method, --blocks and --clip choose the robust test: add --contamination R."),
        (["--contamination", "lots"], "--contamination takes a count"),
        (["--contamination", "0.7"], "fraction must lie in [0, 1/2)"),
        (["--contamination", "3", "--split"], "different tests"),
        (["--contamination", "3", "-p", "sigma=median", "--method", "clip"], "reads its bandwidth from the data"),
        (["--contamination", "3", "-k", "quadratic", "--method", "dc"], "needs a bounded kernel"),
        (["--contamination", "3", "-e", "monk-bcd"], "mmd2_from_sums"),
        (["--contamination", "3", "--method", "mom", "--blocks", "1000", "--dataset", "gauss"], "n_blocks"),
        (["--contamination", "500", "--dataset", "gauss"], "between 0 and the 400 points"),
        (["--clip", "2"], "--method, --blocks and --clip choose the robust test"),
        (["--contamination", "3", "-k", "quadratic", "--clip", "-1"], "clip must be a radius"),
        (["--bandwidths", "1,2"], "--bandwidths sets the kernels of an aggregated test"),
        (["--aggregate", "max"], "--aggregate must be one of agg, fuse"),
        (["--aggregate", "agg", "--split"], "different tests"),
        (["--aggregate", "agg", "--bandwidths", "1,x"], "--bandwidths takes comma-separated numbers"),
        (["--aggregate", "agg", "--bandwidths", "0,1"], "positive finite numbers"),
        (["--aggregate", "agg", "--bandwidths", "1,2,1.0"], "--bandwidths lists 1 more than once; give each bandwidth once."),
        (["--aggregate", "agg", "-k", "linear"], "kernel 'linear' has no bandwidth (sigma) for --bandwidths to vary. Drop --aggregate"),
        (["--aggregate", "agg", "--contamination", "3"], "give -k rbf a sigma, or --bandwidths"),
        (["--aggregate", "agg", "--contamination", "3", "--method", "dc", "--bandwidths", "1"], "robust by itself"),
        (["--aggregate", "fuse", "--contamination", "3", "--bandwidths", "1"], "is supported by agg"),
        # options another test would have dropped without a word
        (["--contamination", "3", "--relabel", "within-blocks"], "--contamination runs another test"),
        (["--split", "--relabel", "global"], "--split runs another test"),
        (["--contamination", "3", "--method", "dc", "--blocks", "5"], "the test runs method='dc', which has none"),
        (["--contamination", "3", "-k", "quadratic", "--method", "clip", "--blocks", "5"], "runs method='clip', which has none"),
    ],
)
def test_bad_options_are_one_line_errors(args, message):
    robust = "--contamination" in args
    base = ["test"] + ([] if "-k" in args else ["-k", "rbf"]) + ([] if "-e" in args or robust else ["-e", "u-stat"])
    if robust and "-k" not in args and "-p" not in args:
        base += ["-p", "sigma=1"]  # a robust test needs a bandwidth fixed before the data
    result = invoke(*base, *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["-p", "sigma=1"], "--param sigma: --aggregate without -k uses the default collection"),
        (["-k", "rbf", "-p", "sigma=1", "--bandwidths", "1,2"], "takes the kernel's sigma from --bandwidths"),
        (["-k", "rbf:sigma=1", "-k", "linear", "--bandwidths", "1,2"], "every -k here fixes its own or has none: drop --bandwidths"),
        (["-k", "rbf:sigma=1"], "--aggregate over -k rbf:sigma=1 is one kernel"),
        (["-k", "rbf", "-k", "laplace", "-p", "norm=l1"], "--param norm: with several -k, give each kernel's parameters"),
        (["--contamination", "2"], "needs --bandwidths fixed before seeing the data"),
        (["--relabel", "within-blocks"], "--aggregate relabels the pooled sample globally"),
        (["--blocks", "5"], "(with --contamination); --aggregate does not use them"),
        # a kernel given twice, in the words typed (expanded, it read "kernels 0 and 10 are the same kernel")
        (["-k", "rbf", "-k", "gaussian"], "Error: -k gaussian repeats -k rbf: give each kernel once."),
        (["-k", "rbf:sigma=1", "-k", "rbf(sigma=1.0)"], "Error: -k rbf(sigma=1.0) repeats -k rbf:sigma=1"),
    ],
)
def test_aggregate_refuses_options_it_would_not_use(args, message):
    # each of these used to be dropped without a word: the test ran the default collection
    result = invoke("test", "--aggregate", "agg", "--dataset", "gauss", *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_monk_tests_relabel_within_blocks_and_say_so():
    table = invoke("test", "-k", "quadratic", "-e", "monk-bcd", "--dataset", "gauss-outliers", "-B", "100")
    assert table.exit_code == 0, table.stderr
    assert "relabelled within 11 blocks" in table.stdout and "Reject H0" in table.stdout
    data = json.loads(invoke("test", "-k", "quadratic", "-e", "monk-bcd", "--dataset", "gauss-outliers", "-B", "100", "--relabel", "global", "--json").stdout)
    assert data["relabel"] == "global" and not data["reject"]


def test_robust_test_reports_its_certificate_and_matches_the_library():
    from monk_framework.two_sample.robust import robust_test

    result = invoke("test", "-k", "rbf", "-p", "sigma=1", "--dataset", "gauss-outliers", "--contamination", "10", "-B", "199")
    assert result.exit_code == 0, result.stderr
    assert "certificate" in result.stdout and "stays valid if up to" in result.stdout
    data = json.loads(invoke("test", "-k", "rbf", "-p", "sigma=1", "--dataset", "gauss-outliers", "--contamination", "10", "-B", "199", "--json").stdout)
    X, Y = get_dataset("gauss-outliers").sample(0)
    direct = robust_test(X, Y, kernel=get_registry().get_kernel("rbf", sigma=1.0), contamination=10, n_permutations=199, rng=0)
    assert data["type"] == "robust-test" and data["method"] == "dc" and data["contamination"] == 10
    assert (data["pvalue"], data["certificate"], data["reject"]) == (direct.pvalue, direct.certificate, direct.reject)
    # a fraction of N + M = 400 points, and mom with a chosen number of blocks
    frac = json.loads(
        invoke("test", "-k", "quadratic", "--dataset", "gauss-outliers", "--contamination", "0.025", "--blocks", "31", "-B", "99", "--json").stdout
    )  # noqa: E501 - one case per line
    assert frac["contamination"] == 10 and frac["method"] == "mom" and frac["n_blocks"] == 31
    assert len(frac["block_pvalues"]) == 31 and frac["estimator"] == "u-stat"


def test_too_few_permutations_is_said_in_words():
    result = invoke("test", "-k", "rbf", "-e", "v-stat", "-B", "10")
    assert result.exit_code == 0 and "Cannot reject at level 0.05 with 10 permutations" in result.stdout


def test_real_process():
    exe = shutil.which("monkfw") or shutil.which("monkfw", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "monk_framework"]
    done = subprocess.run([*cmd, "--quiet", "test", "-k", "quadratic", "-e", "v-stat", "-B", "49", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    data = json.loads(done.stdout)
    assert 0 < data["pvalue"] <= 1 and data["n_permutations"] == 49
    np.testing.assert_equal(data["reject"], data["pvalue"] <= 0.05)


def test_aggregated_test_lists_its_kernels_and_matches_the_library():
    from monk_framework import aggregated_test

    result = invoke("test", "--aggregate", "agg", "--dataset", "gauss", "-B", "99")
    assert result.exit_code == 0, result.stderr
    assert "MMDAgg" in result.stdout and "rbf:sigma=" in result.stdout and "laplace:sigma=" in result.stdout
    assert "No kernel given: Gaussian and Laplace" in result.stderr
    data = json.loads(invoke("test", "--aggregate", "agg", "--dataset", "gauss", "-B", "99", "--json").stdout)
    X, Y = get_dataset("gauss").sample(0)
    direct = aggregated_test(X, Y, n_permutations=99, rng=0)
    assert data["type"] == "aggregated-test" and len(data["kernel_specs"]) == 20
    assert (data["pvalue"], data["reject"], data["kernel_specs"]) == (direct.pvalue, direct.reject, direct.kernel_specs)
    # one family at given bandwidths, MMD-FUSE, and robust aggregation with its certificate
    fuse = json.loads(invoke("test", "--aggregate", "fuse", "-k", "laplace", "--bandwidths", "0.5,1,2", "-B", "99", "--json").stdout)
    assert fuse["method"] == "fuse" and fuse["bandwidths"] == [0.5, 1.0, 2.0] and fuse["kernel"] == "laplace"
    robust = invoke("test", "--aggregate", "agg", "--bandwidths", "0.5,1,2", "--contamination", "2", "--dataset", "gauss-outliers", "-B", "99")
    assert robust.exit_code == 0, robust.stderr
    assert "MMDAgg, robust to 2" in robust.stdout and "certificate" in robust.stdout


def test_robust_test_clips_an_unbounded_kernel_by_default():
    data = json.loads(invoke("test", "-k", "quadratic", "--dataset", "gauss-outliers", "--contamination", "10", "-B", "99", "--json").stdout)
    assert data["method"] == "clip" and data["clip_radius"] > 0 and data["estimator"] == "v-stat"
    table = invoke("test", "-k", "quadratic", "--dataset", "gauss-outliers", "--contamination", "10", "--clip", "5", "-B", "99")
    assert table.exit_code == 0, table.stderr
    assert "dcMMD on clipped features" in table.stdout and "clip radius c" in table.stdout and "(given)" in table.stdout


def _aggregated(*args: str) -> dict:
    result = invoke("test", "--aggregate", "agg", "--dataset", "gauss", "--data-param", "n=150", "-B", "99", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_several_kernels_make_the_collection_of_an_aggregated_test():
    # -k repeated: each kernel with its own sigma (or none) as given, each without one at
    # its family's grid; -k rbf -k laplace:norm=l1 is the published default collection
    default = _aggregated()
    listed = _aggregated("-k", "rbf", "-k", "laplace:norm=l1")
    assert listed["kernel_specs"] == default["kernel_specs"]
    assert listed["pvalue"] == default["pvalue"] and listed["kernel_statistics"] == default["kernel_statistics"]
    X, Y = get_dataset("gauss", n=150).sample(0)
    from monk_framework.two_sample.aggregated import bandwidth_grid

    family = _aggregated("-k", "laplace")
    assert family["bandwidths"] == pytest.approx(list(bandwidth_grid(X, Y, metric="l2")), rel=1e-15)
    assert all(spec.startswith("laplace:") and spec.endswith("norm=l2") for spec in family["kernel_specs"])
    mixed = _aggregated("-k", "quadratic", "-k", "rbf:sigma=1", "-k", "laplace", "--bandwidths", "0.5,2")
    assert mixed["kernel_specs"] == [
        "quadratic:scale=1.0,offset=1.0,normalize=False",
        "rbf:sigma=1.0",
        "laplace:sigma=0.5,norm=l2",
        "laplace:sigma=2.0,norm=l2",
    ]
    robust = _aggregated("-k", "rbf:sigma=1", "-k", "rbf:sigma=2", "--contamination", "2")
    assert robust["contamination"] == 2 and robust["bandwidths"] == [1.0, 2.0] and "certificate" in robust


def test_a_family_without_sigma_is_noted_and_several_kernels_need_aggregate():
    result = invoke("test", "--aggregate", "agg", "--dataset", "gauss", "-B", "19", "-k", "laplace")
    assert result.exit_code == 0, result.stderr
    assert "-k laplace without sigma: 10 bandwidths each over the pooled distances" in result.stderr
    assert "over 10 kernels" in result.stdout
    refused = invoke("test", "--dataset", "gauss", "-k", "rbf", "-k", "laplace")
    assert refused.exit_code == 2
    assert "-k was given 2 times (rbf, laplace): a test uses one kernel. Several kernels make an aggregated test" in refused.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "-k", "rbf", "-k", "laplace", "-e", "u-stat"], "--kernel/-k was given 2 times ('rbf', 'laplace'); it takes one value."),
        (["run", "-krbf", "--kernel=laplace", "-e", "u-stat"], "--kernel/-k was given 2 times ('rbf', 'laplace')"),
        (["test", "-B", "10", "--permutations", "20"], "--permutations/-B was given 2 times ('10', '20')"),
        (["test", "--seed", "1", "--seed", "1"], "--seed was given 2 times ('1', '1')"),
    ],
)
def test_an_option_of_one_value_given_twice_is_refused(args, message):
    # click would keep the last value without a word: -k rbf -k laplace ran laplace alone
    result = invoke(*args, "--dataset", "gauss")
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and result.stderr.count("\n") == 1
