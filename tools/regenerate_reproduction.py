"""Rewrite the numbers of docs/studies/reproduction.md's Experiment 1 and 2 tables from a run.

Run the two commands the page gives, then::

    python tools/regenerate_reproduction.py monk-results/exp1 monk-results/exp2

and, after the page's run of the opt-in mean-embedding MMD::

    python tools/regenerate_reproduction.py --embedding monk-results/exp1-embedding

and, after the page's dimension study (its journals, the main one first)::

    python tools/regenerate_reproduction.py --dimension monk-results/dimension-study.jsonl [MORE.jsonl ...]

Every cell of the two tables is read again from the runs' summary.csv (the rows and
their order stay as the page has them; a row whose estimator the run lacks is an
error), and the figures are copied to docs/figures/. The prose that quotes these
numbers is checked by eye; tests/test_reproduction.py recomputes a few cells from the
code and fails when the page drifts from it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "studies" / "reproduction.md"
MINUS = "\u2212"

#: the page's row labels -> the runs' names
KERNELS = {"quadratic": "quadratic", "RBF": "rbf:sigma=1.0"}
SETTINGS = {"Gaussian": "gauss", "5 outliers": "gauss-outliers", "Pareto(3)": "pareto"}
EXP1_ESTIMATORS = {
    "U-Stat": "u-stat:root=signed",
    "BCD Q = 11": "monk-bcd:n_blocks=11",
    "BCD Q = 21": "monk-bcd:n_blocks=21",
    "BCD-Fast Q = 11": "monk-bcd-fast:n_blocks=11",
    "BCD-Fast Q = 21": "monk-bcd-fast:n_blocks=21",
    "BCD exact Q = 21": "monk-bcd:n_blocks=21,solver=exact",
    "BCD-Fast exact Q = 11": "monk-bcd-fast:n_blocks=11,solver=exact",
    "BCD-Fast exact Q = 21": "monk-bcd-fast:n_blocks=21,solver=exact",
}
EXP1_SIZES = (400, 800, 1200, 1600, 2000)
PANELS = {"EI vs IE": "EI-IE", "EI vs EI": "EI-EI", "IE vs IE": "IE-IE"}
EXP2_ESTIMATORS = {"U-Stat": "u-stat", "BCD-Fast": "monk-bcd-fast:n_blocks=5"}
EXP2_SIZES = (50, 100, 200, 300, 380)


def number(value: float, digits: int, *, sign: bool = False) -> str:
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    return text.replace("-", MINUS)


def exp1_cell(panel: str, estimator: str, n: int, summary: dict[tuple[str, str, str, int], float]) -> str:
    kernel_label, _, setting_label = panel.partition(", ")
    key = (SETTINGS[setting_label], KERNELS[kernel_label], EXP1_ESTIMATORS[estimator], n)
    return number(summary[key], 2)


def rewrite_rows(lines: list[str], header: str, cells: Callable[[str, str, int], str]) -> list[str]:
    """The table under ``header``, each value cell recomputed by ``cells(panel, estimator, i)``;
    the rows' labels, their order and the bold marks stay as they are."""
    out, inside, panel = [], False, ""
    for line in lines:
        if line.startswith(header):
            inside = True
            out.append(line)
            continue
        if inside and not line.startswith("|"):
            inside = False
        if inside and not line.startswith("|---"):
            parts = line.rstrip().rstrip("|").rstrip().split(" | ")
            first, estimator = parts[0].lstrip("|").strip(), parts[1].strip()
            panel = first or panel
            new = []
            for i, old in enumerate(parts[2:]):
                cell = cells(panel, estimator, i)
                if old.startswith("**"):
                    cell = f"**{cell}**"
                elif old.endswith("**"):  # the last figure alone is bold
                    head, _, last = cell.rpartition(", ")
                    cell = f"{head}, **{last}**"
                new.append(cell)
            line = " | ".join([*parts[:2], *new]) + " |"
        out.append(line)
    return out


EMBEDDING = "monk-embedding-mmd:n_blocks=11,center=minmax"


def embedding_rows(lines: list[str], summary: dict[tuple[str, str, str, int], float]) -> list[str]:
    """The opt-in embedding table: its median ln-error at each N, then the range over
    those N of its median minus U-Stat's."""
    out, inside = [], False
    for line in lines:
        if line.startswith("| panel | median ln-error, N = 400 |"):
            inside = True
        elif inside and not line.startswith("|"):
            inside = False
        elif inside and not line.startswith("|---"):
            panel = line.strip("|").split(" | ")[0].strip()
            kernel_label, _, setting_label = panel.partition(", ")
            key = (SETTINGS[setting_label], KERNELS[kernel_label])
            ours = [summary[(*key, EMBEDDING, n)] for n in EXP1_SIZES]
            gaps = [summary[(*key, EMBEDDING, n)] - summary[(*key, EXP1_ESTIMATORS["U-Stat"], n)] for n in EXP1_SIZES]
            cells = [number(v, 2) for v in ours] + [f"{number(min(gaps), 2, sign=True)} to {number(max(gaps), 2, sign=True)}"]
            line = "| " + " | ".join([panel, *cells]) + " |"
        out.append(line)
    return out


#: the dimension study's kernel and data names -> the page's titles of their tables
DIMENSION_KERNELS = {"rbf-sqrt-d": "RBF, σ = √d", "rbf-median": "RBF, σ by the median heuristic", "quadratic": "quadratic"}
DIMENSION_DATA = {"clean": "clean", "outliers": "5 outliers per sample"}
DIMENSION_HEADER = "| N, d | runs | MMD |"


def _tables(lines: list[str], title: Callable[[str], str]) -> dict[str | tuple[str, str], tuple[int, int]]:
    """Each markdown table of ``lines`` -> (first line, line after it), keyed by its header
    line, and a per-cell table (``DIMENSION_HEADER``) by the bold title above it too
    (``title`` maps that title's text to the page's)."""
    found: dict[str | tuple[str, str], tuple[int, int]] = {}
    bold = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if match := re.fullmatch(r"\*\*(.+)\*\*", line.strip()):
            bold = match.group(1)
        if not line.startswith("|"):
            i += 1
            continue
        stop = i
        while stop < len(lines) and lines[stop].startswith("|"):
            stop += 1
        key: str | tuple[str, str] = (title(bold), line) if line.startswith(DIMENSION_HEADER) else line
        if key in found:
            raise SystemExit(f"two tables under {key!r}")
        found[key] = (i, stop)
        i = stop
    return found


def dimension_tables(lines: list[str], summary: list[str]) -> list[str]:
    """The page with every table of the dimension study's ``--summary`` output put in place
    of the page's table with the same header (and, for the per-cell tables, the same
    title); a summary table the page lacks is an error, other tables stay as they are."""

    def page_title(text: str) -> str:
        kernel, _, data = text.partition(", ")
        return f"{DIMENSION_KERNELS.get(kernel, kernel)}, {DIMENSION_DATA.get(data, data)}"

    new = _tables(summary, page_title)
    old = _tables(lines, lambda text: text)
    if missing := [key for key in new if key not in old]:
        raise SystemExit(f"{PAGE.name} has no table for {missing[0]!r}: add its title and header to the page first")
    out = list(lines)
    for key, (start, stop) in sorted(((k, old[k]) for k in new), key=lambda item: -item[1][0]):
        first, last = new[key]
        out[start:stop] = summary[first:last]
    return out


def main_dimension(journals: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import dimension_study

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        dimension_study.summary([Path(j) for j in journals])
    lines = dimension_tables(PAGE.read_text(encoding="utf-8").split("\n"), text.getvalue().split("\n"))
    PAGE.write_text("\n".join(lines), encoding="utf-8")
    print(f"rewrote the dimension study's tables of {PAGE.relative_to(ROOT)}")


def read_summary(directory: str) -> dict[tuple[str, str, str, int], float]:
    rows = list(csv.DictReader((Path(directory) / "summary.csv").open()))
    return {(r["setting"], r["kernel"], r["estimator"], int(r["n"])): float(r["median_log_error"]) for r in rows}


def main_embedding(directory: str) -> None:
    lines = embedding_rows(PAGE.read_text(encoding="utf-8").split("\n"), read_summary(directory))
    PAGE.write_text("\n".join(lines), encoding="utf-8")
    print(f"rewrote the embedding table of {PAGE.relative_to(ROOT)}")


def main(exp1_dir: str, exp2_dir: str) -> None:
    summary1 = read_summary(exp1_dir)
    rows2 = list(csv.DictReader((Path(exp2_dir) / "summary.csv").open()))
    summary2 = {(r["panel"], r["estimator"], int(r["n"])): r for r in rows2}

    def cells1(panel: str, estimator: str, i: int) -> str:
        return exp1_cell(panel, estimator, EXP1_SIZES[i], summary1)

    def cells2(panel: str, estimator: str, i: int) -> str:
        r = summary2[(PANELS[panel], EXP2_ESTIMATORS[estimator], EXP2_SIZES[i])]
        return f"{number(float(r['mean_excess']), 3, sign=True)} ± {float(r['std_excess']):.3f}, {float(r['rejection_rate']):.3f}"

    lines = PAGE.read_text(encoding="utf-8").split("\n")
    lines = rewrite_rows(lines, "| panel | estimator | N = 400 |", cells1)
    lines = rewrite_rows(lines, "| panel | estimator | N = 50 |", cells2)
    PAGE.write_text("\n".join(lines), encoding="utf-8")
    shutil.copy(Path(exp1_dir) / "exp1.png", ROOT / "docs" / "figures" / "exp1.png")
    shutil.copy(Path(exp2_dir) / "exp2.png", ROOT / "docs" / "figures" / "exp2.png")
    print(f"rewrote the tables of {PAGE.relative_to(ROOT)} and copied the two figures")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--embedding":
        main_embedding(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "--dimension":
        main_dimension(sys.argv[2:])
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        raise SystemExit(__doc__)
