"""A hostile-input audit of the command line, run as real processes.

    python tools/hostile_audit.py [--out audit-report] [--only FAMILY] [--jobs 2]

Each case runs ``monkfw`` as its own process (under an address-space limit of 4 GiB and
a timeout), from a work directory holding the damaged files, fake plugin distributions
and results folders the cases name. Every case is graded by rules, then printed for a
human to read:

- **bad**: a traceback or "internal error", an exit code other than 0, 1, 2 or 130, a
  timeout, output on stdout that ``--json`` cannot parse, a number that is not finite, or
  a number that disagrees with the truth the case computes independently;
- **check**: a case expected to be refused that succeeded, or expected to succeed that
  was refused: a person decides whether the message or the result is right;
- **weak**: an error that is not one line, or that names nothing the case expects it to
  name (its ``says`` words);
- **good**: everything else.

The report (``report.md``, ``report.json``) lists every case with its command, exit code
and first error line. The families are those of docs/studies/reliability.md; the cases are new
ones, not the bad-input suite's, so the audit tests what the suite has not pinned.
This is a tool for the team, not part of the test suite: it takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MONKFW = [sys.executable, "-m", "monk_framework"]
LIMIT_BYTES = 4 * 2**30
TIMEOUT = 120.0

SMALL = ["-d", "gauss", "--data-param", "n=30"]


@dataclass
class Case:
    id: str
    family: str
    args: list[str]
    expect: str = "err"  # "err", "ok" or "either"
    says: tuple[str, ...] = ()  # words the first error line must contain (case-insensitive)
    env: dict[str, str] = field(default_factory=dict)
    check: Callable[[subprocess.CompletedProcess[str], Path], str | None] | None = None
    signal_after: float | None = None  # send SIGINT after this many seconds
    stdout_to: str | None = None  # a file for the process's stdout instead of a pipe (/dev/full)
    timeout: float = TIMEOUT


CASES: list[Case] = []


def case(*args, **kwargs) -> None:
    CASES.append(Case(*args, **kwargs))


# ---------------------------------------------------------------------------------------
# files


def write_files(root: Path) -> None:
    rng = np.random.default_rng(7)
    X, Y = rng.normal(size=(40, 2)), rng.normal(0.4, 1.0, size=(40, 2))
    np.save(root / "x.npy", X)
    np.save(root / "y.npy", Y)
    np.savetxt(root / "x.csv", X, delimiter=",")
    np.savetxt(root / "y.csv", Y, delimiter=",")
    lines = "".join(f"{a!r},{b!r}\n" for a, b in X.tolist())
    (root / "crlf.csv").write_bytes(lines.replace("\n", "\r\n").encode())
    (root / "cr-only.csv").write_bytes(lines.replace("\n", "\r").encode())
    (root / "plus-signs.csv").write_text("".join(f"+{abs(a)!r},{b:+.5e}\n" for a, b in X.tolist()))
    (root / "leading-dots.csv").write_text("".join(f".5,{b!r}\n" for _, b in X.tolist()))
    (root / "hex-floats.csv").write_text("".join(f"{float(a).hex()},{float(b).hex()}\n" for a, b in X.tolist()))
    (root / "na-cells.csv").write_text(lines + "NA,1.0\n")
    (root / "nan-word.csv").write_text(lines + "nan,1.0\n")
    (root / "empty-middle-cell.csv").write_text(lines + "1.0,,2.0\n")
    (root / "one-column.csv").write_text("".join(f"{a!r}\n" for a, _ in X.tolist()))
    (root / "one-row.csv").write_text(",".join(repr(v) for v in X[0]) + "\n")
    (root / "wide-row.csv").write_text(",".join("1.0" for _ in range(20000)) + "\n" + ",".join("2.0" for _ in range(20000)) + "\n")
    (root / "comment-line.csv").write_text("# measured on 2026-01-01\n" + lines)
    (root / "quoted-numbers.csv").write_text("".join(f'"{a!r}","{b!r}"\n' for a, b in X.tolist()))
    (root / "spaces-around.csv").write_text("".join(f"  {a!r} ,  {b!r}  \n" for a, b in X.tolist()))
    half = lines.splitlines(keepends=True)
    (root / "blank-lines-inside.csv").write_text("".join(half[:20]) + "\n  \n" + "".join(half[20:]))
    (root / "no-final-newline.csv").write_text(lines.rstrip("\n"))
    (root / "header-row.csv").write_text("height,weight\n" + lines)
    (root / "index-column.csv").write_text(",a,b\n" + "".join(f"{i},{a!r},{b!r}\n" for i, (a, b) in enumerate(X.tolist())))
    (root / "commas-in-tsv.tsv").write_text(lines)
    (root / "gzip-named-csv.csv").write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + os.urandom(40))
    (root / "infinity-word.csv").write_text(lines + "Infinity,1.0\n")
    (root / "huge-cell.csv").write_text(lines + "1e400,1.0\n")
    (root / "tiny-cell.csv").write_text(lines + "1e-400,1.0\n")
    (root / "nul-bytes.csv").write_bytes(lines.encode() + b"\x00\x00,1\n")
    (root / "latin1-header.csv").write_bytes("h\xf6he,breite\n".encode("latin-1") + lines.encode())
    (root / "excel-sep.csv").write_text("sep=,\n" + lines)
    # npy of every dtype and shape a user might save
    np.save(root / "f16.npy", X.astype(np.float16))
    np.save(root / "f32.npy", X.astype(np.float32))
    np.save(root / "i8.npy", (X * 10).astype(np.int8))
    np.save(root / "u64-huge.npy", np.array([[2**63 + 5, 1], [2**64 - 1, 2], [3, 4], [5, 6]], dtype=np.uint64))
    np.save(root / "bool.npy", X > 0)
    np.save(root / "big-endian.npy", X.astype(">f8"))
    np.save(root / "fortran.npy", np.asfortranarray(X))
    np.save(root / "scalar.npy", np.array(3.0))
    np.save(root / "zero-rows.npy", np.zeros((0, 2)))
    np.save(root / "zero-cols.npy", np.zeros((5, 0)))
    np.save(root / "one-d.npy", X[:, 0])
    np.save(root / "structured.npy", np.zeros(5, dtype=[("a", "f8"), ("b", "f8")]))
    np.save(root / "strings.npy", np.array(["ACGT", "ACGA", "TTGA", "AAAA"] * 5))
    np.save(root / "datetimes.npy", np.array(["2020-01-01"] * 10, dtype="datetime64[D]"))
    np.save(root / "complex-real.npy", X.astype(complex))
    np.save(root / "longdouble.npy", X.astype(np.longdouble))
    np.save(root / "subnormal.npy", X * 1e-310)
    np.save(root / "int-near-2-62.npy", (rng.integers(0, 1000, size=(40, 2)) + 2**62).astype(np.int64))
    np.save(root / "mixed-magnitudes.npy", np.vstack([X[:38], [[1e300, 1e-300], [-1e-300, -1e300]]]))
    np.save(root / "constant.npy", np.ones((40, 2)))
    np.save(root / "wide-few.npy", rng.normal(size=(5, 1000)))
    np.save(root / "wide-few-y.npy", rng.normal(size=(5, 1000)))
    np.save(root / "two.npy", X[:2])
    np.save(root / "many.npy", rng.normal(size=(1000, 2)))
    np.savez(root / "archive.npz", x=X)
    shutil.copy(root / "archive.npz", root / "npz-named-npy.npy")
    np.save(root / "inf.npy", np.vstack([X, [[np.inf, 0.0]]]))
    np.save(root / "neg-zero.npy", np.vstack([X, [[-0.0, 0.0]]]))
    # gross outliers: the truth is the same data with the outlier at 1e10 (bounded kernels
    # give it 0 against every other point either way)
    out = X.copy()
    out[0] = [1e250, -1e250]
    np.save(root / "outlier-1e250.npy", out)
    mild = X.copy()
    mild[0] = [1e10, -1e10]
    np.save(root / "outlier-1e10.npy", mild)
    # scale invariance of the bounded kernels
    np.save(root / "x-tiny.npy", X * 1e-200)
    np.save(root / "y-tiny.npy", Y * 1e-200)
    np.save(root / "x-vast.npy", X * 1e200)
    np.save(root / "y-vast.npy", Y * 1e200)
    # shift: the linear and energy MMDs ignore it (1e9 + X is exact in binary: 2^30-ish)
    np.save(root / "x-shifted.npy", X + 2.0**30)
    np.save(root / "y-shifted.npy", Y + 2.0**30)
    # the robust test's promise: N(0, I) against N(3, I), one point far out
    A, B = rng.normal(size=(60, 2)), rng.normal(3.0, 1.0, size=(60, 2))
    A[0] = [1e200, 1e200]
    np.save(root / "robust-x.npy", A)
    np.save(root / "robust-y.npy", B)
    # text files
    (root / "nums.txt").write_text("".join(f"{a!r} {b!r}\n" for a, b in X.tolist()))
    (root / "nums-y.txt").write_text("".join(f"{a!r}\t{b!r}\n" for a, b in Y.tolist()))
    (root / "nums-blank-lines.txt").write_text("".join(f"{a!r} {b!r}\n\n" for a, b in X.tolist()))
    (root / "strings.txt").write_text("ACGTACGT\nACGTTTGA\nTTGACCAA\nAAGGTTCC\n" * 5)
    (root / "strings-y.txt").write_text("ACGAACGT\nACCTTTGA\nTTGGCCAA\nAAGCTTCC\n" * 5)
    (root / "strings-crlf.txt").write_bytes(b"ACGTACGT\r\nACGTTTGA\r\nTTGACCAA\r\nAAGGTTCC\r\n" * 5)
    (root / "strings-empty-line.txt").write_text("ACGTACGT\n\nACGTTTGA\nTTGACCAA\n" * 5)
    (root / "strings-unicode.txt").write_text("ACGTΩCGT\nACGTTTGA\n" * 10)
    (root / "strings-spaces.txt").write_text("ACGT ACGT\nACGTTTGA\n" * 10)
    (root / "strings-one-char.txt").write_text("A\nC\nG\nT\n" * 5)
    # FASTA
    fasta = "".join(f">s{i}\nACGTTGCA{'ACGT'[i % 4]}GGA\n" for i in range(12))
    fasta_y = "".join(f">s{i}\nACCTTGAA{'ACGT'[i % 4]}GTA\n" for i in range(12))
    (root / "a.fa").write_text(fasta)
    (root / "b.fa").write_text(fasta_y)
    (root / "crlf.fa").write_bytes(fasta.replace("\n", "\r\n").encode())
    (root / "header-only.fa").write_text(">only\n")
    (root / "stop-codon.fa").write_text(fasta + ">p\nMKV*\n")
    (root / "gaps.fa").write_text(fasta + ">g\nACG--TGA\n")
    (root / "ambiguous-n.fa").write_text(fasta + ">n\nACGNNTGA\n")
    (root / "spaces-in-sequence.fa").write_text(fasta + ">sp\nACG TGA\n")
    (root / "bom.fa").write_bytes("\ufeff".encode() + fasta.encode())
    (root / "protein.fa").write_text("".join(f">p{i}\nMKVLAAGIVG{'WYFH'[i % 4]}\n" for i in range(12)))
    (root / "duplicate-names.fa").write_text(fasta + fasta)
    (root / "empty.fa").write_text("")
    (root / "semicolon-comment.fa").write_text(";comment\n" + fasta)
    (root / "x.fa.gz").write_bytes(b"\x1f\x8b\x08\x00\x00")
    (root / "notes.md").write_text("notes")
    (root / "no-suffix").write_text("1,2\n3,4\n")
    (root / ("long-name-" + "n" * 240 + ".csv")).write_text(lines)
    (root / "sub").mkdir()
    (root / "a-file").write_text("x")


# ---------------------------------------------------------------------------------------
# plugin distributions (entry points of fake installed packages)

PLUGIN_SOURCE = """
from typing import ClassVar
import os, sys, time, warnings
import attrs
import numpy as np
from monk_framework import Estimate, Kernel, MMDEstimator, hookimpl, parameter
from monk_framework.core.params import one_of
from monk_framework.numerics.distances import squared_distances


def rbf(X, Y):
    return np.exp(-squared_distances(X, Y) / 2.0)


@attrs.frozen(kw_only=True)
class Base(Kernel):
    name: ClassVar[str] = "base-audit"
    summary: ClassVar[str] = "audit"
    input_kind: ClassVar[str] = "vector"

    def compute_gram(self, X, Y):
        return rbf(X, Y)

    def compute_diag(self, X):
        return np.ones(len(X))


@attrs.frozen(kw_only=True)
class Lists(Base):
    name: ClassVar[str] = "lists"
    def compute_gram(self, X, Y):
        return rbf(X, Y).tolist()


@attrs.frozen(kw_only=True)
class WrongShape(Base):
    name: ClassVar[str] = "wrong-shape"
    def compute_gram(self, X, Y):
        return rbf(X, Y)[:, :-1]


@attrs.frozen(kw_only=True)
class Flat(Base):
    name: ClassVar[str] = "flat"
    def compute_gram(self, X, Y):
        return rbf(X, Y).ravel()


@attrs.frozen(kw_only=True)
class Objects(Base):
    name: ClassVar[str] = "objects"
    def compute_gram(self, X, Y):
        return rbf(X, Y).astype(object)


@attrs.frozen(kw_only=True)
class Matrix(Base):
    name: ClassVar[str] = "matrix"
    def compute_gram(self, X, Y):
        return np.asmatrix(rbf(X, Y))


@attrs.frozen(kw_only=True)
class Infinite(Base):
    name: ClassVar[str] = "infinite"
    def compute_gram(self, X, Y):
        K = rbf(X, Y)
        K[K < 0.5] = np.inf
        return K


@attrs.frozen(kw_only=True)
class Vast(Base):
    name: ClassVar[str] = "vast"
    summary: ClassVar[str] = "1e300 times an RBF kernel: sums beyond float64"
    def compute_gram(self, X, Y):
        return 1e300 * rbf(X, Y)
    def compute_diag(self, X):
        return np.full(len(X), 1e300)


@attrs.frozen(kw_only=True)
class NegativeDiag(Base):
    name: ClassVar[str] = "negative-diag"
    def compute_gram(self, X, Y):
        return -rbf(X, Y)
    def compute_diag(self, X):
        return -np.ones(len(X))


@attrs.frozen(kw_only=True)
class Slow(Base):
    name: ClassVar[str] = "slow"
    def compute_gram(self, X, Y):
        time.sleep(0.2)
        return rbf(X, Y)


@attrs.frozen(kw_only=True)
class OutOfMemory(Base):
    name: ClassVar[str] = "out-of-memory"
    def compute_gram(self, X, Y):
        raise MemoryError()


@attrs.frozen(kw_only=True)
class Recursive(Base):
    name: ClassVar[str] = "recursive"
    def compute_gram(self, X, Y):
        return self.compute_gram(X, Y)


@attrs.frozen(kw_only=True)
class RawStdout(Base):
    name: ClassVar[str] = "raw-stdout"
    def compute_gram(self, X, Y):
        os.write(1, b"debug: computing a tile\\n")
        return rbf(X, Y)


@attrs.frozen(kw_only=True)
class SetsErrors(Base):
    name: ClassVar[str] = "sets-errors"
    def compute_gram(self, X, Y):
        np.seterr(all="raise")
        return rbf(X, Y)


@attrs.frozen(kw_only=True)
class Interrupting(Base):
    name: ClassVar[str] = "interrupting"
    def compute_gram(self, X, Y):
        raise KeyboardInterrupt


@attrs.frozen(kw_only=True)
class BadBound(Base):
    name: ClassVar[str] = "bad-bound"
    def sup_diag(self):
        return float("nan")


@attrs.frozen(kw_only=True)
class StringBound(Base):
    name: ClassVar[str] = "string-bound"
    def sup_diag(self):
        return "one"


@attrs.frozen(kw_only=True)
class Changes(Base):
    name: ClassVar[str] = "changes"
    summary: ClassVar[str] = "values that change from call to call"
    def compute_gram(self, X, Y):
        return rbf(X, Y) * (1.0 + 0.01 * np.random.default_rng().random())
    def compute_diag(self, X):
        return np.ones(len(X))


class Thing:
    pass


@attrs.frozen(kw_only=True)
class Strange(MMDEstimator):
    name: ClassVar[str] = "strange"
    summary: ClassVar[str] = "audit estimator; mode chooses what compute_estimate returns"
    mode: str = parameter("string", doc="what to return", check=one_of("string", "array", "none", "bool", "vast", "nan",
                          "thing"))

    def compute_estimate(self, kernel, X, Y, rng, resources):
        value = {"string": "0.5", "array": np.array([0.25]), "none": None, "bool": True, "vast": 10**400,
                 "nan": float("nan")}.get(self.mode, 0.25)
        if self.mode == "thing":
            return Thing()
        return Estimate(mmd2=value, mmd=0.5)


@hookimpl
def monk_kernels():
    return [Lists, WrongShape, Flat, Objects, Matrix, Infinite, Vast, NegativeDiag, Slow, OutOfMemory, Recursive,
            RawStdout, SetsErrors, Interrupting, BadBound, StringBound, Changes]


@hookimpl
def monk_estimators():
    return [Strange]
"""

#: import-time faults, each its own distribution: (dist name, entry name, module source)
IMPORT_FAULTS = {
    "exits-at-import": "import sys\nsys.exit(0)\n",
    "syntax-error": "def broken(:\n    pass\n",
    "chdir-at-import": "import os\nos.chdir('/')\n",
    "warnings-as-errors": "import warnings\nwarnings.simplefilter('error')\n",
    "hook-returns-text": ("from monk_framework import hookimpl\n\n@hookimpl\ndef monk_kernels():\n    return ['rbf']\n"),
    "hook-returns-instance": (
        "from monk_framework import hookimpl\nfrom monk_plugins.vector_kernels import RBFKernel\n\n"
        "class Mine(RBFKernel):\n    name = 'mine-rbf'\n\n@hookimpl\ndef monk_kernels():\n    return [Mine()]\n"
    ),
    "duplicate-builtin": (
        "from typing import ClassVar\nimport attrs\nfrom monk_framework import hookimpl\n"
        "from monk_plugins.vector_kernels import RBFKernel\n\n@attrs.frozen(kw_only=True)\nclass Rbf2(RBFKernel):\n"
        "    name: ClassVar[str] = 'rbf'\n\n@hookimpl\ndef monk_kernels():\n    return [Rbf2]\n"
    ),
    "misspelled-hook": "from monk_framework import hookimpl\n\n@hookimpl\ndef monk_kernel():\n    return []\n",
    "keyboard-interrupt-at-import": "raise KeyboardInterrupt\n",
    "writes-fd1-at-import": "import os\nos.write(1, b'hello from a plugin, straight to descriptor 1\\n')\n",
    "prints-at-import": "print('hello from a plugin')\n",
    "seterr-at-import": "import numpy as np\nnp.seterr(all='raise')\n",
}


def write_plugins(root: Path) -> dict[str, Path]:
    """One site with the misbehaving kernels, and one site per import-time fault."""
    sites: dict[str, Path] = {}

    def dist(site: Path, name: str, module: str, source: str) -> None:
        info = site / f"{name.replace('-', '_')}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[monk_framework.plugins]\n{name} = {module}\n")
        (site / f"{module}.py").write_text(source)

    site = root / "site-audit"
    dist(site, "audit-kernels", "audit_kernels", PLUGIN_SOURCE)
    sites["audit"] = site
    for fault, source in IMPORT_FAULTS.items():
        s = root / f"site-{fault}"
        dist(s, f"audit-{fault}", f"audit_{fault.replace('-', '_')}", source)
        sites[fault] = s
    return sites


# ---------------------------------------------------------------------------------------
# results folders of `experiment exp1 --quick --runs 1`


def write_results(root: Path) -> None:
    base = root / "exp-base"
    subprocess.run([*MONKFW, "-q", "experiment", "exp1", "--quick", "--runs", "1", "--out", str(base)], cwd=root, check=True, capture_output=True)
    journal = (base / "cells.jsonl").read_text().splitlines(keepends=True)

    def folder(name: str) -> Path:
        p = root / name
        shutil.copytree(base, p)
        return p

    folder("exp-crlf-journal")
    (root / "exp-crlf-journal" / "cells.jsonl").write_bytes("".join(journal).replace("\n", "\r\n").encode())
    folder("exp-journal-swapped")
    (root / "exp-journal-swapped" / "cells.jsonl").write_text(journal[1] + journal[0] + "".join(journal[2:]))
    folder("exp-journal-dup")
    (root / "exp-journal-dup" / "cells.jsonl").write_text("".join(journal) + journal[0])
    folder("exp-journal-long-line")
    (root / "exp-journal-long-line" / "cells.jsonl").write_text("".join(journal) + "x" * 5_000_000 + "\n" + journal[0])
    folder("exp-journal-zero")
    (root / "exp-journal-zero" / "cells.jsonl").unlink()
    os.symlink("/dev/zero", root / "exp-journal-zero" / "cells.jsonl")
    folder("exp-manifest-zero")
    (root / "exp-manifest-zero" / "manifest.json").unlink()
    os.symlink("/dev/zero", root / "exp-manifest-zero" / "manifest.json")
    folder("exp-manifest-list")
    (root / "exp-manifest-list" / "manifest.json").write_text("[1, 2, 3]\n")
    folder("exp-manifest-extra-key")
    m = json.loads((base / "manifest.json").read_text())
    m["note"] = "mine"
    (root / "exp-manifest-extra-key" / "manifest.json").write_text(json.dumps(m))
    folder("exp-manifest-config-types")
    m = json.loads((base / "manifest.json").read_text())
    m["config"] = {k: str(v) for k, v in m["config"].items()}
    (root / "exp-manifest-config-types" / "manifest.json").write_text(json.dumps(m))
    folder("exp-manifest-bom")
    (root / "exp-manifest-bom" / "manifest.json").write_bytes("\ufeff".encode() + (base / "manifest.json").read_bytes())
    folder("exp-journal-binary")
    (root / "exp-journal-binary" / "cells.jsonl").write_bytes(os.urandom(3000) + b"\n")
    folder("exp-journal-only-newlines")
    (root / "exp-journal-only-newlines" / "cells.jsonl").write_text("\n" * 10)
    folder("exp-summary-dir")
    (root / "exp-summary-dir" / "summary.csv").unlink()
    (root / "exp-summary-dir" / "summary.csv").mkdir()
    folder("exp-figure-dir")
    for f in (root / "exp-figure-dir").glob("*.png"):
        f.unlink()
        f.mkdir()
    folder("exp-manifest-dir")
    (root / "exp-manifest-dir" / "manifest.json").unlink()
    (root / "exp-manifest-dir" / "manifest.json").mkdir()
    (root / "exp-user-summary").mkdir()
    (root / "exp-user-summary" / "summary.csv").write_text("my,own\n1,2\n")
    folder("exp-journal-truncated-mid")
    text = "".join(journal)
    (root / "exp-journal-truncated-mid" / "cells.jsonl").write_text(text[: len(text) // 2])
    folder("exp-journal-record-edited")
    rec = json.loads(journal[0])
    rec["rows"][0]["error"] = 123.0 if "error" in rec["rows"][0] else 0
    (root / "exp-journal-record-edited" / "cells.jsonl").write_text(json.dumps(rec) + "\n" + "".join(journal[1:]))


# ---------------------------------------------------------------------------------------
# truths for the cases that must succeed


def _json_number(p: subprocess.CompletedProcess[str], key: str) -> float:
    return float(json.loads(p.stdout)[key])


def same_as(other: list[str], key: str, rtol: float = 1e-9) -> Callable[[subprocess.CompletedProcess[str], Path], str | None]:
    """The case's number must equal that of another command (an invariance)."""

    def check(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
        q = subprocess.run([*MONKFW, *other], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
        if q.returncode != 0:
            return f"the reference command failed: {q.stderr.strip().splitlines()[-1:]}"
        a, b = _json_number(p, key), _json_number(q, key)
        if not (math.isfinite(a) and abs(a - b) <= rtol * max(abs(b), 1e-300)):
            return f"{key} = {a!r}, the invariant reference gives {b!r}"
        return None

    return check


def below(key: str, limit: float) -> Callable[[subprocess.CompletedProcess[str], Path], str | None]:
    def check(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
        v = _json_number(p, key)
        return None if v <= limit else f"{key} = {v!r}, expected at most {limit}"

    return check


def numpy_truth(fn: Callable[[Path], float], key: str, rtol: float = 1e-9) -> Callable[[subprocess.CompletedProcess[str], Path], str | None]:
    def check(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
        want, got = fn(cwd), _json_number(p, key)
        return None if abs(got - want) <= rtol * max(abs(want), 1e-300) else f"{key} = {got!r}, the truth is {want!r}"

    return check


def _rbf_v(X: np.ndarray, Y: np.ndarray, sigma: float) -> float:
    def k(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        D = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
        return np.exp(-D / (2 * sigma * sigma))

    return float(k(X, X).mean() + k(Y, Y).mean() - 2 * k(X, Y).mean())


def _files_v(x: str, y: str, sigma: float, cast: Callable[[np.ndarray], np.ndarray] = lambda a: a) -> Callable[[Path], float]:
    return lambda cwd: _rbf_v(cast(np.load(cwd / x).astype(float)), cast(np.load(cwd / y).astype(float)), sigma)


def _median_sigma_ordinary(cwd: Path) -> float:
    X, Y = np.load(cwd / "outlier-1e250.npy"), np.load(cwd / "y.npy")
    Z = np.vstack([X[1:], Y])
    D = np.sqrt(((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))[np.triu_indices(len(Z), 1)]
    return float(np.median(D))


def median_of_ordinary(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
    """The median heuristic beside one gross outlier: the pooled median, which the 79
    ordinary pairs per outlier barely move; it must be near the ordinary points' median."""
    sigma = float(json.loads(p.stdout)["kernel_params"]["sigma"])
    want = _median_sigma_ordinary(cwd)
    return None if 0.9 * want < sigma < 1.1 * want else f"sigma = {sigma!r}, the ordinary points' median distance is {want!r}"


def _rbf_mean_off(cwd: Path) -> float:
    """The mean of k(x_i, x_j) over i != j for x.npy and the RBF kernel at sigma = 1."""
    X = np.load(cwd / "x.npy")
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 2)
    n = len(X)
    return float((K.sum() - n) / (n * (n - 1)))


def json_parses(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
    try:
        json.loads(p.stdout)
    except ValueError as exc:
        return f"stdout is no JSON: {exc}: {p.stdout[:80]!r}"
    return None


def says_in_output(word: str) -> Callable[[subprocess.CompletedProcess[str], Path], str | None]:
    def check(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
        return None if word in p.stdout + p.stderr else f"the output never names {word!r}"

    return check


def journal_intact(folder: str, args: list[str]) -> Callable[[subprocess.CompletedProcess[str], Path], str | None]:
    """After an interruption: every journal line is complete JSON, and the command resumes."""

    def check(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
        path = cwd / folder / "cells.jsonl"
        if path.exists():
            for i, line in enumerate(path.read_text().splitlines(), 1):
                try:
                    json.loads(line)
                except ValueError:
                    return f"journal line {i} is not JSON after the interruption"
        again = subprocess.run([*MONKFW, "-q", *[a for a in args if a != "--fresh"]], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
        if again.returncode != 0:
            return f"the resume failed: {again.stderr.strip().splitlines()[-1:]}"
        return None

    return check


# ---------------------------------------------------------------------------------------
# the cases

RUN, TEST = ["run", "-k", "rbf", "-e", "u-stat"], ["test", "-k", "rbf", "-e", "u-stat"]
J = ["--json"]

# -- usage: options a user guesses --------------------------------------------------------
case("seed-text", "usage", [*RUN, *SMALL, "--seed", "abc"], says=("seed",))
case("seed-float", "usage", [*RUN, *SMALL, "--seed", "1.5"], says=("seed",))
case("seed-past-uint64", "usage", [*RUN, *SMALL, "--seed", str(2**64), *J], expect="either", check=json_parses)
case("seed-huge-valid", "usage", [*RUN, *SMALL, "--seed", str(2**63 - 1), *J], expect="ok", check=json_parses)
case("one-permutation", "usage", [*TEST, *SMALL, "-B", "1", *J], expect="ok", check=below("pvalue", 1.0))
case("alpha-below-resolution", "usage", [*TEST, *SMALL, "-B", "19", "--alpha", "0.001"], expect="either")
case("json-and-quiet", "usage", ["-q", *RUN, *SMALL, *J], expect="ok", check=json_parses)
case("empty-kernel-name", "usage", ["run", "-k", "", "-e", "u-stat", *SMALL], says=("kernel",))
case("empty-estimator-name", "usage", ["run", "-k", "rbf", "-e", "", *SMALL], says=("estimator",))
case("spec-trailing-colon", "usage", ["run", "-k", "rbf:", "-e", "u-stat", *SMALL], expect="either")
case("spec-key-without-value", "usage", ["run", "-k", "rbf:sigma", "-e", "u-stat", *SMALL], says=("sigma",))
case("spec-without-name", "usage", ["run", "-k", ":sigma=1", "-e", "u-stat", *SMALL], says=("kernel",))
case("spec-two-colons", "usage", ["run", "-k", "rbf:sigma=1:2", "-e", "u-stat", *SMALL], says=("sigma",))
case("spec-comma-for-colon", "usage", ["run", "-k", "rbf,sigma=1", "-e", "u-stat", *SMALL], says=("rbf",))
case("spec-unicode-name", "usage", ["run", "-k", "rbf\u00e9", "-e", "u-stat", *SMALL], says=("kernel",))
case("param-routed-to-estimator-unknown", "usage", [*RUN, *SMALL, "-p", "estimator.sigma=1"], says=("sigma",))
case("param-routed-unknown-target", "usage", [*RUN, *SMALL, "-p", "data.sigma=1"], says=("data",))
case("param-empty-value", "usage", [*RUN, *SMALL, "-p", "sigma="], says=("sigma",))
case("param-equals-only", "usage", [*RUN, *SMALL, "-p", "="], says=("param",))
case("max-memory-one-byte", "usage", [*RUN, *SMALL, "--max-memory", "1B", *J], expect="either")
case("max-memory-zero", "usage", [*RUN, *SMALL, "--max-memory", "0"], says=("max_memory",))
case("max-memory-nan", "usage", [*RUN, *SMALL, "--max-memory", "nanGB"], says=("max_memory",))
case("max-memory-inf", "usage", [*RUN, *SMALL, "--max-memory", "infGB"], says=("max_memory",))
case("permutations-as-float", "usage", [*TEST, *SMALL, "-B", "1e3"], says=("permutations",))
case("contamination-zero", "usage", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "0", *J], expect="either")
case("contamination-1e400", "usage", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "1e400"], says=("contamination",))
case("contamination-nan", "usage", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "nan"], says=("contamination",))
case("contamination-just-below-half", "usage", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "0.4999"], expect="either")
case("contamination-percent", "usage", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "5%"], says=("contamination",))
case("clip-without-contamination", "usage", [*TEST, *SMALL, "--clip", "2"], says=("clip",))
case("blocks-without-contamination", "usage", [*TEST, *SMALL, "--blocks", "5"], says=("blocks",))
case("method-without-contamination", "usage", [*TEST, *SMALL, "--method", "dc"], says=("method",))
case("bandwidths-without-aggregate", "usage", [*TEST, *SMALL, "--bandwidths", "1,2"], says=("bandwidths",))
case("null-with-run", "usage", [*RUN, *SMALL, "--null"], says=("null",))
case("trace-with-test", "usage", [*TEST, *SMALL, "--trace"], says=("trace",))
case("describe-nothing-given", "usage", ["describe"], says=("describe",))
case("describe-estimator", "usage", ["describe", "monk-bcd"], expect="ok")
case("describe-dataset", "usage", ["describe", "splice-ei-ie"], expect="ok")
case("describe-spec", "usage", ["describe", "rbf:sigma=2"], expect="either")
case("plugins-json", "usage", ["plugins", "--json"], expect="either")
case("datasets-listed", "usage", ["datasets"], expect="ok")
case("version", "usage", ["--version"], expect="ok")
case("help-of-test", "usage", ["test", "--help"], expect="ok")
case("experiment-without-name", "usage", ["experiment"], says=("experiment",))
case("experiment-quick-twice", "usage", ["experiment", "exp1", "--quick", "--quick", "--runs", "1", "--out", "exp-q2"], expect="either")
case("files-after-options", "usage", ["test", "-k", "rbf", "x.npy", "y.npy", "-B", "99", *J], expect="ok", check=json_parses)
case("run-positional-files", "usage", ["run", "x.npy", "y.npy", *J], expect="ok", check=json_parses)
case("run-one-positional", "usage", ["run", "x.npy"], says=("y",))
case("x-and-positional", "usage", ["run", "--x", "x.npy", "y.npy", "x.npy"], expect="either")
case("long-option-typo", "usage", [*RUN, *SMALL, "--permutation", "9"], says=("permutation",))
case("short-option-unknown", "usage", [*RUN, *SMALL, "-z"], says=("-z",))
case("equals-form", "usage", ["run", "--kernel=rbf", "--estimator=v-stat", *SMALL, *J], expect="ok", check=json_parses)
case("kernel-and-estimator-swapped", "usage", ["run", "-k", "u-stat", "-e", "rbf", *SMALL], says=("u-stat",))
case("dataset-spec-in-dataset", "usage", ["run", "-d", "gauss:n=30"], expect="either")
case("backend-dask-workers-zero", "usage", [*RUN, *SMALL, "--backend", "dask", "--workers", "0"], says=("workers",))
case("scheduler-without-dask", "usage", [*RUN, *SMALL, "--scheduler", "tcp://127.0.0.1:8786"], says=("scheduler",))
case("workers-without-dask", "usage", [*RUN, *SMALL, "--workers", "2"], says=("workers",))


# -- data files ----------------------------------------------------------------------------
def _run_files(x: str, y: str = "y.npy", kernel: str = "rbf:sigma=1", est: str = "v-stat") -> list[str]:
    return ["run", "-k", kernel, "-e", est, "--x", x, "--y", y, *J]


for name in [
    "crlf.csv",
    "cr-only.csv",
    "plus-signs.csv",
    "leading-dots.csv",
    "spaces-around.csv",
    "blank-lines-inside.csv",
    "no-final-newline.csv",
    "quoted-numbers.csv",
    "f16.npy",
    "f32.npy",
    "i8.npy",
    "bool.npy",
    "big-endian.npy",
    "fortran.npy",
    "nums.txt",
    "nums-blank-lines.txt",
    "subnormal.npy",
    "complex-real.npy",
    "longdouble.npy",
    "neg-zero.npy",
    "two.npy",
]:
    case(f"reads-{name}", "data", _run_files(name), expect="either", check=json_parses)
for name, words in [
    ("hex-floats.csv", ("0x",)),
    ("na-cells.csv", ("NA",)),
    ("nan-word.csv", ("nan",)),
    ("empty-middle-cell.csv", ("line 41",)),
    ("one-column.csv", ("feature",)),
    ("one-row.csv", ()),
    ("wide-row.csv", ("point",)),
    ("comment-line.csv", ("#",)),
    ("header-row.csv", ()),
    ("index-column.csv", ()),
    ("commas-in-tsv.tsv", ("comma",)),
    ("gzip-named-csv.csv", ("compress",)),
    ("infinity-word.csv", ("Infinity",)),
    ("huge-cell.csv", ("1e400",)),
    ("tiny-cell.csv", ("1e-400",)),
    ("nul-bytes.csv", ()),
    ("latin1-header.csv", ()),
    ("excel-sep.csv", ("sep",)),
    ("u64-huge.npy", ()),
    ("scalar.npy", ()),
    ("zero-rows.npy", ("no points",)),
    ("zero-cols.npy", ()),
    ("one-d.npy", ()),
    ("structured.npy", ()),
    ("strings.npy", ()),
    ("datetimes.npy", ()),
    ("npz-named-npy.npy", ("npz",)),
    ("archive.npz", ("npz",)),
    ("inf.npy", ("inf",)),
    ("int-near-2-62.npy", ()),
    ("notes.md", (".md",)),
    ("no-suffix", ()),
    ("sub", ("directory",)),
    ("a-file/x.npy", ()),
    ("does-not-exist.npy", ("no such file",)),
    ("strings.txt", ()),
    ("a.fa", ()),
]:
    case(f"file-{name.replace('/', '-')}", "data", _run_files(name), expect="either", says=words, check=json_parses)
case("long-file-name", "data", _run_files("long-name-" + "n" * 240 + ".csv"), expect="ok", check=json_parses)
case("same-file-twice", "data", _run_files("x.npy", "x.npy"), expect="either", check=json_parses)
case("dimension-differs", "data", _run_files("x.npy", "wide-few.npy"), says=("feature",))
case("wide-few-points", "data", _run_files("wide-few.npy", "wide-few-y.npy", kernel="rbf"), expect="either", check=json_parses)
case("constant-median", "data", _run_files("constant.npy", "constant.npy", kernel="rbf"), says=("median",))
case("mixed-magnitudes-rbf", "data", _run_files("mixed-magnitudes.npy", kernel="rbf"), expect="either", check=json_parses)
case("mixed-magnitudes-quadratic", "data", _run_files("mixed-magnitudes.npy", kernel="quadratic", est="u-stat"), expect="either", check=json_parses)
case("two-against-thousand", "data", ["test", "-k", "rbf", "--x", "two.npy", "--y", "many.npy", "-B", "99", *J], expect="either", check=json_parses)
for name, words in [
    ("strings-crlf.txt", ()),
    ("strings-empty-line.txt", ("line",)),
    ("strings-unicode.txt", ("Ω",)),
    ("strings-spaces.txt", ()),
    ("strings-one-char.txt", ("n",)),
    ("crlf.fa", ()),
    ("header-only.fa", ()),
    ("stop-codon.fa", ("*",)),
    ("gaps.fa", ("-",)),
    ("ambiguous-n.fa", ()),
    ("spaces-in-sequence.fa", ()),
    ("bom.fa", ()),
    ("protein.fa", ()),
    ("duplicate-names.fa", ()),
    ("empty.fa", ("empty",)),
    ("semicolon-comment.fa", (";",)),
    ("x.fa.gz", ("gz",)),
    ("strings.npy", ()),
]:
    y = "b.fa" if name.endswith((".fa", ".gz")) else "strings-y.txt"
    case(
        f"strings-{name}", "data", ["run", "-k", "ssk", "-p", "n=2", "-e", "u-stat", "--x", name, "--y", y, *J], expect="either", says=words, check=json_parses
    )
case("ssk-n-zero", "data", ["run", "-k", "ssk", "-p", "n=0", "--x", "a.fa", "--y", "b.fa"], says=("n",))
case("ssk-lam-zero", "data", ["run", "-k", "ssk", "-p", "lam=0", "--x", "a.fa", "--y", "b.fa"], says=("lam",))
case("ssk-lam-one", "data", ["run", "-k", "ssk", "-p", "lam=1", "--x", "a.fa", "--y", "b.fa", *J], expect="either", check=json_parses)
case("ssk-lam-above-one", "data", ["run", "-k", "ssk", "-p", "lam=1.5", "--x", "a.fa", "--y", "b.fa"], says=("lam",))
case("ssk-n-beyond-splice", "data", ["run", "-k", "ssk", "-p", "n=100", "-d", "splice-ei-ie", "--data-param", "n=20"], says=("n",))
case("ssk-dna-against-protein", "data", ["run", "-k", "ssk", "-p", "n=2", "--x", "a.fa", "--y", "protein.fa", *J], expect="either", check=json_parses)
case("rbf-on-splice", "data", ["run", "-k", "rbf", "-d", "splice-ei-ie"], says=("string",))
case("ssk-on-pareto", "data", ["run", "-k", "ssk", "-d", "pareto"], says=("vector",))

# -- numbers that must be right ------------------------------------------------------------
case("rbf-v-gross-outlier", "numbers", _run_files("outlier-1e250.npy"), expect="ok", check=same_as(_run_files("outlier-1e10.npy"), "mmd2"))
case(
    "laplace-v-gross-outlier",
    "numbers",
    _run_files("outlier-1e250.npy", kernel="laplace:sigma=1"),
    expect="ok",
    check=same_as(_run_files("outlier-1e10.npy", kernel="laplace:sigma=1"), "mmd2"),
)
case(
    "rbf-u-gross-outlier",
    "numbers",
    _run_files("outlier-1e250.npy", est="u-stat"),
    expect="ok",
    check=same_as(_run_files("outlier-1e10.npy", est="u-stat"), "mmd2"),
)
case(
    "rbf-bcd-gross-outlier",
    "numbers",
    _run_files("outlier-1e250.npy", est="monk-bcd:n_blocks=5"),
    expect="ok",
    check=same_as(_run_files("outlier-1e10.npy", est="monk-bcd:n_blocks=5"), "mmd"),
)
case(
    "rbf-bcd-fast-gross-outlier",
    "numbers",
    _run_files("outlier-1e250.npy", est="monk-bcd-fast:n_blocks=5"),
    expect="ok",
    check=same_as(_run_files("outlier-1e10.npy", est="monk-bcd-fast:n_blocks=5"), "mmd"),
)
case(
    "rbf-embedding-gross-outlier",
    "numbers",
    _run_files("outlier-1e250.npy", est="monk-embedding-mmd:n_blocks=5"),
    expect="ok",
    check=same_as(_run_files("outlier-1e10.npy", est="monk-embedding-mmd:n_blocks=5"), "mmd", rtol=1e-6),
)
case("rbf-median-gross-outlier", "numbers", _run_files("outlier-1e250.npy", kernel="rbf"), expect="ok", check=median_of_ordinary)
case("rbf-v-truth", "numbers", _run_files("x.npy"), expect="ok", check=numpy_truth(_files_v("x.npy", "y.npy", 1.0), "mmd2"))
case("rbf-tiny-scale", "numbers", _run_files("x-tiny.npy", "y-tiny.npy", kernel="rbf:sigma=1e-200"), expect="ok", check=same_as(_run_files("x.npy"), "mmd2"))
case("rbf-vast-scale", "numbers", _run_files("x-vast.npy", "y-vast.npy", kernel="rbf:sigma=1e200"), expect="ok", check=same_as(_run_files("x.npy"), "mmd2"))
case(
    "laplace-vast-scale",
    "numbers",
    _run_files("x-vast.npy", "y-vast.npy", kernel="laplace:sigma=1e200"),
    expect="ok",
    check=same_as(_run_files("x.npy", kernel="laplace:sigma=1"), "mmd2"),
)
case(
    "rbf-median-vast-scale",
    "numbers",
    _run_files("x-vast.npy", "y-vast.npy", kernel="rbf"),
    expect="ok",
    check=same_as(_run_files("x.npy", kernel="rbf"), "mmd2"),
)


def scaled_by(other: list[str], key: str, factor: float) -> Callable[[subprocess.CompletedProcess[str], Path], str | None]:
    """The case's number must be ``factor`` times that of another command (a homogeneity)."""

    def check(p: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
        q = subprocess.run([*MONKFW, *other], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
        a, b = _json_number(p, key), factor * _json_number(q, key)
        return None if abs(a - b) <= 1e-9 * abs(b) else f"{key} = {a!r}, {factor:g} times the unscaled one is {b!r}"

    return check


# the energy kernel is homogeneous of degree 1: MMD² scales with the data
case(
    "energy-vast-scale",
    "numbers",
    _run_files("x-vast.npy", "y-vast.npy", kernel="energy", est="u-stat"),
    expect="ok",
    check=scaled_by(_run_files("x.npy", kernel="energy", est="u-stat"), "mmd2", 1e200),
)
case(
    "energy-tiny-scale",
    "numbers",
    _run_files("x-tiny.npy", "y-tiny.npy", kernel="energy", est="v-stat"),
    expect="ok",
    check=scaled_by(_run_files("x.npy", kernel="energy", est="v-stat"), "mmd2", 1e-200),
)
case(
    "linear-shift",
    "numbers",
    _run_files("x-shifted.npy", "y-shifted.npy", kernel="linear", est="u-stat"),
    expect="ok",
    check=same_as(_run_files("x.npy", kernel="linear", est="u-stat"), "mmd2", rtol=1e-6),
)
case(
    "energy-shift",
    "numbers",
    _run_files("x-shifted.npy", "y-shifted.npy", kernel="energy", est="u-stat"),
    expect="ok",
    check=same_as(_run_files("x.npy", kernel="energy", est="u-stat"), "mmd2", rtol=1e-6),
)
case("rbf-shift", "numbers", _run_files("x-shifted.npy", "y-shifted.npy"), expect="ok", check=same_as(_run_files("x.npy"), "mmd2", rtol=1e-6))
case(
    "bcd-one-block-is-v",
    "numbers",
    _run_files("x.npy", est="monk-bcd:n_blocks=1"),
    expect="ok",
    check=lambda p, cwd: (
        None if abs(_json_number(p, "mmd") ** 2 - _files_v("x.npy", "y.npy", 1.0)(cwd)) < 1e-4 else "MONK BCD with one block is not the V-statistic"
    ),
)
case(
    "robust-dc-gross-outlier-rejects",
    "numbers",
    ["test", "-k", "rbf:sigma=1", "--x", "robust-x.npy", "--y", "robust-y.npy", "--contamination", "1", "-B", "199", *J],
    expect="ok",
    check=below("pvalue", 0.05),
)
case(
    "robust-clip-gross-outlier-rejects",
    "numbers",
    ["test", "-k", "quadratic", "--x", "robust-x.npy", "--y", "robust-y.npy", "--contamination", "1", "-B", "199", *J],
    expect="ok",
    check=below("pvalue", 0.05),
)
case(
    "permutation-gross-outlier-rejects",
    "numbers",
    ["test", "-k", "rbf:sigma=1", "--x", "robust-x.npy", "--y", "robust-y.npy", "-B", "199", *J],
    expect="ok",
    check=below("pvalue", 0.05),
)
case(
    "aggregate-gross-outlier-rejects",
    "numbers",
    ["test", "--aggregate", "agg", "--x", "robust-x.npy", "--y", "robust-y.npy", "-B", "199", *J],
    expect="ok",
    check=below("pvalue", 0.05),
)
case(
    "fuse-gross-outlier-rejects",
    "numbers",
    ["test", "--aggregate", "fuse", "--x", "robust-x.npy", "--y", "robust-y.npy", "-B", "199", *J],
    expect="ok",
    check=below("pvalue", 0.05),
)
case(
    "split-gross-outlier",
    "numbers",
    ["test", "-k", "rbf", "-e", "u-stat", "--split", "--grid", "sigma=0.5,1,2", "--x", "robust-x.npy", "--y", "robust-y.npy", "-B", "99", *J],
    expect="ok",
    check=json_parses,
)
case(
    "mom-gross-outlier",
    "numbers",
    ["test", "-k", "quadratic", "--method", "mom", "--x", "robust-x.npy", "--y", "robust-y.npy", "--contamination", "1", "-B", "199", *J],
    expect="either",
    says=("gross outliers",),
    check=json_parses,
)
case(
    "tiny-budget-same-number",
    "numbers",
    [*_run_files("x.npy", est="u-stat"), "--max-memory", "2KB"],
    expect="ok",
    check=same_as(_run_files("x.npy", est="u-stat"), "mmd2", rtol=1e-12),
)
case(
    "tiny-budget-test",
    "numbers",
    ["test", "-k", "rbf:sigma=1", "--x", "x.npy", "--y", "y.npy", "-B", "99", "--max-memory", "2KB", *J],
    expect="ok",
    check=same_as(["test", "-k", "rbf:sigma=1", "--x", "x.npy", "--y", "y.npy", "-B", "99", *J], "pvalue", rtol=0),
)

# -- every option and parameter sized by memory or time ------------------------------------
case(
    "bandwidths-many",
    "memory",
    ["test", "--aggregate", "agg", "--bandwidths", ",".join(["1"] * 3 + [f"{1 + i / 1e4:g}" for i in range(9000)]), *SMALL, "-B", "99"],
    says=("bandwidth",),
)
case(
    "grid-many",
    "memory",
    ["test", "-k", "rbf", "--split", "--grid", "sigma=" + ",".join(f"{1 + i / 1e4:g}" for i in range(9000)), *SMALL, "-B", "9"],
    expect="either",
)
case("sizes-huge", "memory", ["experiment", "exp1", "--quick", "--sizes", "1000000000", "--out", "exp-huge"], says=("memory",))
case(
    "sizes-many",
    "memory",
    ["experiment", "exp1", "--quick", "--sizes", ",".join(str(100 + i) for i in range(5000)), "--out", "exp-many"],
    expect="either",
    timeout=30,
)
# mom streams its relabellings (counts per block, no null kept): progress, an estimate, Ctrl-C
case("robust-permutations-huge", "memory", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "1", "-B", "1000000000000"], expect="either", signal_after=10.0)
case("robust-dc-permutations-huge", "memory", ["test", "-k", "rbf:sigma=1", *SMALL, "--contamination", "1", "-B", "1000000000000"], says=("memory",))
case("aggregate-permutations-huge", "memory", ["test", "--aggregate", "agg", *SMALL, "-B", "1000000000000"], says=("memory",))
case("split-permutations-huge", "memory", ["test", "-k", "rbf", "--split", "--grid", "sigma=1,2", *SMALL, "-B", "1000000000000"], says=("memory",))
case("blocks-huge", "memory", [*TEST, *SMALL, "-p", "sigma=1", "--contamination", "1", "--method", "mom", "--blocks", "1000000000"], says=("blocks",))
case("n-iter-huge-trace", "memory", ["run", "-k", "rbf", "-e", "monk-bcd", "-p", "n_iter=1000000000000", *SMALL, "--trace"], says=("trace",))
case("lepski-max-huge", "memory", ["run", "-k", "rbf", "-e", "monk-bcd", "-p", "n_blocks=auto", *SMALL], expect="either")
case(
    "exact-solver-many-blocks",
    "memory",
    ["run", "-k", "rbf", "-e", "monk-bcd", "-p", "n_blocks=61,solver=exact", "-d", "gauss", "--data-param", "n=400"],
    expect="either",
    timeout=60,
)
case("ssk-n-huge", "memory", ["run", "-k", "ssk", "-p", "n=1000000000", "--x", "a.fa", "--y", "b.fa"], says=("n",))
case("dataset-d-huge", "memory", ["run", "-d", "gauss", "--data-param", "d=1000000000"], says=("memory",))
case("dataset-m-huge", "memory", ["run", "-d", "gauss", "--data-param", "n=10", "--data-param", "m=10000000000"], says=("memory",))
case("splice-n-huge", "memory", ["run", "-k", "ssk", "-d", "splice-ei-ie", "--data-param", "n=100000"], says=("n",))
case("rff-features-huge", "memory", ["run", "-k", "rbf", "-e", "rff", "-p", "n_features=1000000000000", *SMALL], says=("memory",))
case("workers-huge", "memory", [*RUN, *SMALL, "--backend", "dask", "--workers", "1000000"], says=("workers",))

# -- plugins ---------------------------------------------------------------------------------
AUDIT = {"MONK_AUDIT_SITE": "audit"}
for kname, words in [
    ("lists", ()),
    ("wrong-shape", ("shape",)),
    ("flat", ("shape",)),
    ("objects", ()),
    ("matrix", ()),
    ("infinite", ("inf",)),
    ("vast", ()),
    ("negative-diag", ("negative",)),
    ("out-of-memory", ("out of memory",)),
    ("recursive", ("recursion",)),
    ("sets-errors", ()),
    ("bad-bound", ("sup_diag",)),
    ("string-bound", ("sup_diag",)),
    ("changes", ()),
]:
    for est in ("v-stat", "u-stat", "monk-bcd-fast:n_blocks=3"):
        case(
            f"plugin-{kname}-{est.split(':')[0]}",
            "plugins",
            ["run", "-k", kname, "-e", est, *SMALL, *J],
            env=AUDIT,
            expect="either",
            says=words,
            check=json_parses,
        )
    case(
        f"plugin-{kname}-test",
        "plugins",
        ["test", "-k", kname, "-e", "u-stat", *SMALL, "-B", "19", *J],
        env=AUDIT,
        expect="either",
        says=words,
        check=json_parses,
    )
    case(
        f"plugin-{kname}-robust",
        "plugins",
        ["test", "-k", kname, *SMALL, "-B", "19", "--contamination", "1", *J],
        env=AUDIT,
        expect="either",
        says=words,
        check=json_parses,
    )
case("plugin-raw-stdout-json", "plugins", ["run", "-k", "raw-stdout", "-e", "u-stat", *SMALL, *J], env=AUDIT, expect="ok", check=json_parses)
case("plugin-raw-stdout-test-json", "plugins", ["test", "-k", "raw-stdout", *SMALL, "-B", "19", *J], env=AUDIT, expect="ok", check=json_parses)
case(
    "plugin-slow-progress",
    "plugins",
    ["run", "-k", "slow", "-e", "u-stat", "-d", "gauss", "--data-param", "n=3000", "--max-memory", "200KB"],
    env=AUDIT,
    expect="either",
    signal_after=8.0,
)
case("plugin-interrupting", "plugins", ["run", "-k", "interrupting", "-e", "u-stat", *SMALL], env=AUDIT, expect="either")
for mode in ("string", "array", "none", "bool", "vast", "thing"):
    case(f"estimator-returns-{mode}", "plugins", ["run", "-k", "rbf", "-e", f"strange:mode={mode}", *SMALL, *J], env=AUDIT, expect="either", check=json_parses)
#: import faults that `monkfw plugins` must report (the others load, with what they changed put back)
REPORTED_FAULTS = ("exits-at-import", "syntax-error", "hook-returns-text", "hook-returns-instance", "duplicate-builtin", "misspelled-hook")
for fault in IMPORT_FAULTS:
    case(f"import-{fault}", "plugins", ["run", "-k", "rbf", "-e", "u-stat", *SMALL, *J], env={"MONK_AUDIT_SITE": fault}, expect="either", check=json_parses)
    case(
        f"import-{fault}-plugins",
        "plugins",
        ["plugins"],
        env={"MONK_AUDIT_SITE": fault},
        expect="either",
        check=says_in_output(f"audit-{fault}") if fault in REPORTED_FAULTS else None,
    )
case(
    "import-chdir-relative-files",
    "plugins",
    ["run", "--x", "x.npy", "--y", "y.npy", "-o", "chdir.json", *J],
    env={"MONK_AUDIT_SITE": "chdir-at-import"},
    expect="ok",
    check=same_as(["run", "--x", "x.npy", "--y", "y.npy", *J], "mmd2"),
)
case("load-plugins-empty", "plugins", [*RUN, *SMALL, *J], env={"MONK_LOAD_PLUGINS": ""}, expect="either", check=json_parses)
case("load-plugins-commas", "plugins", [*RUN, *SMALL, *J], env={"MONK_LOAD_PLUGINS": ",,"}, expect="either", check=json_parses)
case("load-plugins-only-audit", "plugins", ["run", "-k", "rbf", "-e", "u-stat", *SMALL], env={**AUDIT, "MONK_LOAD_PLUGINS": "audit-kernels"}, expect="either")
case("compiled-off", "plugins", [*RUN, *SMALL, *J], env={"MONK_COMPILED": "0"}, expect="ok", check=same_as([*RUN, *SMALL, *J], "mmd2", rtol=1e-12))

# -- results folders and output files --------------------------------------------------------
EXP = ["experiment", "exp1", "--quick", "--runs", "1", "--out"]
for folder, expect in [
    ("exp-crlf-journal", "either"),
    ("exp-journal-swapped", "err"),
    ("exp-journal-dup", "either"),
    ("exp-journal-long-line", "err"),
    ("exp-journal-zero", "err"),
    ("exp-manifest-zero", "err"),
    ("exp-manifest-list", "err"),
    ("exp-manifest-extra-key", "err"),
    ("exp-manifest-config-types", "err"),
    ("exp-manifest-bom", "either"),
    ("exp-journal-binary", "either"),
    ("exp-journal-only-newlines", "either"),
    ("exp-summary-dir", "err"),
    ("exp-figure-dir", "err"),
    ("exp-manifest-dir", "err"),
    ("exp-user-summary", "err"),
    ("exp-journal-truncated-mid", "either"),
    ("exp-journal-record-edited", "err"),
]:
    case(f"results-{folder[4:]}", "results", [*EXP, folder], expect=expect)
case("results-fresh-on-foreign", "results", [*EXP, "exp-user-summary", "--fresh"], says=("summary.csv",))
case("out-under-a-file", "results", [*EXP, "a-file/out"], says=("a-file",))
case("out-in-proc", "results", [*EXP, "/proc/monk-out"], says=("/proc",))
case("out-name-too-long", "results", [*EXP, "o" * 300], says=("long",))
case("output-to-dev-full", "results", [*RUN, *SMALL, "-o", "/dev/full"], says=("/dev/full",))
case("stdout-is-full-json", "results", [*RUN, *SMALL, *J], stdout_to="/dev/full", says=("No space left",))
case("stdout-is-full-table", "results", [*RUN, *SMALL], stdout_to="/dev/full", says=("No space left",))
case("stdout-is-full-test-saved", "results", [*TEST, *SMALL, "-B", "99", "-o", "full-kept.json"], stdout_to="/dev/full", says=("No space left",), check=None)
case("stdout-is-full-experiment", "results", [*EXP, "exp-full-stdout"], stdout_to="/dev/full", says=("No space left",))
case("output-to-dev-null", "results", [*RUN, *SMALL, "-o", "/dev/null"], expect="either")
case("output-in-missing-dir", "results", [*RUN, *SMALL, "-o", "no/such/dir/r.json"], expect="either")
case("output-trailing-slash", "results", [*RUN, *SMALL, "-o", "newdir/"], expect="either")
case("output-over-data", "results", [*RUN, "--x", "x.npy", "--y", "y.npy", "-o", "y.npy"], says=("y.npy",))
case("output-name-too-long", "results", [*RUN, *SMALL, "-o", "r" * 300 + ".json"], says=("long",))
INTERRUPTED = ["experiment", "exp1", "--quick", "--runs", "20", "--out", "exp-interrupted"]
case("interrupt-experiment", "results", INTERRUPTED, expect="either", signal_after=3.0, check=journal_intact("exp-interrupted", INTERRUPTED))
FRESH = ["experiment", "exp1", "--quick", "--runs", "20", "--out", "exp-fresh-int", "--fresh"]
case("interrupt-fresh-experiment", "results", FRESH, expect="either", signal_after=3.0, check=journal_intact("exp-fresh-int", FRESH))
case(
    "interrupt-test-with-output",
    "results",
    ["test", "-k", "rbf", "-d", "gauss", "--data-param", "n=3000", "-B", "100000", "-o", "int-test.json"],
    expect="either",
    signal_after=6.0,
    check=lambda p, cwd: "a partial result file was left" if (cwd / "int-test.json").exists() and p.returncode else None,
)
DASK = ["experiment", "exp1", "--quick", "--runs", "20", "--backend", "dask", "--out", "exp-dask-int"]
case("interrupt-dask-experiment", "results", DASK, expect="either", signal_after=12.0, check=journal_intact("exp-dask-int", DASK))

# -- more options a user mistypes -----------------------------------------------------------
case("kernel-uppercase", "usage", ["run", "-k", "RBF", "-e", "u-stat", *SMALL, *J], expect="either", check=json_parses)
case("spec-shown-form-unclosed", "usage", ["run", "-k", "rbf(sigma=1", "-e", "u-stat", *SMALL], says=("parenthes",))
case("spec-shown-form", "usage", ["run", "-k", "rbf(sigma=1)", "-e", "u-stat", *SMALL, *J], expect="ok", check=json_parses)
case("spec-param-twice", "usage", ["run", "-k", "rbf:sigma=1,sigma=2", "-e", "u-stat", *SMALL], says=("twice",))
case("spec-and-param-clash", "usage", ["run", "-k", "rbf:sigma=1", "-p", "sigma=2", "-e", "u-stat", *SMALL], says=("sigma",))
case("param-joined-with-commas", "usage", ["run", "-k", "rbf", "-e", "monk-bcd", "-p", "n_blocks=5,n_iter=20", *SMALL, *J], expect="ok", check=json_parses)
case("param-list-value", "usage", [*RUN, *SMALL, "-p", "sigma=1,2"], says=("sigma",))
for name, value in [
    ("d-zero", "d=0"),
    ("n-negative", "n=-1"),
    ("std-zero", "std_x=0"),
    ("std-negative", "std_y=-1"),
    ("mean-inf", "mean_x=inf"),
    ("mean-nan", "mean_y=nan"),
    ("n-float", "n=30.5"),
    ("m-text", "m=many"),
]:
    case(f"data-param-{name}", "usage", ["run", "-d", "gauss", "--data-param", value], says=(value.split("=")[0],))
for name, value in [("empty-item", "0.1,,1"), ("text", "a,b"), ("beyond-float64", "1,1e400"), ("negative", "-1,1"), ("single", "1")]:
    case(
        f"bandwidths-{name}",
        "usage",
        ["test", "--aggregate", "agg", "--bandwidths", value, *SMALL, "-B", "99", *J],
        expect="ok" if name == "single" else "err",
        says=() if name == "single" else ("bandwidth",),
        check=json_parses,
    )
for name, value in [("empty", "sigma="), ("text", "sigma=a"), ("ssk-float-n", "n=1.5"), ("unknown-key", "foo=1"), ("no-equals", "sigma")]:
    kernel = "ssk" if name.startswith("ssk") else "rbf"
    data = ["-d", "splice-ei-ie", "--data-param", "n=40"] if kernel == "ssk" else SMALL
    case(f"grid-{name}", "usage", ["test", "-k", kernel, "--split", "--grid", value, *data, "-B", "19"], says=(value.split("=")[0],))
for name, value in [("empty-item", "100,,200"), ("negative", "-5"), ("float", "1e3"), ("zero", "0"), ("text", "big")]:
    case(f"sizes-{name}", "usage", ["experiment", "exp1", "--quick", "--sizes", value, "--out", f"exp-sizes-{name}"], says=("sizes",))
case("experiment-estimator-twice", "usage", ["experiment", "exp1", "--quick", "-e", "u-stat", "-e", "u-stat", "--out", "exp-twice"], says=("u-stat",))
case("experiment-estimator-kernel-name", "usage", ["experiment", "exp1", "--quick", "-e", "rbf", "--out", "exp-rbf"], says=("rbf",))
case("exp2-sizes-too-small", "usage", ["experiment", "exp2", "--quick", "--sizes", "2", "--out", "exp2-small"], says=("size",))
case("exp2-sizes-too-large", "usage", ["experiment", "exp2", "--quick", "--sizes", "5000", "--out", "exp2-large"], says=("size",))
case(
    "split-too-few-points", "usage", ["test", "-k", "rbf", "--split", "--grid", "sigma=1,2", "-d", "gauss", "--data-param", "n=4", "-B", "19"], expect="either"
)
case("alpha-half-one-permutation", "usage", [*TEST, *SMALL, "--alpha", "0.5", "-B", "1", *J], expect="ok", check=json_parses)
case(
    "identical-samples-test",
    "numbers",
    ["test", "-k", "rbf:sigma=1", "--x", "x.npy", "--y", "x.npy", "-B", "199", *J],
    expect="ok",
    check=lambda p, cwd: None if _json_number(p, "pvalue") > 0.5 else "identical samples rejected",
)
case(
    "constant-samples-fixed-sigma",
    "numbers",
    ["test", "-k", "rbf:sigma=1", "--x", "constant.npy", "--y", "constant.npy", "-B", "99", *J],
    expect="ok",
    check=lambda p, cwd: None if _json_number(p, "pvalue") == 1.0 else "p < 1 on equal points",
)
case(
    "duplicated-points-u",
    "numbers",
    ["run", "-k", "rbf:sigma=1", "-e", "u-stat", "--x", "x.npy", "--y", "x.npy", *J],
    expect="ok",
    check=lambda p, cwd: (
        None
        if abs(_json_number(p, "mmd2") + 2 * (1 - _rbf_mean_off(cwd)) / 40) < 1e-12
        else f"MMD_U^2 of a sample against itself is {_json_number(p, 'mmd2')!r}"
    ),
)


# -- outside parties ---------------------------------------------------------------------------
for address, words in [
    ("tcp://no-such-host.invalid:8786", ("no-such-host",)),
    ("tcp://[::1]:1", ("::1",)),
    ("tcp://127.0.0.1", ("port",)),
    ("tcp://:8786", ("host",)),
    ("8786", ()),
    ("tcp://127.0.0.1:8786/path", ()),
    ("tcp://user@127.0.0.1:1", ()),
]:
    case(f"scheduler-{re.sub(r'[^a-z0-9]+', '-', address)}", "outside", [*RUN, *SMALL, "--backend", "dask", "--scheduler", address], says=words, timeout=60)


# ---------------------------------------------------------------------------------------
# running


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def run_case(c: Case, cwd: Path, sites: dict[str, Path]) -> dict:
    env = dict(os.environ)
    env.pop("MONK_LOAD_PLUGINS", None)
    env.pop("PYTHONUNBUFFERED", None)  # as a user's shell runs it: stdout block-buffered when not a terminal
    env.update({k: v for k, v in c.env.items() if k != "MONK_AUDIT_SITE"})
    if "MONK_AUDIT_SITE" in c.env:
        env["PYTHONPATH"] = str(sites[c.env["MONK_AUDIT_SITE"]]) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "200"
    start = time.monotonic()
    sink = open(c.stdout_to, "w") if c.stdout_to else None  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*MONKFW, *c.args], cwd=cwd, env=env, stdout=sink or subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_limit)
    timed_out = False
    try:
        if c.signal_after is not None:
            try:
                out, err = proc.communicate(timeout=c.signal_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
                out, err = proc.communicate(timeout=c.timeout)
        else:
            out, err = proc.communicate(timeout=c.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    seconds = time.monotonic() - start
    if sink is not None:
        sink.close()
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out or "", err)
    grade, why = grade_case(c, p, cwd, timed_out)
    errors = [line for line in err.splitlines() if line.startswith("Error")]
    return {
        "id": c.id,
        "family": c.family,
        "args": c.args,
        "env": c.env,
        "rc": p.returncode,
        "seconds": round(seconds, 2),
        "grade": grade,
        "why": why,
        "error": errors[0] if errors else "",
        "stderr_tail": err.strip().splitlines()[-3:],
        "stdout_head": p.stdout[:200],
    }


def grade_case(c: Case, p: subprocess.CompletedProcess[str], cwd: Path, timed_out: bool) -> tuple[str, str]:
    text = p.stdout + p.stderr
    if timed_out:
        return "bad", f"no answer within {c.timeout:.0f} s"
    if "Traceback" in text or "internal error" in text.lower():
        return "bad", "a traceback or an internal error"
    if p.returncode not in (0, 1, 2, 130):
        return "bad", f"exit code {p.returncode}"
    if p.returncode == 0 and "--json" in c.args:
        problem = json_parses(p, cwd)
        if problem:
            return "bad", problem
        if re.search(r"\b(NaN|Infinity)\b", p.stdout):
            return "bad", "a non-finite number in the JSON"
    if p.returncode == 130 and c.signal_after is not None and not p.stderr.rstrip().splitlines()[-1:][0].startswith("Interrupted"):
        return "weak", "an interruption that does not end with its one line"
    if (p.returncode == 0 or (p.returncode == 130 and c.signal_after is not None)) and c.check is not None:
        try:
            problem = c.check(p, cwd)
        except Exception as exc:  # the audit's own check failed: say so, do not hide it
            problem = f"the audit's check failed: {type(exc).__name__}: {exc}"
        if problem:
            return "bad", problem
    errors = [line for line in p.stderr.splitlines() if line.startswith("Error")]
    if p.returncode in (1, 2):
        if len(errors) != 1:
            return "weak", f"{len(errors)} error lines"
        if c.says and not all(w.lower() in errors[0].lower() for w in c.says):
            return "weak", f"the error does not name {c.says}"
    if c.expect == "ok" and p.returncode != 0:
        return "check", "expected to succeed"
    if c.expect == "err" and p.returncode == 0:
        return "check", "expected to be refused"
    return "good", ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="audit-report")
    parser.add_argument("--only", default=None, help="one family")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    write_files(work)
    sites = write_plugins(work)
    write_results(work)
    cases = [c for c in CASES if args.only in (None, c.family)]
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_case(c, work, sites), cases))
    counts: dict[str, int] = {}
    for r in results:
        counts[r["grade"]] = counts.get(r["grade"], 0) + 1
    (out / "report.json").write_text(json.dumps(results, indent=1))
    lines = [f"# Hostile-input audit: {len(results)} cases", "", ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), ""]
    for r in sorted(results, key=lambda r: ("bad", "check", "weak", "good").index(r["grade"])):
        shown = " ".join(r["args"])
        lines.append(f"- **{r['grade']}** `{r['id']}` rc={r['rc']} ({r['seconds']} s) {r['why']}")
        lines.append(f"  - `monkfw {textwrap.shorten(shown, 160)}`" + (f" env={r['env']}" if r["env"] else ""))
        if r["error"]:
            lines.append(f"  - {textwrap.shorten(r['error'], 400)}")
        elif r["rc"] != 0:
            lines.append(f"  - stderr: {r['stderr_tail']}")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print(f"{len(results)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f"; report in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
