"""Parameter validators and the command-line value parser."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pytest

from monk_framework import ParameterError, UnknownNameError
from monk_framework.core.params import Configurable, boolean, integer, one_of, parameter, parse_spec, parse_value, real, real_or


@attrs.frozen(kw_only=True)
class Thing(Configurable):
    name: ClassVar[str] = "thing"
    plugin_type: ClassVar[str] = "kernel"
    rate: float = parameter(0.5, doc="a rate", check=real(gt=0, le=1), kind="float")
    count: int = parameter(3, doc="a count", check=integer(ge=1), kind="int")
    flag: bool = parameter(False, doc="a flag", check=boolean())
    mode: str = parameter("a", doc="a mode", check=one_of("a", "b"))
    width: float | str = parameter("auto", doc="a width", check=real_or("auto", ge=0), kind="float")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0.0}, "The 'rate' parameter of Thing must be a float in (0, 1]. Got 0.0 instead."),
        ({"rate": 1.5}, "must be a float in (0, 1]. Got 1.5 instead."),
        ({"rate": True}, "Got True instead."),
        ({"count": 0}, "The 'count' parameter of Thing must be an int >= 1. Got 0 instead."),
        ({"count": "3"}, "Got '3' instead."),
        ({"flag": 1}, "must be a bool (true or false). Got 1 instead."),
        ({"mode": "c"}, "must be one of 'a', 'b'. Got 'c' instead."),
        ({"width": -1}, "must be a float >= 0 or 'auto'. Got -1.0 instead."),
        # a value copied from typeset text: the one character that is not '-' is named
        ({"width": "1e\u22123"}, "Got '1e\u22123' instead. It holds '\u2212' (U+2212, the typographic minus sign), which only looks like part of a number"),
    ],
)
def test_messages_in_scikit_learn_wording(kwargs, message):
    with pytest.raises(ParameterError) as info:
        Thing(**kwargs)
    assert str(info.value) == message or message in str(info.value)


def test_numbers_are_stored_as_plain_python_types():
    thing = Thing(rate=np.float32(0.25), count=np.int64(4), width=2)
    assert type(thing.rate) is float and type(thing.count) is int and type(thing.width) is float
    assert thing.params() == {"rate": 0.25, "count": 4, "flag": False, "mode": "a", "width": 2.0}


def test_from_params_rejects_unknown_names():
    with pytest.raises(UnknownNameError, match="Unknown parameter of kernel 'thing': 'rat'. Did you mean 'rate'"):
        Thing.from_params({"rat": 1})
    assert Thing.from_params({"rate": 1}, count=2) == Thing(rate=1.0, count=2)


def test_parameters_describe_defaults_and_allowed_values():
    info = {p.name: p for p in Thing.parameters()}
    assert info["rate"].default == 0.5 and info["rate"].allowed == "a float in (0, 1]"
    assert info["width"].allowed == "a float >= 0 or 'auto'"


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1), ("-2", -2), ("0.5", 0.5), ("1e-3", 1e-3), ("true", True), ("False", False), ("median", "median"), (" rbf ", "rbf")],
)
def test_parse_value(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e-400", r"'1e-400' is below float64's smallest positive number .* read as 0\."),
        ("-2.5e-999", r"'-2.5e-999' is below float64's smallest"),
        ("1e400", r"'1e400' is beyond float64's largest number .* read as infinity\."),
        ("-1E400", r"'-1E400' is beyond .* read as -infinity\."),
    ],
)
def test_a_number_beyond_float64_is_refused_as_typed_not_as_0_or_infinity(text, message):
    # "-p sigma=1e-400" was refused as "Got 0.0 instead", a value the user never typed
    with pytest.raises(ParameterError, match=message):
        parse_value(text)
    with pytest.raises(ParameterError, match=message):
        parse_spec(f"rbf:sigma={text}")
    # the parameter it was given for is named first
    with pytest.raises(ParameterError, match=rf"^sigma in spec 'rbf:sigma={text}': '{text}' is"):
        parse_spec(f"rbf:sigma={text}")
    with pytest.raises(ParameterError, match=rf"^--data-param n: '{text}' is"):
        parse_value(text, "--data-param n")
    # what float64 holds, and the words for its ends, are read as before
    assert parse_value("0e5") == 0.0 and parse_value("5e-324") == 5e-324 and parse_value("-inf") == -float("inf")


def test_a_spec_giving_a_parameter_twice_is_refused():
    # "rbf:sigma=1,sigma=2" used sigma = 2 without a word, where --param refuses the same
    with pytest.raises(ParameterError, match=r"Parameter 'sigma' is given twice in spec 'rbf:sigma=1,sigma=2'"):
        parse_spec("rbf:sigma=1,sigma=2")
    assert parse_spec("rbf:sigma=1,width=2") == ("rbf", {"sigma": 1, "width": 2})


def test_the_form_results_show_is_read_back_as_a_spec():
    # tables and logs show rbf(sigma=0.615) and u-stat(root='clip'): pasted into the next
    # command, it was "Unknown kernel 'rbf(sigma=0.615)'"
    from monk_framework.core.registry import get_registry

    reg = get_registry()
    for obj in (
        reg.get_kernel("rbf", sigma=0.615),
        reg.get_kernel("ssk", n=2, normalize=False),
        reg.get_estimator("u-stat", root="signed"),
        reg.get_estimator("monk-bcd", n_blocks=7, variant="paper"),
    ):
        name, params = parse_spec(obj.spec())
        assert name == obj.name and params == obj.params()
    assert parse_spec("rbf()") == ("rbf", {}) and parse_spec(' laplace( sigma = 2 , norm = "l1" ) ') == ("laplace", {"sigma": 2, "norm": "l1"})
    # the colon form is read as before, a value holding parentheses included
    assert parse_spec("rbf:sigma=2") == ("rbf", {"sigma": 2}) and parse_spec("x:a=f(1)") == ("x", {"a": "f(1)"})
    with pytest.raises(ParameterError, match=r"Bad parameter 'sigma' in spec 'rbf\(sigma\)': expected key=value"):
        parse_spec("rbf(sigma)")
    # a parenthesis lost in copying was looked up as a name: "Unknown kernel 'rbf(sigma=2'"
    for half in ("rbf(sigma=2", "rbf)", "rbf sigma=2)"):
        with pytest.raises(
            ParameterError,
            match=r"Cannot read spec .*: write it as name\(key=value, ...\), with both "
            r"parentheses, or as name:key=value",
        ):
            parse_spec(half)


def test_an_int_beyond_float64_is_refused_by_name_not_with_an_overflow():
    # get_kernel("rbf", sigma=10**400) raised OverflowError from the converter; the message
    # gives the int's size, not its 401 digits
    from monk_framework.core.errors import shown
    from monk_framework.core.registry import get_registry

    with pytest.raises(
        ParameterError,
        match=r"The 'sigma' parameter of RBFKernel must be .* Got an int of about "
        r"10\^400 \(beyond float64\) instead\.",
    ):
        get_registry().get_kernel("rbf", sigma=10**400)
    assert shown(10**400) == "an int of about 10^400 (beyond float64)"
    assert shown(-(10**5000)) == "an int of about 10^5000 (beyond float64)"  # str() of it is refused by Python
    assert shown(list(range(1000))) == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1... (4,890 characters)"
    assert shown(2.5) == "2.5" and shown(True) == "True"


@attrs.frozen(kw_only=True)
class Counted(Configurable):
    name: ClassVar[str] = "counted"
    plugin_type: ClassVar[str] = "estimator"
    n_iter: int = parameter(3, doc="a count", check=integer(ge=1), kind="int")
    trace: bool | str = parameter("auto", doc="a flag or a rule", check=one_of("auto", True, False))


@pytest.mark.parametrize("big", [2**63, 10**70, 10**400, np.uint64(2**63)])
def test_an_int_past_numpys_largest_is_refused_for_an_int_parameter(big):
    # 10**400 iterations or a subsequence length of 10**400 reached a float conversion deep
    # in the work ("internal error: OverflowError: int too large to convert to float")
    with pytest.raises(
        ParameterError,
        match=r"The 'n_iter' parameter of Counted must be an int >= 1\. Got .* instead\. "
        r"An int parameter is at most 2\^63 - 1 = 9,223,372,036,854,775,807",
    ):
        Counted(n_iter=big)
    assert Counted(n_iter=2**63 - 1).n_iter == 2**63 - 1
    # a float parameter's refusal of a huge int says nothing of the int bound
    with pytest.raises(ParameterError) as info:
        Thing(rate=10**400)
    assert "2^63" not in str(info.value)


def test_a_whole_number_typed_as_a_float_is_told_how_to_write_it():
    # the command line reads n=1e6 as 1000000.0: refused as before, now with the int to write
    with pytest.raises(
        ParameterError,
        match=r"must be an int >= 1\. Got 1000000\.0 instead\. Write the whole number "
        r"without a decimal point or exponent: 1000000\.$",
    ):
        Counted(n_iter=parse_value("1e6"))
    with pytest.raises(ParameterError) as info:
        Counted(n_iter=2.5)
    assert "Write the whole number" not in str(info.value)


@pytest.mark.parametrize("number", [1, 0, 1.0, np.int64(1)])
def test_a_number_is_not_taken_for_a_bool_among_named_choices(number):
    # Python's 1 == True let trace=1 pass a check of ('auto', True, False), stored as 1, where
    # normalize=1 (boolean()) was refused: a flag is true or false in every plugin
    with pytest.raises(ParameterError, match=r"must be one of 'auto', True, False\. Got"):
        Counted(trace=number)
    assert Counted(trace=True).trace is True and Counted(trace=np.False_).trace == False  # noqa: E712


def test_first_repeat_names_the_first_pair_of_equal_items():
    from monk_framework.core.params import first_repeat

    assert first_repeat(["rbf", "laplace", "rbf", "laplace"]) == (0, 2)
    assert first_repeat(["a", "b", "c", "b"]) == (1, 3)
    assert first_repeat(["a", "b"]) is None and first_repeat([]) is None
