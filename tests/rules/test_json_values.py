"""JSON in and out: orjson reads and writes first, and every result and message is the standard library's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules.safeload import JsonError, NotTextError, copy_json, dump_json, load_json


def _stdlib_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    raise AssertionError(f"the standard library reads {text!r}")


@pytest.mark.parametrize(
    "text",
    ['{"a": 01}', "{'a': 1}", '{"a": 1} x', '{"a": "x\x01y"}', '{"a": 1,}', "", "[1, 2"],
    ids=["leading zero", "single quotes", "extra data", "control character", "trailing comma", "empty", "cut"],
)
def test_an_error_is_worded_as_the_standard_library_words_it(text: str) -> None:
    with pytest.raises(JsonError) as caught:
        load_json(text)
    assert str(caught.value) == _stdlib_error(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 123456789012345678901234567890}', {"a": 123456789012345678901234567890}),  # orjson: a float
        ('{"a": -9223372036854775809}', {"a": -9223372036854775809}),
        ('{"a": 18446744073709551616}', {"a": 18446744073709551616}),
        ('{"a": 1, "a": 2}', {"a": 2}),
        ('{"a": 1.5, "b": -0, "c": 1E2}', {"a": 1.5, "b": 0, "c": 100.0}),
    ],
)
def test_values_are_read_as_the_standard_library_reads_them(text: str, expected: Any) -> None:
    value = load_json(text)
    assert value == expected and type(value) is type(expected)
    if isinstance(value, dict):
        assert [type(v) for v in value.values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": -Infinity}', '{"a": 1e400}'])
def test_non_finite_numbers_are_refused(text: str) -> None:
    with pytest.raises(JsonError, match=r"not a JSON value|not a finite number"):
        load_json(text)


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        ('"\\ud800"', "", "holds the lone surrogate \\ud800, which is not Unicode text"),
        (
            '{"request": {"uid": "a\\udfff"}}',
            "request.uid",
            "holds the lone surrogate \\udfff, which is not Unicode text",
        ),
        (
            '{"a": [1, {"b": ["x", "\\udc00y"]}]}',
            "a[1].b[1]",
            "holds the lone surrogate \\udc00, which is not Unicode text",
        ),
        (
            '{"labels": {"app/\\ud800": "x"}}',
            "labels[app/\\ud800]",
            "the key holds the lone surrogate \\ud800, which is not Unicode text",
        ),
        (
            '{"0a": {"b\\u0007": ["\\ud800"]}}',
            "[0a][b\\x07][0]",
            "holds the lone surrogate \\ud800, which is not Unicode text",
        ),
        (
            '{"n": 12345678901234567890, "s": "\\ud800"}',
            "s",
            "holds the lone surrogate \\ud800, which is not Unicode text",
        ),
    ],
    ids=["document", "value", "nested", "key", "keys named escaped", "long digits"],
)
def test_a_lone_surrogate_is_refused_naming_the_string(text: str, path: str, problem: str) -> None:
    """orjson refuses it, the standard library reads it, and no UTF-8 writer can echo it (it was a 500)."""
    with pytest.raises(NotTextError) as caught:
        load_json(text)
    assert (caught.value.path, caught.value.problem) == (path, problem)
    assert load_json('"\\ud83d\\ude00"') == "\U0001f600"  # a surrogate pair is one character


def test_bytes_are_read_as_utf8_only() -> None:
    assert load_json('{"a": "é"}'.encode()) == {"a": "é"}
    with pytest.raises(UnicodeDecodeError):
        load_json('{"a": "é"}'.encode("utf-16"))  # the standard library would detect UTF-16 in bytes
    with pytest.raises(UnicodeDecodeError):
        load_json(b'{"a": "\xff"}')


def test_deep_nesting_is_reported_not_raised() -> None:
    with pytest.raises(JsonError, match="nested too deeply"):
        load_json("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(
    "value",
    [
        {"b": [1, "é", None, True], "a": {"x": 1.5}},
        {"big": 2**70, "small": -(2**70)},  # past orjson's 64 bits: written by the standard library
        ["\u202e", "\x00"],
    ],
)
def test_dump_json_writes_compact_json_that_reads_back_equal(value: Any) -> None:
    text = dump_json(value)
    assert json.loads(text) == value
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def test_copy_json_shares_no_object() -> None:
    shared = {"key": "zone", "operator": "In", "values": ["a"]}
    original = [{"matchExpressions": [shared]}, {"matchExpressions": [shared]}]
    copied = copy_json(original)
    assert copied == original
    first, second = (term["matchExpressions"][0] for term in copied)
    assert first is not second and first is not shared and first["values"] is not shared["values"]
