"""Reading back any result the library wrote (``monkfw ... -o result.json``), by its type.

Apart from :mod:`monk_framework.core.results` because an embedding needs the registry
to rebuild its kernel, and the registry sits above the results.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from monk_framework.core.embedding import Embedding, EmbeddingsResult
from monk_framework.core.errors import DataError, UnknownNameError
from monk_framework.core.registry import Registry, get_registry
from monk_framework.core.results import MMDResult, Result
from monk_framework.core.test_results import AggregatedTestResult, PermutationTestResult, RobustTestResult, SplitTestResult

__all__ = ["load_result"]


def _result_classes() -> dict[str, type[Result]]:
    classes: list[type[Result]] = [
        MMDResult,
        Embedding,
        EmbeddingsResult,
        PermutationTestResult,
        SplitTestResult,
        RobustTestResult,
        AggregatedTestResult,
    ]
    return {cls.kind: cls for cls in classes}


def load_result(data: str | os.PathLike[str] | Mapping[str, Any], *, registry: Registry | None = None) -> Result:
    """Any result the library wrote, by its ``"type"``: its JSON text, the parsed dict, or
    the path of a file holding it (what ``monkfw ... -o result.json`` saved)."""
    source = "JSON text"
    # a string that is no JSON object but names a file (or looks like a file name) is a path
    named = (
        isinstance(data, str) and not data.lstrip().startswith("{") and "\n" not in data and (Path(data).is_file() or data.endswith(".json") or os.sep in data)
    )
    if isinstance(data, os.PathLike) or named:
        path = Path(data)  # type: ignore[arg-type]
        source = f"file {str(path)!r}"
        try:
            data = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"Cannot read the result file {str(path)!r}: {exc}.") from None
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise DataError(f"Not a JSON result ({source}; load_result takes a result's JSON text, its dict, or the path of its file): {exc}.") from None
        except RecursionError:
            raise DataError(f"Not a JSON result ({source}): its values are nested too deeply to be one.") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise DataError("A result is a JSON object with a 'type' (a string); this is not one.")
    classes = _result_classes()
    if data["type"] not in classes:
        raise UnknownNameError("result type:", str(data["type"]), sorted(classes))
    cls = classes[data["type"]]
    if cls in (Embedding, EmbeddingsResult):
        return cls.from_dict(data, registry=registry or get_registry())
    return cast("Result", cls.from_dict(data))
