"""Atomic writes: the old file or the new one, never a torn one, and no temporary left."""

from __future__ import annotations

import os
import stat

import pytest

from monk_framework.app.files import write_atomically, write_csv_atomically


def test_write_replaces_the_file_with_the_usual_permissions(tmp_path):
    path = tmp_path / "sub" / "out.txt"
    write_atomically(path, "old")
    write_atomically(path, b"new")
    assert path.read_text() == "new"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert os.listdir(path.parent) == ["out.txt"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    write_atomically(path, "old")
    with pytest.raises(TypeError):
        write_atomically(path, 12345)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_csv_has_a_header_and_empty_fields_for_missing_values(tmp_path):
    path = tmp_path / "t.csv"
    write_csv_atomically(path, ["a", "b"], [{"a": 1, "b": None}, {"a": 2.5, "b": "x", "c": "ignored"}])
    assert path.read_text() == "a,b\n1,\n2.5,x\n"


def test_a_missing_optional_dependency_names_its_extra():
    from monk_framework.core.errors import MonkError, optional_import

    with pytest.raises(MonkError, match=r"The figures need no_such_module_xyz, which is not installed: pip install 'monk-framework\[experiments\]'"):
        optional_import("no_such_module_xyz", "experiments", "The figures")
    assert optional_import("json", "x", "y").dumps([1]) == "[1]"
