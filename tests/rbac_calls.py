"""What the server calls (tests/data/rbac/server-calls.yaml) as RBAC grants, and the grants a chart renders or a
request needs, so that one comparison checks the chart against the list and another the server's requests."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from testkit.rbac import ANY, Grant, allowed, rendered_grants, request_grant
from tests.support import DATA, load_yaml

__all__ = ["ANY", "Grant", "allowed", "calls", "expected_grants", "rendered_grants", "request_grant"]

CALLS = DATA / "rbac" / "server-calls.yaml"


def calls() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = load_yaml(CALLS)["calls"]
    return entries


def expected_grants(
    conditions: Collection[str], namespaces: Mapping[str, str], names: Mapping[str, Iterable[str]]
) -> set[Grant]:
    """The grants the listed calls need where `conditions` hold (besides `always`): `namespaces` resolves
    `release` and `velero`, `names` each symbolic name to the object names it stands for."""
    grants = set()
    for call in calls():
        if call["when"] != "always" and call["when"] not in conditions:
            continue
        namespace = ANY if call["where"] in ("cluster", "any") else namespaces[call["where"]]
        for name in names[call["name"]] if "name" in call else [ANY]:
            grants |= {Grant(call["group"], call["resource"], verb, namespace, name) for verb in call["verbs"]}
    return grants
