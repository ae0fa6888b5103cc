"""What the server calls (tests/data/rbac/server-calls.yaml) as RBAC grants, and the grants a chart renders or a
request needs, so that one comparison checks the chart against the list and another the server's requests."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support import DATA, load_yaml

CALLS = DATA / "rbac" / "server-calls.yaml"
ANY = "*"  # every namespace (and cluster scope), or every name

#: Request paths of the Kubernetes API: /api/v1 or /apis/<group>/<version>, then an optional namespace, the
#: resource and an optional name. Discovery (/api, /apis, /apis/<group>/<version>) matches none of it.
_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[a-z0-9.-]+)/v[0-9a-z]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[a-z]+)"
    r"(?:/(?P<name>[^/]+))?$"
)
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class Grant:
    """One verb on one resource, in one namespace (or ANY) on one object name (or ANY)."""

    group: str
    resource: str
    verb: str
    namespace: str = ANY
    name: str = ANY


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


def rendered_grants(docs: Iterable[Mapping[str, Any]]) -> set[Grant]:
    """What the rendered Roles and ClusterRoles grant (each bound: test_chart_rbac checks the bindings)."""
    grants = set()
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        namespace = doc["metadata"]["namespace"] if doc["kind"] == "Role" else ANY
        for rule in doc.get("rules") or []:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [ANY]:
                            grants.add(Grant(group, resource, verb, namespace, name))
    return grants


def request_grant(method: str, path: str, query: Mapping[str, str]) -> Grant | None:
    """The grant a request needs; None for discovery, which every authenticated client may read."""
    match = _PATH.match(path)
    if match is None:
        return None
    name = match["name"]
    if method == "GET" and name is None:
        verb = "watch" if query.get("watch") in ("true", "1") else "list"
        selected = [term for term in query.get("fieldSelector", "").split(",") if term.startswith("metadata.name=")]
        name = selected[0].split("=", 1)[1] if selected else None
    else:
        verb = "get" if method == "GET" else _VERBS[method]
    return Grant(match["group"] or "", match["resource"], verb, match["ns"] or ANY, name or ANY)


def allowed(needed: Grant, grants: Iterable[Grant]) -> bool:
    """RBAC's answer: a grant of the verb on the resource in every namespace or the request's, for every name or
    the request's."""
    return any(
        (grant.group, grant.resource, grant.verb) == (needed.group, needed.resource, needed.verb)
        and grant.namespace in (ANY, needed.namespace)
        and grant.name in (ANY, needed.name)
        for grant in grants
    )
