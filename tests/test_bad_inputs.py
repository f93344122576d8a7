"""Bad inputs, as a new user gives them: every case runs the CLI in a real process.

The cases run in a few processes, each running the command line's own entry point once
per case with every error handler the console script has (a handful also run as their
own ``monkfw`` process, which must give the same). Each case checks
the exit code, that the first line of stderr names the problem, and
that no traceback and no "internal error" appear (that path is for real bugs only).
Cases that must *succeed* on extreme but valid input check that the number printed is
finite and not the 0 an overflow would give. Each process runs under an address-space
limit (``ulimit -v``) of 2 GiB, so a case that allocates in proportion to a user number
fails here instead of passing on a large machine. docs/studies/reliability.md lists the same
cases (a test keeps the two in step).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

#: the address-space limit of each case's process
LIMIT_BYTES = 2 * 2**30

SMALL = ["-d", "gauss", "--data-param", "n=30"]
RUN = ["run", "-k", "rbf", "-e", "u-stat"]
TEST = ["test", "-k", "rbf", "-e", "u-stat"]


def _files(root: Path) -> None:
    """The data files the cases name, written once into the case directory."""
    rng = np.random.default_rng(0)
    np.save(root / "x.npy", rng.normal(size=(40, 2)))
    np.save(root / "y.npy", rng.normal(size=(40, 2)))
    np.save(root / "y3.npy", rng.normal(size=(40, 3)))
    np.save(root / "tiny.npy", rng.normal(size=(3, 2)))
    np.save(root / "two-x.npy", np.array([[0.0], [0.1]]))
    np.save(root / "two-y.npy", np.array([[30.0], [30.2]]))
    np.save(root / "cube.npy", rng.normal(size=(4, 3, 2)))
    np.save(root / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(root / "nan.npy", np.array([[1.0, np.nan], [2.0, 3.0]]))
    np.save(root / "big1.npy", rng.normal(size=(40, 2)) * 1e200)
    np.save(root / "big2.npy", rng.normal(0.5, 1.0, size=(40, 2)) * 1e200)
    np.save(root / "huge.npy", np.array([[-1.5e308], [1.5e308], [-1.4e308], [1.4e308]]))
    np.save(root / "outlier.npy", _with_outlier())
    bits = np.random.default_rng(1)  # its own stream: the other files keep their draws
    np.save(root / "binary-x.npy", (bits.random((50, 1)) < 0.8).astype(float))
    np.save(root / "binary-y.npy", (bits.random((50, 1)) < 0.7).astype(float))
    np.save(root / "outlier1e8.npy", _with_outlier(1e8))
    np.save(root / "outlier1e20.npy", _with_outlier(1e20))
    (root / "garbage.npy").write_bytes(b"this is not an array\n" * 8)
    from numpy.lib import format as npy

    with (root / "claims.npy").open("wb") as handle:
        npy.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 3)})
        handle.write(b"\0" * 64)
    (root / "cell.csv").write_text("1,2\n3,oops\n")
    (root / "ragged.csv").write_text("1,2\n3\n")
    (root / "empty.csv").write_text("\n\n")
    (root / "inf.csv").write_text("1,2\ninf,3\n")
    (root / "header.csv").write_text("a,b\n")
    (root / "latin1.csv").write_bytes("1,2\n\xe9,3\n".encode("latin-1"))
    (root / "utf16.csv").write_text("1,2\n3,4\n", encoding="utf-16")  # PowerShell's '>'
    (root / "data.xlsx").write_text("x")
    (root / "empty.txt").write_text("\n\n")
    (root / "noheader.fa").write_text("ACGT\n>x\nA\n")
    (root / "nosequence.fa").write_text(">a\nAC\n>b\n>c\nA\n")
    (root / "gt.fa").write_text(">a\nAC>G\n")
    (root / "hash.fa").write_text(">a\nACGT\n>b\nAC#GT\n")  # a character that is no residue
    (root / "dna1.fa").write_text("".join(f">s{i}\nACGTTGCA{'ACGT'[i % 4]}\n" for i in range(12)))
    (root / "dna2.fa").write_text("".join(f">s{i}\nacgttgca{'acgt'[i % 4]}\n" for i in range(12)))
    (root / "adir").mkdir()
    (root / "blocker").write_text("a file where a directory is expected")
    os.mkfifo(root / "pipe.csv")
    os.mkfifo(root / "pipe.json")
    (root / "loop.npy").symlink_to("loop.npy")
    (root / "loop.json").symlink_to("loop.json")
    (root / "data.json").symlink_to("x.npy")  # a result's name for the data's file
    (root / "notes.json").write_text('{"my": "own notes"}\n')  # JSON, but no monkfw result
    (root / "tabs.csv").write_text("".join(f"{a!r}\t{b!r}\n" for a, b in rng.normal(size=(40, 2)).tolist()))
    np.save(root / "complex.npy", rng.normal(size=(40, 2)) + 1j)
    (root / "dangling.npy").symlink_to("gone.npy")
    np.savetxt(root / "nums.txt", rng.normal(0.5, 1.0, size=(40, 2)))
    (root / "lead-missing.csv").write_text(",2.5\n1.0,2.0\n3.0,4.0\n")
    (root / "short.fa").write_text(">a\nACG\n>b\nAC\n>c\nGT\n")
    X = rng.normal(size=(40, 2))
    (root / "semicolons.csv").write_text("".join(f"{a!r};{b!r}\n" for a, b in X.tolist()))
    # what a spreadsheet with a decimal comma writes when it quotes every cell
    (root / "quoted-semicolons.csv").write_text("".join(f'"{a:.3f}";"{b:.3f}"\n'.replace(".", ",") for a, b in X.tolist()))
    # what a word processor writes for '-': the typographic minus sign
    (root / "minus-sign.csv").write_text("".join(f"{a:.3f},{b:.3f}\n".replace("-", "\u2212") for a, b in X.tolist()), encoding="utf-8")
    # Fortran's exponent letter: not numbers to Python, so a .txt file of strings
    (root / "fortran.txt").write_text("".join(f"{a:.6E} {b:.6E}\n".replace("E", "D") for a, b in X.tolist()))
    (root / "bom.csv").write_text("".join(f"{a!r},{b!r}\n" for a, b in X.tolist()), encoding="utf-8-sig")
    (root / "aligned.txt").write_text("".join(f"  {a!r}\t\t {b!r}  \n" for a, b in X.tolist()))
    far_x, far_y = _far_from_origin()
    np.save(root / "far-x.npy", far_x)
    np.save(root / "far-y.npy", far_y)
    np.save(root / "cut.npy", X[:30])
    np.save(root / "small-units-x.npy", 1e-4 * X)
    np.save(root / "small-units-y.npy", 1e-4 * rng.normal(0.5, 1.0, size=(40, 2)))
    (root / "cut.npy").write_bytes((root / "cut.npy").read_bytes()[:-304])
    (root / "pandas-names.csv").write_text("0,1\n" + "".join(f"{a!r},{b!r}\n" for a, b in X.tolist()))
    (root / "trailing.csv").write_text("".join(f"{a!r},{b!r},\n" for a, b in X.tolist()))
    (root / "numbered.fa").write_text(">a\n     1 acgtacgtac gtacgtacgt\n>b\n     1 ttgcaacgtt\n")
    (root / "dna1.fa.gz").write_bytes(b"\x1f\x8b\x08\x00")
    (root / "gzipped.csv").write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xfe" + bytes(range(256)))
    (root / "npy.txt").write_bytes((root / "x.npy").read_bytes())
    (root / "sep-comma.csv").write_text("sep=,\n" + "".join(f"{a!r},{b!r}\n" for a, b in X.tolist()))
    (root / "sep-semicolon.csv").write_text("sep=;\n" + "".join(f"{a!r};{b!r}\n" for a, b in X.tolist()))
    (root / "commas.tsv").write_text("".join(f"{a!r},{b!r}\n" for a, b in X.tolist()))
    _results_folders(root)


def _results_folders(root: Path) -> None:
    """Results directories of `experiment exp1 --quick`, each with one fault."""
    from monk_framework.app.experiments import get_experiment
    from monk_framework.app.experiments.runner import Cell, record_checksum

    exp = get_experiment("exp1", quick=True)
    manifest = json.dumps({"experiment": exp.name, "config": exp.config()})
    settings = {"setting": "gauss", "n": 200, "run": 0}
    record = {"key": Cell(settings).key, "settings": settings, "rows": [{"n": 200, "value": 1.0}], "seconds": 0.1, "seq": 1}
    record["sha"] = record_checksum(record)
    good = json.dumps(record)
    faults = {
        "jnan": (manifest, good.replace('"value": 1.0', '"value": NaN')),
        "jbig": (manifest, good.replace('"value": 1.0', '"value": 1e400')),
        "jdeep": (manifest, "[" * 50000 + "]" * 50000 + "\n" + good),  # not the last line: not a torn write
        "mshape": ("[1, 2]", good),
    }
    for name, (man, line) in faults.items():
        (root / name).mkdir()
        (root / name / "manifest.json").write_text(man)
        (root / name / "cells.jsonl").write_text(line + "\n")
    (root / "lockdir" / ".lock").mkdir(parents=True)
    for name, kind in (("jdir", "dir"), ("jfifo", "fifo"), ("mfifo", "manifest-fifo")):
        (root / name).mkdir()
        if kind == "manifest-fifo":
            os.mkfifo(root / name / "manifest.json")
            continue
        (root / name / "manifest.json").write_text(manifest)
        if kind == "dir":
            (root / name / "cells.jsonl").mkdir()
        else:
            os.mkfifo(root / name / "cells.jsonl")
    (root / "mine").mkdir()
    (root / "mine" / "results.csv").write_text("my,own,results\n")


#: (id, arguments, expected exit code, regex the first stderr line must match)
CASES: list[tuple[str, list[str], int, str]] = [
    # -- the command line itself ------------------------------------------------------
    ("unknown-command", ["estimate"], 2, r"No such command 'estimate'"),
    ("unknown-option", [*RUN, *SMALL, "--sigma", "2"], 2, r"No such option: --sigma"),
    ("option-twice", [*RUN, *SMALL, "-k", "laplace"], 2, r"--kernel/-k was given 2 times \('rbf', 'laplace'\); it takes one value"),
    (
        "kernels-without-aggregate",
        [*TEST, *SMALL, "-k", "laplace"],
        2,
        r"-k was given 2 times \(rbf, laplace\): a test uses one "
        r"kernel. Several kernels make an aggregated test: add --aggregate agg",
    ),
    ("unknown-kernel", ["run", "-k", "rbff", "-e", "u-stat"], 2, r"Unknown kernel 'rbff'.*Did you mean 'rbf'"),
    ("unknown-estimator", ["run", "-k", "rbf", "-e", "monk"], 2, r"Unknown estimator 'monk'"),
    ("unknown-dataset", [*RUN, "-d", "gaus"], 2, r"Unknown dataset 'gaus'.*Did you mean 'gauss'"),
    ("unknown-param", [*RUN, *SMALL, "-p", "sgma=2"], 2, r"sgma.*Did you mean 'sigma'"),
    ("param-without-value", [*RUN, *SMALL, "-p", "sigma"], 2, r"--param.*key=value"),
    ("negative-sigma", [*RUN, *SMALL, "-p", "sigma=-1"], 2, r"'sigma' parameter of RBFKernel must be a float > 0"),
    ("text-sigma", [*RUN, *SMALL, "-p", "sigma=wide"], 2, r"'sigma'.*Got 'wide'"),
    (
        "sigma-below-float64",
        [*RUN, *SMALL, "-p", "sigma=1e-400"],
        2,
        r"--param sigma: '1e-400' is below float64's smallest positive number \(about "
        r"4.9e-324\): it would be read as 0",
    ),
    ("nan-sigma", [*RUN, *SMALL, "-p", "sigma=nan"], 2, r"'sigma'.*must be a float > 0"),
    ("zero-blocks", ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "n_blocks=0"], 2, r"'n_blocks'.*>= 1"),
    (
        "too-many-blocks",
        ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "n_blocks=40"],
        1,
        r"X has 30 point\(s\) but estimator 'monk-bcd' needs at "
        r"least 80 \(n_blocks=40",
    ),
    ("bad-variant", ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "variant=fast"], 2, r"'variant'.*'authors', 'paper'"),
    ("bad-report", ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "report=last"], 2, r"'report'.*'before-update', 'final'"),
    (
        "ridge-beyond-the-kernel",
        ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "ridge=1e300"],
        2,
        r"Estimator 'monk-bcd': ridge = 1e\+300 exceeds the kernel's largest k\(x, x\) = 1 on these data",
    ),
    (
        "authors-ridge-on-small-values",
        ["run", "-k", "linear", "-e", "monk-bcd-fast", "--x", "small-units-x.npy", "--y", "small-units-y.npy"],
        2,
        r"ridge = 1e-05 exceeds the kernel's largest k\(x, x\) = .*ridge=auto is the authors' absolute 1e-5",
    ),
    ("bad-degree", ["run", "-k", "polynomial", "-e", "u-stat", *SMALL, "-p", "degree=2.5"], 2, r"'degree'.*int >= 1"),
    ("zero-permutations", [*TEST, *SMALL, "-B", "0"], 2, r"Invalid value for '--permutations' / '-B'"),
    ("alpha-above-one", [*TEST, *SMALL, "--alpha", "2"], 2, r"--alpha must be a number in \(0, 1\); got 2.0"),
    ("alpha-zero", [*TEST, *SMALL, "--alpha", "0"], 2, r"--alpha must be a number in \(0, 1\); got 0.0"),
    ("bad-relabel", [*TEST, *SMALL, "--relabel", "some"], 2, r"relabel must be one of 'auto', 'within-blocks', 'global'; got 'some'"),
    ("bad-method", [*TEST, *SMALL, "--contamination", "2", "--method", "best"], 2, r"method must be one of 'auto', 'clip', 'dc', 'mom'; got 'best'"),
    ("negative-contamination", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "-1"], 2, r"contamination must lie between 0 and the 60 points"),
    ("half-contamination", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "0.7"], 2, r"contamination as a fraction must lie in \[0, 1/2\)"),
    ("bad-max-memory", [*RUN, *SMALL, "--max-memory", "lots"], 2, r"max_memory: cannot read 'lots'"),
    ("unknown-memory-unit", [*RUN, *SMALL, "--max-memory", "2XB"], 2, r"max_memory: unknown unit 'XB' in '2XB'; the units are B, KB, MB, GB, TB, PB"),
    ("negative-max-memory", [*RUN, *SMALL, "--max-memory", "-2GB"], 2, r"max_memory must be more than 0 bytes; got '-2GB'"),
    # a count past int64 reached a float conversion deep in the work (internal error: OverflowError)
    (
        "count-past-int64",
        ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "n_iter=100000000000000000000"],
        2,
        r"The 'n_iter' parameter of MonkBCD must be an int >= 1\. Got 100000000000000000000 instead\. An int parameter is "
        r"at most 2\^63 - 1",
    ),
    (
        "flag-given-as-a-number",
        ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "trace=1"],
        2,
        r"The 'trace' parameter of MonkBCD must be one of 'auto', True, False\. Got 1 instead",
    ),
    (
        "permutations-past-int64",
        [*TEST, *SMALL, "-B", "100000000000000000000"],
        2,
        r"Invalid value for '--permutations' / '-B': Input should be less than or equal to 9223372036854775807",
    ),
    ("bad-aggregate", ["test", *SMALL, "--aggregate", "max"], 2, r"--aggregate must be one of agg, fuse; got 'max'"),
    ("zero-bandwidth", ["test", *SMALL, "--aggregate", "agg", "--bandwidths", "0,1"], 2, r"--bandwidths takes positive finite numbers; got '0,1'"),
    (
        "robust-aggregate-without-bandwidths",
        ["test", *SMALL, "--aggregate", "agg", "--contamination", "2"],
        2,
        r"--aggregate with --contamination needs --bandwidths fixed before seeing the data",
    ),
    (
        "negative-clip",
        ["test", "-k", "quadratic", *SMALL, "--contamination", "2", "--clip", "-1"],
        2,
        r"clip must be a radius > 0 \(a finite number\); got -1.0",
    ),
    (
        "huge-n-pairs",
        [*RUN[:3], "-e", "incomplete-u", *SMALL, "-p", "n_pairs=1000000000000"],
        1,
        r"Estimator 'incomplete-u': n_pairs = 1,000,000,000,000 pairs of each kind need about",
    ),
    (
        "huge-n-features",
        [*RUN[:3], "-e", "rff", *SMALL, "-p", "n_features=1000000000000"],
        1,
        r"Estimator 'rff': n_features = 1,000,000,000,000 random features of 30 points need about",
    ),
    (
        "huge-clip",
        ["test", "-k", "quadratic", *SMALL, "--contamination", "2", "--clip", "1e300"],
        2,
        r"clip must be a radius whose square is within float64's range",
    ),
    ("aggregate-with-sigma", ["test", *SMALL, "--aggregate", "agg", "-p", "sigma=1"], 2, r"--param sigma: --aggregate without -k uses the default collection"),
    (
        "aggregate-with-relabel",
        ["test", *SMALL, "--aggregate", "agg", "--relabel", "global"],
        2,
        r"--relabel chooses how a one-kernel permutation test relabels; --aggregate relabels",
    ),
    (
        "robust-with-relabel",
        [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "2", "--relabel", "global"],
        2,
        r"--relabel chooses how the permutation test relabels; --contamination runs another test",
    ),
    (
        "dc-with-blocks",
        [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "2", "--method", "dc", "--blocks", "5"],
        2,
        r"n_blocks \(--blocks\) sets the blocks of method='mom'; the test runs method='dc'",
    ),
    ("text-contamination", [*TEST, *SMALL, "--contamination", "some"], 2, r"--contamination takes a count"),
    ("grid-without-split", [*TEST, *SMALL, "--grid", "sigma=1,2"], 2, r"--grid chooses hyperparameters on part 1 of the split test: add --split"),
    ("grid-unknown-key", [*TEST, *SMALL, "--split", "--grid", "sgma=1,2"], 2, r"Unknown parameter of kernel 'rbf' \(in --grid\): 'sgma'"),
    ("data-param-unknown", [*RUN, "-d", "gauss", "--data-param", "size=30"], 2, r"Unknown parameter of dataset 'gauss': 'size'"),
    ("data-param-zero", [*RUN, "-d", "gauss", "--data-param", "n=0"], 2, r"'n' parameter.*>= 1"),
    ("data-param-text", [*RUN, "-d", "gauss", "--data-param", "n=many"], 2, r"'n' parameter of GaussDataset must be an int >= 1. Got 'many'"),
    ("data-param-with-files", [*RUN, "--x", "x.npy", "--y", "y.npy", "--data-param", "n=3"], 2, r"--data-param applies to --dataset only"),
    ("files-and-dataset", [*RUN, "--x", "x.npy", "--y", "y.npy", "-d", "gauss"], 2, r"either --dataset or --x/--y"),
    ("y-without-x", [*RUN, "--y", "y.npy"], 2, r"--y needs --x"),
    ("x-without-y", [*RUN, "--x", "x.npy"], 2, r"give Y as well as X \(a second file, or --y\)"),
    ("trace-not-iterative", [*RUN, *SMALL, "--trace"], 2, r"--trace: estimator 'u-stat' is not iterative"),
    ("test-with-embedding", ["test", "-k", "rbf", "-e", "mean", *SMALL], 2, r"'mean' estimates mean embeddings, not MMD"),
    ("string-kernel-on-vectors", ["run", "-k", "ssk", "-e", "u-stat", "--x", "x.npy", "--y", "y.npy"], 1, r"X holds numbers, but kernel 'ssk' needs strings"),
    (
        "vector-kernel-on-strings",
        ["run", "-k", "rbf", "-e", "u-stat", "--x", "dna1.fa", "--y", "dna2.fa"],
        1,
        r"X holds strings, but kernel 'rbf' needs "
        r"numeric vectors",
    ),
    ("negative-seed", [*RUN, *SMALL, "--seed", "-1"], 2, r"Invalid value for '--seed'"),
    ("unknown-backend", [*TEST, *SMALL, "--backend", "spark"], 2, r"Unknown backend 'spark': choose one of local, dask"),
    ("bad-scheduler", [*TEST, *SMALL, "--backend", "dask", "--scheduler", "notanaddress"], 2, r"scheduler address 'notanaddress' \(--scheduler\) is not valid"),
    (
        "scheduler-port-out-of-range",
        [*TEST, *SMALL, "--backend", "dask", "--scheduler", "tcp://scheduler-host:99999"],
        2,
        r"scheduler address 'tcp://scheduler-host:99999' \(--scheduler\) has port 99999; a TCP port is 1 to 65535",
    ),
    ("unknown-experiment", ["experiment", "exp3"], 2, r"Unknown experiment 'exp3'"),
    ("sizes-text", ["experiment", "exp1", "--sizes", "abc", "--out", "e1"], 2, r"--sizes takes comma-separated integers"),
    ("sizes-zero", ["experiment", "exp1", "--sizes", "0,5", "--out", "e2"], 2, r"sizes must be positive"),
    ("experiment-bad-spec", ["experiment", "exp1", "--quick", "-e", "monk-bcd:n_blocks", "--out", "e3"], 2, r"Bad parameter 'n_blocks'"),
    (
        "experiment-unknown-estimator",
        ["experiment", "exp1", "--quick", "-e", "monk-bdc", "--out", "e4"],
        2,
        r"Unknown estimator 'monk-bdc'. Did you mean "
        r"'monk-bcd'",
    ),
    ("journal-nan", ["experiment", "exp1", "--quick", "--out", "jnan"], 1, r"'jnan/cells.jsonl', line 1: it holds a number that is not finite"),
    ("journal-1e400", ["experiment", "exp1", "--quick", "--out", "jbig"], 1, r"'jbig/cells.jsonl', line 1: it holds a number that is not finite"),
    ("journal-deeply-nested", ["experiment", "exp1", "--quick", "--out", "jdeep"], 1, r"'jdeep/cells.jsonl', line 1: not a journal record"),
    ("manifest-wrong-shape", ["experiment", "exp1", "--quick", "--out", "mshape"], 1, r"'mshape/manifest.json' is not a manifest of a monkfw experiment"),
    (
        "journal-is-a-directory",
        ["experiment", "exp1", "--quick", "--out", "jdir", "--fresh"],
        1,
        r"'jdir/cells.jsonl' is a directory where this run writes a file; it is left alone",
    ),
    (
        "journal-is-a-pipe",
        ["experiment", "exp1", "--quick", "--out", "jfifo"],
        1,
        r"'jfifo/cells.jsonl' is not a regular file \(a directory, pipe or device\), so it is not a monkfw result",
    ),
    (
        "manifest-is-a-pipe",
        ["experiment", "exp1", "--quick", "--out", "mfifo"],
        1,
        r"'mfifo/manifest.json' is not a regular file \(a directory, pipe or device\), so it is not a monkfw result",
    ),
    ("lock-is-a-directory", ["experiment", "exp1", "--quick", "--out", "lockdir"], 1, r"results directory 'lockdir' \(its lock file .lock is a directory\)"),
    ("foreign-results-csv", ["experiment", "exp1", "--quick", "--out", "mine", "--fresh"], 1, r"'mine' has no manifest.json but holds results.csv"),
    ("csv-first-value-missing", [*RUN, "--x", "lead-missing.csv", "--y", "y.npy"], 1, r"lead-missing.csv, line 1, column 1: a missing value"),
    (
        "ssk-n-beyond-every-string",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "short.fa", "--y", "dna1.fa", "-p", "n=5"],
        2,
        r"'n' parameter of SubsequenceKernel is 5, but every string of X is shorter \(the longest has 3 characters\)",
    ),
    (
        "runs-beyond-memory",
        ["experiment", "exp1", "--quick", "--runs", "1000000000000", "--out", "e6"],
        1,
        r"exp1: [\d,]+ cells \(1,000,000,000,000 runs \(--runs\) for each of 18 settings\) need about",
    ),
    (
        "workers-beyond-memory",
        [*RUN, *SMALL, "--backend", "dask", "--workers", "1000000"],
        1,
        r"--workers 1,000,000 starts 1,000,000 worker processes of about",
    ),
    (
        "reshuffles-beyond-memory",
        ["run", "-k", "rbf", "-e", "monk-bcd-fast", *SMALL, "-p", "n_iter=100000000", "-p", "reshuffle_every=1"],
        1,
        r"monk-bcd-fast: n_iter=100,000,000 with reshuffle_every=1 draws 100,000,000 partitions of 60 points",
    ),
    (
        "trace-beyond-memory",
        ["run", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-p", "n_iter=1000000000000", "-p", "trace=true"],
        1,
        r"monk-bcd: trace=True with n_iter=1,000,000,000,000 records 1,000,000,000,001 values",
    ),
    ("experiment-out-is-a-file", ["experiment", "exp1", "--quick", "--out", "blocker"], 1, r"results directory 'blocker': it is a file, not a directory"),
    # -- data files ---------------------------------------------------------------------
    ("missing-file", [*RUN, "--x", "nope.npy", "--y", "y.npy"], 1, r"nope.npy: no such file"),
    ("symlink-loop-as-file", [*RUN, "--x", "loop.npy", "--y", "y.npy"], 1, r"loop.npy: is a loop of symbolic links, not a data file"),
    ("dangling-symlink-as-file", [*RUN, "--x", "dangling.npy", "--y", "y.npy"], 1, r"dangling.npy: is a symbolic link to 'gone.npy', which does not exist"),
    ("output-symlink-loop", [*RUN, "--x", "x.npy", "--y", "y.npy", "-o", "loop.json"], 2, r"--output 'loop.json' is a loop of symbolic links"),
    (
        "csv-separated-by-tabs",
        [*RUN, "--x", "tabs.csv", "--y", "y.npy"],
        1,
        r"tabs.csv, line 1, column 1: cannot read .* as a number. The values seem separated by tabs or spaces",
    ),
    (
        "complex-npy",
        [*RUN, "--x", "complex.npy", "--y", "y.npy"],
        1,
        r"X must be a numeric array; got dtype complex128 \(complex numbers are not vectors of reals",
    ),
    ("directory-as-file", [*RUN, "--x", "adir", "--y", "y.npy"], 1, r"adir: is a directory"),
    ("fifo-as-file", [*RUN, "--x", "pipe.csv", "--y", "y.npy"], 1, r"pipe.csv: is not a regular file"),
    ("unknown-suffix", [*RUN, "--x", "data.xlsx", "--y", "y.npy"], 1, r"unsupported file type '.xlsx'"),
    ("csv-bad-cell", [*RUN, "--x", "cell.csv", "--y", "y.npy"], 1, r"cell.csv, line 2, column 2: cannot read 'oops'"),
    ("csv-ragged", [*RUN, "--x", "ragged.csv", "--y", "y.npy"], 1, r"ragged.csv, line 2: has 1 columns where line 1 has 2"),
    ("csv-empty", [*RUN, "--x", "empty.csv", "--y", "y.npy"], 1, r"empty.csv: holds no data rows"),
    ("csv-inf", [*RUN, "--x", "inf.csv", "--y", "y.npy"], 1, r"inf.csv, line 2, column 1: 'inf' is not a finite number"),
    ("csv-header-only", [*RUN, "--x", "header.csv", "--y", "y.npy"], 1, r"header.csv, line 1: holds a header row but no data rows"),
    ("csv-not-utf8", [*RUN, "--x", "latin1.csv", "--y", "y.npy"], 1, r"latin1.csv, line 2: is not UTF-8 text \(invalid continuation byte\); save it as UTF-8"),
    ("csv-utf16", [*RUN, "--x", "utf16.csv", "--y", "y.npy"], 1, r"utf16.csv: is UTF-16 text, not UTF-8; save it as UTF-8"),
    ("npy-garbage", [*RUN, "--x", "garbage.npy", "--y", "y.npy"], 1, r"garbage.npy: is not a .npy file"),
    ("npy-pickle", [*RUN, "--x", "obj.npy", "--y", "y.npy"], 1, r"obj.npy: holds pickled Python objects"),
    ("npy-header-lies", [*RUN, "--x", "claims.npy", "--y", "y.npy"], 1, r"claims.npy: its header claims an array of shape \(1000000000000, 3\)"),
    ("npy-three-dimensional", [*RUN, "--x", "cube.npy", "--y", "y.npy"], 1, r"X has 3 dimensions \(shape \(4, 3, 2\)\)"),
    ("npy-nan", [*RUN, "--x", "nan.npy", "--y", "y.npy"], 1, r"X contains NaN at point 0, feature 1"),
    ("dimension-mismatch", [*RUN, "--x", "x.npy", "--y", "y3.npy"], 1, r"X has 2 feature\(s\) per point but Y has 3"),
    (
        "too-few-points",
        ["run", "-k", "rbf", "-e", "monk-bcd", "--x", "tiny.npy", "--y", "y.npy"],
        1,
        r"X has 3 point\(s\) but estimator 'monk-bcd' needs "
        r"at least 22",
    ),
    ("txt-empty", ["run", "-k", "ssk", "-e", "u-stat", "--x", "empty.txt", "--y", "dna1.fa"], 1, r"empty.txt: holds no strings"),
    (
        "fasta-no-header",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "noheader.fa", "--y", "dna1.fa"],
        1,
        r"noheader.fa, line 1: sequence data before the "
        r"first '>'",
    ),
    (
        "fasta-empty-record",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "nosequence.fa", "--y", "dna1.fa"],
        1,
        r"nosequence.fa, line 3: FASTA record has a header "  # noqa: E501 - one case per line
        r"but no sequence",
    ),
    ("fasta-gt-in-sequence", ["run", "-k", "ssk", "-e", "u-stat", "--x", "gt.fa", "--y", "dna1.fa"], 1, r"gt.fa, line 2, column 3: '>' inside a sequence line"),
    (
        "fasta-odd-character",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "hash.fa", "--y", "dna1.fa"],
        1,
        r"hash.fa, line 4, column 3: the character '#' \(U\+0023\) inside a sequence line",
    ),
    # -- numbers at the edges of float64 ----------------------------------------------
    (
        "exponential-tiny-sigma",
        ["run", "-k", "exponential", "-e", "u-stat", *SMALL, "-p", "sigma=1e-300"],
        1,
        r"is too large here.*Use sigma >= "
        r"[0-9.]+(e[-+]\d+)? or rescale",
    ),
    (
        "polynomial-overflow",
        ["run", "-k", "polynomial", "-e", "u-stat", "--x", "big1.npy", "--y", "big2.npy"],
        1,
        r"Kernel polynomial\(degree=3.*gives non-finite "  # noqa: E501 - one case per line
        r"values",
    ),
    # binary data: most pairs tie, so the median heuristic is 0; the median of the others is offered
    (
        "median-sigma-binary-data",
        [*TEST, "--x", "binary-x.npy", "--y", "binary-y.npy"],
        1,
        r"The median heuristic gives sigma = 0: more than half of the pooled pairwise distances are zero \(many repeated "
        r"points: \d+% of the pairs\)\. Pass sigma explicitly, for instance the median of the nonzero distances: sigma=1\.",
    ),
    (
        "median-sigma-overflow",
        ["run", "-k", "rbf", "-e", "u-stat", "--x", "huge.npy", "--y", "huge.npy", "-p", "sigma=median"],
        1,
        r"median heuristic overflows "  # noqa: E501 - one case per line
        r"float64",
    ),
    (
        "ssk-lam-underflows",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "dna1.fa", "--y", "dna2.fa", "-p", "n=3", "-p", "lam=1e-300"],
        2,
        r"SubsequenceKernel with n = 3 and lam = "  # noqa: E501 - one case per line
        r"1e-300: lam\^\(2n\) underflows float64",
    ),
    (
        "ssk-n-beyond-lam",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "dna1.fa", "--y", "dna2.fa", "-p", "n=1000000000"],
        2,
        r"SubsequenceKernel with n = 1,000,000,000 and lam = 0.5: .* Use n <= 511",
    ),
    # -- sizes beyond memory ------------------------------------------------------------
    ("permutations-beyond-memory", [*TEST, *SMALL, "-B", "1000000000"], 1, r"n_permutations \(-B\) = 1,000,000,000 needs about"),
    ("monk-permutations-beyond-memory", ["test", "-k", "rbf", "-e", "monk-bcd", *SMALL, "-B", "1000000000"], 1, r"n_permutations \(-B\)"),
    ("dataset-beyond-memory", [*RUN, "-d", "gauss", "--data-param", "n=10000000000"], 1, r"drawing X and Y \(n = 10,000,000,000"),
    ("sizes-beyond-memory", ["experiment", "exp1", "--sizes", "10000000", "--out", "e5"], 1, r"--sizes\): N = 10,000,000 needs"),
    # -- where results go ---------------------------------------------------------------
    ("output-is-a-directory", [*RUN, *SMALL, "-o", "adir"], 2, r"--output 'adir' is a directory"),
    ("output-unwritable", [*RUN, *SMALL, "-o", "blocker/out.json"], 2, r"--output 'blocker/out.json' cannot be written: 'blocker' is a file, not a directory"),
    ("output-is-a-pipe", [*RUN, *SMALL, "-o", "pipe.json"], 2, r"--output 'pipe.json' is not a regular file \(a device, pipe or socket\)"),
    (
        "output-named-csv",
        [*RUN, *SMALL, "-o", "result.csv"],
        2,
        r"--output 'result.csv' names a .csv file, but a result is saved "
        r"as JSON; name it 'result.json'",
    ),
    ("data-param-twice", [*RUN, *SMALL, "--data-param", "n=40"], 2, r"--data-param n is given twice"),
    ("param-twice", [*RUN, *SMALL, "-p", "sigma=1", "-p", "sigma=2"], 2, r"--param sigma is given twice"),
    ("test-output-is-a-directory", [*TEST, *SMALL, "-o", "adir"], 2, r"--output 'adir' is a directory"),
    (
        "output-is-the-data",
        [*RUN, "--x", "x.npy", "--y", "y.npy", "-o", "data.json"],
        2,
        r"--output 'data.json' is the data file 'x.npy': "
        r"the result would overwrite the data",
    ),
    ("empty-out", ["experiment", "exp1", "--quick", "--out", ""], 2, r"Invalid value for '--out': is empty; give a path"),
    ("max-memory-beyond-float64", [*RUN, *SMALL, "--max-memory", "1e400"], 2, r"max_memory must be a finite number of bytes; got '1e400'"),
    ("sizes-twice", ["experiment", "exp1", "--quick", "--sizes", "30,40,30", "--out", "e7"], 2, r"Experiment 1 sizes list 30 more than once"),
    (
        "spec-param-twice",
        ["run", "-k", "rbf:sigma=1,sigma=2", "-e", "u-stat", *SMALL],
        2,
        r"Parameter 'sigma' is given twice in spec "
        r"'rbf:sigma=1,sigma=2'",
    ),
    (
        "csv-semicolons",
        [*RUN, "--x", "semicolons.csv", "--y", "y.npy"],
        1,
        r"semicolons.csv, line 1, column 1: cannot read .* The values seem "
        r"separated by ';'",
    ),
    (
        "csv-quoted-semicolons",
        [*RUN, "quoted-semicolons.csv", "y.npy"],
        1,
        r"quoted-semicolons.csv, line 1, column 1: cannot read .* The "
        r"values seem separated by ';'",
    ),
    (
        "csv-typographic-minus",
        [*RUN, "minus-sign.csv", "y.npy"],
        1,
        r"minus-sign.csv, line \d+, column \d: cannot read "
        r"'\u2212[0-9.]+' as a number. It holds '\u2212' \(U\+2212, the typographic minus sign\), which only looks like part",
    ),
    (
        "txt-of-strings-beside-vectors",
        ["run", "fortran.txt", "y.npy"],
        2,
        r"X \(fortran.txt\) reads as strings \(a .txt file is strings, "
        r"one a line, unless its first data line is numbers: '.*D-?\+?.*' is not\) but Y \(y.npy\) as vectors",
    ),
    (
        "npy-truncated",
        [*RUN, "--x", "cut.npy", "--y", "y.npy"],
        1,
        r"cut.npy: its header claims an array of shape \(30, 2\) \(480 bytes\) but "
        r"the file holds only 176 bytes",
    ),
    (
        "csv-trailing-separator",
        [*RUN, "--x", "trailing.csv", "--y", "y.npy"],
        1,
        r"trailing.csv, line 1, column 3: the line ends "
        r"with ',', so its last value is missing: if every line does, the file has a trailing separator",
    ),
    (
        "fasta-position-numbers",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "numbered.fa", "--y", "dna1.fa"],
        1,
        r"numbered.fa, line 2, "
        r"column 6: the digit '1' inside a sequence line",
    ),
    (
        "compressed-fasta",
        ["run", "-k", "ssk", "-e", "u-stat", "--x", "dna1.fa.gz", "--y", "dna1.fa"],
        1,
        r"dna1.fa.gz: unsupported file "
        r"type '.gz'; .* It is compressed: decompress it first",
    ),
    # no kernel named: the default is chosen by the files' kinds, and a file of a type no
    # reader takes must be refused by its type, not called "vectors" against the FASTA file
    (
        "compressed-fasta-default-kernel",
        ["run", "--x", "dna1.fa.gz", "--y", "dna1.fa"],
        1,
        r"dna1.fa.gz: unsupported "
        r"file type '.gz'; .* It is compressed: decompress it first",
    ),
    ("kernel-given-as-estimator", ["run", "-e", "rbf", *SMALL], 2, r"'rbf' is a kernel, not an estimator\. Known estimators: "),
    (
        "output-is-another-file",
        [*RUN, "--x", "x.npy", "--y", "y.npy", "-o", "notes.json"],
        2,
        r"--output 'notes.json' exists and is not "
        r"a monkfw result: it would be overwritten",
    ),
    # a name the system refuses (a component over 255 bytes) was an internal error: OSError
    (
        "output-name-too-long",
        [*RUN, *SMALL, "-o", "r" * 300 + ".json"],
        2,
        r"--output 'r{300}\.json' cannot be written: File "
        r"name too long",
    ),
    (
        "out-name-too-long",
        ["experiment", "exp1", "--quick", "--out", "o" * 300],
        1,
        r"Cannot create the results directory "
        r"'o{300}': File name too long",
    ),
    (
        "data-name-too-long",
        [*RUN, "--x", "a" * 300 + ".csv", "--y", "y.npy"],
        1,
        r"a{300}\.csv: cannot be read \(File name "
        r"too long\)",
    ),
    # Path("newdir/") is Path("newdir"): the result was written to a file named like the folder
    (
        "output-ends-with-separator",
        [*RUN, *SMALL, "-o", "newdir/"],
        2,
        r"Invalid value for '--output' / '-o': 'newdir/' ends "
        r"with a separator, so it names a directory; give a file name inside it, e.g. 'newdir/result.json'",
    ),
    # binary files in a text reader were told to convert from Latin-1 (iconv)
    (
        "gzip-named-csv",
        [*RUN, "--x", "gzipped.csv", "--y", "y.npy"],
        1,
        r"gzipped.csv: is gzip-compressed, not text \(its first "
        r"bytes say so\): decompress it first, e.g. gunzip -c gzipped.csv > gzipped-text.csv",
    ),
    (
        "npy-named-txt",
        [*RUN, "--x", "npy.txt", "--y", "y.npy"],
        1,
        r"npy.txt: is a NumPy .npy file, not text \(its first bytes say "
        r"so\): give it a .npy name",
    ),
    (
        "excel-separator-line-semicolon",
        [*RUN, "--x", "sep-semicolon.csv", "--y", "y.npy"],
        1,
        r"sep-semicolon.csv, line 1: is "
        r"Excel's separator line 'sep=;': the values are separated by ';', where a .csv file has ','",
    ),
    (
        "tsv-with-commas",
        [*RUN, "--x", "commas.tsv", "--y", "y.npy"],
        1,
        r"commas.tsv, line 2, column 1: cannot read .* as a number. "
        r"The values seem separated by ',': a .tsv file is read with tabs between values; name it .csv",
    ),
    (
        "empty-kernel-option",
        ["run", "-k", "", "-e", "u-stat", *SMALL],
        2,
        r"Invalid value for '--kernel' / '-k': is empty; give a "
        r"name, listed by monkfw plugins",
    ),
    # an unbounded kernel's value beside one point at 1e200 overflows: rescaling would not help
    (
        "quadratic-gross-outlier-overflow",
        ["test", "-k", "quadratic", "--method", "mom", "--contamination", "1", "--x", "outlier.npy", "--y", "y.npy", "-B", "19"],
        1,
        r"Kernel quadratic\(.*\) gives non-finite values on these data: inf, a "
        r"value beyond float64 \(overflow\), and only at 1 of the \d+ points in this block: points far larger than the others",
    ),
]

#: (id, arguments): extreme but valid inputs that must give a finite, non-degenerate MMD²
VALID: list[tuple[str, list[str]]] = [
    ("rbf-sigma-1e200-on-1e200-data", ["run", "-k", "rbf", "-e", "v-stat", "--x", "big1.npy", "--y", "big2.npy", "-p", "sigma=1e200", "--json"]),
    ("laplace-sigma-1e200-on-1e200-data", ["run", "-k", "laplace", "-e", "v-stat", "--x", "big1.npy", "--y", "big2.npy", "-p", "sigma=1e200", "--json"]),
    ("rbf-median-on-1e200-data", ["run", "-k", "rbf", "-e", "u-stat", "--x", "big1.npy", "--y", "big2.npy", "-p", "sigma=median", "--json"]),
    ("rbf-sigma-1e-200", ["run", "-k", "rbf", "-e", "v-stat", *SMALL, "-p", "sigma=1e-200", "--json"]),
    ("rbf-sigma-beyond-the-data", ["run", "-k", "rbf", "-e", "v-stat", *SMALL, "-p", "sigma=1e300", "--json"]),
    ("quadratic-offset-dwarfs-the-data", ["run", "-k", "quadratic", "-e", "v-stat", *SMALL, "-p", "offset=1e18", "--json"]),
    ("energy-on-1e200-data", ["run", "-k", "energy", "-e", "v-stat", "--x", "big1.npy", "--y", "big2.npy", "--json"]),
    ("lowercase-fasta", ["run", "-k", "ssk", "-e", "v-stat", "--x", "dna1.fa", "--y", "dna2.fa", "-p", "n=2", "--json"]),
    ("numbers-in-a-txt-file", ["run", "-k", "rbf", "-e", "v-stat", "--x", "nums.txt", "--y", "y.npy", "--json"]),
    ("csv-with-byte-order-mark", ["run", "-k", "rbf", "-e", "v-stat", "--x", "bom.csv", "--y", "y.npy", "--json"]),
    ("txt-aligned-with-tabs", ["run", "-k", "rbf", "-e", "v-stat", "--x", "aligned.txt", "--y", "y.npy", "--json"]),
    ("csv-with-pandas-default-names", ["run", "-k", "rbf", "-e", "v-stat", "--x", "pandas-names.csv", "--y", "y.npy", "--json"]),
    ("linear-far-from-origin", ["run", "-k", "linear", "-e", "v-stat", "--x", "far-x.npy", "--y", "far-y.npy", "--json"]),
    ("energy-far-from-origin", ["run", "-k", "energy", "-e", "u-stat", "--x", "far-x.npy", "--y", "far-y.npy", "--json"]),
    ("quadratic-far-from-origin", ["run", "-k", "quadratic", "-e", "v-stat", "--x", "far-x.npy", "--y", "far-y.npy", "--json"]),
    (
        "normalised-quadratic-far-from-origin",
        ["run", "-k", "quadratic", "-p", "normalize=true", "-e", "v-stat", "--x", "far-x.npy", "--y", "far-y.npy", "--json"],
    ),
    ("rbf-one-gross-outlier", ["run", "-k", "rbf", "-e", "v-stat", "--x", "outlier.npy", "--y", "y.npy", "-p", "sigma=1", "--json"]),
    ("laplace-one-gross-outlier", ["run", "-k", "laplace", "-e", "v-stat", "--x", "outlier.npy", "--y", "y.npy", "-p", "sigma=1", "--json"]),
    ("rbf-median-one-gross-outlier", ["run", "-k", "rbf", "-e", "v-stat", "--x", "outlier.npy", "--y", "y.npy", "--json"]),
    ("aggregate-one-gross-outlier", ["test", "--aggregate", "agg", "--x", "outlier.npy", "--y", "y.npy", "-B", "99", "--json"]),
    ("clip-outlier-beyond-float64", ["test", "-k", "quadratic", "--contamination", "1", "--x", "outlier.npy", "--y", "y.npy", "-B", "99", "--json"]),
    # one point whose k(z, z) dwarfs every value between points: the U-statistic sums
    # without the diagonal (it had subtracted it, and kept only its digits)
    ("quadratic-u-stat-far-outlier", ["run", "-k", "quadratic", "-e", "u-stat", "--x", "outlier1e8.npy", "--y", "y.npy", "--json"]),
    ("energy-u-stat-far-outlier", ["run", "-k", "energy", "-e", "u-stat", "--x", "outlier1e20.npy", "--y", "y.npy", "--json"]),
    ("quadratic-u-stat-test-far-outlier", ["test", "-k", "quadratic", "-e", "u-stat", "--x", "outlier1e8.npy", "--y", "y.npy", "-B", "99", "--json"]),
    # two points against two, far apart: 6 splits, so no p-value of the data below 1/6
    ("two-points-against-two", ["test", "--x", "two-x.npy", "--y", "two-y.npy", "-B", "99", "--json"]),
    # Excel's separator line, when it names the file's own separator, is no data
    ("excel-separator-line", ["run", "-k", "rbf", "-e", "v-stat", "--x", "sep-comma.csv", "--y", "y.npy", "--json"]),
    # one -p joining several key=value, as a spec does
    ("param-joined-with-commas", ["run", "-k", "rbf", "-e", "monk-bcd", "-p", "n_blocks=3,n_iter=20", *SMALL, "--json"]),
]


#: a third-party distribution whose plugins misbehave, installed on PYTHONPATH for
#: PLUGIN_CASES only; and one whose module fails to import
HOSTILE_PLUGINS = """
import os
import sys
from typing import ClassVar

import attrs
import numpy as np

from monk_framework import Estimate, Kernel, MMDEstimator, hookimpl


@attrs.frozen(kw_only=True)
class Scribbler(Kernel):
    name: ClassVar[str] = "scribbler"
    summary: ClassVar[str] = "The linear kernel, after writing into its inputs."

    def compute_gram(self, X, Y):
        X[:] = 0.0
        return X @ Y.T

    def compute_diag(self, X):
        return np.einsum("ij,ij->i", X, X)


@attrs.frozen(kw_only=True)
class Quitter(Scribbler):
    name: ClassVar[str] = "quitter"
    summary: ClassVar[str] = "A kernel whose code ends the process."

    def compute_gram(self, X, Y):
        sys.exit(3)


@attrs.frozen(kw_only=True)
class NaNKernel(Scribbler):
    name: ClassVar[str] = "nan-kernel"
    summary: ClassVar[str] = "A kernel that gives NaN."

    def compute_gram(self, X, Y):
        return np.full((len(X), len(Y)), np.nan)


@attrs.frozen(kw_only=True)
class Chatty(MMDEstimator):
    name: ClassVar[str] = "chatty"
    summary: ClassVar[str] = "The V-statistic, printing as it goes."

    def compute_estimate(self, kernel, X, Y, rng, resources):
        print("chatty: computing {not json")
        v = kernel.gram(X).mean() + kernel.gram(Y).mean() - 2 * kernel.gram(X, Y).mean()
        return Estimate(mmd2=v, mmd=max(v, 0.0) ** 0.5)


@attrs.frozen(kw_only=True)
class Negative(Chatty):
    name: ClassVar[str] = "negative"
    summary: ClassVar[str] = "An estimator that reports a negative MMD."

    def compute_estimate(self, kernel, X, Y, rng, resources):
        return Estimate(mmd2=0.25, mmd=-0.5)


@attrs.frozen(kw_only=True)
class Complexer(Kernel):
    name: ClassVar[str] = "complexer"
    summary: ClassVar[str] = "A kernel whose values are complex."

    def compute_gram(self, X, Y):
        return X @ Y.T + 1j

    def compute_diag(self, X):
        return (X * X).sum(1)


@attrs.frozen(kw_only=True)
class BadFit(Kernel):
    name: ClassVar[str] = "bad-fit"
    summary: ClassVar[str] = "A kernel whose fit returns a string."

    def fit(self, X, Y=None):
        return "fitted!"

    def compute_gram(self, X, Y):
        return X @ Y.T

    def compute_diag(self, X):
        return (X * X).sum(1)


@attrs.frozen(kw_only=True)
class BadSpec(NaNKernel):
    name: ClassVar[str] = "bad-spec"
    summary: ClassVar[str] = "NaN values, and a spec() that raises while the error is worded."

    def spec(self):
        raise RuntimeError("spec boom")


@attrs.frozen(kw_only=True)
class Diagnosing(Chatty):
    name: ClassVar[str] = "diagnosing"
    summary: ClassVar[str] = "An estimator whose diagnostics hold a function."

    def compute_estimate(self, kernel, X, Y, rng, resources):
        return Estimate(mmd2=0.25, mmd=0.5, diagnostics={"callback": print})


@attrs.frozen(kw_only=True)
class NaNBlocks(Chatty):
    name: ClassVar[str] = "nan-blocks"
    summary: ClassVar[str] = "The V-statistic, whose block statistics (a robust mom test's) are NaN."

    def mmd2_from_sums(self, sums, n, m):
        return np.full(np.broadcast(sums.xx, n).shape, np.nan)


@attrs.frozen(kw_only=True)
class Lopsided(Scribbler):
    name: ClassVar[str] = "lopsided"
    summary: ClassVar[str] = "The linear kernel, computed whole into an asymmetric matrix."

    def compute_gram(self, X, Y):
        return X @ Y.T

    def symmetric_gram(self, X, *, run_bands=None):
        K = X @ X.T
        K[0, 1] += 1.0
        return K


@attrs.frozen(kw_only=True)
class Misfeatured(Scribbler):
    name: ClassVar[str] = "misfeatured"
    summary: ClassVar[str] = "The linear kernel, whose features are twice its own."
    has_features: ClassVar[bool] = True

    def compute_gram(self, X, Y):
        return X @ Y.T

    def compute_features(self, X):
        return 2.0 * X


@attrs.frozen(kw_only=True)
class Hungry(Scribbler):
    name: ClassVar[str] = "hungry"
    summary: ClassVar[str] = "A kernel whose code runs out of memory."

    def compute_gram(self, X, Y):
        raise MemoryError()


@attrs.frozen(kw_only=True)
class Descriptor(Scribbler):
    name: ClassVar[str] = "descriptor"
    summary: ClassVar[str] = "The linear kernel, writing straight to file descriptor 1 (as C code's printf does)."

    def compute_gram(self, X, Y):
        os.write(1, b"descriptor: a tile {not json\\n")
        return X @ Y.T


@hookimpl
def monk_kernels():
    return [Scribbler, Quitter, NaNKernel, Complexer, BadFit, BadSpec, Lopsided, Misfeatured, Hungry, Descriptor]


@hookimpl
def monk_estimators():
    return [Chatty, Negative, Diagnosing, NaNBlocks]
"""


def _distribution(root: Path, dist: str, entry: str, module: str, source: str) -> None:
    """A minimal installed distribution: its .dist-info (one entry point) and its module."""
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[monk_framework.plugins]\n{entry} = {module}\n")
    (root / f"{module}.py").write_text(source)


def _plugin_site(root: Path) -> Path:
    site = root / "plugin-site"
    site.mkdir()
    _distribution(site, "monk-hostile", "hostile", "monk_hostile", HOSTILE_PLUGINS)
    _distribution(site, "monk-broken-rq", "rq", "monk_broken_rq", "raise ImportError('scipy.special.rq is gone')\n")
    # a plugin whose import changes the process's working directory: every relative data
    # file was "no such file" (the import's changes to the process are put back)
    _distribution(site, "monk-wanderer", "wanderer", "monk_wanderer", "import os\nos.chdir('/')\n")
    return site


#: (id, arguments, exit code, regex of the first stderr line, environment): a plugin's faults
#: where they happen, run with the plugins above installed
PLUGIN_CASES: list[tuple[str, list[str], int, str, dict[str, str]]] = [
    (
        "plugin-writes-into-its-input",
        ["run", "-k", "scribbler", "-e", "v-stat", *SMALL],
        1,
        r"kernel 'scribbler' \(monk_hostile.Scribbler\): compute_gram failed: ValueError: .*read-only.*copy before writing",
        {},
    ),
    (
        "plugin-ends-the-process",
        ["run", "-k", "quitter", "-e", "v-stat", *SMALL],
        1,
        r"kernel 'quitter' \(monk_hostile.Quitter\): compute_gram tried to end the process \(sys.exit\(3\)\)",
        {},
    ),
    (
        "plugin-gives-nan",
        ["run", "-k", "nan-kernel", "-e", "v-stat", *SMALL],
        1,
        r"Kernel nan-kernel\(\) \(monk_hostile.NaNKernel\) gives non-finite values on these data: NaN, the result of an "
        r"undefined operation",
        {},
    ),
    (
        "plugin-negative-mmd",
        ["run", "-k", "rbf", "-e", "negative", *SMALL],
        1,
        r"estimator 'negative' \(monk_hostile.Negative\): compute_estimate returned MMD = -0.5 with MMD\^2 = 0.25",
        {},
    ),
    (
        "plugin-gives-complex-values",
        ["run", "-k", "complexer", "-e", "v-stat", *SMALL],
        1,
        r"kernel 'complexer' \(monk_hostile.Complexer\): compute_gram returned complex values \(dtype complex128\)",
        {},
    ),
    (
        "plugin-fit-returns-no-kernel",
        ["run", "-k", "bad-fit", "-e", "v-stat", *SMALL],
        1,
        r"kernel 'bad-fit' \(monk_hostile.BadFit\): fit returned str 'fitted!'; it must return a Kernel",
        {},
    ),
    (
        "plugin-fails-outside-its-hooks",
        ["run", "-k", "bad-spec", "-e", "v-stat", *SMALL],
        1,
        r"the plugin monk-hostile==1.2.3\[hostile\] failed in spec: RuntimeError: spec boom",
        {},
    ),
    (
        "plugin-diagnostics-not-json",
        ["run", "-k", "rbf", "-e", "diagnosing", *SMALL, "--json"],
        1,
        r"estimator 'diagnosing' \(monk_hostile.Diagnosing\): compute_estimate returned diagnostics\['callback'\] = "
        r"<built-in function print>, which a results file cannot hold",
        {},
    ),
    # a NaN counted as below the observed value rejected null data at p = 5e-19
    (
        "plugin-block-statistics-nan",
        ["test", "-k", "rbf", "-p", "sigma=1", "-e", "nan-blocks", *SMALL, "--contamination", "1", "--method", "mom", "-B", "19"],
        1,
        r"estimator 'nan-blocks' \(monk_hostile.NaNBlocks\): mmd2_from_sums returned nan for these kernel sums",
        {},
    ),
    ("plugin-whole-gram-asymmetric", ["run", "-k", "lopsided", "-e", "u-stat", *SMALL], 1, r"kernel 'lopsided' \(monk_hostile.Lopsided\) is not symmetric", {}),
    # the classical sums read a kernel's features: MMD² 4 times the kernel's own
    (
        "plugin-features-disagree",
        ["run", "-k", "misfeatured", "-e", "u-stat", *SMALL],
        1,
        r"kernel 'misfeatured' \(monk_hostile.Misfeatured\): its features disagree with its kernel values",
        {},
    ),
    (
        "plugin-failed-import-named",
        ["run", "-k", "rq", "-e", "u-stat", *SMALL],
        2,
        r"Unknown kernel 'rq'.*could not be loaded: monk-broken-rq==1.2.3\[rq\]: failed to import 'monk_broken_rq': "
        r"ImportError: scipy.special.rq is gone",
        {},
    ),
    (
        "load-plugins-typo",
        ["run", "-k", "scribbler", "-e", "v-stat", *SMALL],
        2,
        r"Unknown kernel 'scribbler'.*could not be loaded: MONK_LOAD_PLUGINS: 'hostlie' matches no installed plugin's.*"
        r"Did you mean 'hostile'",
        {"MONK_LOAD_PLUGINS": "hostlie"},
    ),
    # a plugin's own MemoryError was "out of memory ()", named after no one
    (
        "plugin-runs-out-of-memory",
        ["run", "-k", "hungry", "-e", "v-stat", *SMALL],
        1,
        r"the plugin monk-hostile==1.2.3\[hostile\] ran out of memory in compute_gram \(an allocation failed\)",
        {},
    ),
    ("compiled-switch-typo", [*RUN, *SMALL], 2, r"MONK_COMPILED='fasle' is not a switch: give 0 \(off\) or 1 \(on, the default\)", {"MONK_COMPILED": "fasle"}),
]
#: a plugin that prints while it computes: the JSON on stdout stays whole
PLUGIN_VALID = ("plugin-prints-into-json", ["run", "-k", "rbf", "-e", "chatty", *SMALL, "--json"])
#: a plugin that writes to file descriptor 1 itself, which no redirection of sys.stdout
#: catches; with relative data files, beside the plugin whose import changes directory. A
#: real process: the suite's driver shares one stdout among its cases
PLUGIN_REAL = ("plugin-writes-to-descriptor-1", ["run", "-k", "descriptor", "-e", "v-stat", "--x", "x.npy", "--y", "y.npy", "--json"])


def _far_from_origin() -> tuple[np.ndarray, np.ndarray]:
    """Two samples near 2^30 (1.07e9), on a grid of 2^-20 so that the shift is exact."""
    gen = np.random.default_rng(3)
    X = np.round(gen.normal(size=(40, 2)) * 2**20) / 2**20
    Y = np.round(gen.normal(0.5, 1.0, size=(40, 2)) * 2**20) / 2**20
    return X + 2.0**30, Y + 2.0**30


def _with_outlier(far: float = 1e200) -> np.ndarray:
    """40 ordinary points (those of x.npy) and one at (far, far) in their place 0."""
    X = np.random.default_rng(0).normal(size=(40, 2))
    X[0] = far
    return X


def _far_outlier_truth(case_id: str) -> float:
    """MMD_U² of outlier1e8.npy (quadratic) or outlier1e20.npy (energy) against y.npy in
    exact arithmetic: fractions for the quadratic kernel, 60-digit decimals for the
    energy kernel's square roots. The diagonal, 1e33 or 1.4e20, dwarfs every value
    between points; subtracting it from the sums had left 190 % errors or a flipped sign."""
    import decimal
    from fractions import Fraction

    rng = np.random.default_rng(0)
    rng.normal(size=(40, 2))
    energy = case_id.startswith("energy")
    X, Y = _with_outlier(1e20 if energy else 1e8), rng.normal(size=(40, 2))
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        if energy:

            def k(a, b):  # noqa: E306
                norm = lambda v: sum((c * c for c in v), decimal.Decimal(0)).sqrt()  # noqa: E731
                return (norm(a) + norm(b) - norm([p - q for p, q in zip(a, b)])) / 2

            num = decimal.Decimal
        else:

            def k(a, b):  # noqa: E306
                return (sum(p * q for p, q in zip(a, b)) + 1) ** 2

            num = Fraction
        A = [[num(float(c)) for c in row] for row in X]
        B = [[num(float(c)) for c in row] for row in Y]
        n, m = len(A), len(B)
        xx = sum(k(A[i], A[j]) for i in range(n) for j in range(n) if i != j)
        yy = sum(k(B[i], B[j]) for i in range(m) for j in range(m) if i != j)
        xy = sum(k(a, b) for a in A for b in B)
        return float(xx / (n * (n - 1)) + yy / (m * (m - 1)) - 2 * xy / (n * m))


def _outlier_truth(case_id: str) -> float:
    """The V-statistic of outlier.npy against y.npy, pair by pair from coordinate
    differences divided by σ first (no square of a raw coordinate): the outlier's
    kernel values are 0 but its own, every other pair keeps its value."""
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(0)
    rng.normal(size=(40, 2))
    X, Y = _with_outlier(), rng.normal(size=(40, 2))
    sigma = 1.0
    if case_id.startswith("rbf-median"):
        # the median over the 3160 pooled pairs: the 40 + 40 - 1 outlier pairs are the largest
        Z = np.vstack([X[1:], Y])
        d = np.sort(np.concatenate([pdist(Z), np.full(79, np.inf)]))
        sigma = float(d[(len(d) - 1) // 2] + d[len(d) // 2]) / 2.0

    def k(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            t = (A[:, None, :] - B[None, :, :]) / sigma
            sq = (t**2).sum(-1)
        return np.exp(-np.sqrt(sq)) if case_id.startswith("laplace") else np.exp(-0.5 * sq)

    return float(k(X, X).mean() + k(Y, Y).mean() - 2.0 * k(X, Y).mean())


def _check_outlier_test(case_id: str, result: dict) -> None:
    """The tests on outlier.npy against y.npy, against values computed pair by pair:
    the aggregated test's grid starts at half the 1 % quantile of the pooled distances
    (the outlier's own read with np.hypot, no square of 1e200); the clip test's statistic
    is the V-statistic MMD of the clipped quadratic kernel whose outlier, with k(x, x)
    beyond float64, has the feature 0."""
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(0)
    rng.normal(size=(40, 2))
    X, Y = _with_outlier(), rng.normal(size=(40, 2))
    ordinary = np.vstack([X[1:], Y])
    assert math.isfinite(result["statistic"]) and 0 < result["pvalue"] <= 1
    if case_id.startswith("aggregate"):
        far = ordinary - X[0]
        l2 = np.concatenate([pdist(ordinary), np.hypot(far[:, 0], far[:, 1])])
        l1 = np.concatenate([pdist(ordinary, "cityblock"), np.abs(far).sum(1)])
        bandwidths = result["bandwidths"]
        assert bandwidths[0] == pytest.approx(np.quantile(l2, 0.01) / 2, rel=1e-12)
        assert bandwidths[10] == pytest.approx(np.quantile(l1, 0.01) / 2, rel=1e-12)
        return
    norms = np.sort(np.concatenate([(ordinary**2).sum(1) + 1.0, [np.inf]]))
    c = norms[39]  # the median of the 80 norms sqrt(k(z, z)) = z.z + 1, the outlier's the largest
    assert result["clip_radius"] == pytest.approx(c, rel=1e-12)
    s = np.minimum(1.0, c / ((ordinary**2).sum(1) + 1.0))
    K = (ordinary @ ordinary.T + 1.0) ** 2 * s[:, None] * s[None, :]
    wx = np.r_[np.full(39, 1 / 40), np.zeros(40)]  # X's mean embedding: its outlier adds 0
    wy = np.r_[np.zeros(39), np.full(40, 1 / 40)]
    v = (wx - wy) @ K @ (wx - wy)
    assert result["statistic"] == pytest.approx(math.sqrt(v), rel=1e-10)


def _limit_memory() -> None:  # runs in the child, before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


#: how many cases each driver process runs (each process starts Python, numpy and the
#: library once: 84 processes took most of the suite's time)
CASES_PER_PROCESS = 24

#: runs the CLI's own entry point (``MonkGroup.main``, with every error handler of the
#: console script) once per case, in this one process, and prints what each case wrote
DRIVER = """
import contextlib, io, json, sys
from monk_framework.app.cli import app
import typer.main
group = typer.main.get_command(app)
out = []
for case_id, args in json.load(sys.stdin):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = group.main(args, prog_name="monkfw", standalone_mode=False)
    out.append([case_id, code, stdout.getvalue(), stderr.getvalue()])
sys.__stdout__.write(json.dumps(out))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "COLUMNS": "100"}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """One case as its own process: the installed ``monkfw`` console script (or
    ``python -m monk_framework`` where the script is not beside the interpreter)."""
    script = Path(sys.executable).with_name("monkfw")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "monk_framework"]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )


def _run_many(jobs: list[tuple[str, list[str]]], cwd: Path, env: dict[str, str] | None = None) -> dict[str, subprocess.CompletedProcess[str]]:
    """Several cases in one process under the same memory limit, through the driver
    (``env``: variables added to the process's environment)."""
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        cwd=cwd,
        env={**_env(), **(env or {})},
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 0, done.stderr
    return {
        case_id: subprocess.CompletedProcess(args, code, stdout, stderr) for (case_id, code, stdout, stderr), (_, args) in zip(json.loads(done.stdout), jobs)
    }


#: cases that also run as their own ``monkfw`` process (the console script's path, the
#: exit code through sys.exit)
REAL_PROCESS = ("unknown-command", "missing-file", "rbf-sigma-1e200-on-1e200-data")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("bad-inputs")
    _files(root)
    jobs = [(case_id, args) for case_id, args, _, _ in CASES] + list(VALID)
    chunks = [jobs[i : i + CASES_PER_PROCESS] for i in range(0, len(jobs), CASES_PER_PROCESS)]
    site = _plugin_site(root)
    by_env: dict[str, list[tuple[str, list[str]]]] = {}
    for case_id, args, _, _, env in PLUGIN_CASES:
        by_env.setdefault(json.dumps(env), []).append((case_id, args))
    by_env[json.dumps({})].append(PLUGIN_VALID)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results: dict[str, subprocess.CompletedProcess[str]] = {}
        runs = [pool.submit(_run_many, chunk, root) for chunk in chunks]
        runs += [pool.submit(_run_many, cases, root, {"PYTHONPATH": str(site), **json.loads(env)}) for env, cases in by_env.items()]
        for run in runs:
            results.update(run.result())
    return results


@pytest.fixture(scope="module")
def real_processes(outcomes, tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("bad-inputs-real")
    _files(root)
    every = {case_id: args for case_id, args, _, _ in CASES} | dict(VALID)
    return {case_id: _run(every[case_id], root) for case_id in REAL_PROCESS}


@pytest.mark.parametrize("case_id", REAL_PROCESS)
def test_a_real_process_gives_what_the_driver_gives(outcomes, real_processes, case_id):
    real, driven = real_processes[case_id], outcomes[case_id]
    assert real.returncode == driven.returncode, real.stderr
    assert real.stderr.splitlines()[:1] == driven.stderr.splitlines()[:1]
    if real.returncode == 0:
        assert json.loads(real.stdout)["mmd2"] == json.loads(driven.stdout)["mmd2"]


def test_the_suite_is_large_and_its_ids_unique():
    ids = [c[0] for c in CASES] + [v[0] for v in VALID]
    assert len(CASES) >= 60 and len(ids) == len(set(ids))


@pytest.mark.parametrize("case_id, args, code, first_line", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_a_one_line_error_naming_the_problem(outcomes, case_id, args, code, first_line):
    result = outcomes[case_id]
    err = result.stderr
    assert "Traceback" not in err and "internal error" not in err, err
    assert result.returncode == code, (result.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[0].startswith("Error: "), err
    assert re.search(first_line, lines[0]), (first_line, lines[0])
    assert not result.stdout.strip() or "Error" not in result.stdout


@pytest.mark.parametrize("case_id, args", VALID, ids=[v[0] for v in VALID])
def test_extreme_but_valid_input_gives_a_finite_nonzero_number(outcomes, case_id, args):
    result = outcomes[case_id]
    assert result.returncode == 0, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    if case_id == "two-points-against-two":
        found = json.loads(result.stdout)
        assert not found["reject"] and found["pvalue"] >= 1 / 6
        assert found["decision"].startswith(
            "No evidence of a difference at level 0.05, and none is possible with N = 2 and M = 2: the 4 points split into 2 and 2 in only 6 ways"
        )
        return
    if case_id.endswith("far-outlier"):
        found = json.loads(result.stdout)
        assert found["statistic_mmd2" if args[0] == "test" else "mmd2"] == pytest.approx(_far_outlier_truth(case_id), rel=1e-9)
        assert "Warning" not in result.stderr, result.stderr
        return
    if args[0] == "test":
        _check_outlier_test(case_id, json.loads(result.stdout))
        return
    mmd2 = json.loads(result.stdout)["mmd2"]
    assert math.isfinite(mmd2)
    if case_id == "lowercase-fasta":
        assert mmd2 == pytest.approx(0.0, abs=1e-12)  # the same sequences, in lowercase
    elif case_id == "quadratic-far-from-origin":
        # an MMD that depends on the origin is read with the kernel anchored at the data:
        # the exact value (the data are dyadic), where the kernel's own values near 1e36 had
        # lost every digit of it
        from fractions import Fraction

        X, Y = ([[Fraction(v) for v in row] for row in Z.tolist()] for Z in _far_from_origin())

        def mean(A, B):
            return sum((sum(p * q for p, q in zip(a, b)) + 1) ** 2 for a in A for b in B) / (len(A) * len(B))

        assert mmd2 == pytest.approx(float(mean(X, X) + mean(Y, Y) - 2 * mean(X, Y)), rel=1e-12)
        assert "Warning:" not in result.stderr
    elif case_id == "normalised-quadratic-far-from-origin":
        # a cosine cannot be anchored: its lost digits are said, once
        assert re.search(r"^Warning: The data lie 1\.\d+e\+09 spreads from the origin, and quadratic.* depends on the origin", result.stderr, flags=re.M), (
            result.stderr
        )
        assert result.stderr.count("Warning:") == 1
    elif case_id.endswith("far-from-origin"):
        # the MMD of the data moved back to the origin (exactly), from its closed form; the
        # sums of kernel values near 1e18 had lost it
        from scipy.spatial.distance import cdist

        X, Y = (Z - 2.0**30 for Z in _far_from_origin())
        n, m = len(X), len(Y)
        truth = (
            float(np.sum((X.mean(0) - Y.mean(0)) ** 2))
            if case_id.startswith("linear")
            else (2 * cdist(X, Y).mean() - cdist(X, X).sum() / (n * (n - 1)) - cdist(Y, Y).sum() / (m * (m - 1))) / 2
        )
        assert mmd2 == pytest.approx(truth, rel=1e-10)
    elif case_id in ("rbf-sigma-beyond-the-data", "quadratic-offset-dwarfs-the-data"):
        # a kernel that cannot tell the points apart gives its number with the warning
        kernel = "rbf" if case_id.startswith("rbf") else "quadratic"
        assert re.search(rf"^Warning: {kernel}\(.*\) cannot tell these distinct points apart", result.stderr, flags=re.M), result.stderr
    elif case_id == "rbf-sigma-1e-200":
        # every value between points underflows: the diagonal's 1/N + 1/M, and the warning
        assert mmd2 == pytest.approx(1 / 30 + 1 / 30, rel=1e-12)
        assert re.search(r"^Warning: rbf\(sigma=1e-200\) is 0 between every two distinct points of the 60 checked", result.stderr, flags=re.M), result.stderr
    elif case_id == "csv-with-pandas-default-names":
        # the header pandas writes without an index was the point (0, 1): the same points
        # as bom.csv now, and the guess said
        assert mmd2 == json.loads(outcomes["csv-with-byte-order-mark"].stdout)["mmd2"]
        assert re.search(r"^Warning: pandas-names.csv: line 1 \(0,1\) is read as pandas' default column names", result.stderr, flags=re.M), result.stderr
    elif "gross-outlier" in case_id:
        # one point at 1e200 moves a bounded kernel's MMD² by its bounded share only
        assert mmd2 == pytest.approx(_outlier_truth(case_id), rel=1e-12)
    else:
        assert mmd2 != 0.0  # not the 0 of an overflowed kernel


@pytest.mark.parametrize("case_id, args, code, first_line, env", PLUGIN_CASES, ids=[c[0] for c in PLUGIN_CASES])
def test_a_misbehaving_plugin_gets_a_one_line_error_naming_it(outcomes, case_id, args, code, first_line, env):
    result = outcomes[case_id]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.match(r"Error: " + first_line, lines[0]), result.stderr


def test_what_a_plugin_writes_to_descriptor_1_never_reaches_the_json(tmp_path):
    _files(tmp_path)
    site = _plugin_site(tmp_path)
    script = Path(sys.executable).with_name("monkfw")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "monk_framework"]
    result = subprocess.run(
        [*command, *PLUGIN_REAL[1]],
        cwd=tmp_path,
        env={**_env(), "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    X, Y = np.load(tmp_path / "x.npy"), np.load(tmp_path / "y.npy")
    assert found["mmd2"] == pytest.approx(float(np.sum((X.mean(0) - Y.mean(0)) ** 2)), rel=1e-12)
    assert "descriptor: a tile {not json" in result.stderr


def test_what_a_plugin_prints_never_reaches_the_json(outcomes):
    result = outcomes[PLUGIN_VALID[0]]
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["estimator"] == "chatty" and "chatty: computing {not json" in result.stderr


@pytest.mark.parametrize("case_id, args", VALID, ids=[v[0] for v in VALID])
def test_the_numbers_the_reliability_page_shows_are_what_the_suite_gives(outcomes, case_id, args):
    # the page's MMD² of numbers-in-a-txt-file and csv-with-byte-order-mark had drifted when
    # the suite's files changed (0.0887693 where the suite gave 0.10985)
    text = (Path(__file__).resolve().parents[1] / "docs" / "studies" / "reliability.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| `{case_id}` |"))
    shown = row.rsplit("|", 2)[1]
    result = json.loads(outcomes[case_id].stdout)
    for label, key in (("MMD²", "mmd2"), ("MMD", "statistic"), ("p", "pvalue")):
        found = re.search(rf"(?<![\w²]){label} = ([-+\d.e]+)", shown)
        if found is not None:
            assert f"{result[key]:.6g}" == found.group(1).rstrip("."), (case_id, label, result[key], found.group(1))


def test_reliability_page_lists_every_case():
    text = (Path(__file__).resolve().parents[1] / "docs" / "studies" / "reliability.md").read_text()
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.M))
    ids = {c[0] for c in CASES} | {v[0] for v in VALID} | {c[0] for c in PLUGIN_CASES} | {PLUGIN_VALID[0], PLUGIN_REAL[0]}
    assert ids - listed == set(), "cases missing from docs/studies/reliability.md"
    assert listed - ids == set(), "docs/studies/reliability.md lists cases the suite does not run"
    # and the README counts them as they are
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"a suite of {len(ids)} cases run through the real command line" in readme


def _shape(line: str) -> str:
    """A message with its machine's figures made alike: sizes, numbers and counts (free
    memory, worker counts, random draws) differ from one machine and run to the next."""
    line = re.sub(r"\d[\d.,]*(e[+-]?\d+)?\s*(bytes|KiB|MiB|GiB|TiB|PiB|EiB)", "SIZE", line)
    return re.sub(r"-?\d+(\.\d+)?(e[+-]?\d+)?", "#", line)


def _says(shown: str, printed: str) -> bool:
    """Whether a row of the page shows the line a command printed: the same words, its
    figures aside; "…" and "(...)" in the row stand for text left out."""
    pieces = re.split(r"…|\(\.\.\.\)", shown)
    return re.match(".*?".join(re.escape(_shape(piece)) for piece in pieces), _shape(printed), flags=re.S) is not None


def test_the_reliability_page_shows_what_each_error_case_gives(outcomes):
    # a row that no longer says what the command prints misleads a reader who looks up a message
    text = (Path(__file__).resolve().parents[1] / "docs" / "studies" / "reliability.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| .* \| \d+ \| (Error: .*?) \|$", text, flags=re.M))
    stale = []
    for case_id in [c[0] for c in CASES] + [c[0] for c in PLUGIN_CASES]:
        shown = rows[case_id].replace("\\|", "|")
        lines = [line for line in outcomes[case_id].stderr.splitlines() if line.strip()]
        if not _says(shown, lines[0]):
            stale.append(f"{case_id}: the page shows {shown!r}, the command prints {lines[0]!r}")
    assert not stale, "\n".join(stale)
