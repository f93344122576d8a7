"""Results files, summaries and figures of the experiments (written atomically)."""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from monk_framework.app.experiments.runner import CellStore
from monk_framework.app.files import write_atomically, write_csv_atomically
from monk_framework.core.errors import optional_import
from monk_framework.core.params import parse_spec

__all__ = ["exp1_report", "exp2_report", "exp1_summary", "exp2_summary", "read_csv"]

#: ln of the smallest error the summaries distinguish (an exact 0 would be -inf)
LOG_FLOOR = math.log(1e-300)


def _pyplot() -> Any:
    matplotlib = optional_import("matplotlib", "experiments", "The experiment figures (the results files are written)")
    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    write_atomically(path, buffer.getvalue())
    return path


def _groups(rows: Iterable[dict[str, Any]], keys: tuple[str, ...]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        out[tuple(row[k] for k in keys)].append(row)
    return out


def _order(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _write_tables(experiment: Any, rows: list[dict[str, Any]], summary: list[dict[str, Any]], store: CellStore) -> list[Path]:
    """results.csv (the tidy rows, in plan order) and summary.csv."""
    results, summary_path = store.path("results.csv"), store.path("summary.csv")
    write_csv_atomically(results, experiment.columns, rows)
    write_csv_atomically(summary_path, list(summary[0]), summary)
    return [results, summary_path]


# -- experiment 1 -------------------------------------------------------------------------

#: how the figures name the estimators
ESTIMATOR_NAMES = {
    "u-stat": "U-Stat",
    "v-stat": "V-Stat",
    "monk-bcd": "BCD",
    "monk-bcd-fast": "BCD-Fast",
    "monk-embedding-mmd": "embedding MMD",
}
#: how far above the other curves (in ln units) a curve is drawn off the scale
OFF_SCALE = 3.0


def readable(spec: str) -> str:
    """``"monk-bcd-fast:n_blocks=21,solver=exact"`` -> ``"BCD-Fast, Q = 21, exact solver"``."""
    name, params = parse_spec(spec)
    parts = [ESTIMATOR_NAMES.get(name, name)]
    for key, value in params.items():
        if key == "n_blocks":
            parts.append(f"Q = {value}")
        elif key == "solver":
            parts.append(f"{value} solver")
        elif key == "root" and value == "signed":
            continue  # the statistic the figure plots anyway
        else:
            parts.append(f"{key} = {value}")
    return ", ".join(parts)


def _off_scale(curves: dict[str, list[float]], lows: dict[str, list[float]]) -> set[str]:
    """Curves whose lower quartile lies more than OFF_SCALE above every other curve's top:
    drawn on the panel, they would flatten the others (the U-statistic with outliers)."""
    out = set()
    for label in curves:
        others = [max(v) for other, v in curves.items() if other != label]
        if others and min(lows[label]) > max(others) + OFF_SCALE:
            out.add(label)
    return out


def exp1_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and quartiles of ln|MMD̂ − MMD| per setting, kernel, estimator and N."""
    out = []
    for (setting, kernel, estimator, n), group in _groups(rows, ("setting", "kernel", "estimator", "n")).items():
        logs = np.maximum([float(r["log_error"]) for r in group], LOG_FLOOR)
        q25, q50, q75 = np.quantile(logs, [0.25, 0.5, 0.75])
        out.append(
            {
                "setting": setting,
                "kernel": kernel,
                "estimator": estimator,
                "n": n,
                "runs": len(group),
                "median_log_error": q50,
                "q25_log_error": q25,
                "q75_log_error": q75,
                "mean_seconds": float(np.mean([r["seconds"] for r in group])),
            }
        )
    return out


def exp1_report(experiment: Any, rows: list[dict[str, Any]], store: CellStore, *, titles: Mapping[str, str]) -> list[Path]:

    summary = exp1_summary(rows)
    tables = _write_tables(experiment, rows, summary, store)
    plt = _pyplot()
    kernels, settings = list(experiment.kernels), list(experiment.settings)
    estimators = list(experiment.estimators)
    fig, axes = plt.subplots(len(kernels), len(settings), figsize=(4.6 * len(settings), 3.6 * len(kernels)), squeeze=False)
    table = {(s["setting"], s["kernel"], s["estimator"], s["n"]): s for s in summary}
    labels = _order(r["estimator"] for r in rows)
    colours = plt.get_cmap("tab10")
    handles: dict[str, Any] = {}
    for i, kernel in enumerate(kernels):
        for j, setting in enumerate(settings):
            series = {}
            for label in labels:
                pts = [table[(setting, kernel, label, n)] for n in experiment.sizes if (setting, kernel, label, n) in table]
                if pts:
                    series[label] = pts
            _exp1_panel(axes[i][j], series, labels, colours, handles)
            axes[i][j].set_title(f"{kernel}, {titles[setting]}", fontsize=9)
    for label in labels:  # every estimator in the legend, even one drawn only off the scale
        if readable(label) not in handles:
            k = labels.index(label)
            handles[readable(label)] = plt.Line2D([], [], marker="o", ms=3, color=colours(k % 10))
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(4, len(estimators)), fontsize=8, frameon=False)
    fig.suptitle(f"Experiment 1: median and quartiles over {experiment.runs} runs", fontsize=10)
    fig.tight_layout(rect=(0, 0.08 if len(labels) > 4 else 0.05, 1, 0.97))
    figure = _save(fig, store.path("exp1.png"))
    plt.close(fig)
    return [*tables, figure]


def _exp1_panel(ax: Any, series: dict[str, list[dict[str, Any]]], labels: list[str], colours: Any, handles: dict[str, Any]) -> None:
    """One panel of Experiment 1's figure: each estimator's median log-error with its
    quartiles against N; the curves far above the rest named on the panel instead, so
    that the ones drawn keep the scale."""
    off = _off_scale(
        {k: [p["q75_log_error"] for p in v] for k, v in series.items()},
        {k: [p["q25_log_error"] for p in v] for k, v in series.items()},
    )
    notes = []
    for k, label in enumerate(labels):
        if label not in series:
            continue
        pts = series[label]
        if label in off:
            values = [p["median_log_error"] for p in pts]
            notes.append(f"{readable(label)}: off the scale, median {min(values):.1f} to {max(values):.1f}")
            continue
        ns = [p["n"] for p in pts]
        (line,) = ax.plot(ns, [p["median_log_error"] for p in pts], marker="o", ms=3, color=colours(k % 10), label=readable(label))
        handles.setdefault(readable(label), line)
        ax.fill_between(ns, [p["q25_log_error"] for p in pts], [p["q75_log_error"] for p in pts], color=colours(k % 10), alpha=0.15)
    if notes:
        ax.text(0.02, 0.97, "\n".join(notes), transform=ax.transAxes, va="top", fontsize=7, bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "0.8"})
        ax.margins(y=0.25)
    ax.set_xlabel("N (each sample)")
    ax.set_ylabel("ln |MMD estimate - MMD|", fontsize=8)  # on every panel: the scales differ
    ax.grid(alpha=0.3)


# -- experiment 2 -------------------------------------------------------------------------


def exp2_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and standard deviation of T − q̂ and the rejection rate per panel, estimator, N."""
    out = []
    for (panel, estimator, n), group in _groups(rows, ("panel", "estimator", "n")).items():
        excess = np.array([float(r["excess"]) for r in group if r["excess"] not in (None, "")])
        chosen = _groups(group, ("chosen",))
        out.append(
            {
                "panel": panel,
                "estimator": estimator,
                "n": n,
                "runs": len(group),
                "mean_excess": float(excess.mean()) if excess.size else None,
                "std_excess": float(excess.std(ddof=1)) if excess.size > 1 else None,
                "rejection_rate": float(np.mean([bool(r["reject"]) for r in group])),
                "most_chosen": max(chosen, key=lambda c: len(chosen[c]))[0],
                "mean_seconds": float(np.mean([r["seconds"] for r in group])),
            }
        )
    return out


def exp2_report(experiment: Any, rows: list[dict[str, Any]], store: CellStore, *, timing: Callable[[Any], dict[str, Any]]) -> list[Path]:

    summary = exp2_summary(rows)
    tables = _write_tables(experiment, rows, summary, store)
    timing_path = store.path("timing.json")
    if not timing_path.exists():  # machine-dependent, so measured once, here, alone
        write_atomically(timing_path, json.dumps(timing(experiment), indent=2) + "\n")
    plt = _pyplot()
    panels = list(experiment.panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
    table = {(s["panel"], s["estimator"], s["n"]): s for s in summary}
    labels = _order(r["estimator"] for r in rows)
    colours = plt.get_cmap("tab10")
    for j, panel in enumerate(panels):
        ax = axes[0][j]
        for k, label in enumerate(labels):
            pts = [table[(panel, label, n)] for n in experiment.sizes if (panel, label, n) in table]
            pts = [p for p in pts if p["mean_excess"] is not None]
            if not pts:
                continue
            ns = np.array([p["n"] for p in pts], dtype=float) * (1 + 0.01 * (k - (len(labels) - 1) / 2))
            mean = np.array([p["mean_excess"] for p in pts])
            std = np.array([p["std_excess"] or 0.0 for p in pts])
            rates = ", ".join(f"{p['rejection_rate']:.2f}" for p in pts[-1:])
            ax.errorbar(ns, mean, yerr=std, marker="o", ms=3, capsize=2, color=colours(k % 10), label=f"{label} (reject {rates} at N={pts[-1]['n']})")
        ax.axhline(0.0, color="black", lw=0.8)
        a, b = panel.split("-")
        ax.set_title(f"{a} vs {b}" + (" (inter-class)" if a != b else " (intra-class)"), fontsize=9)
        ax.set_xlabel("N (each sample)")
        if j == 0:
            ax.set_ylabel("T - q (mean ± std)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"Experiment 2: split test on splice DNA, B = {experiment.n_permutations}, alpha = {experiment.alpha}, {experiment.runs} runs",
        fontsize=10,
    )
    fig.tight_layout()
    figure = _save(fig, store.path("exp2.png"))
    plt.close(fig)
    return [*tables, timing_path, figure]


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a results or summary file (values as text)."""
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
