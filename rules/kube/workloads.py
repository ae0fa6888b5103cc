"""Workload kinds whose pod template becomes pods: where each keeps its template, and the pod a controller makes of
it (docs/design.md#6-validation, workload templates).

Kinds are matched by name, as everywhere in rules/: the chart sends these kinds only from their own API groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.model import Json

#: The kinds judged as the pod they are or will become, with every rule, the ones that read the cluster included:
#: a Pod, and a Job, whose controller creates its pods at once, on today's nodes and claims. A refusal of the Job
#: is what its creator sees (VolSync reports a failed Job create in the ReplicationSource's status); a refusal of
#: its pods would only be an event on the Job.
POD_KINDS = ("Pod", "Job")

#: kind → the path of its pod template. A Job's template is checked as its pods are: the Job controller creates
#: them at once; the others keep theirs for pods made later, on whatever nodes and claims exist then.
TEMPLATE_PATHS: Mapping[str, tuple[str, ...]] = {
    "Job": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def template_of(obj: Any, path: tuple[str, ...]) -> Json:
    """The pod template at `path`, or {} where a part of it is missing (a workload with no template yet)."""
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else {}


def template_spec(kind: str, obj: Json, template: Json) -> Json:
    """The spec of the pods the controller creates from `template`: a StatefulSet's pods also mount a claim per
    `volumeClaimTemplates` entry, which replaces a template volume of the same name (kubernetes/kubernetes
    pkg/controller/statefulset/stateful_set_utils.go, updateStorage); the claim named is the first replica's."""
    spec: Json = template.get("spec") or {}
    claims = (obj.get("spec") or {}).get("volumeClaimTemplates") if kind == "StatefulSet" else None
    if not claims:
        return spec
    workload = (obj.get("metadata") or {}).get("name") or ""
    names = list(dict.fromkeys(name for claim in claims if (name := (claim.get("metadata") or {}).get("name"))))
    replaced = set(names)  # a set: each volume is looked up, and both lists are the tenant's to grow
    kept = [volume for volume in spec.get("volumes") or () if volume.get("name") not in replaced]
    added = [{"name": name, "persistentVolumeClaim": {"claimName": f"{name}-{workload}-0"}} for name in names]
    return {**spec, "volumes": kept + added}
