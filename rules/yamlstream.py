"""YAML documents built from LibYAML's events, with every check of the reference loader in rules/safeload.py.

LibYAML (C) scans and parses, at the speed of its format; the values are built here from its events with an
explicit stack, never recursion, so nesting is counted as the events arrive and a document nested past
MAX_DEPTH is refused at the first event beyond it, whatever its size (LibYAML's own composer recurses in C:
a deep enough document crashes the process, so it is never used). The checks are `_JsonTypesLoader`'s, with its
words and marks: JSON values only (tags, non-finite numbers, non-string and repeated keys, merge keys), no
aliases. As there, a document's problems in the order the reference finds them: a syntax error or an alias
anywhere in it first, then the first check in document order, then a value its tag cannot build.

LibYAML refuses a lone surrogate escape (`"\\ud800"`) with its own words, so rules/safeload.py gives a text that
holds one to the reference loader, after `scan_depth` here, as it does every text when PyYAML was built without
LibYAML (`yaml.__with_libyaml__` false; the events of `scan_depth` then come from PyYAML's Python parser).
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError, SafeConstructor

from rules.quoting import clip, escaped

#: Collections nested deeper than this are refused. A Kubernetes object nests about 12 deep (a pod's affinity
#: values, inside a List); PyYAML's Python composer, which recurses, gives out near 350 (the recursion limit).
MAX_DEPTH = 100
NESTED_TOO_DEEPLY = "nested too deeply"
ALIASES_REFUSED = "YAML aliases are not accepted (they allow documents that explode in size)"

_Y = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL, MAP, SEQ, MERGE = (
    _Y + n for n in ("str", "int", "float", "bool", "null", "map", "seq", "merge")
)
JSON_TAGS = frozenset((STR, INT, FLOAT, BOOL, NULL, MAP, SEQ))
_KIND = {MAP: "mapping", SEQ: "sequence"}  # what each tag builds; every other JSON tag, a scalar


#: LibYAML's scanner reads a run of opening brackets ahead of its parser, to its own limit (1,000).
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


class TooDeep(ValueError):
    """A document nests collections past MAX_DEPTH."""


def _parser(text: str) -> Any:
    if yaml.__with_libyaml__:
        return yaml.CSafeLoader(text)  # its events are LibYAML's (CParser)
    return yaml.SafeLoader(text)  # its Python parser: the same events, slower


def tag_problem(tag: str) -> str:
    short = "!!" + tag.removeprefix(_Y) if tag.startswith(_Y) else tag
    return f"the YAML tag {short} is not accepted (only JSON values are)"


def key_problem(tag: str, text: str | None) -> str:
    """Why a map key that is not a string is refused: JSON (and so every Kubernetes object) keys maps by strings;
    sigs.k8s.io/yaml refuses a null key, and one that silently became "1" or "true" would not be what was meant.
    `text` is None for a list or a map."""
    kind = {"null": "null", "int": "a number", "float": "a number", "bool": "a boolean"}.get(
        tag.removeprefix(_Y), "a list or a map"
    )
    if text is None:
        return f"a map key is {kind}, not a string"
    shown = escaped(clip(text or "~", 40))
    return f'the map key {shown} is {kind}, not a string (quote it: "{shown}")'


def repeated_key(text: str) -> str:
    return f'the key "{escaped(text)}" appears twice (a map has each key once)'


MERGE_REFUSED = "merge keys (<<) are not accepted"


def not_finite(text: str) -> str:
    return f"{text} is not accepted (only finite numbers are)"


def scan_depth(text: str) -> None:
    """TooDeep if a YAML text nests past MAX_DEPTH, read as far as that (a syntax error ends the scan silently:
    the reader that follows reports it)."""
    parser = _parser(text)
    depth = 0
    try:
        while (event := parser.get_event()) is not None and type(event) is not yaml.StreamEndEvent:
            if type(event) is yaml.SequenceStartEvent or type(event) is yaml.MappingStartEvent:
                depth += 1
                if depth > MAX_DEPTH:
                    raise TooDeep(NESTED_TOO_DEEPLY)
            elif type(event) is yaml.SequenceEndEvent or type(event) is yaml.MappingEndEvent:
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        if exc.problem == _LIBYAML_TOO_DEEP:
            raise TooDeep(NESTED_TOO_DEEPLY) from None
    except yaml.YAMLError:
        pass
    finally:
        parser.dispose()


def load_stream(text: str, *, json: bool = False) -> list[Any]:
    """The non-empty documents of a YAML text without a lone surrogate, built from LibYAML's events; refusals
    raise what the reference loader raises (ConstructorError, ComposerError, ValueError), or TooDeep.

    `json`: the text is JSON (it opens with `{` or `[`), whose unquoted values are JSON's: a number reads as
    JSON reads it (`1e3` is 1000.0, where YAML 1.1 has a string) and `NaN`, `Infinity` or `1e400` is refused as
    not finite, as orjson reads the same text."""
    return _Builder(_RESOLVERS, json).documents(text)


class _Frame:
    """An open collection: what it builds, where it is, and (a map) the key waiting for its value."""

    __slots__ = ("index", "is_key", "key", "mark", "path", "value")

    def __init__(self, value: Any, path: str, mark: Any, is_key: bool) -> None:
        self.value, self.path, self.mark, self.is_key = value, path, mark, is_key
        self.key: Any = _NO_KEY
        self.index = 0


_NO_KEY = object()


class _Builder:
    """The values of one stream's documents; `problem` and `late` hold a document's first check problem and its
    first value its tag cannot build, raised at its end (so that a later syntax error comes first, as there)."""

    def __init__(self, resolvers: dict[Any, list[tuple[str, Any]]], json: bool) -> None:
        self.json = json
        wildcard = resolvers.get(None, [])
        self.resolvers = {first: [*found, *wildcard] for first, found in resolvers.items() if first is not None}
        self.wildcard = wildcard
        self.constructor = SafeConstructor()

    def documents(self, text: str) -> list[Any]:
        parser = yaml.CSafeLoader(text)
        try:
            return self._run(parser)
        except yaml.MarkedYAMLError as exc:
            if exc.problem == _LIBYAML_TOO_DEEP:
                raise TooDeep(NESTED_TOO_DEEPLY) from None
            raise
        finally:
            parser.dispose()

    def _run(self, parser: Any) -> list[Any]:
        documents: list[Any] = []
        stack: list[_Frame] = []
        root: Any = None
        problem: Exception | None = None
        late: Exception | None = None
        anchors: dict[str, Any] = {}
        get_event = parser.get_event
        while True:
            event = get_event()
            kind = type(event)
            if kind is yaml.ScalarEvent or kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                if event.anchor is not None:
                    if event.anchor in anchors:
                        raise ComposerError(
                            f"found duplicate anchor {event.anchor!r}; first occurrence",
                            anchors[event.anchor],
                            "second occurrence",
                            event.start_mark,
                        )
                    anchors[event.anchor] = event.start_mark
                top = stack[-1] if stack else None
                is_key = top is not None and type(top.value) is dict and top.key is _NO_KEY
                if top is None:
                    path = ""
                elif type(top.value) is list:
                    path = f"{top.path}[{top.index}]"
                elif is_key:
                    path = top.path
                else:
                    path = f"{top.path}.{top.key}" if top.path else str(top.key)
                if kind is yaml.ScalarEvent:
                    value, found, unbuilt = self._scalar(event, path, is_key, top, problem is None)
                    problem = problem or found
                    late = late or unbuilt
                    root = self._attach(stack, top, value, is_key, root)
                else:
                    if len(stack) >= MAX_DEPTH:
                        raise TooDeep(NESTED_TOO_DEEPLY)
                    builds = SEQ if kind is yaml.SequenceStartEvent else MAP
                    tag = builds if event.tag is None or event.tag == "!" else event.tag
                    if problem is None:
                        problem, unbuilt = self._collection_checks(tag, builds, path, event.start_mark, is_key)
                        late = late or unbuilt
                    stack.append(_Frame({} if builds == MAP else [], path, event.start_mark, is_key))
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                frame = stack.pop()
                top = stack[-1] if stack else None
                if frame.is_key and problem is None:
                    problem = ConstructorError(None, None, _at(frame.path, key_problem("", None)), frame.mark)
                root = self._attach(stack, top, frame.value, frame.is_key, root)
            elif kind is yaml.AliasEvent:
                raise ComposerError(None, None, ALIASES_REFUSED, event.start_mark)
            elif kind is yaml.DocumentEndEvent:
                if problem is not None:
                    raise problem
                if late is not None:
                    raise late
                if root is not None:
                    documents.append(root)
                root, anchors = None, {}
            elif kind is yaml.StreamEndEvent:
                return documents

    def _scalar(self, event: Any, path: str, is_key: bool, top: _Frame | None, checking: bool) -> tuple[Any, Any, Any]:
        """(value, check problem, build problem) of a scalar event."""
        text = event.value
        tag = event.tag
        if tag is None or tag == "!":
            if not event.implicit[0]:
                tag = STR
            elif self.json and not is_key and (_JSON_NUMBER.fullmatch(text) or text in _NON_FINITE):
                return self._json_number(text, path, event.start_mark, checking)
            else:
                tag = self._resolve(text)
        if tag == STR and not is_key:
            return text, None, None
        problem: Exception | None = None
        if checking:
            problem = self._scalar_problem(tag, text, event.start_mark, path=path, is_key=is_key, top=top)
        if tag == STR or problem is not None:
            return text, problem, None
        try:
            return self._build(tag, text, event), problem, None
        except (ValueError, ConstructorError) as exc:
            return None, problem, exc

    @staticmethod
    def _json_number(text: str, path: str, mark: Any, checking: bool) -> tuple[Any, Any, Any]:
        """(value, check problem, build problem) of an unquoted number in a JSON text."""
        if text not in _NON_FINITE and not any(char in text for char in ".eE"):
            try:
                return int(text), None, None
            except ValueError as exc:  # past sys.get_int_max_str_digits
                return None, None, exc
        value = math.inf if text in _NON_FINITE else float(text)
        if checking and not math.isfinite(value):
            return None, ConstructorError(None, None, _at(path, not_finite(text)), mark), None
        return value, None, None

    def _scalar_problem(
        self, tag: str, text: str, mark: Any, *, path: str, is_key: bool, top: _Frame | None
    ) -> Exception | None:
        """The reference's checks of a scalar, in its order: a merge key, the tag, a float's finiteness, and for
        a key its type and whether the map has it already."""
        problem: str | None = None
        if is_key and tag == MERGE:
            problem = MERGE_REFUSED
        elif tag not in JSON_TAGS:
            problem = tag_problem(tag)
        elif tag == FLOAT:
            node = yaml.ScalarNode(tag, text, mark, mark)
            try:
                if not math.isfinite(self.constructor.construct_yaml_float(node)):
                    problem = not_finite(text)
            except ValueError as exc:  # an explicit !!float on what no float reads
                return exc
        if problem is None and is_key and tag != STR:
            problem = key_problem(tag, text)
        elif problem is None and is_key and top is not None and text in top.value:
            problem = repeated_key(text)
        return None if problem is None else ConstructorError(None, None, _at(path, problem), mark)

    def _build(self, tag: str, text: str, event: Any) -> Any:
        if tag == NULL:
            return None
        if _KIND.get(tag) is not None:
            raise ConstructorError(None, None, f"expected a {_KIND[tag]} node, but found scalar", event.start_mark)
        node = yaml.ScalarNode(tag, text, event.start_mark, event.end_mark)
        build = {INT: self.constructor.construct_yaml_int, FLOAT: self.constructor.construct_yaml_float}
        try:
            return build.get(tag, self.constructor.construct_yaml_bool)(node)
        except (KeyError, IndexError):  # `!!bool x`, `!!int ""`: PyYAML raises these, uncaught
            kind = {INT: "an integer", FLOAT: "a number"}.get(tag, "a boolean")
            problem = f'"{escaped(clip(text, 40))}" is not {kind}'
            raise ConstructorError(None, None, problem, event.start_mark) from None

    def _collection_checks(
        self, tag: str, builds: str, path: str, mark: Any, is_key: bool
    ) -> tuple[Exception | None, Exception | None]:
        """(check problem, build problem) of a collection's start."""
        found = "mapping" if builds == MAP else "sequence"
        if is_key and tag == MERGE:
            return ConstructorError(None, None, _at(path, MERGE_REFUSED), mark), None
        if tag not in JSON_TAGS:
            return ConstructorError(None, None, _at(path, tag_problem(tag)), mark), None
        if tag == FLOAT:  # the reference reads a float tag's number while checking: a collection has none
            return ConstructorError(None, None, f"expected a scalar node, but found {found}", mark), None
        if tag != builds:
            want = _KIND.get(tag, "scalar")
            return None, ConstructorError(None, None, f"expected a {want} node, but found {found}", mark)
        return None, None

    def _resolve(self, text: str) -> str:
        """The tag of a plain scalar, as yaml.resolver.Resolver.resolve finds it."""
        for tag, regexp in self.resolvers.get(text[:1], self.wildcard):
            if regexp.match(text):
                return str(tag)
        return STR

    @staticmethod
    def _attach(stack: list[_Frame], top: _Frame | None, value: Any, is_key: bool, root: Any) -> Any:
        if top is None:
            return value
        if type(top.value) is list:
            top.value.append(value)
            top.index += 1
        elif is_key:
            top.key = value if type(value) is str else repr(value)
        else:
            top.value[top.key] = value
            top.key = _NO_KEY
        return root


def _at(path: str, problem: str) -> str:
    return f"{path}: {problem}" if path else problem


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_NON_FINITE = frozenset(("NaN", "Infinity", "-Infinity"))
#: The implicit resolvers of the reference loader: SafeLoader's, less timestamps (a date stays a string).
_RESOLVERS = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _Y + "timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
