"""What ``monkfw`` prints: tables of results, plugins and kernels, and the JSON of a result.

A result says what its table shows (``report_table``); this module lays it out, saves
the result when asked and prints it as a table or as JSON.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from monk_framework.app.files import write_atomically
from monk_framework.app.terminal import STATE, GuardedStdout, one_line, stderr, stdout
from monk_framework.core.errors import MonkError
from monk_framework.core.params import Configurable
from monk_framework.core.registry import PluginEntry
from monk_framework.core.results import dumps


def tell(message: str) -> None:
    if not STATE.quiet:
        stderr.print(one_line(message), markup=False)


def print_json(data: Any) -> None:
    GuardedStdout().write(dumps(data) + "\n")


def entries_tables(title: str, entries: list[PluginEntry]) -> list[Table]:
    """One table per distribution, so that a provider is a short module name that never
    breaks across lines; estimators say whether they estimate MMD or embeddings only."""
    groups: dict[tuple[str | None, str | None], list[PluginEntry]] = {}
    for entry in entries:
        groups.setdefault((entry.provider.distribution, entry.provider.version), []).append(entry)
    tables = []
    for (dist, version), group in groups.items():
        where = f"from {dist} {version}" if dist else "registered by a script"
        table = Table(title=f"{title} {where}", title_justify="left")
        estimators = group[0].plugin_type == "estimator"
        table.add_column("name", no_wrap=True)
        if estimators:
            table.add_column("estimates", no_wrap=True)
        table.add_column("plugin", no_wrap=True)
        table.add_column("summary", overflow="fold", ratio=1)
        for entry in group:
            name = entry.name + "".join(f"\n({alias})" for alias in entry.cls.aliases)
            kind = ["MMD" if entry.details.get("estimates") == "mmd" else "embedding only"] if estimators else []
            plugin = entry.provider.entry_point or entry.provider.module
            table.add_row(escape(name), *kind, escape(plugin), escape(entry.summary))
        tables.append(table)
    return tables


def describe_dict(cls: type[Configurable], provider: str) -> dict[str, Any]:
    return {
        "name": cls.name,
        "type": cls.plugin_type,
        "summary": cls.summary,
        "formula": cls.formula,
        "parameters": [p.to_dict() for p in cls.parameters()],
        "provider": provider,
    }


def result_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(show_header=False, title=title, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("")
    for row in rows:
        table.add_row(*(escape(str(v)) for v in row))
    return table


def anchored(path: Path | None) -> Path | None:
    """``path`` made absolute against the working directory the command started in, so
    that plugin code which changes directory during the work cannot move where a result
    is saved. Messages keep naming the path as the user gave it."""
    return None if path is None else Path(os.path.abspath(path))


def deliver(payload: dict[str, Any], output: Path | None, as_json: bool, table: Table, footer: str | None = None, *, target: Path | None) -> None:
    """Save the result if asked (to ``target``, the anchored ``output``), then print it as
    JSON or as a table (and a footer line). A save that fails (a full disk) still prints
    the result before the error: the work is not lost with the file."""
    if output is not None:
        assert target is not None  # anchored(output), taken before the work
        try:
            write_atomically(target, dumps(payload) + "\n")
        except MonkError:
            print_result(payload, as_json, table, footer)
            raise
        # a .csv or .txt name does not make it a table: say what the file holds
        kind = "" if output.suffix.lower() in ("", ".json") else " (as JSON, whatever its suffix: read it with load_result)"
        tell(f"Result saved to {output}{kind}.")
    print_result(payload, as_json, table, footer)


def print_result(payload: dict[str, Any], as_json: bool, table: Table, footer: str | None) -> None:
    if as_json:
        print_json(payload)
        return
    stdout.print(table)
    if footer is not None:
        stdout.print(footer, markup=False)


def print_description(info: dict[str, Any]) -> None:
    """``monkfw describe``'s text for one kernel, estimator or data set (:func:`describe_dict`)."""
    stdout.print(f"[bold]{escape(info['name'])}[/bold] ({info['type']}, from {escape(info['provider'])})")
    stdout.print(info["summary"], markup=False)
    stdout.print(f"  {info['formula']}", markup=False)
    if not info["parameters"]:
        stdout.print("  (no parameters)")
        return
    table = Table(title_justify="left")
    for column in ("parameter", "default", "allowed", "meaning"):
        table.add_column(column, overflow="fold")
    for p in info["parameters"]:
        table.add_row(*(escape(s) for s in (p["name"], repr(p["default"]), p["allowed"], p["doc"])))
    stdout.print(table)
