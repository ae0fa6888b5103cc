"""Label and field selectors, as the fake API matches them against stored objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.model import Json


def selector_matcher(label_selector: str, field_selector: str) -> Callable[[Json], bool]:
    """The subset of label and field selector syntax the webhook uses (and a little more)."""
    label_tests = [_label_test(term.strip()) for term in label_selector.split(",") if term.strip()]
    field_tests = [_field_test(term.strip()) for term in field_selector.split(",") if term.strip()]

    def matches(obj: Json) -> bool:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        return all(t(labels) for t in label_tests) and all(t(meta) for t in field_tests)

    return matches


def _label_test(term: str) -> Callable[[dict[str, str]], bool]:
    if "!=" in term:
        key, value = term.split("!=", 1)
        return lambda labels: labels.get(key) != value
    if "=" in term:
        key, value = term.replace("==", "=").split("=", 1)
        return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        return lambda labels: term[1:] not in labels
    return lambda labels: term in labels


def _field_test(term: str) -> Callable[[dict[str, Any]], bool]:
    negate = "!=" in term
    path, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
    attribute = {"metadata.name": "name", "metadata.namespace": "namespace"}.get(path)
    if attribute is None:
        raise ValueError(f"field selector {path!r} is not supported by the fake API")
    return lambda meta: (str(meta.get(attribute) or "") == value) != negate
