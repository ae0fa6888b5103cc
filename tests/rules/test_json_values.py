"""JSON in and out: orjson reads and writes first, and every result and message is the standard library's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import safeload
from rules.jsonscan import depth_over, has_big_integer
from rules.safeload import _STRICT, JsonError, NotTextError, copy_json, dump_json, load_json, lone_surrogate


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


# -- the fast path and the standard library's agree ---------------------------------------------------------------

_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=2**63 - 3, max_value=2**64 + 3)
    | st.integers(min_value=-(2**63) - 3, max_value=-(2**63) + 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)  # surrogates included: written as `\ud800` escapes
    | st.from_regex(r"-?[0-9]{17,25}(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?", fullmatch=True)
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=16,
)


def _standard(text: str | bytes) -> Any:
    """What the standard library's path of load_json reads, always walked for lone surrogates."""
    try:
        value = _STRICT.decode(text if isinstance(text, str) else text.decode())
    except ValueError as exc:
        return ("error", type(exc).__name__)
    if (lone := lone_surrogate(value)) is not None:
        return ("lone", lone)
    return _typed(value)


def _fast(text: str | bytes) -> Any:
    try:
        return _typed(load_json(text))
    except NotTextError as exc:
        return ("lone", (exc.path, exc.problem))
    except JsonError:
        return ("error", "JSONDecodeError")


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, repr(value))


@given(_JSON, st.booleans(), st.booleans())
def test_the_fast_path_reads_what_the_standard_library_reads(value: Any, ascii_only: bool, raw_number: bool) -> None:
    """Big integers, digits in strings, escapes, lone surrogates: orjson's reading is used only where it is the
    standard library's, whichever path the scans choose."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    if raw_number and isinstance(value, str) and value and all(c.isdigit() or c in "-.eE+" for c in value):
        text = value  # a number token of the same digits, not a string
    if not ascii_only and any("\ud800" <= c <= "\udfff" for c in text):
        assert _fast(text) == _standard(text)  # a str holding a raw surrogate: no UTF-8 bytes of it
        return
    assert _fast(text.encode()) == _standard(text)
    assert _fast(text) == _standard(text)


@given(_JSON)
def test_a_big_integer_is_found_only_as_a_token(value: Any) -> None:
    """`has_big_integer` is true exactly when the text has an integer token orjson cannot hold."""
    big: list[int] = []

    def integer(token: str) -> int:
        number = int(token)
        if not -(2**63) <= number <= 2**64 - 1:
            big.append(number)
        return number

    text = json.dumps(value)
    json.loads(text, parse_int=integer)
    assert has_big_integer(text.encode()) == bool(big)


@given(_JSON, st.integers(1, 6))
def test_depth_over_is_the_nesting_depth(value: Any, limit: int) -> None:
    def depth(item: Any) -> int:
        if isinstance(item, dict):
            return 1 + max(map(depth, item.values()), default=0)
        if isinstance(item, list):
            return 1 + max(map(depth, item), default=0)
        return 0

    assert depth_over(json.dumps(value).encode(), limit) == (depth(value) > limit)


def test_a_review_with_long_digits_in_a_string_stays_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not timed: a run of 19 digits inside a string no longer reaches the standard library's decoder or
    the surrogate walk; an integer token past 64 bits does, and a surrogate escape brings the walk."""
    calls: list[str] = []
    decode, walk = _STRICT.decode, safeload.lone_surrogate

    def counted_decode(text: str) -> Any:
        calls.append("decode")
        return decode(text)

    def counted_walk(value: Any) -> Any:
        calls.append("walk")
        return walk(value)

    monkeypatch.setattr(safeload._STRICT, "decode", counted_decode)
    monkeypatch.setattr(safeload, "lone_surrogate", counted_walk)
    load_json(b'{"a": "1234567890123456789012345", "b": 12345678901234567890.5, "c": 18446744073709551615}')
    assert calls == []
    assert load_json(b'{"a": "x", "n": 18446744073709551616}') == {"a": "x", "n": 18446744073709551616}
    assert calls == ["decode"]
    load_json(b'{"a": "\\ud83d\\ude00", "n": -9223372036854775809}')
    assert calls == ["decode", "decode", "walk"]
