"""What the fake API serves: its resources and their paths, which groups are served, and discovery."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from rules.model import Json
from webhook.state.kinds import STATE_KINDS

#: plural → (kind, namespaced, API prefix): the cluster-state kinds (webhook/state/kinds.py) and what the server
#: writes (Leases, policy reports, Events).
RESOURCES: dict[str, tuple[str, bool, str]] = {
    **{entry.plural: (entry.kind, entry.namespaced, entry.prefix) for entry in STATE_KINDS},
    "deployments": ("Deployment", True, "/apis/apps/v1"),
    "statefulsets": ("StatefulSet", True, "/apis/apps/v1"),
    "daemonsets": ("DaemonSet", True, "/apis/apps/v1"),
    "replicasets": ("ReplicaSet", True, "/apis/apps/v1"),
    "jobs": ("Job", True, "/apis/batch/v1"),
    "cronjobs": ("CronJob", True, "/apis/batch/v1"),
    "leases": ("Lease", True, "/apis/coordination.k8s.io/v1"),
    "events": ("Event", True, "/apis/events.k8s.io/v1"),
    "reports": ("Report", True, "/apis/openreports.io/v1alpha1"),
    "policyreports": ("PolicyReport", True, "/apis/wgpolicyk8s.io/v1alpha2"),
}
#: The API groups a cluster may or may not serve (CRDs): discovery lists those in `FakeKubeAPI.served_groups`,
#: and their resources answer 404 while they are not served.
OPTIONAL_GROUPS = frozenset(
    {entry.group for entry in STATE_KINDS if entry.feature is not None} | {"openreports.io", "wgpolicyk8s.io"}
)
#: The policy report groups, one of which the webhook writes.
REPORT_GROUPS = frozenset({"openreports.io", "wgpolicyk8s.io"})
PLURAL_OF = {kind: plural for plural, (kind, _, _) in RESOURCES.items()}
PATH = re.compile(
    r"^(?P<prefix>/api/v1|/apis/(?P<group>[a-z0-9.-]+)/v[0-9a-z]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)"
    r"(?:/(?P<name>[^/]+))?$"
)


def plural_of(kind_or_plural: str) -> str:
    return PLURAL_OF.get(kind_or_plural, kind_or_plural)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    agent: str = ""  # the User-Agent: which of several clients sent it (a fault can hit one replica only)

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


def with_kind(obj: Json | None, kind: str) -> Json:
    assert obj is not None
    prefix = RESOURCES[PLURAL_OF[kind]][2]
    api_version = prefix.removeprefix("/apis/").removeprefix("/api/")
    return {"kind": kind, "apiVersion": api_version, **copy.deepcopy(obj)}


def _group_of(prefix: str) -> str:
    return prefix.removeprefix("/apis/").split("/")[0] if prefix.startswith("/apis/") else ""


def is_served(plural: str, prefix: str, served: set[str]) -> bool:
    """A resource of a served group, asked for under its own API prefix."""
    if plural not in RESOURCES or RESOURCES[plural][2] != prefix:
        return False
    group = _group_of(prefix)
    return group not in OPTIONAL_GROUPS or group in served


def discovery(path: str, served: set[str]) -> Json | None:
    """What the client's discovery reads: `GET /apis` (the APIGroupList of the groups served) and
    `GET /apis/<group>/<version>` (the APIResourceList of a served group)."""
    prefixes = sorted({prefix for plural, (_, _, prefix) in RESOURCES.items() if is_served(plural, prefix, served)})
    if path in ("/apis", "/apis/"):
        versions = [prefix.removeprefix("/apis/") for prefix in prefixes if prefix.startswith("/apis/")]
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": gv.split("/")[0],
                    "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                    "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
                }
                for gv in versions
            ],
        }
    if path not in prefixes or not path.startswith("/apis/"):
        return None
    resources = [
        {"name": p, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": _VERBS}
        for p, (kind, namespaced, prefix) in RESOURCES.items()
        if prefix == path
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": path[len("/apis/") :],
        "resources": resources,
    }


_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
