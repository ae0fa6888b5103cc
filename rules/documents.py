"""Safe YAML/JSON document loading shared by the policy, the CLI and static cluster state.

Aliases are refused: a YAML bomb (billion laughs) expands through them, and no manifest or policy needs them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import yaml


class DocumentError(ValueError):
    """A document could not be read; the message names the source and, for syntax errors, the line."""


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None,
                None,
                "YAML aliases are not accepted (they allow documents that explode in size)",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def load_documents(text: str, source: str) -> list[Any]:
    """All documents of a multi-document YAML (or JSON) text; empty documents are skipped."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_NoAliasLoader) if doc is not None]
    except RecursionError:  # PyYAML composes recursively; never swap in CSafeLoader: it segfaults instead
        raise DocumentError(f"{source}: not valid YAML: {NESTED_TOO_DEEPLY}") from None
    except ValueError as exc:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise DocumentError(f"{source}: not valid YAML: {_value_error(exc)}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DocumentError(f"{source}: YAML syntax error{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise DocumentError(f"{source}: not valid YAML: {exc}") from None


NESTED_TOO_DEEPLY = "nested too deeply"


class JsonError(ValueError):
    """JSON text that cannot be read; the message says why (with line and column for syntax errors)."""


def load_json(text: str, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """`json.loads` whose every failure is a JsonError fit for a user: deep nesting raises RecursionError and
    overlong integers a bare ValueError, which would otherwise escape as internal errors."""
    try:
        return json.loads(text, parse_constant=parse_constant)
    except json.JSONDecodeError as exc:
        raise JsonError(f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise JsonError(NESTED_TOO_DEEPLY) from None
    except ValueError as exc:
        raise JsonError(_value_error(exc)) from None


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
