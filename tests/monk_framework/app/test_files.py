"""Atomic writes: the old file or the new one, never a torn one, and no temporary left."""

from __future__ import annotations

import os
import stat

import pytest

from monk_framework.app.files import check_writable, write_atomically, write_csv_atomically
from monk_framework.core.errors import ParameterError


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


def test_a_write_through_a_symbolic_link_updates_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "target.json").write_text('{"type": "mmd"}')  # an earlier result
    (tmp_path / "link.json").symlink_to("target.json")
    assert check_writable(tmp_path / "link.json") == tmp_path / "target.json"
    write_atomically(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "target.json").read_text() == "new"
    # a dangling link: the file it points to is created, the link kept
    (tmp_path / "dangling.json").symlink_to("later.json")
    write_atomically(tmp_path / "dangling.json", "made")
    assert (tmp_path / "dangling.json").is_symlink() and (tmp_path / "later.json").read_text() == "made"


def test_a_loop_of_links_and_a_link_to_the_data_are_refused_naming_what_was_given(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(ParameterError, match=r"--output '.*a' is a loop of symbolic links"):
        check_writable(tmp_path / "a", what="--output")
    (tmp_path / "x.npy").write_bytes(b"data")
    (tmp_path / "out.json").symlink_to("x.npy")
    with pytest.raises(ParameterError, match=r"--output '.*out.json' is the data file '.*x.npy'"):
        check_writable(tmp_path / "out.json", what="--output", inputs=[tmp_path / "x.npy"])
    assert (tmp_path / "x.npy").read_bytes() == b"data"


def test_an_existing_file_is_replaced_only_if_it_holds_a_result(tmp_path):
    # `-o other.npy` replaced the user's other data file with JSON; a result (or an empty
    # file, or none) is replaced as before
    (tmp_path / "other.out").write_bytes(b"\x93NUMPY data of another sample")
    (tmp_path / "notes.json").write_text('{"a": 1}\n')
    for name in ("other.out", "notes.json"):
        with pytest.raises(
            ParameterError,
            match=rf"--output '.*{name}' exists and is not a monkfw result: it would be "
            "overwritten",
        ):
            check_writable(tmp_path / name, what="--output")
    # a name of another format is refused before anything is looked at: a result is JSON
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    for name in ("notes.csv", "new.npy", "table.TSV"):
        with pytest.raises(ParameterError, match=r"names a \.\w+ file, but a result is saved as JSON; name it '.*\.json'"):
            check_writable(tmp_path / name, what="--output")
    (tmp_path / "old.json").write_text('{\n  "type": "mmd",\n  "mmd2": 0.1\n}\n')
    (tmp_path / "empty.json").write_text("")
    for name in ("old.json", "empty.json", "new.json"):
        assert check_writable(tmp_path / name, what="--output") == tmp_path / name
    assert (tmp_path / "notes.csv").read_text() == "a,b\n1,2\n"


def test_an_existing_file_that_cannot_be_read_is_not_called_a_non_result(tmp_path, monkeypatch):
    # whether it holds a result is unknown: say that, not "is not a monkfw result"
    from pathlib import Path

    (tmp_path / "locked.json").write_text('{"type": "mmd"}')
    real_open = Path.open

    def refuse(self, *args, **kwargs):
        if self.name == "locked.json":
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(
        ParameterError,
        match=r"--output '.*locked.json' exists and cannot be read \(Permission denied\), so "
        r"whether it holds a result .* is unknown",
    ):
        check_writable(tmp_path / "locked.json", what="--output")


def test_a_name_the_system_refuses_is_a_parameter_error(tmp_path):
    # os.stat's ENAMETOOLONG had escaped as an internal error
    with pytest.raises(ParameterError, match=r"--output '.*r{300}\.json' cannot be written: File name too long"):
        check_writable(str(tmp_path / ("r" * 300 + ".json")), what="--output")


def test_a_trailing_separator_names_a_directory(tmp_path):
    # Path("out/") is Path("out"): the result would have been a file named like the folder
    given = str(tmp_path / "out") + os.sep
    with pytest.raises(
        ParameterError,
        match=r"ends with a separator, so it names a directory; give a file name inside it, "
        r"e\.g\. '.*out/result\.json'",
    ):
        check_writable(given)
    assert not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    with pytest.raises(ParameterError, match="is a directory; give a file name inside it"):
        check_writable(given)
