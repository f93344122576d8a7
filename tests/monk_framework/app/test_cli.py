"""The monkfw command line, through typer's test runner and once as a real process."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from monk_framework import MMDResult, get_registry
from monk_framework.app.cli import app
from monk_framework.app.datasets import DATASETS, get_dataset

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.startswith("monkfw ")


def test_plugins_json_lists_the_builtins_with_their_provider():
    result = invoke("plugins", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    kernels = {k["name"]: k for k in data["kernels"]}
    assert set(kernels) == {"linear", "polynomial", "quadratic", "rbf", "exponential", "laplace", "energy", "ssk"}
    assert {e["name"] for e in data["estimators"]} >= {"v-stat", "u-stat", "mean"}
    for entry in data["kernels"] + data["estimators"]:
        assert entry["provider"]["distribution"] == "monk-framework"
    assert kernels["rbf"]["parameters"][0]["name"] == "sigma"
    assert data["problems"] == []


def test_plugins_table():
    result = invoke("plugins")
    assert result.exit_code == 0
    assert "quadratic" in result.stdout and "u-stat" in result.stdout and "vector_kernels" in result.stdout


def test_describe_shows_formula_and_defaults():
    result = invoke("describe", "polynomial", "--json")
    info = json.loads(result.stdout)
    assert info["formula"] == "k(x, y) = (scale * <x, y> + offset)^degree; normalize: k(x, y) / sqrt(k(x, x) k(y, y))"
    assert [(p["name"], p["default"]) for p in info["parameters"]] == [("degree", 3), ("scale", 1.0), ("offset", 1.0), ("normalize", False)]
    text = invoke("describe", "gauss-outliers")
    assert text.exit_code == 0 and "n_outliers" in text.stdout
    assert invoke("describe", "u-stat").exit_code == 0
    # a spec, as -k and -e take them: its plugin, with a note that says so
    spec = invoke("describe", "polynomial:degree=2", "--json")
    assert spec.exit_code == 0 and json.loads(spec.stdout) == info
    assert "'polynomial:degree=2' is 'polynomial' with parameters" in spec.stderr
    shown = invoke("describe", "polynomial(degree=2)", "--json")  # the form tables show
    assert shown.exit_code == 0 and json.loads(shown.stdout) == info
    unknown = invoke("describe", "polynomal:degree=2")
    assert unknown.exit_code == 2 and "Unknown kernel, estimator or data set 'polynomal'" in unknown.stderr
    experiment = invoke("describe", "exp2")  # no plugin: where an experiment is described
    assert experiment.exit_code == 2 and "'exp2' is an experiment: 'monkfw experiment exp2 --help'." in experiment.stderr
    for half in ("polynomial(degree=2", "polynomial degree=2)"):  # a parenthesis lost in copying
        cut = invoke("describe", half)
        assert cut.exit_code == 2 and "Cannot read spec" in cut.stderr and "with both parentheses" in cut.stderr


def test_datasets_listing():
    data = json.loads(invoke("datasets", "--json").stdout)
    assert [d["name"] for d in data] == ["gauss", "gauss-outliers", "pareto", "splice-ei-ie", "splice-ei-ei", "splice-ie-ie"]


def test_run_without_data_uses_the_default_dataset_and_says_so():
    result = invoke("run", "--kernel", "rbf", "--estimator", "u-stat", "--json")
    assert result.exit_code == 0, result.output
    assert "No data given: using the built-in data set gauss" in result.stderr
    payload = json.loads(result.stdout)
    X, Y = get_dataset("gauss").sample(0)
    reg = get_registry()
    want = reg.get_estimator("u-stat").estimate(reg.get_kernel("rbf"), X, Y)
    assert payload["mmd2"] == want.mmd2
    assert payload["data"] == {"source": "dataset", "name": "gauss", "params": get_dataset("gauss").params(), "seed": 0}
    assert MMDResult.from_dict(payload).mmd2 == want.mmd2


def test_run_routes_parameters_and_saves_the_result(tmp_path):
    out = tmp_path / "res" / "r.json"
    result = invoke(
        "run",
        "-k",
        "rbf",
        "-e",
        "u-stat",
        "--dataset",
        "gauss-outliers",
        "--data-param",
        "n=40",
        "--param",
        "sigma=median",
        "--param",
        "root=signed",
        "--seed",
        "3",
        "--output",
        str(out),
    )
    assert result.exit_code == 0, result.output
    saved = json.loads(out.read_text())
    assert saved["kernel_params_requested"] == {"sigma": "median"} and saved["kernel_params"]["sigma"] > 0
    assert saved["estimator_params"] == {"root": "signed"} and saved["seed"] == 3
    assert saved["n_x"] == 40 and saved["data"]["params"]["n"] == 40
    assert "MMD" in result.stdout


def test_run_on_files(tmp_path, rng):
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(20, 2))
    np.save(tmp_path / "x.npy", X)
    np.savetxt(tmp_path / "y.csv", Y, delimiter=",", header="a,b", comments="")
    result = invoke("run", "-k", "energy", "-e", "v-stat", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.csv"), "--json")
    assert result.exit_code == 0, result.output
    reg = get_registry()
    assert json.loads(result.stdout)["mmd2"] == pytest.approx(reg.get_estimator("v-stat").estimate(reg.get_kernel("energy"), X, Y).mmd2, rel=1e-12)


def test_run_embedding_estimator():
    result = invoke("run", "-k", "rbf", "-e", "mean", "--data-param", "n=30", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    X, Y = get_dataset("gauss", n=30).sample(0)
    reg = get_registry()
    want = reg.get_estimator("v-stat").estimate(reg.get_kernel("rbf"), X, Y).mmd
    assert payload["distance"] == pytest.approx(want, rel=1e-12)
    assert len(payload["x"]["weights"]) == 30


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["run", "-k", "rbff", "-e", "u-stat"], 2, "Unknown kernel 'rbff'. Did you mean 'rbf'?"),
        (["run", "-k", "rbf", "-e", "ustat"], 2, "Did you mean 'u-stat'?"),
        (["run", "-k", "rbf", "-e", "u-stat", "-p", "sigam=1"], 2, "Unknown parameter for kernel 'rbf' and estimator 'u-stat': 'sigam'. Did you mean 'sigma'?"),
        (["run", "-k", "rbf", "-e", "u-stat", "-p", "sigma"], 2, "--param expects key=value"),
        (["run", "-k", "rbf", "-e", "u-stat", "-p", "sigma=-2"], 2, "The 'sigma' parameter of RBFKernel must be a float > 0"),
        (["run", "-k", "rbf", "-e", "u-stat", "-p", "model.sigma=1"], 2, "prefix must be 'kernel.' or 'estimator.'"),
        (["run", "-k", "rbf", "-e", "u-stat", "-d", "gaus"], 2, "Unknown dataset 'gaus'"),
        (["run", "-k", "rbf", "-e", "u-stat", "--data-param", "n=1"], 1, "X has 1 point(s) but estimator 'u-stat' needs at least 2"),
        (["run", "-k", "rbf", "-e", "u-stat", "--data-param", "n=0"], 2, "The 'n' parameter of GaussDataset must be an int >= 1"),
        (["run", "-k", "exponential", "-e", "u-stat", "-d", "gauss-outliers"], 1, "sums of kernel values could overflow float64"),
        (["run", "a.npy", "b.npy", "c.npy"], 2, "Give at most two sample files (X and Y); got 3"),
        (["test", "a.npy", "b.npy", "--x", "a.npy"], 2, "Give the samples either as arguments or with --x/--y, not both"),
        (["run", "-k", "rbf", "-e", "u-stat", "--seed", "-1"], 2, "--seed"),
        (["describe", "nothing"], 2, "Unknown kernel, estimator or data set 'nothing'"),
        (["frobnicate"], 2, "No such command 'frobnicate'"),
    ],
)
def test_usage_and_library_errors_are_one_line_with_exit_codes(args, code, message):
    result = invoke(*args)
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("files", "extra", "code", "message"),
    [
        ({"x.csv": "1\nnan\n", "y.csv": "1\n2\n"}, [], 1, "x.csv, line 2, column 1: a missing value ('nan'"),
        ({"x.csv": "1\n2\n", "y.csv": "a,b\n1,2\n"}, [], 1, "X has 1 feature(s) per point but Y has 2"),
        ({"x.csv": "1\n2\n", "y.csv": "a\n"}, [], 1, "y.csv, line 1: holds a header row but no data rows"),
        ({"x.csv": "1\n2\n"}, [], 2, "give Y as well as X (a second file, or --y)"),
        ({"x.csv": "1\n2\n", "y.csv": "1\n2\n"}, ["-d", "gauss"], 2, "either --dataset or --x/--y"),
        ({"y.csv": "1\n2\n"}, ["--x", "missing.npy"], 1, "missing.npy: no such file"),
    ],
)
def test_bad_files_from_the_command_line(tmp_path, files, extra, code, message):
    args = ["run", "-k", "rbf", "-e", "v-stat"]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        args += [f"--{name[0]}", str(tmp_path / name)]
    args += [a if a != "missing.npy" else str(tmp_path / a) for a in extra]
    result = invoke(*args)
    assert result.exit_code == code, result.output
    assert message in result.stderr


def test_debug_shows_the_traceback():
    result = invoke("--debug", "run", "-k", "rbf", "-e", "u-stat", "--data-param", "n=1")
    assert result.exit_code == 1 and "Traceback" in result.stderr


def test_quiet_hides_notes():
    result = invoke("--quiet", "run", "-k", "rbf", "-e", "u-stat")
    assert result.exit_code == 0 and result.stderr == ""


def test_real_process_run_and_usage_error():
    exe = shutil.which("monkfw") or shutil.which("monkfw", path=str(__import__("pathlib").Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "monk_framework"]
    ok = subprocess.run([*cmd, "run", "--kernel", "quadratic", "--estimator", "v-stat", "--json"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["kernel"] == "quadratic"
    bad = subprocess.run([*cmd, "run", "--kernel", "rbf", "--estimator", "v-stat", "--bogus"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "No such option: --bogus" in bad.stderr


@pytest.mark.slow  # five real processes, one writing 20 000 numbers: about 8 s
@pytest.mark.parametrize("args", [["plugins"], ["test", "-d", "gauss", "--data-param", "n=30", "--null", "-B", "20000", "--json"]], ids=["table", "json"])
def test_a_reader_that_leaves_ends_the_command_quietly_and_a_full_device_is_one_line(args, tmp_path):
    # `monkfw plugins | head -1` said "the work was ended by a call to sys.exit(1) outside the
    # library (in a plugin?)" (rich's broken-pipe exit), and `> /dev/full` "internal error"
    import os

    exe = shutil.which("monkfw") or shutil.which("monkfw", path=str(__import__("pathlib").Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "monk_framework"]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    with os.fdopen(write, "w") as closed:
        left = subprocess.run([*cmd, "-q", *args], stdout=closed, stderr=subprocess.PIPE, text=True, timeout=120)
    assert left.returncode == 141 and left.stderr == "", left.stderr
    if os.path.exists("/dev/full"):
        # buffered (a result smaller than the buffer fails only when it is flushed) and not
        for env in ({k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, {**os.environ, "PYTHONUNBUFFERED": "1"}):
            with open("/dev/full", "w") as full:
                saved = tmp_path / "kept.json"
                done = subprocess.run(
                    [*cmd, "-q", *args, *(["-o", str(saved)] if args[0] == "test" else [])],
                    stdout=full,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=120,
                    env=env,
                )
            assert done.returncode == 1 and done.stderr == "Error: cannot write to standard output: No space left on device.\n"
            if args[0] == "test":
                assert json.loads(saved.read_text())["type"] == "permutation-test"  # what -o saved is whole


@pytest.mark.slow  # two real processes: about 3 s
def test_a_closed_stdout_is_one_line_and_a_full_stderr_does_not_end_the_work(tmp_path):
    # `monkfw run ... >&-` said "internal error: AttributeError: 'NoneType' object has no
    # attribute 'write'" after saving; with `2>/dev/full` the first note ended the work (exit 1,
    # no result) although the result goes to stdout
    import os

    exe = shutil.which("monkfw") or shutil.which("monkfw", path=str(__import__("pathlib").Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "monk_framework"]
    args = ["run", "-d", "gauss", "--data-param", "n=30", "--json"]
    saved = tmp_path / "kept.json"

    def closed_stdout() -> None:  # as the shell's >&- does, in the child before it starts
        os.close(1)

    closed = subprocess.run(
        [*cmd, *args, "-o", str(saved)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=closed_stdout
    )
    assert closed.returncode == 1
    assert closed.stderr.splitlines()[-1] == "Error: cannot write to standard output: standard output is closed."
    assert json.loads(saved.read_text())["type"] == "mmd"  # what -o saved is whole
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            done = subprocess.run([*cmd, *args], stdout=subprocess.PIPE, stderr=full, text=True, timeout=120)
        assert done.returncode == 0 and json.loads(done.stdout)["mmd2"] == json.loads(saved.read_text())["mmd2"]


@pytest.mark.parametrize(
    ("x_value", "message"),
    [
        (np.array([[1.0], [np.inf], [2.0]]), "X contains inf at point 1, feature 0"),
        (np.zeros((0, 1)), "X is empty"),
        (np.array(["ACGT", "GGCA"]), "X holds strings, but kernel 'rbf' needs numeric vectors"),
        (np.array([{"a": 1}], dtype=object), "pickled Python objects, which are never loaded"),
        (np.zeros((2, 2, 2)), "X has 3 dimensions"),
    ],
)
def test_bad_npy_samples_from_the_command_line(tmp_path, x_value, message):
    np.save(tmp_path / "x.npy", x_value, allow_pickle=x_value.dtype == object)
    np.save(tmp_path / "y.npy", np.zeros((3, 1)))
    result = invoke("run", "-k", "rbf", "-e", "u-stat", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"))
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and message in errors[0]


def test_empty_csv_from_the_command_line(tmp_path):
    (tmp_path / "x.csv").write_text("\n")
    (tmp_path / "y.csv").write_text("1\n2\n")
    result = invoke("run", "-k", "rbf", "-e", "u-stat", "--x", str(tmp_path / "x.csv"), "--y", str(tmp_path / "y.csv"))
    assert result.exit_code == 1 and "x.csv: holds no data rows" in result.stderr


def test_bare_command_shows_help_without_error():
    result = invoke()
    assert result.exit_code == 2 and "Usage: monkfw" in result.stderr and "Error" not in result.stderr


def test_not_enough_memory_is_a_library_error(monkeypatch):
    from monk_framework.core import resources

    monkeypatch.setattr(resources, "available_memory", lambda: 2**20)
    # what a user's number would need beyond the memory there is is refused before it is allocated
    result = invoke("run", "-k", "rbf", "-p", "sigma=1", "-e", "rff", "-p", "n_features=100000", "--data-param", "n=500")
    assert result.exit_code == 1 and "random features of 500 points need about 0.37 GiB, but only 512.0 KiB (half of the 1.0 MiB free)" in result.stderr
    # the stored Gram matrix the old parameter asked for: no longer a user's choice (deprecated),
    # the engine goes matrix-free within the memory there is
    result = invoke("run", "-k", "rbf", "-p", "sigma=1", "-e", "monk-bcd", "-p", "matrix_free=false", "--data-param", "n=500", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["diagnostics"]["matrix_free"] is True
    assert "Warning: monk-bcd: matrix_free=False is deprecated and has no effect" in result.stderr
    # a budget above what is available is cut to it: matrix-free, not that error
    result = invoke("run", "-k", "rbf", "-p", "sigma=1", "-e", "monk-bcd", "--data-param", "n=500", "--max-memory", "1GB", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["diagnostics"]["matrix_free"] is True


def test_running_out_of_memory_unforeseen_is_said_as_such(monkeypatch):
    # numpy's own MemoryError (the room the checks saw was taken meanwhile) was reported
    # as "internal error: MemoryError: Unable to allocate ..."
    from monk_framework.app import jobs

    def short(*args, **kwargs):
        raise MemoryError("Unable to allocate 2.98 GiB for an array with shape (20000, 20000) and data type float64")

    monkeypatch.setattr(jobs, "run", short)
    result = invoke("run", "-k", "rbf", "-p", "sigma=1", "--data-param", "n=30")
    assert result.exit_code == 1 and "internal error" not in result.stderr
    assert (
        "Error: out of memory (Unable to allocate 2.98 GiB for an array with shape (20000, 20000) and data type "
        "float64). Give --max-memory a smaller budget" in result.stderr
    )
    # an empty MemoryError() read "out of memory ()"
    monkeypatch.setattr(jobs, "run", lambda *args, **kwargs: (_ for _ in ()).throw(MemoryError()))
    result = invoke("run", "-k", "rbf", "-p", "sigma=1", "--data-param", "n=30")
    assert result.exit_code == 1 and "Error: out of memory (an allocation failed). Give --max-memory" in result.stderr


def test_a_file_the_system_refuses_is_named_not_an_internal_error(monkeypatch):
    # an OSError naming a file, from a path no check foresaw (a file removed under the run)
    from monk_framework.app import jobs

    def gone(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "results/part.tmp")

    monkeypatch.setattr(jobs, "run", gone)
    result = invoke("run", "-k", "rbf", "-p", "sigma=1", "--data-param", "n=30")
    assert result.exit_code == 1 and "internal error" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "Error: cannot use 'results/part.tmp': No such file or directory."


def test_one_param_option_may_join_several_as_a_spec_does():
    joined = invoke("run", "-k", "rbf", "-e", "monk-bcd", "-p", "n_blocks=3,n_iter=20,sigma=1", "--data-param", "n=30", "--json")
    apart = invoke("run", "-k", "rbf", "-e", "monk-bcd", "-p", "n_blocks=3", "-p", "n_iter=20", "-p", "sigma=1", "--data-param", "n=30", "--json")
    assert joined.exit_code == apart.exit_code == 0, joined.stderr
    assert json.loads(joined.stdout)["mmd"] == json.loads(apart.stdout)["mmd"]
    assert json.loads(joined.stdout)["estimator_params"]["n_iter"] == 20
    # a value with a comma of its own stays one value, refused as such
    listed = invoke("run", "-k", "rbf", "-p", "sigma=1,2", "--data-param", "n=30")
    assert listed.exit_code == 2 and "The 'sigma' parameter of RBFKernel must be a float > 0 or 'median'. Got '1,2'" in listed.stderr


@pytest.mark.parametrize("option", ["-k", "-e"])
def test_an_empty_kernel_or_estimator_option_is_named(option):
    result = invoke("run", option, "", "--data-param", "n=30")
    name = "--kernel' / '-k'" if option == "-k" else "--estimator' / '-e'"
    assert result.exit_code == 2 and f"Invalid value for '{name}: is empty; give a name, listed by monkfw plugins" in result.stderr


def test_name_completion():
    from monk_framework.app.cli import _complete

    assert _complete("kernel")("l") == ["laplace", "linear"]
    assert _complete("estimator")("u") == ["u-stat"]
    assert _complete("dataset")("gauss") == ["gauss", "gauss-outliers"]
    assert _complete("any")("") == sorted(get_registry().names() + list(DATASETS))


def test_string_kernel_runs_on_the_bundled_splice_data_by_default():
    for estimator in ("u-stat", "monk-bcd"):
        result = invoke("run", "--kernel", "ssk", "--estimator", estimator, "--json")
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["data"]["name"] == "splice-ei-ie" and out["data"]["seed"] == 0
        assert out["n_x"] == out["n_y"] == 762
        assert 0.1 < out["mmd"] < 1.0  # EI and IE differ clearly
        assert "splice-ei-ie" in result.stderr


def test_string_and_vector_kernels_refuse_each_others_data(tmp_path):
    wrong = invoke("run", "--kernel", "ssk", "--estimator", "v-stat", "--dataset", "gauss")
    assert wrong.exit_code == 2 and "gives vectors but kernel 'ssk' takes strings; use a kernel for vectors (energy," in " ".join(wrong.output.split())
    wrong = invoke("run", "--kernel", "rbf", "--estimator", "v-stat", "--dataset", "splice-ie-ie")
    assert wrong.exit_code == 2 and "gives strings but kernel 'rbf' takes vectors; use a kernel for strings (ssk)." in " ".join(wrong.output.split())
    (tmp_path / "x.txt").write_text("ACGT\nAGGT\n")
    (tmp_path / "y.fa").write_text(">a\nACG\nT\n>b\nGGTA\n")
    wrong = invoke("run", "--kernel", "rbf", "--estimator", "v-stat", "--x", str(tmp_path / "x.txt"), "--y", str(tmp_path / "y.fa"))
    # a .txt file is numbers for a vector kernel: its first string is named, with what to do
    assert wrong.exit_code == 1 and "x.txt, line 1, column 1: cannot read 'ACGT' as a number" in wrong.output
    assert "as strings (one per line) for a string kernel such as ssk" in " ".join(wrong.output.split())
    right = invoke("run", "--kernel", "ssk", "--param", "n=2", "--estimator", "v-stat", "--json", "--x", str(tmp_path / "x.txt"), "--y", str(tmp_path / "y.fa"))
    assert right.exit_code == 0, right.output
    out = json.loads(right.stdout)
    assert (out["n_x"], out["n_y"]) == (2, 2) and out["kernel_params"]["n"] == 2


def test_fasta_case_flag_reaches_the_loader(tmp_path):
    from monk_framework.app.cli import app

    (tmp_path / "x.fa").write_text(">a\nacgtacgt\n>b\nacgtaaaa\n>c\nccgtacgg\n>d\nacgtttgt\n")
    (tmp_path / "y.fa").write_text(">a\nACGTACGT\n>b\nACGTAAAA\n>c\nCCGTACGG\n>d\nACGTTTGT\n")
    args = ["run", "-k", "ssk", "-e", "v-stat", "--x", str(tmp_path / "x.fa"), "--y", str(tmp_path / "y.fa"), "--json"]
    same = CliRunner().invoke(app, args)
    kept = CliRunner().invoke(app, [*args, "--case-sensitive"])
    assert same.exit_code == 0 and kept.exit_code == 0, same.output + kept.output
    assert json.loads(same.stdout)["mmd2"] == pytest.approx(0.0, abs=1e-12)
    assert json.loads(kept.stdout)["mmd2"] > 0.5


@pytest.mark.parametrize("command", ["run", "test"])
def test_an_output_path_that_cannot_be_written_is_refused_before_the_work(tmp_path, command, monkeypatch):
    from monk_framework.app import test_job
    from monk_framework.app.cli import app

    calls = []
    monkeypatch.setattr(test_job, "permutation_test", lambda *a, **k: calls.append(1))
    base = [command, "-k", "rbf", "-e", "u-stat", "-d", "gauss", "--data-param", "n=20"]
    result = CliRunner().invoke(app, [*base, "-o", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory; give a file name inside it" in result.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(app, [*base, "-o", str(blocker / "out.json")])
    assert result.exit_code == 2 and "cannot be written" in result.stderr
    assert calls == [] and "internal error" not in result.stderr


@pytest.mark.parametrize("command", ["run", "test"])
def test_an_output_that_is_one_of_the_data_files_is_refused_and_the_data_kept(tmp_path, command):
    # -o x.csv after --x x.csv overwrote the data with the result's JSON
    from monk_framework.app.cli import app

    gen = np.random.default_rng(5)
    for name in ("x.csv", "y.csv"):
        np.savetxt(tmp_path / name, gen.normal(size=(12, 2)), delimiter=",")
    kept = {name: (tmp_path / name).read_bytes() for name in ("x.csv", "y.csv")}
    samples = ["--x", str(tmp_path / "x.csv"), "--y", str(tmp_path / "y.csv")]
    (tmp_path / "link.json").symlink_to(tmp_path / "x.csv")  # a result's name, the data's file
    for target, said in (
        ("x.csv", "names a .csv file, but a result is saved as JSON; name it"),
        ("./y.csv", "names a .csv file"),
        ("link.json", "the result would overwrite the data"),
    ):
        result = CliRunner().invoke(app, [command, "-k", "rbf:sigma=1", *samples, "-o", str(tmp_path / target)])
        assert result.exit_code == 2, result.output
        assert said in result.stderr
    assert {name: (tmp_path / name).read_bytes() for name in kept} == kept


@pytest.mark.parametrize(
    "args",
    [["run", "-d", "gauss", "-o", ""], ["run", "--x", "", "--y", "y.npy"], ["test", "", "y.npy"], ["experiment", "exp1", "--quick", "--out", ""]],
    ids=["output", "x", "argument", "out"],
)
def test_an_empty_path_is_refused_not_read_as_the_current_directory(args):
    # an unset shell variable ("--out $DIR") left '' that was read as '.'
    result = invoke(*args)
    assert result.exit_code == 2 and "is empty; give a path" in result.stderr


def test_a_malformed_scheduler_address_is_a_usage_error():
    pytest.importorskip("distributed")
    from monk_framework.app.cli import app

    result = CliRunner().invoke(app, ["test", "-k", "rbf", "-e", "u-stat", "--backend", "dask", "--scheduler", "notanaddress"])
    assert result.exit_code == 2
    assert "scheduler address 'notanaddress' (--scheduler) is not valid" in result.stderr


@pytest.mark.parametrize(
    ("address", "message"),
    [
        # each was dask's own words: "not enough values to unpack", "Can't instantiate abstract
        # class UCXConnector", "TLS expects a `ssl_context` argument"
        ("inproc://x", r"names a scheduler inside one Python process \(inproc://\), which no other process reaches"),
        ("ucx://127.0.0.1:1", r"uses UCX, which needs the distributed-ucxx package"),
        ("tls://127.0.0.1:1", r"uses TLS, which needs dask's TLS settings \(distributed\.comm\.tls"),
    ],
)
def test_a_scheduler_scheme_this_client_cannot_use_says_why(address, message):
    pytest.importorskip("distributed")
    import importlib.util

    if address.startswith("ucx") and importlib.util.find_spec("distributed_ucxx") is not None:
        pytest.skip("UCX is installed here")
    from monk_framework.app.cli import app

    result = CliRunner().invoke(app, ["test", "-k", "rbf", "-e", "u-stat", "-d", "gauss", "--data-param", "n=20", "--backend", "dask", "--scheduler", address])
    assert result.exit_code == 2
    assert re.search(rf"^Error: The scheduler address '{re.escape(address)}' \(--scheduler\) {message}", result.stderr, re.M)


@pytest.mark.parametrize("command", ["run", "test"])
def test_ctrl_c_prints_one_interrupted_line_and_exits_130(command, monkeypatch):
    from monk_framework.app import test_job
    from monk_framework.app.cli import app
    from monk_framework.core.estimators import MMDEstimator

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(test_job, "permutation_test", interrupted)
    monkeypatch.setattr(MMDEstimator, "estimate", interrupted)
    result = CliRunner().invoke(app, [command, "-k", "rbf", "-e", "u-stat", "-d", "gauss", "--data-param", "n=20"])
    assert result.exit_code == 130
    assert result.stderr.count("Interrupted.") == 1 and "Traceback" not in result.stderr


@contextlib.contextmanager
def _registered_estimator(cls):
    """``cls`` registered as a throwaway plugin's estimator while the block runs."""
    import types

    from monk_framework import hookimpl

    plugin = types.ModuleType(cls.name)
    plugin.monk_estimators = hookimpl(lambda: [cls])
    reg = get_registry()
    reg.register(plugin)
    try:
        yield cls
    finally:
        reg.unregister(plugin)


def _v_statistic(kernel, X, Y) -> float:
    return kernel.gram(X).mean() + kernel.gram(Y).mean() - 2 * kernel.gram(X, Y).mean()


@pytest.fixture
def diagnosing_estimator():
    """A throwaway MMD estimator that declares its own printable diagnostics."""
    from typing import ClassVar

    import attrs

    from monk_framework import Estimate, MMDEstimator

    @attrs.frozen(kw_only=True)
    class Diagnosing(MMDEstimator):
        name: ClassVar[str] = "diagnosing"
        summary: ClassVar[str] = "The V-statistic, with a diagnostic of its own."
        formula: ClassVar[str] = "||mean k(., x) - mean k(., y)||^2"

        def compute_estimate(self, kernel, X, Y, rng, resources):
            v = _v_statistic(kernel, X, Y)
            return Estimate(mmd2=v, mmd=max(v, 0.0) ** 0.5, diagnostics={"witness_peak": 4.25, "hidden": 1})

        def diagnostic_rows(self, diagnostics, timings):
            return [("witness peak", f"{diagnostics['witness_peak']:.3f}")]

    with _registered_estimator(Diagnosing):
        yield Diagnosing


def test_a_new_estimator_shows_the_diagnostics_it_declares_without_a_cli_change(diagnosing_estimator):
    result = invoke("run", "-k", "rbf", "-e", "diagnosing", "--data-param", "n=20")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in result.stdout.splitlines() if line.count("│") == 3}
    assert rows["witness peak"] == "4.250" and "hidden" not in rows
    # and the estimate is what the library gives for the same seed
    data = json.loads(invoke("run", "-k", "rbf", "-e", "diagnosing", "--data-param", "n=20", "--json").stdout)
    X, Y = get_dataset("gauss", n=20).sample(0)
    want = diagnosing_estimator().estimate(get_registry().get_kernel("rbf"), X, Y, rng=0)
    assert data["mmd2"] == want.mmd2 and data["diagnostics"]["witness_peak"] == 4.25


def test_run_and_test_report_the_statistic_python_gives_for_the_same_seed():
    from monk_framework.two_sample import permutation_test

    reg = get_registry()
    args = ["-k", "quadratic", "-e", "monk-bcd", "--dataset", "gauss-outliers", "--seed", "3", "--json"]
    ran = json.loads(invoke("run", *args).stdout)
    tested = json.loads(invoke("test", *args, "--relabel", "global", "-B", "19").stdout)
    X, Y = get_dataset("gauss-outliers").sample(3)
    est, kernel = reg.get_estimator("monk-bcd"), reg.get_kernel("quadratic")
    python = est.estimate(kernel, X, Y, rng=3)
    assert ran["mmd2"] == python.mmd2 and ran["mmd"] == python.mmd
    assert tested["statistic_mmd2"] == python.mmd2 and tested["estimate"] is None  # T is the estimate
    assert tested["statistic"] == permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=19, rng=3, relabel="global").statistic


def test_plugins_table_keeps_providers_whole_at_80_columns_and_marks_embedding_estimators():
    result = runner.invoke(app, ["plugins"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "Estimators from monk-framework" in result.stdout and max(map(len, lines)) <= 80
    rows = {line.split("│")[1].strip(): line for line in lines if line.count("│") == 5}
    assert "embedding only" in rows["mean"] and "MMD" in rows["u-stat"] and "monk_embedding " in rows["monk-embedding"]
    assert any(line.split("│")[1].strip() == "(gaussian)" for line in lines if line.count("│") == 4)


def test_a_within_block_test_also_reports_the_estimate_run_gives_for_the_seed():
    args = ["-k", "quadratic", "-e", "monk-bcd", "--dataset", "gauss-outliers", "--seed", "5", "--json"]
    ran = json.loads(invoke("run", *args).stdout)
    tested = json.loads(invoke("test", *args, "-B", "19").stdout)
    assert tested["relabel"] == "within-blocks" and tested["estimate"] == ran["mmd"]
    assert tested["statistic"] != ran["mmd"]  # the test-time form on the fixed blocks is another number
    table = invoke("test", *args[:-1], "-B", "19").stdout
    assert f"{ran['mmd']:.6g}" in table and "MMD estimate (run)" in table


def test_the_compiled_loops_falling_back_is_one_warning_line(monkeypatch):
    # without numba the command still runs, on the numpy twins, and says so in one line
    from monk_framework.numerics import compiled

    def no_numba():
        compiled._fall_back("numba cannot be imported (a test)")
        return None

    monkeypatch.setitem(compiled._STATE, "warned", False)
    monkeypatch.setitem(compiled._STATE, "numba", None)
    monkeypatch.setitem(compiled._STATE, "switch", True)  # on, even where MONK_COMPILED=0 runs the suite
    monkeypatch.setattr(compiled, "_numba", no_numba)
    result = invoke("run", "-k", "rbf", "-e", "monk-bcd-fast", "-d", "gauss", "--data-param", "n=200", "--json")
    assert result.exit_code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]
    assert len(warned) == 1 and "numpy references" in warned[0] and "Traceback" not in result.stderr
    assert "CompiledLoopsWarning" not in result.stderr  # not Python's two-line form
    assert json.loads(result.stdout)["mmd2"] > 0


def test_the_common_guesses_work_files_as_arguments_short_flags_and_defaults(tmp_path):
    # monkfw test X.csv Y.csv; -x/-y; -q after the subcommand; no -k/-e: rbf (median) and u-stat
    gen = np.random.default_rng(3)
    np.savetxt(tmp_path / "x.csv", gen.normal(size=(30, 2)), delimiter=",")
    np.savetxt(tmp_path / "y.txt", gen.normal(0.8, 1.0, size=(25, 2)))  # numbers in a .txt file
    x, y = str(tmp_path / "x.csv"), str(tmp_path / "y.txt")
    by_args = invoke("test", x, y, "-B", "99", "--json")
    assert by_args.exit_code == 0, by_args.output
    assert "No kernel given: rbf with sigma by the median heuristic" in by_args.stderr
    assert "No estimator given: u-stat" in by_args.stderr
    explicit = invoke("test", "-k", "rbf", "-e", "u-stat", "--x", x, "--y", y, "-B", "99", "--json")
    short = invoke("test", "-x", x, "-y", y, "-B", "99", "--json", "-q")
    assert short.exit_code == 0 and short.stderr.strip() == ""  # -q after the subcommand
    got = [json.loads(r.stdout) for r in (by_args, explicit, short)]
    assert got[0]["statistic"] == got[1]["statistic"] == got[2]["statistic"]
    assert got[0]["pvalue"] == got[1]["pvalue"] and got[0]["kernel"] == "rbf" and got[0]["estimator"] == "u-stat"
    ran = invoke("run", x, y, "--json")
    assert ran.exit_code == 0 and json.loads(ran.stdout)["estimator"] == "u-stat"
    # "rerun with --debug" is most often followed by adding it at the end of the command
    for command in ("run", "test", "describe"):
        args = ["nope"] if command == "describe" else [x, y, "-k", "nope"]
        debugged = invoke(command, *args, "--debug")
        assert debugged.exit_code == 2 and "Traceback (most recent call last)" in debugged.stderr
        assert "Traceback" not in invoke(command, *args).stderr


def test_the_default_kernel_follows_the_data_kind(tmp_path):
    (tmp_path / "x.fa").write_text("".join(f">s{i}\nACGTTGCA{'ACGT'[i % 4]}\n" for i in range(8)))
    (tmp_path / "y.txt").write_text("".join(f"ACGTAGCA{'ACGT'[i % 4]}\n" for i in range(8)))
    result = invoke("run", str(tmp_path / "x.fa"), str(tmp_path / "y.txt"), "-p", "n=2", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kernel"] == "ssk" and "No kernel given: ssk (for strings" in result.stderr
    spliced = invoke("run", "-d", "splice-ei-ie", "--data-param", "n=10", "-p", "n=2", "--json")
    assert spliced.exit_code == 0 and json.loads(spliced.stdout)["kernel"] == "ssk"
    # files of two kinds: refused before either is read, each named with why it is that kind
    np.save(tmp_path / "v.npy", np.zeros((8, 2)))
    for args in (("y.txt", "v.npy"), ("v.npy", "y.txt")):
        mixed = invoke("test", *(str(tmp_path / a) for a in args))
        assert mixed.exit_code == 2 and "the two samples must be of one kind" in mixed.stderr
        assert "(a .txt file is strings, one a line, unless its first data line is numbers: 'ACGTAGCAA' is not)" in mixed.stderr
    # an empty .txt file is not taken for strings: the loader names it
    (tmp_path / "empty.txt").write_text("\n\n")
    empty = invoke("run", str(tmp_path / "empty.txt"), str(tmp_path / "v.npy"))
    assert empty.exit_code == 1 and "empty.txt: holds no data rows" in empty.stderr
    # with a kernel named, it reads the .txt file as its kind: no refusal here
    assert invoke("run", "-k", "ssk", "-p", "n=2", str(tmp_path / "x.fa"), str(tmp_path / "y.txt")).exit_code == 0


def test_long_work_writes_plain_progress_lines_when_stderr_is_not_a_terminal(monkeypatch):
    # a log file or a batch job: no bar, but a line at most every PLAIN_PROGRESS_EVERY seconds
    # with the time left (here every report, so that a short job shows them)
    from monk_framework.app import progress_bar

    monkeypatch.setattr(progress_bar, "PLAIN_PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(progress_bar, "PLAIN_PROGRESS_FIRST", 0.0)
    ran = invoke("run", "-k", "rbf", "-p", "sigma=1", "-e", "monk-bcd", "-p", "n_iter=40", "--data-param", "n=100", "--json")
    assert ran.exit_code == 0, ran.output
    lines = [line for line in ran.stderr.splitlines() if line.startswith("estimate: iterations (Q = 11)")]
    assert lines and re.fullmatch(r"estimate: iterations \(Q = 11\) \d+/40 \(\d+%\), \d+ s elapsed(, about \d+ s left)?", lines[0])
    json.loads(ran.stdout)  # the result stays whole
    tested = invoke("test", "-k", "rbf", "-p", "sigma=1", "-e", "u-stat", "--data-param", "n=50", "-B", "200", "--json")
    assert tested.exit_code == 0 and re.search(r"^test: permutations \d+/200 \(\d+%\)", tested.stderr, flags=re.M)
    quiet = invoke("test", "-k", "rbf", "-p", "sigma=1", "--data-param", "n=50", "-B", "200", "--json", "-q")
    assert quiet.exit_code == 0 and quiet.stderr.strip() == ""
    # between the lines, at least PLAIN_PROGRESS_EVERY seconds (none at all in a short job)
    monkeypatch.setattr(progress_bar, "PLAIN_PROGRESS_EVERY", 3600.0)
    monkeypatch.setattr(progress_bar, "PLAIN_PROGRESS_FIRST", 3600.0)
    assert "permutations" not in invoke("test", "-k", "rbf", "-p", "sigma=1", "--data-param", "n=50", "-B", "200").stderr


@pytest.mark.parametrize("estimator", ["u-stat", "v-stat", "monk-bcd-fast", "rff", "incomplete-u", "monk-embedding-mmd"])
def test_one_seed_gives_the_same_bits_in_run_and_python_and_the_test_agrees_to_round_off(estimator):
    # what docs/estimators.md#seeds states: run and Python are one code path (the same bits);
    # a global test sums the same draws from its pooled Gram matrix in another order
    from monk_framework import estimate

    args = ["-k", "rbf", "-e", estimator, "--data-param", "n=80", "--seed", "4", "--json"]
    ran = json.loads(invoke("run", *args).stdout)
    tested = json.loads(invoke("test", *args, "--relabel", "global", "-B", "19").stdout)
    X, Y = get_dataset("gauss", n=80).sample(4)
    python = estimate(X, Y, kernel="rbf", estimator=estimator, rng=4)
    assert ran["mmd2"] == python.mmd2 and ran["mmd"] == python.mmd
    assert tested["statistic_mmd2"] == pytest.approx(python.mmd2, rel=1e-13, abs=0)


def test_a_terminal_bar_shortens_large_counts():
    # the characters of a file read showed as 16777279/70674009
    from monk_framework.app.progress_bar import counts

    assert counts(16_777_279, 70_674_009) == "16.8M/70.7M"
    assert counts(2_097, 3_000) == "2,097/3,000" and counts(1.5, 3) == "1.5/3"
    assert counts(3e9, 1.2e10) == "3.0G/12.0G" and counts(0, 2e12) == "0.0T/2.0T"


def test_kernel_and_estimator_options_take_specs_as_python_does():
    by_spec = json.loads(invoke("run", "-k", "rbf:sigma=1", "-e", "monk-bcd:n_blocks=5", "--data-param", "n=30", "--json").stdout)
    by_params = json.loads(invoke("run", "-k", "rbf", "-e", "monk-bcd", "-p", "sigma=1", "-p", "n_blocks=5", "--data-param", "n=30", "--json").stdout)
    assert by_spec["mmd2"] == by_params["mmd2"] and by_spec["kernel_params"] == {"sigma": 1.0}
    tested = json.loads(invoke("test", "-k", "rbf:sigma=1", "-e", "monk-bcd:n_blocks=5", "--data-param", "n=30", "-B", "19", "--json").stdout)
    assert tested["n_blocks"] == 5
    both = invoke("run", "-k", "rbf:sigma=1", "-p", "sigma=2", "--data-param", "n=30")
    assert both.exit_code == 2 and "The kernel parameter 'sigma' is given in its spec and by --param; keep one." in both.stderr
    # the form the table shows, pasted back
    shown = json.loads(invoke("run", "-k", "rbf(sigma=1)", "-e", "monk-bcd(n_blocks=5)", "--data-param", "n=30", "--json").stdout)
    assert shown["mmd2"] == by_spec["mmd2"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data-param", "n=30", "--data-param", "n=40"], "--data-param n is given twice; give each data set parameter once."),
        (["-p", "sigma=1", "-p", "sigma=2"], "--param sigma is given twice; give each parameter once."),
        (["-o", "PIPE"], "is not a regular file (a device, pipe or socket); give a file name."),
    ],
)
def test_an_option_given_twice_or_a_device_as_output_is_refused_before_the_work(tmp_path, args, message):
    # the last value won silently; and a device given as --output was renamed over (as root,
    # /dev/full became a regular file): a pipe stands for it here
    import os

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    args = [str(pipe) if a == "PIPE" else a for a in args]
    result = invoke("run", "-k", "rbf", "-d", "gauss", *(["--data-param", "n=30"] if "--data-param" not in args else []), *args)
    assert result.exit_code == 2 and message in result.stderr
    assert not pipe.is_file()  # still the pipe


def test_a_stage_whose_first_report_comes_late_is_timed_from_the_stage_before(monkeypatch):
    # three Gram matrices of a costly kernel: the first report ("1/3") comes after the
    # first matrix's 7 s, so the time left is 14 s, not 0 (the stage began before it told)
    from rich.console import Console

    from monk_framework.app import progress_bar as cli

    clock = [100.0]
    monkeypatch.setattr(cli.time, "monotonic", lambda: clock[0])
    console = Console(stderr=False, file=__import__("io").StringIO(), width=200)
    monkeypatch.setattr(cli, "stderr", console)
    monkeypatch.setattr(cli, "PLAIN_PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(cli, "PLAIN_PROGRESS_FIRST", 0.0)
    bar = cli.ProgressBar("estimate")
    assert bar.plain  # a StringIO is not a terminal
    clock[0] = 107.0
    bar(1, 3, "Gram matrices")
    clock[0] = 110.5
    bar(1.5, 3, "Gram matrices")  # a share between counts: no count shown, and no double space
    clock[0] = 113.0
    bar(2, 3, "permutations")  # a new stage: timed from the last report (113 - 110.5 spent on 2/3)
    lines = console.file.getvalue().splitlines()
    assert lines[0] == "estimate: Gram matrices 1/3 (33%), 7 s elapsed, about 14 s left"
    assert lines[1] == "estimate: Gram matrices (50%), 10 s elapsed, about 10 s left"
    assert lines[2] == "estimate: permutations 2/3 (67%), 13 s elapsed, about 1 s left"
    # a fine stage whose first band carried the warm-up (threads starting, pages faulted in:
    # 5 s for 0.3 %, then the other bands in 1 s): no estimate from that band alone (it
    # said "about 1648 s left" for a 6 s stage), then one from the rate after it
    clock[0] = 118.0
    bar(600, 200_000, "Gram matrix")
    clock[0] = 118.5
    bar(120_000, 200_000, "Gram matrix")
    lines = console.file.getvalue().splitlines()
    assert lines[3] == "estimate: Gram matrix 600/200,000 (0%), 18 s elapsed"
    assert lines[4] == "estimate: Gram matrix 120,000/200,000 (60%), 18 s elapsed, about 0 s left"
    # long spans in the units people read them in; n_iter = 10**18 once read "about
    # 4965338753307636888703912726981771264 s left"
    clock[0] = 100.0 + 2 * 3600  # 79,999 left at 119,401 per 7182 s since the stage's first report
    bar(120_001, 200_000, "Gram matrix")
    lines = console.file.getvalue().splitlines()
    assert lines[5] == "estimate: Gram matrix 120,001/200,000 (60%), 2.0 h elapsed, about 80 min left"
    assert [cli.ProgressBar._duration(t) for t in (89.4, 91, 5400, 47 * 3600, 4 * 86400, 1e30)] == [
        "89 s",
        "2 min",
        "1.5 h",
        "47.0 h",
        "4.0 days",
        "more than ten years",
    ]


@pytest.mark.parametrize("columns", ["0", "5"])
def test_a_width_nobody_reads_still_draws_the_result(columns):
    # COLUMNS=0 printed nothing at all (exit 0), COLUMNS=5 one letter a line
    import os

    exe = shutil.which("monkfw") or shutil.which("monkfw", path=str(__import__("pathlib").Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "monk_framework"]
    env = {**os.environ, "COLUMNS": columns}
    ran = subprocess.run([*cmd, "run", "-k", "rbf", "-p", "sigma=1", "--data-param", "n=30"], capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 0, ran.stderr
    shown = re.search(r"│ MMD\^2 +│ ([-0-9.e+]+) +│", ran.stdout)
    assert shown, ran.stdout
    assert "u-stat with rbf" in ran.stdout  # the title on one line
    # the number the table shows is the estimate's, to its printed digits
    X, Y = get_dataset("gauss", n=30).sample(0)
    from monk_framework import estimate

    assert float(shown.group(1)) == pytest.approx(estimate(X, Y, kernel="rbf:sigma=1", estimator="u-stat", rng=0).mmd2, rel=1e-9)


def test_shell_completion_ends_as_click_ends_it_not_as_a_plugins_exit():
    # typer and click end completion with sys.exit: that was reported as "the work was ended
    # by a call to sys.exit(0) outside the library (in a plugin?)", with exit code 1
    import os

    exe = shutil.which("monkfw") or shutil.which("monkfw", path=str(__import__("pathlib").Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "monk_framework"]
    env = {**os.environ, "_MONKFW_COMPLETE": "complete_bash", "COMP_WORDS": "monkfw ru", "COMP_CWORD": "1"}
    completed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0 and completed.stdout.split() == ["run"] and completed.stderr == ""
    # the shell named, not detected: under sh (or no shell at all) typer refuses "Shell sh not supported"
    named = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run([*cmd, "--show-completion", "bash"], capture_output=True, text=True, timeout=120, env=named)
    assert shown.returncode == 0 and "complete -o default -F _monkfw_completion monkfw" in shown.stdout
    assert shown.stderr == ""


def test_a_terminal_that_cannot_encode_a_character_gets_it_escaped(tmp_path):
    # with PYTHONIOENCODING=ascii (LANG=C on an old system, a Windows console) `monkfw
    # describe rbf` ended in "internal error: UnicodeEncodeError" at the sigma of its table
    import os

    exe = shutil.which("monkfw") or shutil.which("monkfw", path=str(__import__("pathlib").Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "monk_framework"]
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run([*cmd, "describe", "rbf"], capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"\\u03c3" in done.stdout and "σ" in done.stdout.decode("unicode_escape")
    # in a Python caller's process, the stream keeps its own rule after the command
    import io

    from monk_framework.app.cli import app as cli_app

    wrapper = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    before, sys.stdout = sys.stdout, wrapper
    try:
        cli_app(["describe", "rbf"], standalone_mode=False)
    finally:
        sys.stdout = before
    assert wrapper.errors == "strict"


@pytest.mark.parametrize("command", ["run", "test"])
def test_a_save_that_fails_still_prints_the_result_before_the_error(monkeypatch, tmp_path, command):
    # on a full disk `-o r.json` lost the computed result: the error alone was printed
    from monk_framework.app import render
    from monk_framework.core.errors import MonkError

    def full(path, data):
        raise MonkError(f"Cannot write {str(path)!r}: No space left on device.")

    monkeypatch.setattr(render, "write_atomically", full)
    result = invoke(
        command,
        "-d",
        "gauss",
        "--data-param",
        "n=30",
        "-B" if command == "test" else "--seed",
        "99" if command == "test" else "0",
        "--json",
        "-o",
        str(tmp_path / "r.json"),
    )
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("No space left on device.")
    printed = json.loads(result.stdout)
    assert printed["type"] == ("mmd" if command == "run" else "permutation-test") and math.isfinite(printed["mmd2" if command == "run" else "statistic"])
    assert not (tmp_path / "r.json").exists()


def test_reading_a_large_table_of_numbers_shows_progress(monkeypatch, tmp_path):
    # a CSV of 80 MB took 5 s to read without a word (800 MB: nearly a minute)
    from monk_framework import load_sample
    from monk_framework.app import progress_bar
    from monk_framework.io import loading

    monkeypatch.setattr(progress_bar, "PLAIN_PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(progress_bar, "PLAIN_PROGRESS_FIRST", 0.0)
    monkeypatch.setattr(loading, "READ_REPORT_CHARS", 1000)
    X = np.random.default_rng(0).normal(size=(500, 3))
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.tsv", X + 1, delimiter="\t")
    ran = invoke("run", "-k", "rbf", "-p", "sigma=1", "-e", "v-stat", str(tmp_path / "x.csv"), str(tmp_path / "y.tsv"), "--json")
    assert ran.exit_code == 0, ran.output
    for name in ("x.csv", "y.tsv"):
        lines = [line for line in ran.stderr.splitlines() if line.startswith(f"data: reading {name} ")]
        assert lines and re.match(rf"data: reading {re.escape(name)} \d[\d,]*/[\d,]+ \(\d+%\)", lines[0]), ran.stderr
    # in Python: the characters read, rising to the file's size, and the same numbers
    heard: list[tuple[int, int, str]] = []
    got = load_sample(tmp_path / "x.csv", progress=lambda done, total, what: heard.append((done, total, what)))
    size = (tmp_path / "x.csv").stat().st_size
    assert np.array_equal(got, np.loadtxt(tmp_path / "x.csv", delimiter=","))
    assert heard[-1] == (size, size, "reading x.csv") and all(a[0] <= b[0] for a, b in zip(heard, heard[1:]))
    assert len(heard) >= size // 1100  # one report a READ_REPORT_CHARS (a line may cross it)


@pytest.mark.parametrize("name", ["bad\nname.csv", "esc\x1b[31m.csv", "tab\there.csv"])
def test_a_control_character_in_a_file_name_keeps_the_message_on_one_line(tmp_path, name):
    # a newline in the name split the error ("Error: bad" on one line, the rest on the
    # next); an escape sequence would have recoloured the terminal
    (tmp_path / name).write_text("1,2\n3,1.2.3\n")
    np.save(tmp_path / "y.npy", np.zeros((4, 2)))
    result = invoke("run", str(tmp_path / name), str(tmp_path / "y.npy"))
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert result.exit_code == 1 and len(lines) == 1
    shown = name.replace("\n", "\\n").replace("\x1b", "\\x1b").replace("\t", "\\t")
    assert lines[0].endswith(f"{shown}, line 2, column 2: cannot read '1.2.3' as a number.")
    assert "\x1b" not in result.stderr


@pytest.fixture
def wandering_estimator(tmp_path):
    """A throwaway estimator whose estimate changes the working directory, as careless
    plugin code might (its import is already guarded by the registry; its calls are not)."""
    from typing import ClassVar

    import attrs

    from monk_framework import Estimate, MMDEstimator

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    @attrs.frozen(kw_only=True)
    class Wandering(MMDEstimator):
        name: ClassVar[str] = "wandering"
        summary: ClassVar[str] = "The V-statistic, computed after a chdir."
        formula: ClassVar[str] = "||mean k(., x) - mean k(., y)||^2"

        def compute_estimate(self, kernel, X, Y, rng, resources):
            os.chdir(elsewhere)
            v = _v_statistic(kernel, X, Y)
            return Estimate(mmd2=v, mmd=max(v, 0.0) ** 0.5)

    with _registered_estimator(Wandering):
        yield elsewhere


def test_an_output_is_saved_where_the_user_named_it_though_a_plugin_changed_directory(wandering_estimator, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(home)
    result = invoke("run", "-k", "rbf", "-e", "wandering", "--data-param", "n=20", "-o", "result.json", "--json")
    assert result.exit_code == 0, result.output
    assert os.getcwd() == str(wandering_estimator)  # the plugin did move the process
    assert "Result saved to result.json." in result.stderr  # named as given
    saved = json.loads((home / "result.json").read_text())
    assert saved == json.loads(result.stdout) and saved["estimator"].startswith("wandering")
    assert not (wandering_estimator / "result.json").exists()
