"""Safe YAML/JSON document loading shared by the policy, the CLI, static cluster state and the codec.

Documents hold JSON values only, as the API server's objects do: strings, finite numbers, booleans, null, lists
and maps. Aliases are refused (a YAML bomb expands through them), so are tags that build anything else
(`!!binary`, `!!timestamp`, `!!set`, `!!python/...`, local `!tags`) and the non-finite numbers `.nan`/`.inf` and
JSON's `NaN`/`Infinity`, which no Kubernetes object can carry and kube-apiserver cannot decode. A date-like
scalar stays the string it is written as (YAML 1.2 has no implicit timestamps). Map keys are strings, each once
per map, and every string is Unicode text (no lone surrogate such as `"\\ud800"`), as in JSON that Go decodes.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import yaml

from rules.jsonscan import depth_over, has_big_integer, has_surrogate_escape, repeats_a_key
from rules.quoting import escaped, field_path
from rules.yamlstream import (
    ALIASES_REFUSED,
    FLOAT,
    JSON_TAGS,
    MAX_DEPTH,
    MERGE,
    MERGE_REFUSED,
    NESTED_TOO_DEEPLY,
    STR,
    TooDeep,
    key_problem,
    load_stream,
    not_finite,
    repeated_key,
    scan_depth,
    tag_problem,
)


class DocumentError(ValueError):
    """A document could not be read; the message names the source and, for syntax errors, the line."""


class _JsonTypesLoader(yaml.SafeLoader):
    """The reference loader, all Python: it composes JSON values only and every refusal names the path and line
    of the value. rules/yamlstream.py builds the same values from LibYAML's events, with the same checks and
    words; this one reads what LibYAML words otherwise (a lone surrogate escape) and every text when PyYAML has
    no LibYAML, each after `scan_depth` (it composes recursively)."""

    def construct_document(self, node: Any) -> Any:
        self._check(node, "")
        return super().construct_document(node)

    def _check(self, node: Any, path: str) -> None:
        if node.tag not in JSON_TAGS:
            _refuse(node, path, tag_problem(node.tag))
        if node.tag == FLOAT and not math.isfinite(self.construct_yaml_float(node)):
            _refuse(node, path, not_finite(node.value))
        if isinstance(node, yaml.ScalarNode) and (found := _SURROGATE.search(node.value)):
            _refuse(node, path, _surrogate_problem(found.group()))
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                if key.tag == MERGE:
                    _refuse(key, path, MERGE_REFUSED)
                self._check(key, path)
                if key.tag != STR or not isinstance(key, yaml.ScalarNode):
                    _refuse(key, path, key_problem(key.tag, key.value if isinstance(key, yaml.ScalarNode) else None))
                if key.value in seen:
                    _refuse(key, path, repeated_key(key.value))
                seen.add(key.value)
                self._check(value, f"{path}.{key.value}" if path else str(key.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._check(item, f"{path}[{i}]")

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(None, None, ALIASES_REFUSED, event.start_mark)
        return super().compose_node(parent, index)


# Timestamps resolve as strings: an implicit `!!timestamp` would make a date object no JSON value can hold.
_JsonTypesLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _surrogate_problem(char: str, where: str = "holds") -> str:
    return f"{where} the lone surrogate {escaped(char)}, which is not Unicode text"


def _refuse(node: Any, path: str, problem: str) -> None:
    raise yaml.constructor.ConstructorError(None, None, f"{path}: {problem}" if path else problem, node.start_mark)


def load_documents(text: str, source: str) -> list[Any]:
    """All documents of a multi-document YAML (or JSON) text; empty documents are skipped.

    A text that opens with `{` or `[` is read as JSON by orjson when it can be (rules/jsonscan.py says when: no
    integer past 64 bits, no repeated key, no nesting past MAX_DEPTH; and none of the characters YAML refuses
    or reads as line breaks); any other text, or a JSON text orjson refuses, is read as YAML, by LibYAML
    (rules/yamlstream.py) unless it holds a lone surrogate. Every path refuses alike, naming the value.
    """
    try:
        json_text = _JSON_START.match(text) is not None
        if json_text and (value := _json_document(text)) is not _UNDECIDED:
            return [value]
        if yaml.__with_libyaml__ and not _has_surrogate(text):
            return load_stream(text, json=json_text)
        scan_depth(_SURROGATE_TEXT.sub(_same_length_blank, text))
        return [doc for doc in yaml.load_all(text, Loader=_JsonTypesLoader) if doc is not None]
    except (TooDeep, RecursionError):
        raise DocumentError(f"{source}: not valid YAML: {NESTED_TOO_DEEPLY}") from None
    except ValueError as exc:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise DocumentError(f"{source}: not valid YAML: {_value_error(exc)}") from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DocumentError(f"{source}: not accepted{where}: {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DocumentError(f"{source}: YAML syntax error{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise DocumentError(f"{source}: not valid YAML: {exc}") from None


_UNDECIDED = object()
_JSON_START = re.compile(r"[ \t\r\n]*[\[{]")
#: What YAML refuses (yaml.reader.Reader.NON_PRINTABLE) or reads as a line break, folded in a quoted string.
_YAML_ONLY = re.compile("[^\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: A lone surrogate, raw or escaped (`\\ud800`, `\\U0000d800`): LibYAML refuses it in its own words.
_SURROGATE_TEXT = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\U0000[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return _SURROGATE_TEXT.search(text) is not None


def _same_length_blank(found: re.Match[str]) -> str:
    return " " if len(found.group()) == 1 else "\\u0020" if len(found.group()) == 6 else "\\U00000020"


def _json_document(text: str) -> Any:
    """The value of a JSON text, read by orjson, when that is exactly what the YAML reading gives or refuses
    alike; _UNDECIDED when the YAML reader must decide (and word the refusal)."""
    if _YAML_ONLY.search(text):
        return _UNDECIDED
    try:
        data = text.encode("utf-8")
        value = orjson.loads(data)
    except (UnicodeEncodeError, orjson.JSONDecodeError):
        return _UNDECIDED
    if has_big_integer(data) or depth_over(data, MAX_DEPTH) or repeats_a_key(data, value) is not False:
        return _UNDECIDED
    return value


class JsonError(ValueError):
    """JSON text that cannot be read; the message says why (with line and column for syntax errors)."""


class NotTextError(JsonError):
    """JSON that decodes, but with a lone surrogate escape (`"\\ud800"`) in a string: no Unicode text, so no
    UTF-8 writer (ours, the API server's) can echo it. `path` names the string, `problem` what it holds."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: Any) -> tuple[str, str] | None:
    """(path, problem) of the first string, key or value, of a JSON value that holds a lone surrogate; None when
    every string is Unicode text. Iterative: a value as deep as the decoder allows must not exhaust the stack."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if found := _SURROGATE.search(item):
                return path, _surrogate_problem(found.group())
        elif isinstance(item, dict):
            for key, element in reversed(item.items()):
                inner = field_path([key], path)
                if found := _SURROGATE.search(key):
                    return inner, _surrogate_problem(found.group(), "the key holds")
                stack.append((inner, element))
        elif isinstance(item, list):
            stack.extend((field_path([i], path), element) for i, element in reversed(list(enumerate(item))))
    return None


def load_json(text: str | bytes) -> Any:
    """Strict `json.loads` whose every failure is a JsonError fit for a user: `NaN` and `Infinity` are refused,
    deep nesting (RecursionError) and overlong integers (a bare ValueError) are reported, not raised. Bytes must
    be UTF-8 (UnicodeDecodeError otherwise, for the caller to word).

    orjson reads it first, two to three times faster (every review body comes through here). It refuses what
    the standard library is told to refuse, and a little more (a lone surrogate, nesting past 1,024); whatever
    it refuses, the standard library reads again, so the result and every error message stay the standard
    library's. The one silent difference, an integer token past 64 bits read as a float, is kept from it: such
    a text (rules/jsonscan.py finds the token, not digits in a string) goes to the standard library. A lone
    surrogate escape the standard library reads is then refused (NotTextError, naming the string): no UTF-8
    writer can echo it back. Only a text with a surrogate escape (or a str holding one) is walked for it.
    """
    raw_surrogate = False
    if isinstance(text, bytes):
        data = text
    else:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in the str itself, not escaped
            data, raw_surrogate = text.encode("utf-8", "surrogatepass"), True
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        if not has_big_integer(data):
            return value
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        value = _STRICT.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonError(f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise JsonError(NESTED_TOO_DEEPLY) from None
    except ValueError as exc:
        raise JsonError(_value_error(exc)) from None
    if (raw_surrogate or has_surrogate_escape(data)) and (lone := lone_surrogate(value)) is not None:
        raise NotTextError(*lone)
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 reads as infinity
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


_STRICT = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def copy_json(value: Any) -> Any:
    """A tree copy of a JSON value in which, unlike `copy.deepcopy`'s, no object appears twice."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def dump_json(value: Any) -> bytes:
    """Compact JSON of a value built from JSON values; never `NaN` (loading refuses it, so none can appear).

    orjson writes it (ten times faster than `json.dumps` for a review); what orjson cannot write (an integer
    past 64 bits, a subclass of a JSON type) goes to the standard library, which refuses non-finite floats.
    """
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


def _value_error(exc: ValueError) -> str:
    if "integer string conversion" in str(exc):
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def iter_objects(documents: list[Any], source: str) -> Iterator[dict[str, Any]]:
    """Kubernetes objects from documents, unpacking `kind: List` (and `*List`) wrappers."""
    for index, doc in enumerate(documents):
        if not isinstance(doc, dict):
            raise DocumentError(f"{source}: document {index + 1} is not an object")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
            for item in doc["items"]:
                if not isinstance(item, dict):
                    raise DocumentError(f"{source}: an item of document {index + 1} is not an object")
                yield item
        else:
            yield doc


def unreadable(source: str, exc: OSError | UnicodeDecodeError) -> str:
    """The one wording of a file that cannot be read: `<file>: cannot read: No such file or directory`."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{source}: cannot read: {reason}"
