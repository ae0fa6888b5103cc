"""Which registered rules a fuzz run reaches past their early returns, and how often.

A rule is *reached* in a review when its own call left an outcome: a patch operation that changes the object, a
warning, a finding (a denial or a warning finding) or an audit annotation. Reasons do not count: rules write them
on their early returns too ("not re-pinned", "nothing to do"). Every assertion of the fuzz is about outcomes (the
patch applies and stays within the owned fields, the answer is one kube-apiserver accepts, a message carries no
control character), so a rule that never leaves one in a run is never judged by it, whatever lines of it ran.

The rules are every callable of every table in rules/registry.py, found by looking at the module, so a rule or a
table added there is counted with no step of its own. Counting replaces each table by one of wrapped entries for
the duration of a `counting()` block; the wrapper compares a few lengths around each rule call and changes nothing
the rule sees or returns. The pipeline reads every table as `registry.TABLE` when it runs, which is what lets the
wrapped ones be seen: a table imported by name elsewhere would be counted 0, and named.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rules import registry
from rules.context import Context, PodTarget

AnyRule = Callable[[Context, Any], None]


def _tables() -> list[tuple[str, dict[str, Any] | list[Any]]]:
    """The rule tables of rules/registry.py: its upper-case dicts and lists."""
    return [(n, v) for n, v in vars(registry).items() if n.isupper() and isinstance(v, (dict, list))]


def _name(table: str, key: str | None, rule: AnyRule) -> str:
    where = f"{table}[{key}]" if key is not None else table
    return f"{where}: {rule.__module__}.{rule.__qualname__}"


def registered() -> dict[str, AnyRule]:
    """Every registered rule by its name, `TABLE[key]: module.function` (`TABLE: module.function` in a list):
    the same function in two tables is two entries, since each table is reached by other reviews."""
    out: dict[str, AnyRule] = {}
    for table, value in _tables():
        items = value.items() if isinstance(value, dict) else ((None, rule) for rule in value)
        out.update((_name(table, key, rule), rule) for key, rule in items if callable(rule))
    return out


def _outcome(ctx: Context, target: Any) -> tuple[int, int, int, tuple[str, ...], int]:
    decision = ctx.decision
    ops = len(target.patch.operations()) if isinstance(target, PodTarget) and target.patch.written else 0
    return len(decision.findings), len(decision.warnings), len(decision.audit), tuple(decision.audit.values()), ops


def _counted(table: str, key: str | None, rule: Any, counts: Counter[str]) -> Any:
    if not callable(rule):
        return rule
    name = _name(table, key, rule)

    @functools.wraps(rule)
    def counted(ctx: Context, target: Any) -> None:
        before = _outcome(ctx, target)
        rule(ctx, target)  # a rule that raises reached nothing: the pipeline reports it as a crash
        if _outcome(ctx, target) != before:
            counts[name] += 1

    return counted


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Within the block, every registered rule the pipeline runs counts a review it left an outcome in."""
    counts: Counter[str] = Counter()
    saved = _tables()
    for table, value in saved:
        if isinstance(value, dict):
            setattr(registry, table, {k: _counted(table, k, r, counts) for k, r in value.items()})
        else:
            setattr(registry, table, [_counted(table, None, r, counts) for r in value])
    try:
        yield counts
    finally:
        for table, value in saved:
            setattr(registry, table, value)


def short(name: str) -> str:
    """`POD_VALIDATORS: role_trust`, for a table of counts a person reads."""
    where, _, qualified = name.partition(": ")
    return f"{where}: {qualified.rsplit('.', 1)[-1]}"
