"""Reading and validating samples: every bad input gets a message naming the problem."""

from __future__ import annotations

import re

import numpy as np
import pytest

from monk_framework import DataError, DataFileError, as_strings, as_vectors, load_sample


def test_one_dimensional_input_is_one_feature_per_point():
    out = as_vectors([1, 2, 3])
    assert out.shape == (3, 1) and out.dtype == np.float64 and out.flags.c_contiguous


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "X is empty"),
        (np.zeros((0, 3)), "X is empty"),
        (np.zeros((3, 0)), "no features"),
        (3.0, "single number"),
        (np.zeros((2, 2, 2)), "3 dimensions"),
        ([[1.0, np.nan], [0.0, 0.0]], r"NaN at point 0, feature 1 \(1 non-finite value in all\)"),
        ([[1.0], [np.inf], [-np.inf]], r"inf at point 1, feature 0 \(2 non-finite values"),
        (["ACGT", "GATTACA"], "holds strings"),
        ([[1, 2], [3]], "numeric array"),
        (np.array([object(), object()]), r"X holds object <object object at .*> at point 0, which is not a number"),
    ],
)
def test_bad_vector_samples_are_named(value, message):
    with pytest.raises(DataError, match=message):
        as_vectors(value, name="X")


def test_string_samples():
    assert as_strings(("ab", "c")) == ["ab", "c"]
    for value, message in [
        ("abc", "single string"),
        ([], "empty"),
        (["a", 3], r"X\[1\] is int"),
        (np.zeros(3), "holds numbers"),
        ([b"ACGT"], r"X\[0\] is bytes .*decode them first"),
        ([["AC", "G"]], r"X\[0\] is list \['AC', 'G'\]"),
    ]:
        with pytest.raises(DataError, match=message):
            as_strings(value)


def test_a_column_of_strings_is_its_strings():
    # df[["seq"]].values, shape (N, 1), was refused: "X[0] is ndarray array(['ACGT'])"
    column = np.array([["ACGT"], ["GGA"]], dtype=object)
    assert as_strings(column) == as_strings([["ACGT"], ["GGA"]]) == as_strings(np.array([["ACGT"], ["GGA"]])) == ["ACGT", "GGA"]


def test_csv_with_header_and_tsv(tmp_path):
    (tmp_path / "a.csv").write_text("x1,x2\n1,2\n\n3.5,-4e-1\n")
    np.testing.assert_array_equal(load_sample(tmp_path / "a.csv"), [[1, 2], [3.5, -0.4]])
    (tmp_path / "b.tsv").write_text("# a comment\n1\t2\n3\t4\n")
    np.testing.assert_array_equal(load_sample(tmp_path / "b.tsv"), [[1, 2], [3, 4]])
    (tmp_path / "c.csv").write_text("7\n8\n")
    np.testing.assert_array_equal(load_sample(tmp_path / "c.csv"), [[7], [8]])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n3,x\n", r"c.csv, line 3, column 2: cannot read 'x' as a number"),
        ("1,2\n3,\n", r"line 2, column 2: a missing value"),
        ("1,2\n3,4,5\n", r"line 2: has 3 columns where line 1 has 2"),
        ("1,2\nnan,4\n", r"line 2, column 1: a missing value \(.nan.;"),
        ("x,y\n", r"line 1: holds a header row but no data rows"),
        ("\n\n", r"holds no data rows"),
        # categories, yes-or-no values and thousands separators get the conversion to make
        (
            "x,colour\n1.0,red\n2.0,blue\n",
            r"line 2, column 2: cannot read 'red' as a number\. A vector kernel reads "
            r"numbers: encode a column of categories as numbers first.*pd\.get_dummies",
        ),
        ("1,TRUE\n2,FALSE\n", r"line 1, column 2: cannot read 'TRUE' as a number\. A yes-or-no value: write it as 1 or 0"),
        (
            '"1,000",2\n3,4\n',
            r"line 1, column 1: cannot read '1,000' as a number\. It looks like a number with ',' "
            r"between its thousands.*thousands=','",
        ),
        ('"-12,345.5",2\n3,4\n', r"cannot read '-12,345\.5' as a number\. It looks like a number with ','"),
        ("0x1A,2\n3,4\n", r"line 1, column 1: cannot read '0x1A' as a number\.$"),
    ],
)
def test_bad_cells_are_reported_with_file_line_and_column(tmp_path, text, message):
    path = tmp_path / "c.csv"
    path.write_text(text)
    with pytest.raises(DataFileError, match=message):
        load_sample(path)


def test_npy_files_and_pickles(tmp_path):
    np.save(tmp_path / "ok.npy", np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(load_sample(tmp_path / "ok.npy"), np.arange(6.0).reshape(3, 2))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataFileError, match="pickled Python objects, which are never loaded"):
        load_sample(tmp_path / "obj.npy")
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(DataFileError, match="junk.npy"):
        load_sample(tmp_path / "junk.npy")


def test_missing_and_unsupported_files(tmp_path):
    with pytest.raises(DataFileError, match="no such file"):
        load_sample(tmp_path / "nope.csv")
    # "no such file" only where that is what is wrong
    (tmp_path / "loop.csv").symlink_to("loop.csv")
    with pytest.raises(DataFileError, match="loop.csv: is a loop of symbolic links"):
        load_sample(tmp_path / "loop.csv")
    (tmp_path / "dangling.csv").symlink_to("gone.csv")
    with pytest.raises(DataFileError, match="dangling.csv: is a symbolic link to 'gone.csv', which does not exist"):
        load_sample(tmp_path / "dangling.csv")
    (tmp_path / "plain").write_text("")
    with pytest.raises(DataFileError, match="a part of its path is a file, not a directory"):
        load_sample(tmp_path / "plain" / "x.csv")
    (tmp_path / "a.xlsx").write_text("")
    with pytest.raises(DataFileError, match=r"unsupported file type '.xlsx'; use one of .csv, .fa, .fasta, .npy, .tsv, .txt"):
        load_sample(tmp_path / "a.xlsx")
    with pytest.raises(DataFileError, match="is a directory"):
        load_sample(tmp_path)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra.numpy import arrays  # noqa: E402


@settings(max_examples=50, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(1, 5)), elements=st.floats(allow_nan=False, allow_infinity=False, width=64)),
    st.booleans(),
    st.sampled_from([".csv", ".tsv"]),
)  # noqa: E501 - one case per line
def test_delimited_files_round_trip_exactly(tmp_path_factory, values, header, suffix):
    path = tmp_path_factory.mktemp("rt") / f"data{suffix}"
    sep = "\t" if suffix == ".tsv" else ","
    lines = [sep.join(f"col{j}" for j in range(values.shape[1]))] if header else []
    lines += [sep.join(repr(float(v)) for v in row) for row in values]
    path.write_text("\n".join(lines) + "\n")
    assert np.array_equal(load_sample(path), values)


def test_text_files_hold_one_string_per_line(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("ACGT\nA C\n\nTTA\r\n", encoding="utf-8")
    assert load_sample(path) == ["ACGT", "A C", "TTA"]  # empty lines skipped, spaces kept
    (tmp_path / "e.txt").write_text("\n\n")
    with pytest.raises(DataFileError, match="holds no strings"):
        load_sample(tmp_path / "e.txt")
    (tmp_path / "b.txt").write_bytes(b"AC\xff\n")
    with pytest.raises(DataFileError, match="b.txt, line 1: is not UTF-8 text"):
        load_sample(tmp_path / "b.txt")


@pytest.mark.parametrize("name", ["x.csv", "x.txt", "x.fa"])
def test_text_that_is_not_utf8_is_named_by_line_or_as_utf16(tmp_path, name):
    path = tmp_path / name
    # far past the reader's first buffer: the line is counted in the file, not the buffer
    rows = "".join(f"{i},{i}\n" if name == "x.csv" else (">r\nACGT\n" if name == "x.fa" else "ACGT\n") for i in range(20_000))
    path.write_bytes(rows.encode() + "caf\xe9\n".encode("latin-1"))
    lines = rows.count("\n") + 1
    with pytest.raises(DataFileError, match=rf"{name}, line {lines}: is not UTF-8 text .*iconv -f LATIN1 -t UTF-8"):
        load_sample(path)
    path.write_text("1,2\n3,4\n" if name == "x.csv" else "ACGT\n", encoding="utf-16")  # PowerShell's '>'
    with pytest.raises(DataFileError, match=rf"{name}: is UTF-16 text, not UTF-8; save it as UTF-8"):
        load_sample(path)


def test_the_line_of_a_bad_byte_is_counted_across_blocks_and_a_cut_last_character_named(tmp_path):
    # the file is searched in 1 MiB blocks (a binary file may have no line end at all): a
    # character cut by a block's end is no error, a bad byte after it is on its own line
    path = tmp_path / "x.csv"
    path.write_bytes(b"1,2\n" + b"a" * ((1 << 20) - 5) + "é".encode() + b"\n3,\xff\n")
    with pytest.raises(DataFileError, match=r"x.csv, line 3: is not UTF-8 text \(invalid start byte\)"):
        load_sample(path)
    path.write_bytes(b"1,2\n3,4\xc3")
    with pytest.raises(DataFileError, match=r"x.csv, line 2: is not UTF-8 text \(its last character is cut short\)"):
        load_sample(path)


def test_fasta_is_case_insensitive_by_default_and_keeps_case_on_request(tmp_path):
    # soft-masked (lowercase) residues are the same letters: upper-cased when read
    (tmp_path / "mixed.fa").write_text(">r1\nacgTTga\n>r2\nGGcc\n")
    assert load_sample(tmp_path / "mixed.fa") == ["ACGTTGA", "GGCC"]
    assert load_sample(tmp_path / "mixed.fa", case_sensitive=True) == ["acgTTga", "GGcc"]
    (tmp_path / "mixed.txt").write_text("acgT\n")
    assert load_sample(tmp_path / "mixed.txt") == ["acgT"]  # .txt strings are kept as they are


def test_lowercase_fasta_gives_the_same_mmd_as_uppercase(tmp_path, registry):
    rng = np.random.default_rng(5)
    seqs = ["".join(rng.choice(list("ACGT"), size=30)) for _ in range(16)]
    upper_x, upper_y = seqs[:8], seqs[8:]
    for name, sample in (("x", upper_x), ("y", upper_y)):
        (tmp_path / f"{name}.fa").write_text("".join(f">s{i}\n{q}\n" for i, q in enumerate(sample)))
        (tmp_path / f"{name}-lower.fa").write_text("".join(f">s{i}\n{q.lower()}\n" for i, q in enumerate(sample)))
    kernel, est = registry.get_kernel("ssk", n=3), registry.get_estimator("v-stat")
    upper = est.estimate(kernel, load_sample(tmp_path / "x.fa"), load_sample(tmp_path / "y.fa"))
    lower = est.estimate(kernel, load_sample(tmp_path / "x-lower.fa"), load_sample(tmp_path / "y.fa"))
    assert lower.mmd2 == upper.mmd2
    kept = est.estimate(kernel, load_sample(tmp_path / "x-lower.fa", case_sensitive=True), load_sample(tmp_path / "y.fa"))
    assert kept.mmd2 > upper.mmd2 + 0.1  # other letters: the samples share no substring


def test_fasta_records_and_errors_with_line_numbers(tmp_path):
    path = tmp_path / "s.fasta"
    path.write_text(">one desc\nACG T\nGG\n; a comment\n\n>two\nTTA\n")
    assert load_sample(path) == ["ACGTGG", "TTA"]
    (tmp_path / "a.fa").write_text("ACGT\n>x\nA\n")
    with pytest.raises(DataFileError, match=r"a.fa, line 1: sequence data before the first '>'"):
        load_sample(tmp_path / "a.fa")
    (tmp_path / "b.fa").write_text(">x\nAC\n>y\n>z\nA\n")
    with pytest.raises(DataFileError, match=r"line 3: FASTA record has a header but no sequence"):
        load_sample(tmp_path / "b.fa")
    (tmp_path / "c.fa").write_text(">x\nAC>G\n")
    with pytest.raises(DataFileError, match=r"line 2.*'>' inside a sequence line"):
        load_sample(tmp_path / "c.fa")
    # position numbers (GenBank's ORIGIN lines pasted into a .fa) were read as letters
    (tmp_path / "d.fa").write_text(">x\n  1 acgtac gtta\n")
    with pytest.raises(DataFileError, match=r"d.fa, line 2, column 3: the digit '1' inside a sequence line"):
        load_sample(tmp_path / "d.fa")
    (tmp_path / "e.fa").write_text(">x\n AC>G\n")  # the column counts the line as written
    with pytest.raises(DataFileError, match=r"line 2, column 4: '>' inside"):
        load_sample(tmp_path / "e.fa")
    # '#', a comma or a quotation mark was read as a residue: a letter of its own to every kernel
    for odd in "#,'\"é":
        (tmp_path / "f.fa").write_text(f">x\nACGT\n>y\nAC{odd}GT\n", encoding="utf-8")
        with pytest.raises(
            DataFileError,
            match=rf"f.fa, line 4, column 3: the character {odd!r} \(U\+{ord(odd):04X}\) inside "
            rf"a sequence line: FASTA sequence lines hold letters, and '-', '.' and '\*'",
        ):
            load_sample(tmp_path / "f.fa")
    # gaps and stops are sequence characters
    (tmp_path / "g.fa").write_text(">x\nAC-GT.A*\n>y\nmkv*\n")
    assert load_sample(tmp_path / "g.fa") == ["AC-GT.A*", "MKV*"]


def test_a_long_cell_is_shown_by_its_start_and_length(tmp_path):
    # a cell of 2000 characters (values joined by the wrong separator) was echoed whole
    (tmp_path / "x.tsv").write_text("1\t2\n" + ",".join(["1"] * 1000) + "\t2\n")
    with pytest.raises(
        DataFileError,
        match=r"x.tsv, line 2, column 1: cannot read '1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\.\.\. "
        r"\(2,001 characters\) as a number",
    ):
        load_sample(tmp_path / "x.tsv")


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("x.fa.gz", "It is compressed: decompress it first"),
        ("x.zip", "It is compressed"),
        ("x.fastq", "FASTQ is not read: convert it to FASTA"),
        ("x.npz", "save the one you mean with np.save"),
        ("x.parquet", "Export the sample to .csv"),
    ],
)
def test_the_files_people_have_instead_get_what_to_do(tmp_path, name, hint):
    (tmp_path / name).write_bytes(b"\x1f\x8b")
    with pytest.raises(DataFileError, match="unsupported file type") as info:
        load_sample(tmp_path / name)
    assert hint in str(info.value)


def test_a_trailing_separator_is_named_and_a_missing_last_value_is_not_called_one(tmp_path):
    (tmp_path / "t.csv").write_text("1,2,\n3,4,\n")
    with pytest.raises(DataFileError, match=r"t.csv, line 1, column 3: the line ends with ',', so .*trailing separator"):
        load_sample(tmp_path / "t.csv")
    (tmp_path / "m.csv").write_text("1,2\n3,\n")  # one value missing, not a separator on every line
    with pytest.raises(DataFileError, match=r"m.csv, line 2, column 2: a missing value"):
        load_sample(tmp_path / "m.csv")


# -- files that must be refused before anything is loaded ------------------------------


def test_a_file_that_is_not_npy_is_not_called_a_pickle(tmp_path):
    path = tmp_path / "garbage.npy"
    path.write_bytes(b"just some text, not an array\n" * 4)
    with pytest.raises(DataFileError, match="is not a .npy file"):
        load_sample(path)


def test_an_npy_header_claiming_more_data_than_the_file_holds_is_refused(tmp_path):
    from numpy.lib import format as npy

    path = tmp_path / "huge.npy"
    with path.open("wb") as handle:
        npy.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 3)})
        handle.write(b"\0" * 64)
    with pytest.raises(DataFileError, match=r"claims an array of shape \(1000000000000, 3\).*truncated or damaged"):
        load_sample(path)


def test_an_npy_array_that_cannot_fit_in_memory_is_refused_before_loading(tmp_path, monkeypatch):
    from monk_framework import ResourceError

    np.save(tmp_path / "a.npy", np.zeros((1000, 4)))
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 10_000)
    with pytest.raises(ResourceError, match=r"a.npy: an array of shape \(1000, 4\) needs about"):
        load_sample(tmp_path / "a.npy")


def test_a_fifo_is_refused_instead_of_blocking(tmp_path):
    import os

    fifo = tmp_path / "x.csv"
    os.mkfifo(fifo)
    with pytest.raises(DataFileError, match="not a regular file"):
        load_sample(fifo)


def test_an_unreadable_file_is_a_data_file_error(tmp_path, monkeypatch):
    from pathlib import Path

    path = tmp_path / "x.txt"
    path.write_text("ACGT\n")

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(DataFileError, match=r"x.txt: cannot be read \(Permission denied\)"):
        load_sample(path)


def test_a_csv_written_by_pandas_loses_its_index_column(tmp_path):
    # what DataFrame(X).to_csv(path) writes: an unnamed index column and a header of column names
    path = tmp_path / "x.csv"
    path.write_text(",0,1\n0,1.5,2.0\n1,-3.0,4.25\n2,0.0,1e-3\n")
    np.testing.assert_array_equal(load_sample(path), [[1.5, 2.0], [-3.0, 4.25], [0.0, 1e-3]])
    named = tmp_path / "named.csv"
    named.write_text(",a,b\nr1,1,2\nr2,3,4\n")
    np.testing.assert_array_equal(load_sample(named), [[1, 2], [3, 4]])


@pytest.mark.parametrize("cell", ["", "<NA>", "NaN", "nan"])
def test_missing_values_of_pandas_are_named_with_what_to_do(tmp_path, cell):
    path = tmp_path / "x.csv"
    path.write_text(f",a,b\n0,1.0,2.0\n1,{cell},4.0\n")
    with pytest.raises(DataFileError, match=r"line 3.*missing value.*dropna") as info:
        load_sample(path)
    # the column as the file has it (the index label is column 1), where an editor shows it
    assert "line 3, column 2" in str(info.value)


# -- read as users mean it ----------------------------------------------------------------


@pytest.mark.parametrize("delimiter", [" ", "\t", ","], ids=["spaces", "tabs", "commas"])
def test_a_text_file_of_numbers_is_read_as_vectors_for_a_vector_kernel(tmp_path, delimiter):
    X = np.random.default_rng(1).normal(size=(7, 3))
    path = tmp_path / "x.txt"
    np.savetxt(path, X, delimiter=delimiter, header="made by np.savetxt")
    np.testing.assert_array_equal(load_sample(path, kind="vector"), X)  # %.18e round-trips exactly
    np.savetxt(path, X[:, 0])
    np.testing.assert_array_equal(load_sample(path, kind="vector"), X[:, :1])
    # for a string kernel (or without a kind) a .txt file stays one string per line
    lines = [line for line in path.read_text().splitlines() if line]
    assert load_sample(path, kind="string") == load_sample(path) == lines


def test_a_text_file_of_numbers_names_its_bad_cell(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("1.0 2.0\n3.0 x\n")
    with pytest.raises(DataFileError, match=r"x.txt, line 2, column 2: cannot read 'x' as a number"):
        load_sample(path, kind="vector")


def test_a_csv_whose_first_value_is_missing_is_not_taken_for_a_pandas_file(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text(",2.5\n1.0,2.0\n3.0,4.0\n")
    with pytest.raises(DataFileError, match=r"line 1, column 1: a missing value"):
        load_sample(path)
    # pandas' default column names 0..k-1 and named columns are still its header
    path.write_text(",0,1\n0,1.5,2.0\n1,3.0,4.0\n")
    np.testing.assert_array_equal(load_sample(path), [[1.5, 2.0], [3.0, 4.0]])


def test_a_large_csv_is_streamed_into_float64_without_a_copy_per_cell(tmp_path):
    # 200 000 values: the reader holds each as 8 bytes, not as a Python string and list
    import tracemalloc

    X = np.random.default_rng(2).normal(size=(20000, 10))
    path = tmp_path / "x.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.17g")
    tracemalloc.start()
    got = load_sample(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_array_equal(got, X)
    assert peak < 2.5 * X.nbytes, (peak, X.nbytes)  # the values and their buffer's growth
    assert peak < 0.6 * path.stat().st_size


def test_a_masked_array_is_refused_unless_nothing_is_masked():
    from monk_framework import DataError, get_registry

    reg = get_registry()
    X = np.ma.masked_array(np.arange(8.0).reshape(4, 2), mask=[[0, 1], [0, 0], [1, 1], [0, 0]])
    with pytest.raises(DataError, match=r"X is a masked array with 3 masked values"):
        reg.get_estimator("v-stat").estimate(reg.get_kernel("rbf", sigma=1.0), X, np.ones((3, 2)))
    clear = np.ma.masked_array(np.arange(8.0).reshape(4, 2))
    kernel = reg.get_kernel("rbf", sigma=1.0)
    assert kernel.gram(clear).tolist() == kernel.gram(np.arange(8.0).reshape(4, 2)).tolist()


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".txt"])
def test_a_byte_order_mark_is_dropped(tmp_path, suffix):
    # spreadsheet programs start a "CSV UTF-8" file with U+FEFF, header or not
    X = np.random.default_rng(2).normal(size=(5, 2))
    sep = "\t" if suffix == ".tsv" else ","
    body = "\n".join(sep.join(repr(float(v)) for v in row) for row in X)
    header = "# a b\n" if suffix == ".txt" else f"a{sep}b\n"  # np.savetxt's header is a comment
    for text in (body, header + body):
        path = tmp_path / f"x{suffix}"
        path.write_text(text, encoding="utf-8-sig")
        np.testing.assert_array_equal(load_sample(path, kind="vector"), X)


def test_a_byte_order_mark_is_not_part_of_a_string_or_a_fasta_file(tmp_path):
    path = tmp_path / "x.fa"
    path.write_text(">a\nACGT\n>b\nGGA\n", encoding="utf-8-sig")
    assert load_sample(path) == ["ACGT", "GGA"]
    path = tmp_path / "x.txt"
    path.write_text("ACGT\nGGA\n", encoding="utf-8-sig")
    assert load_sample(path, kind="string") == ["ACGT", "GGA"]


def test_a_text_file_of_numbers_splits_on_any_run_of_spaces_and_tabs(tmp_path):
    # as np.loadtxt reads it: aligned columns, tabs and spaces mixed, leading blanks
    X = np.random.default_rng(3).normal(size=(4, 3))
    path = tmp_path / "x.txt"
    path.write_text("\n".join(f"  {float(a)!r}\t\t {float(b)!r}    {float(c)!r} \t" for a, b, c in X) + "\n")
    np.testing.assert_array_equal(load_sample(path, kind="vector"), X)
    np.testing.assert_array_equal(load_sample(path, kind="vector"), np.loadtxt(path, ndmin=2))
    np.savetxt(path, X, fmt="%12.4f")
    np.testing.assert_array_equal(load_sample(path, kind="vector"), np.loadtxt(path))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("0.5;1.5\n2.5;3.5\n", "line 1, column 1: cannot read '0.5;1.5'"),  # not taken for a header row
        ("0,5;1,5\n2,5;3,5\n", "line 1, column 2: cannot read '5;1'"),  # decimal commas
        ('"0,5";"1,5"\n"2,5";"3,5"\n', "line 1, column 1: cannot read '0,5;\"1'"),  # every cell quoted
        ("a;b\n0,5;1,5\n2,5;3,5\n", "line 2: has 3 columns where line 1 has 1\\."),
    ],  # a header read whole first
)
def test_a_semicolon_separated_file_gets_a_hint(tmp_path, text, where):
    path = tmp_path / "x.csv"
    path.write_text(text)
    with pytest.raises(DataFileError, match=rf"{where}.*seem separated by ';'.*decimal=','"):
        load_sample(path)


def test_a_word_in_a_txt_file_of_numbers_keeps_the_txt_hint(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("1.0 2.0\n3.0 abc\n")
    with pytest.raises(DataFileError, match=r"cannot read 'abc' as a number\. A \.txt file is read as numbers"):
        load_sample(path, kind="vector")


@pytest.mark.parametrize(
    ("cell", "hint"),
    [
        ("\u22120.5", r"'\u2212' \(U\+2212, the typographic minus sign\)"),
        ("\u20130.5", r"'\u2013' \(U\+2013, an en dash\)"),
        ("1\u00a0000.5", r"a no-break space \(U\+00A0\)"),  # a thousands separator, not two values
        ("1.5D3", r"Its exponent is written with 'D' \(Fortran's double precision\): write 'E'"),
        ("-.5d-2", r"Its exponent is written with 'D'"),
    ],
)
def test_a_cell_that_only_looks_like_a_number_says_why(tmp_path, cell, hint):
    # '−0.5' read as text, with no word about the one character that is not '-'
    path = tmp_path / "x.csv"
    path.write_text(f"1.0,{cell}\n2.0,3.0\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=rf"line 1, column 2: cannot read .* as a number\. (It holds )?{hint}"):
        load_sample(path)


@pytest.mark.parametrize("separator", ["\t", "  "])
def test_a_csv_whose_values_are_separated_by_blanks_gets_a_hint_at_its_first_line(tmp_path, separator):
    path = tmp_path / "x.csv"
    path.write_text(f"0.5{separator}1.5\n2.5{separator}3.5\n")
    # not taken for a header row, which would move the error to line 2
    with pytest.raises(DataFileError, match=r"line 1, column 1: cannot read .* seem separated by tabs or spaces.*\.tsv"):
        load_sample(path)
    tsv = tmp_path / "x.tsv"
    tsv.write_text("0.5\t1.5\n2.5\t3.5\n")
    np.testing.assert_array_equal(load_sample(tsv), [[0.5, 1.5], [2.5, 3.5]])


def test_a_truncated_small_npy_file_says_its_sizes_in_bytes(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((30, 2)))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 304])  # 480 bytes of data claimed, 176 kept
    with pytest.raises(DataFileError, match=r"\(480 bytes\) but the file holds only 176 bytes of data"):
        load_sample(path)


def test_integers_beyond_2_to_53_are_read_with_a_word_on_their_rounding():
    from monk_framework import PrecisionWarning

    big = np.array([[2**53 + 1], [2**53 + 2], [2**53 + 3]], dtype=np.int64)
    with pytest.warns(PrecisionWarning, match=r"X holds integers up to 9\.007e\+15, beyond 2\^53"):
        out = as_vectors(big)
    assert out[0, 0] == float(2**53)  # 2^53 + 1 is rounded, as the message says
    np.testing.assert_array_equal(as_vectors(np.arange(10, dtype=np.int64)), np.arange(10.0)[:, None])  # no word


def test_pandas_default_column_names_are_a_header_when_the_data_say_so(tmp_path):
    # pd.DataFrame(X).to_csv(path, index=False) writes "0,1" first: it was read as the
    # point (0, 1), one point too many
    from monk_framework import ReadWarning

    X = np.random.default_rng(0).normal(size=(6, 3))
    (tmp_path / "names.csv").write_text("0,1,2\n" + "".join(",".join(map(repr, row)) + "\n" for row in X.tolist()))
    with pytest.warns(ReadWarning, match=r"names.csv: line 1 \(0,1,2\) is read as pandas' default column names"):
        got = load_sample(tmp_path / "names.csv")
    assert np.array_equal(got, X)
    # integer data keep the row as a point, and so does one column (a sample that starts at 0)
    (tmp_path / "ints.csv").write_text("0,1\n2,3\n4,5\n")
    (tmp_path / "column.csv").write_text("0\n0.5\n1.5\n")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_sample(tmp_path / "ints.csv").tolist() == [[0, 1], [2, 3], [4, 5]]
        assert load_sample(tmp_path / "column.csv").ravel().tolist() == [0.0, 0.5, 1.5]


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_table_given_to_a_string_kernel_is_refused_with_what_to_give(tmp_path, suffix):
    # its first strings were taken for a header, then "cannot read 'GGTACCAT' as a number"
    sep = "," if suffix == ".csv" else "\t"
    path = tmp_path / f"seqs{suffix}"
    path.write_text(f"id{sep}sequence\n1{sep}ACGTACGT\n2{sep}GGTACCAT\n")
    with pytest.raises(
        DataFileError,
        match=rf"seqs\{suffix}: a \{suffix} file is read as numbers .* the kernel takes strings: "
        r"give them as a .txt file .* or as FASTA; .* e.g. cut -(d, -)?f2 seqs",
    ):
        load_sample(path, kind="string")


@pytest.mark.parametrize(
    "magic, what",
    [
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "is gzip-compressed, not text"),
        (b"BZh91AY&SY", "is bzip2-compressed"),
        (b"\xfd7zXZ\x00\x00", "is xz-compressed"),
        (b"\x28\xb5\x2f\xfd\x00", "is zstd-compressed"),
        (b"PK\x03\x04\x14\x00", "is a zip archive (as .xlsx, .ods and .npz files are)"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1", "is an old-style Office file (.xls)"),
        (b"\x93NUMPY\x01\x00", "is a NumPy .npy file, not text"),
        (b"PAR1\x15\x04", "is a Parquet file"),
        (b"\x89HDF\r\n\x1a\n", "is an HDF5 file"),
        (b"\x89PNG\r\n\x1a\n", "is a PNG image"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3", "is a PDF document"),
    ],
)
@pytest.mark.parametrize("name, kind", [("data.csv", None), ("data.tsv", None), ("data.txt", "vector"), ("data.txt", "string"), ("data.fa", None)])
def test_a_binary_file_where_text_is_read_is_named_by_its_first_bytes(tmp_path, magic, what, name, kind):
    # a gzip file was told to convert itself from Latin-1 (iconv -f LATIN1)
    path = tmp_path / name
    path.write_bytes(magic + bytes(range(128, 256)) * 4)
    with pytest.raises(DataFileError, match=re.escape(f"{name}: {what}") + ".*its first bytes say so") as info:
        load_sample(path, kind=kind)
    assert "iconv" not in str(info.value)


def test_a_compressed_file_is_told_the_command_that_gives_its_text(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    with pytest.raises(DataFileError, match=r"decompress it first, e\.g\. gunzip -c x\.csv > x-text\.csv$"):
        load_sample(path)


def test_excels_separator_line_is_skipped_or_explained(tmp_path):
    rows = "1.5,2.5\n3.5,4.5\n"
    (tmp_path / "plain.csv").write_text(rows)
    (tmp_path / "sep.csv").write_text("sep=,\n" + rows)
    assert np.array_equal(load_sample(tmp_path / "sep.csv"), load_sample(tmp_path / "plain.csv"))
    (tmp_path / "tab.tsv").write_text("sep=\t\n" + rows.replace(",", "\t"))
    assert np.array_equal(load_sample(tmp_path / "tab.tsv"), load_sample(tmp_path / "plain.csv"))
    (tmp_path / "semi.csv").write_text("sep=;\n1,5;2,5\n")
    with pytest.raises(
        DataFileError,
        match=r"semi.csv, line 1: is Excel's separator line 'sep=;': the values are separated "
        r"by ';', where a .csv file has ','.*decimal=','",
    ):
        load_sample(tmp_path / "semi.csv")


def test_a_tsv_file_separated_by_commas_is_told_its_name(tmp_path):
    hint = r"The values seem separated by ',': a .tsv file is read with tabs between values; name it .csv\.$"
    (tmp_path / "x.tsv").write_text("1.5,2.5\n3.5,4.5\n")
    with pytest.raises(DataFileError, match=r"line 2, column 1: cannot read '3.5,4.5' as a number\. " + hint):
        load_sample(tmp_path / "x.tsv")
    (tmp_path / "y.tsv").write_text("a\tb\n1.5,2.5\n")  # a header written with tabs, the rows with commas
    with pytest.raises(DataFileError, match=r"line 2: has 1 columns where line 1 has 2\. " + hint):
        load_sample(tmp_path / "y.tsv")


def test_a_name_the_system_refuses_is_not_called_missing(tmp_path):
    with pytest.raises(DataFileError, match=r"a{300}\.csv: cannot be read \(File name too long\)"):
        load_sample(tmp_path / ("a" * 300 + ".csv"))
