"""Rewrite the output under every ``$ monkfw ...`` line of docs/studies/cli-examples.md's console blocks.

Run after a change to what the CLI prints; tests/test_docs.py checks the page against
the CLI line by line (at 88 columns, the time rows aside)::

    python tools/regenerate_cli_examples.py
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from monk_framework.app.cli import app

PAGE = Path(__file__).resolve().parents[1] / "docs" / "studies" / "cli-examples.md"


def regenerate(block: str) -> str:
    runner = CliRunner()
    out = []
    for chunk in block.split("$ ")[1:]:
        command = chunk.partition("\n")[0]
        result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "88"})
        if result.exit_code != 0:
            raise SystemExit(f"{command}: exit {result.exit_code}\n{result.stderr}")
        out.append(f"$ {command}\n{result.stdout}")
    return "".join(out)


def main() -> None:
    text = PAGE.read_text()
    new = re.sub(r"(```console\n)(.*?)(```)", lambda m: m[1] + regenerate(m[2]) + m[3], text, flags=re.S)
    PAGE.write_text(new)
    print(f"{PAGE}: {'rewritten' if new != text else 'unchanged'}")


if __name__ == "__main__":
    main()
