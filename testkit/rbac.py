"""RBAC as the API server applies it: the grants a chart's Roles and ClusterRoles give, the grant a request needs,
and whether it is allowed. The fake API (testkit/fakeapi/) answers 403 to what the chart does not grant the
server's ServiceAccount, so a missing permission fails the tests as it fails a pod in a cluster."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from testkit import yamldocs

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "storage-affinity-webhook"
HELM = ROOT / ".tools" / "bin" / "helm"  # scripts/install-helm.sh (make unit and make chart-test run it)
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


#: Values under which the chart grants everything the server may call: a Velero ConfigMap to follow, both report
#: APIs, certificates it writes itself (the default).
_EVERY_CALL = {
    "reports": {"api": "auto"},
    "policy": {"loadAffinitySource": {"configMap": {"namespace": "velero", "name": "nac"}}},
}


@cache
def chart_grants() -> frozenset[Grant]:
    """What the chart's Roles and ClusterRoles grant the server's ServiceAccount, rendered by the real helm.

    A ClusterRole's rules hold as rendered. A namespaced Role's hold in every namespace for every name: tests run
    the server in namespaces and with object names of their own (tests/e2e/test_api_calls.py checks those against
    tests/data/rbac/server-calls.yaml, which tests/chart/test_chart_rbac.py checks against the chart)."""
    if not HELM.exists():
        raise RuntimeError(f"helm is not installed at {HELM}: run scripts/install-helm.sh (make unit does)")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="values-") as values:
        json.dump(_EVERY_CALL, values)
        values.flush()
        result = subprocess.run(
            [str(HELM), "template", "saw", str(CHART), "--namespace", "storage-affinity", "-f", values.name],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    docs = [doc for doc in yamldocs.load_all(result.stdout) if doc]
    account = {
        (doc["metadata"]["namespace"], doc["metadata"]["name"]) for doc in docs if doc["kind"] == "ServiceAccount"
    }
    bound = {
        (binding["roleRef"]["kind"], binding["roleRef"]["name"])
        for binding in docs
        if binding["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(
            (s.get("namespace"), s["name"]) in account for s in binding["subjects"] if s["kind"] == "ServiceAccount"
        )
    }
    roles = [doc for doc in docs if (doc["kind"], doc["metadata"]["name"]) in bound]
    return frozenset(
        replace(grant, namespace=ANY, name=ANY) if grant.namespace != ANY else grant for grant in rendered_grants(roles)
    )
