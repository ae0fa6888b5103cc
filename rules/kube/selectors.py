"""Kubernetes LabelSelector: validation and matching with exactly the API's semantics.

An empty selector matches everything, a missing one nothing (callers decide which applies); `NotIn` and
`DoesNotExist` match objects that lack the key, as in apimachinery.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rules.kube.names import label_key_error, label_value_error
from rules.quoting import clip, one_of

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_INT = re.compile(r"^[+-]?[0-9]{1,19}$")  # 19 digits hold every int64; more never parse

Problem = tuple[str, str]  # (field path, message)


def selector_problems(selector: Any, path: str, operators: tuple[str, ...] = SELECTOR_OPERATORS) -> list[Problem]:
    """Every reason `selector` is not a valid LabelSelector, each with its field path."""
    if not isinstance(selector, Mapping):
        return [(path, f"must be a label selector object, not {type_name(selector)}")]
    problems: list[Problem] = []
    for key in selector:
        if key not in ("matchLabels", "matchExpressions"):
            problems.append((f"{path}.{key}", "unknown field (expected matchLabels or matchExpressions)"))
    labels = selector.get("matchLabels")
    if labels is not None:
        if not isinstance(labels, Mapping):
            problems.append((f"{path}.matchLabels", f"must be a map of strings, not {type_name(labels)}"))
        else:
            for key, value in labels.items():
                at = f"{path}.matchLabels[{key}]"
                if (err := label_key_error(str(key))) is not None:
                    problems.append((at, err))
                if not isinstance(value, str):
                    problems.append((at, f"must be a string, not {type_name(value)}"))
                elif (err := label_value_error(value)) is not None:
                    problems.append((at, err))
    expressions = selector.get("matchExpressions")
    if expressions is not None:
        if not isinstance(expressions, list):
            problems.append((f"{path}.matchExpressions", f"must be a list, not {type_name(expressions)}"))
        else:
            for i, expr in enumerate(expressions):
                problems.extend(requirement_problems(expr, f"{path}.matchExpressions[{i}]", operators))
    return problems


def requirement_problems(expr: Any, path: str, operators: tuple[str, ...]) -> list[Problem]:
    """Problems of one `{key, operator, values}` requirement (label selector or node selector flavour)."""
    if not isinstance(expr, Mapping):
        return [(path, f"must be an object with key, operator and values, not {type_name(expr)}")]
    problems: list[Problem] = []
    for name in expr:
        if name not in ("key", "operator", "values"):
            problems.append((f"{path}.{name}", "unknown field (expected key, operator or values)"))
    key = expr.get("key")
    if not isinstance(key, str):
        problems.append(
            (f"{path}.key", "required string" if key is None else f"must be a string, not {type_name(key)}")
        )
    elif (err := label_key_error(key)) is not None:
        problems.append((f"{path}.key", err))
    operator = expr.get("operator")
    values = expr.get("values")
    if operator not in operators:
        shown = "missing" if operator is None else f'"{operator}"'
        problems.append((f"{path}.operator", f"{shown} is not one of {one_of(operators)}"))
    if values is not None and not (isinstance(values, list) and all(isinstance(v, str) for v in values)):
        problems.append((f"{path}.values", "must be a list of strings"))
        return problems
    count = len(values or [])
    if operator in ("In", "NotIn") and count == 0:
        problems.append((f"{path}.values", f"must not be empty when operator is {operator}"))
    elif operator in ("Exists", "DoesNotExist") and count:
        problems.append((f"{path}.values", f"must be empty when operator is {operator}"))
    elif operator in ("Gt", "Lt"):
        if count != 1:
            problems.append((f"{path}.values", f"must have exactly one value when operator is {operator}"))
        elif not is_int64(first := next(iter(values or [""]))):
            problems.append((f"{path}.values[0]", f'"{clip(first)}" is not a 64-bit integer (operator {operator})'))
    if operator in ("In", "NotIn") and values:
        for j, value in enumerate(values):
            if (err := label_value_error(value)) is not None:
                problems.append((f"{path}.values[{j}]", err))
    return problems


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy a (valid) LabelSelector; the empty selector matches everything."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(expr, labels) for expr in selector.get("matchExpressions") or ())


def requirement_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One label requirement, including the node-only Gt/Lt integer comparisons."""
    key = expr["key"]
    operator = expr["operator"]
    values: list[str] = list(expr.get("values") or ())
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1 or not is_int64(labels[key]) or not is_int64(values[0]):
            return False
        actual, bound = int(labels[key]), int(values[0])
        return actual > bound if operator == "Gt" else actual < bound
    return False


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for error messages users read."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def is_int64(text: str) -> bool:
    """Go's `strconv.ParseInt(text, 10, 64)`: an optional sign, ASCII digits, 64-bit range (no spaces or '_')."""
    if not isinstance(text, str) or not _INT.fullmatch(text):
        return False
    return -(2**63) <= int(text) < 2**63
