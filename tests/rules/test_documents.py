"""Static files: the fast readers (orjson for JSON, LibYAML's events for YAML) read and refuse what the
reference loader, all Python, reads and refuses, in its words and naming the field, for JSON and YAML alike."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from rules import safeload, yamlstream
from rules.safeload import DocumentError, load_documents
from tests.support import table_cases

TABLE = Path(__file__).parent.parent / "data" / "documents" / "strictness.yaml"
KEYS = {"name", "source", "yaml", "json", "error", "json_error", "yaml_error", "value"}


def reference(text: str) -> Any:
    """What the reference loader (PyYAML's Python reader with the same checks) reads, or its message."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=safeload._JsonTypesLoader) if doc is not None]
    except RecursionError:
        return "not valid YAML: nested too deeply"
    except (yaml.YAMLError, ValueError):
        pass
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(yaml, "__with_libyaml__", False)  # the reference path of load_documents, for its words
        return read(text)


def read(text: str) -> Any:
    try:
        return load_documents(text, "f")
    except DocumentError as exc:
        return str(exc)


def typed(value: Any) -> Any:
    """A value with its types spelled out: 1 and 1.0 and True compare equal in Python, not here. A syntax error
    or a character YAML refuses is in LibYAML's words or PyYAML's: only that it is one is compared."""
    if isinstance(value, str) and ("YAML syntax error" in value or "unacceptable character" in value):
        return "refused by the YAML syntax"
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    return (type(value).__name__, repr(value))


@pytest.mark.parametrize("case", table_cases(TABLE, KEYS))
def test_strictness_is_the_same_in_yaml_and_json(case: dict[str, Any]) -> None:
    for form in ("yaml", "json"):
        if form not in case:
            continue
        got = read(case[form])
        if "value" in case:
            assert typed(got) == typed([case["value"]])
            continue
        expected = str(case.get(f"{form}_error", case.get("error")))
        assert isinstance(got, str) and got.startswith("f: ") and got.endswith(expected), (form, got)
        if form == "yaml" or "json_error" not in case:  # the reference reads JSON's NaN as the string "NaN"
            assert got == reference(case[form]) or "nested too deeply" in got


def test_json_is_read_as_json() -> None:
    """Where YAML 1.1 reads a JSON text otherwise, a JSON text is JSON: `1e3` is a number, a surrogate pair is
    one character, a tab is whitespace."""
    assert read('{"a": 1e3, "b": "\\ud83d\\ude00",\t"c": 1E+2}') == [{"a": 1000.0, "b": "\U0001f600", "c": 100.0}]
    assert read('{"a": 1e3, "a": 2}').endswith('the key "a" appears twice (a map has each key once)')
    assert read('{"a": 1e3, "b": 123456789012345678901234567890}') == [
        {"a": 1000.0, "b": 123456789012345678901234567890}
    ]
    assert read("a: 1e3") == [{"a": "1e3"}]  # YAML stays YAML 1.1


def test_odd_tags_are_refused_not_raised() -> None:
    """A boolean tag on what no boolean reads, an int tag on an empty string: the reference raised KeyError and
    IndexError; both are refused, naming the line."""
    assert read("a: !!bool x") == 'f: not accepted at line 1, column 4: "x" is not a boolean'
    assert read('a: !!int ""') == 'f: not accepted at line 1, column 4: "" is not an integer'
    assert read("? !!str [a]\n: 1").endswith("a map key is a list or a map, not a string")


@pytest.mark.parametrize("form", ["flow", "json", "block"])
def test_a_deep_document_is_refused_after_reading_as_far_as_the_limit(form: str, monkeypatch: Any) -> None:
    """A megabyte of nesting is refused after about MAX_DEPTH events, not after reading it (counted, not timed)."""
    depth = 300_000
    text = {
        "flow": "a: " + "[" * depth + "]" * depth,
        "json": '{"a":' * depth + "1" + "}" * depth,
        "block": "".join("  " * i + "-\n" for i in range(700)),
    }[form]
    events = []

    class Counting(yaml.CSafeLoader):
        def get_event(self) -> Any:
            events.append(1)
            return super().get_event()

    monkeypatch.setattr(yaml, "CSafeLoader", Counting)
    assert read(text) == "f: not valid YAML: nested too deeply"
    assert len(events) <= 2 * yamlstream.MAX_DEPTH + 10


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: "." in repr(f))  # YAML 1.1 reads it a float
    | st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)
    | st.from_regex(r"[0-9]{17,23}", fullmatch=True)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(_VALUES, st.sampled_from(["compact", "indent", "ascii", "yaml", "flow"]))
def test_the_fast_readers_agree_with_the_reference(value: Any, form: str) -> None:
    text = {
        "compact": lambda: json.dumps({"v": value}, separators=(",", ":"), ensure_ascii=False),
        "indent": lambda: json.dumps({"v": value}, indent=2, ensure_ascii=False),
        "ascii": lambda: json.dumps({"v": value}),
        "yaml": lambda: yaml.safe_dump({"v": value}, allow_unicode=True),
        "flow": lambda: yaml.safe_dump({"v": value}, default_flow_style=True),
    }[form]()
    assert typed(read(text)) == typed(reference(text))


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c:d", "\\u003a"]), st.integers(0, 3)), min_size=1, max_size=6),
    st.booleans(),
)
def test_repeated_keys_are_refused_alike(pairs: list[tuple[str, int]], nested: bool) -> None:
    """A JSON map with repeated keys (orjson keeps the last silently) is refused as the reference refuses it."""
    body = "{" + ", ".join(f'"{key}": {number}' for key, number in pairs) + "}"
    text = '{"x": [' + body + "]}" if nested else body
    assert read(text) == reference(text)


@given(st.floats(allow_nan=False).filter(lambda f: "." in repr(f) or math.isinf(f)))
def test_numbers_past_a_double_are_refused_alike(number: float) -> None:
    text = yaml.safe_dump({"n": number})
    assert read(text) == reference(text)
