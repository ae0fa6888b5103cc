"""The cost fuzzer's dimensions (testkit/costfuzz.py): each a thing a tenant can grow, and how to grow it.

Each grower adds n hostile items named apart by a salt: items the label index cannot narrow, distinct at each size
(no memo answers a larger size from a smaller one), near a known name where a did-you-mean would look.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import yaml

from rules import budget
from rules.model import Json
from testkit import hostile, yamldocs

NS = hostile.NAMESPACE
CLAIM = "data"
POD_KINDS = ("Pod", "Job", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "CronJob")
BASES = ("plain", "mover", "backup")
POLICY_CM, VELERO_CM = "policy ConfigMap", "Velero ConfigMap"
REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"

# --- dimensions -----------------------------------------------------------------------------------------------

Grow = Callable[[Json, int, str], None]


@dataclass(frozen=True)
class Dimension:
    """One thing a tenant can grow. `grow(obj, n, salt)` gives `obj` (a pod, or the reviewed object for
    `whole=True`) n of it, named apart by `salt`; `cluster(n, salt)` the state objects it adds; `kinds` the
    object kinds it applies to; `paths` the fields of rules/kube/shapes.py it grows; `size` its size in
    `make test` (2 × size must stay within the review budget)."""

    name: str
    paths: tuple[str, ...]
    size: int
    grow: Grow = lambda obj, n, salt: None
    cluster: Callable[[int, str], list[Json]] = lambda n, salt: []
    kinds: tuple[str, ...] = POD_KINDS
    bases: tuple[str, ...] = BASES
    whole: bool = False
    #: The most the review budget lets one object hold of this dimension (larger runs stop at half of it).
    limit: int | None = None

    def scaled(self, scale: int) -> int:
        """The size `scale` times the test's, at most half the budget's limit (the double must fit too)."""
        return min(self.size * scale, self.limit // 2) if self.limit else self.size * scale


def _spec(pod: Json) -> Json:
    spec: Json = pod["spec"]
    return spec


def _annotations(pod: Json) -> Json:
    annotations: Json = pod["metadata"].setdefault("annotations", {})
    return annotations


def _terms(pod: Json) -> list[Json]:
    node_affinity = _spec(pod).setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault(REQUIRED[2], {"nodeSelectorTerms": []})
    terms: list[Json] = required["nodeSelectorTerms"]
    return terms


def _unnarrowable(key: str) -> list[Json]:
    return [
        {"key": key, "operator": "NotIn", "values": ["x"]},
        {"key": "kubernetes.io/os", "operator": "DoesNotExist"},
    ]


def _volumes_same_claim(pod: Json, n: int, salt: str) -> None:
    _spec(pod).setdefault("volumes", []).extend(
        {"name": f"{salt}v{i}", "persistentVolumeClaim": {"claimName": CLAIM}} for i in range(n)
    )


def _volumes_distinct(pod: Json, n: int, salt: str) -> None:
    _spec(pod).setdefault("volumes", []).extend(
        {"name": f"{salt}w{i}", "persistentVolumeClaim": {"claimName": f"{salt}claim-{i}"}} for i in range(n)
    )


def _claims(n: int, salt: str) -> list[Json]:
    return [hostile.claim_object(f"{salt}claim-{i}") for i in range(n)]


def _ephemeral(pod: Json, n: int, salt: str) -> None:
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": hostile.STORAGE_CLASS}}
    _spec(pod).setdefault("volumes", []).extend(
        {"name": f"{salt}e{i}", "ephemeral": {"volumeClaimTemplate": template}} for i in range(n)
    )


def _containers(pod: Json, n: int, salt: str) -> None:
    _spec(pod)["containers"].extend({"name": f"{salt}c{i}", "image": "registry.example/c:1"} for i in range(n))


def _tolerations(pod: Json, n: int, salt: str) -> None:
    _spec(pod).setdefault("tolerations", []).extend(
        {"key": f"example.com/{salt}t{i}", "operator": "Exists", "effect": "NoSchedule"} for i in range(n)
    )


def _node_selector(pod: Json, n: int, salt: str) -> None:
    _spec(pod).setdefault("nodeSelector", {}).update({f"example.com/{salt}s{i}": "x" for i in range(n)})


def _scheduling_gates(pod: Json, n: int, salt: str) -> None:
    _spec(pod).setdefault("schedulingGates", []).extend({"name": f"example.com/{salt}g{i}"} for i in range(n))


def _terms_grow(pod: Json, n: int, salt: str) -> None:
    _terms(pod).extend({"matchExpressions": _unnarrowable(f"example.com/{salt}t{i}")} for i in range(n))


def _requirements(pod: Json, n: int, salt: str) -> None:
    expressions = [{"key": f"example.com/{salt}r{i}", "operator": "DoesNotExist"} for i in range(n)]
    _terms(pod).append({"matchExpressions": [*expressions, {"key": "kubernetes.io/os", "operator": "DoesNotExist"}]})


def _values(pod: Json, n: int, salt: str) -> None:
    values = [f"{salt}v{i}" for i in range(n)]
    _terms(pod).append({"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": values}]})


def _gt_terms(pod: Json, n: int, salt: str) -> None:
    _terms(pod).extend(
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Gt", "values": [f"{i}{_digits(salt)}"]}]}
        for i in range(n)
    )


def _digits(salt: str) -> str:
    """The digits of a salt (`s<k>`): what sets apart integer values of one size from another's."""
    return "".join(c for c in salt if c.isdigit()) or "0"


def _match_fields(pod: Json, n: int, salt: str) -> None:
    fields: list[Json] = [
        {"key": "metadata.name", "operator": "NotIn", "values": [f"{salt}elsewhere-{i}"]} for i in range(n)
    ]
    fields.append({"key": "metadata.name", "operator": "In", "values": [f"{salt}elsewhere"]})
    _terms(pod).append({"matchFields": fields})
    _spec(pod)["nodeName"] = "node-00000"


def _labels(pod: Json, n: int, salt: str) -> None:
    pod["metadata"].setdefault("labels", {}).update({f"example.com/{salt}l{i}": "x" for i in range(n)})


def _unknown_keys(pod: Json, n: int, salt: str) -> None:
    _annotations(pod).update({f"storage-affinity.io/{salt}rolle-{i}": "" for i in range(n)})


def _foreign_keys(pod: Json, n: int, salt: str) -> None:
    _annotations(pod).update({f"example.com/{salt}a{i}": "x" for i in range(n)})


def _disk_types(pod: Json, n: int, salt: str) -> None:
    key = "affinity.volumes.csi-baremetal.dell.com/types"
    _annotations(pod)[key] = ",".join(f"pod-bound-requird-{salt}{i}" for i in range(n))


def _disk_labels(pod: Json, n: int, salt: str) -> None:
    annotations = _annotations(pod)
    annotations["antiaffinity.volumes.csi-baremetal.dell.com/types"] = "pod-label-required"
    annotations["antiaffinity.volumes.csi-baremetal.dell.com/labels"] = ",".join(
        f"app{salt}{i}=db:{NS}" for i in range(n)
    )


def _load_affinity(entries: int, requirements: int, salt: str) -> str:
    return json.dumps(
        [
            {
                "nodeSelector": {
                    "matchExpressions": [
                        *(
                            {"key": f"example.com/{salt}e{e}r{r}", "operator": "DoesNotExist"}
                            for r in range(requirements)
                        ),
                        {"key": "kubernetes.io/os", "operator": "DoesNotExist"},
                    ]
                }
            }
            for e in range(entries)
        ]
    )


def _la_entries(pod: Json, n: int, salt: str) -> None:
    _annotations(pod)["storage-affinity.io/load-affinity"] = _load_affinity(n, 1, salt)


def _la_requirements(pod: Json, n: int, salt: str) -> None:
    _annotations(pod)["storage-affinity.io/load-affinity"] = _load_affinity(2, n, salt)


def _role_claimed(pod: Json, n: int, salt: str) -> None:
    """The backup role claimed by annotation on a tenant pod (untrusted), with n load-affinity entries."""
    _annotations(pod).update(
        {"storage-affinity.io/role": "backup", "storage-affinity.io/load-affinity": _load_affinity(n, 2, salt)}
    )


def _owner_references(pod: Json, n: int, salt: str) -> None:
    pod["metadata"].setdefault("ownerReferences", []).extend(
        {"apiVersion": "v1", "kind": "ConfigMap", "name": f"{salt}o{i}", "uid": f"{salt}u{i}"} for i in range(n)
    )


def _conditions(pod: Json, n: int, salt: str) -> None:
    status = pod.setdefault("status", {"phase": "Pending"})
    status.setdefault("conditions", []).extend({"type": f"{salt}C{i}", "status": "False"} for i in range(n))
    status.setdefault("containerStatuses", []).extend(
        {"name": f"{salt}c{i}", "state": {"waiting": {"reason": "Pending"}}} for i in range(n)
    )


def _claim_templates(obj: Json, n: int, salt: str) -> None:
    """A StatefulSet's claim templates, and as many template volumes, none of the same name."""
    obj["spec"]["volumeClaimTemplates"].extend({"metadata": {"name": f"{salt}ct{i}"}} for i in range(n))
    obj["spec"]["template"]["spec"].setdefault("volumes", []).extend(
        {"name": f"{salt}tv{i}", "emptyDir": {}} for i in range(n)
    )


def _users(n: int, salt: str) -> list[Json]:
    """n Pending pods of the namespace mounting the mover's claim, and n Running ones split over two nodes."""
    users = hostile.claim_users(n, claim=CLAIM) + hostile.claim_users(n, nodes=2, claim=CLAIM)
    for i, user in enumerate(users):
        user["metadata"]["name"] = user["metadata"]["uid"] = f"{salt}user-{i}"
    return users


def _nodes(n: int, salt: str) -> list[Json]:
    extra = hostile.nodes(n)
    for node in extra:
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = (
            f"{salt}{node['metadata']['name']}"
        )
    return extra


def _policy_entries(obj: Json, n: int, salt: str) -> None:
    doc = yamldocs.load(obj["data"]["policy.yaml"])
    doc["loadAffinity"] = json.loads(_load_affinity(n, 1, salt))
    obj["data"]["policy.yaml"] = yaml.safe_dump(doc)


def _policy_nesting(obj: Json, n: int, salt: str) -> None:
    obj["data"]["policy.yaml"] += f"\nx{_digits(salt)}: " + "[" * n + "]" * n + "\n"


def _velero_entries(obj: Json, n: int, salt: str) -> None:
    obj["data"]["node-agent-config.json"] = json.dumps({"loadAffinity": json.loads(_load_affinity(n, 1, salt))})


def _velero_requirements(obj: Json, n: int, salt: str) -> None:
    obj["data"]["node-agent-config.json"] = json.dumps({"loadAffinity": json.loads(_load_affinity(2, n, salt))})


def _velero_unknown(obj: Json, n: int, salt: str) -> None:
    doc = {
        "loadAffinity": [
            {"nodeSelector": {"matchLabels": {"a": "b"}}, **{f"{salt}nodeSelectr{i}": 1 for i in range(n)}}
        ]
    }
    obj["data"]["node-agent-config.json"] = json.dumps(doc)


def _data_keys(obj: Json, n: int, salt: str) -> None:
    obj["data"].update({f"{salt}extra-{i}.json": "{}" for i in range(n)})


_ANNOTATIONS = ("metadata.annotations",)
_TEMPLATE_VOLUMES = ("spec.volumes", "spec.volumes[].persistentVolumeClaim", "spec.volumes[].ephemeral")


def _within(limit: int) -> int:
    """A budget limit less room for what the base object already holds, so the bench's 2n stays within it."""
    return limit - 16


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("volumes on one claim", _TEMPLATE_VOLUMES, 256, _volumes_same_claim, limit=_within(budget.MAX_VOLUMES)),
    Dimension(
        "volumes of distinct claims",
        _TEMPLATE_VOLUMES,
        128,
        _volumes_distinct,
        _claims,
        limit=_within(budget.MAX_VOLUMES),
    ),
    Dimension("ephemeral volumes", _TEMPLATE_VOLUMES, 128, _ephemeral, limit=_within(budget.MAX_VOLUMES)),
    Dimension("containers", ("spec.containers",), 128, _containers, limit=_within(budget.MAX_CONTAINERS)),
    Dimension("tolerations", ("spec.tolerations",), 128, _tolerations, limit=_within(budget.MAX_TOLERATIONS)),
    Dimension("nodeSelector labels", ("spec.nodeSelector",), 128, _node_selector),
    Dimension("scheduling gates", ("spec.schedulingGates",), 128, _scheduling_gates),
    Dimension("required terms", (TERMS,), 128, _terms_grow, limit=budget.MAX_TERMS),
    Dimension("requirements of a term", (f"{TERMS}[].matchExpressions",), 256, _requirements),
    Dimension("values of a requirement", (f"{TERMS}[].matchExpressions[].values",), 256, _values),
    Dimension("Gt terms on the hostname", (TERMS,), 128, _gt_terms, limit=budget.MAX_TERMS),
    Dimension("matchFields of a term failing spec.nodeName", (f"{TERMS}[].matchFields",), 256, _match_fields),
    Dimension("labels", ("metadata.labels",), 128, _labels),
    Dimension(
        "unknown storage-affinity.io annotation keys",
        _ANNOTATIONS,
        64,
        _unknown_keys,
        limit=_within(budget.MAX_ANNOTATIONS),
    ),
    Dimension("foreign annotation keys", _ANNOTATIONS, 128, _foreign_keys, limit=_within(budget.MAX_ANNOTATIONS)),
    Dimension("unknown disk types", _ANNOTATIONS, 64, _disk_types),
    Dimension("disk anti-affinity labels", _ANNOTATIONS, 128, _disk_labels),
    Dimension(
        "load-affinity entries",
        _ANNOTATIONS,
        32,
        _la_entries,
        bases=("backup",),
        limit=budget.MAX_LOAD_AFFINITY_ENTRIES,
    ),
    Dimension("load-affinity requirements of an entry", _ANNOTATIONS, 128, _la_requirements, bases=("backup",)),
    Dimension(
        "role claimed by annotation: load-affinity entries",
        _ANNOTATIONS,
        32,
        _role_claimed,
        bases=("plain",),
        limit=budget.MAX_LOAD_AFFINITY_ENTRIES,
    ),
    Dimension("owner references", ("metadata.ownerReferences",), 64, _owner_references),
    Dimension("status conditions", ("status.conditions", "status.containerStatuses"), 64, _conditions, kinds=("Pod",)),
    Dimension(
        "claim templates and template volumes",
        ("spec.volumeClaimTemplates",),
        256,
        _claim_templates,
        kinds=("StatefulSet",),
        whole=True,
        limit=_within(budget.MAX_VOLUMES),
    ),
    Dimension("pods of the claim in the state", (), 64, cluster=_users, kinds=("Pod", "Job"), bases=("mover",)),
    Dimension("claims in the state", (), 128, cluster=_claims, kinds=("Pod",), bases=("mover",)),
    Dimension("nodes in the state", (), 256, cluster=_nodes, kinds=("Pod", "Job")),
    Dimension("policy loadAffinity entries", ("data",), 64, _policy_entries, kinds=(POLICY_CM,), whole=True),
    Dimension("policy YAML nesting depth", ("data",), 64, _policy_nesting, kinds=(POLICY_CM,), whole=True),
    Dimension("Velero loadAffinity entries", ("data",), 64, _velero_entries, kinds=(VELERO_CM,), whole=True),
    Dimension("Velero entry requirements", ("data",), 128, _velero_requirements, kinds=(VELERO_CM,), whole=True),
    Dimension("Velero unknown entry fields", ("data",), 64, _velero_unknown, kinds=(VELERO_CM,), whole=True),
    Dimension("ConfigMap data keys", ("data",), 128, _data_keys, kinds=(POLICY_CM, VELERO_CM), whole=True),
)
#: What no dimension grows, and why (tests/fuzz/test_cost.py checks that every list and map of rules/kube/shapes.py
#: for the reviewed kinds is grown or listed here).
NOT_GROWN = {
    "binaryData": "no rule reads its values, only that it holds no policy key",
    "status.initContainerStatuses": "read as containerStatuses are, by the same function",
}
