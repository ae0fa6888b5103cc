"""What a policy test case expects of a review, and whether the review's result meets it.

A case lists only what it checks: `allowed` always, then any of `nodes` (exactly the set of Nodes the result may
run on), `tolerations` (each among the result's, on the fields given), `warnings` (regular expressions, each
found in some warning; `[]`: no warning at all), `violations` (each matching one violation, `message` as a regular
expression; `[]`: none), `warningCount` and `violationCount` (exactly that many), `decisions` (regular
expressions, each found in some line of the decision trace: that a placement really happened, not only where the
pod may run) and `patched` (a partial object the result contains). The checks are pure: the runner (suites.py)
computes the result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules.model import Json
from rules.quoting import field_path

EXPECT_KEYS = (
    "allowed", "nodes", "tolerations", "warnings", "violations", "warningCount", "violationCount", "decisions",
    "patched",
)  # fmt: skip
#: The expectations that count a list of the result's: the key, and the list it counts.
COUNTS = {"warningCount": "warnings", "violationCount": "violations"}
TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
VIOLATION_FIELDS = ("family", "field", "message")


class _Missing:
    """What a partial object names and the result does not have (shown as such, null in JSON)."""

    def __repr__(self) -> str:
        return "no such field"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Outcome:
    """What came of one case: the review's result and the Nodes its pods may run on (None: not a pod kind)."""

    allowed: bool
    nodes: list[str] | None
    tolerations: list[Json]
    warnings: list[str]
    violations: list[Json]
    patched: Any
    decisions: list[str]


@dataclass(frozen=True)
class Failure:
    """One expectation that did not hold: which, what was expected, and what came."""

    expectation: str
    expected: Any
    got: Any

    def as_json(self) -> Json:
        return {
            "expectation": self.expectation,
            "expected": self.expected,
            "got": None if self.got is MISSING else self.got,
        }


def expect_problems(expect: Any, kind_runs_pods: bool) -> list[tuple[str, str]]:
    """What is wrong with an `expect` map, as (key under `expect`, message): the suite is bad, not the case."""
    if not isinstance(expect, Mapping):
        return [("", "must be a map of expectations")]
    problems = [
        (str(key), f"unknown key (expectations: {', '.join(EXPECT_KEYS)})") for key in expect if key not in EXPECT_KEYS
    ]
    if "allowed" not in expect:
        problems.append(("allowed", "missing: every case says whether the object is allowed"))
    elif not isinstance(expect["allowed"], bool):
        problems.append(("allowed", "must be true or false"))
    if "nodes" in expect:
        if not _strings(expect["nodes"]):
            problems.append(("nodes", "must be a list of Node names"))
        elif not kind_runs_pods:
            problems.append(("nodes", "the object runs no pod: only a Pod or a workload has nodes"))
    for key in ("warnings", "decisions"):
        if key in expect:
            problems += _pattern_problems(key, expect[key])
    for key in COUNTS:
        if key in expect and (type(expect[key]) is not int or expect[key] < 0):
            problems.append((key, "must be a whole number, 0 or more"))
    for key, fields in (("tolerations", TOLERATION_FIELDS), ("violations", VIOLATION_FIELDS)):
        if key in expect:
            problems += _items_problems(key, expect[key], fields)
    if "patched" in expect and not isinstance(expect["patched"], Mapping):
        problems.append(("patched", "must be a map: the part of the object the result must contain"))
    return problems


def failures(expect: Mapping[str, Any], outcome: Outcome) -> list[Failure]:
    """Every expectation of a well-formed `expect` (see `expect_problems`) that the outcome does not meet."""
    found: list[Failure] = []
    if expect["allowed"] is not outcome.allowed:
        found.append(Failure("allowed", expect["allowed"], outcome.allowed))
    if "nodes" in expect and sorted(set(expect["nodes"])) != outcome.nodes:
        found.append(Failure("nodes", sorted(set(expect["nodes"])), outcome.nodes))
    for wanted in expect.get("tolerations") or ():
        if not any(_fields_match(wanted, t, regex=()) for t in outcome.tolerations):
            found.append(Failure("tolerations", wanted, outcome.tolerations))
    for key in ("warnings", "violations"):
        if expect.get(key) == [] and getattr(outcome, key):  # an empty list asserts absence
            found.append(Failure(key, [], getattr(outcome, key)))
    for key, counted in COUNTS.items():
        if key in expect and expect[key] != len(got := getattr(outcome, counted)):
            found.append(Failure(key, expect[key], got))
    for key in ("warnings", "decisions"):
        lines = getattr(outcome, key)
        for pattern in expect.get(key) or ():
            if not any(re.search(pattern, line) for line in lines):
                found.append(Failure(key, pattern, lines))
    for wanted in expect.get("violations") or ():
        if not any(_fields_match(wanted, v, regex=("message",)) for v in outcome.violations):
            found.append(Failure("violations", wanted, outcome.violations))
    if "patched" in expect and (where := first_difference(expect["patched"], outcome.patched)) is not None:
        path, expected, got = where
        found.append(Failure(f"patched {path}".rstrip(), expected, got))
    return found


def first_difference(partial: Any, whole: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place where `whole` does not contain `partial`: (field path, expected, what is there), or None.

    A map contains each key of the partial map with a containing value; a list contains each item of the partial
    list in some item of its own (order aside); anything else is equal."""
    if isinstance(partial, Mapping):
        if not isinstance(whole, Mapping):
            return path, partial, whole
        for key, value in partial.items():
            where = field_path([key], path)
            if key not in whole:
                return where, value, MISSING
            if (found := first_difference(value, whole[key], where)) is not None:
                return found
        return None
    if isinstance(partial, list):
        if not isinstance(whole, list):
            return path, partial, whole
        for index, item in enumerate(partial):
            if not any(first_difference(item, candidate) is None for candidate in whole):
                return f"{path}[{index}]", item, whole
        return None
    return None if partial == whole and type(partial) is type(whole) else (path, partial, whole)


def _fields_match(wanted: Mapping[str, Any], actual: Mapping[str, Any], *, regex: Sequence[str]) -> bool:
    for key, value in wanted.items():
        if key in regex:
            if not re.search(str(value), str(actual.get(key) or "")):
                return False
        elif str(value) != str(actual.get(key, "")) or (key == "tolerationSeconds" and value != actual.get(key)):
            return False
    return True


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _pattern_problems(key: str, patterns: Any) -> list[tuple[str, str]]:
    if not _strings(patterns):
        return [(key, "must be a list of regular expressions")]
    return [(f"{key}[{i}]", f"not a regular expression: {e}") for i, p in enumerate(patterns) if (e := _regex_error(p))]


def _items_problems(key: str, items: Any, fields: Sequence[str]) -> list[tuple[str, str]]:
    if not isinstance(items, list) or not all(isinstance(item, Mapping) and item for item in items):
        return [(key, f"must be a list of maps, each with some of: {', '.join(fields)}")]
    problems: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        where = f"{key}[{index}]"
        problems += [(f"{where}.{k}", f"unknown key (fields: {', '.join(fields)})") for k in item if k not in fields]
        if "message" in item and (error := _regex_error(item["message"])):
            problems.append((f"{where}.message", f"not a regular expression: {error}"))
    return problems


def _regex_error(pattern: Any) -> str | None:
    if not isinstance(pattern, str):
        return "must be a string"
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None
