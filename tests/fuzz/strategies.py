"""Hypothesis strategies for what reaches the webhook: pods, Jobs, cluster states, policies and ConfigMaps.

Names come from small pools so that generated pods mount claims the generated state holds, anchors sit on nodes
the state knows, and selectors hit the labels nodes carry. Objects the API server would have decoded are
type-valid (they pass `tests.support.validate_strict`), but their values may be semantically odd: a mutating
webhook sees objects before the API server's validation, so odd operators, empty terms and duplicate tolerations
are exactly what it must cope with.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import yaml
from hypothesis import strategies as st

from rules.annotations import (
    CO_SCHEDULE_WITH,
    CO_SCHEDULED_WITH,
    LOAD_AFFINITY,
    LOAD_AFFINITY_APPLIED,
    PLACEMENT,
    ROLE,
    STORAGE_CLASS,
)
from rules.checks import disk
from rules.datasource.exposer import DATA_UPLOAD_LABEL
from rules.datasource.sources import MANAGED_BY
from rules.kube.tolerations import toleration_problems
from rules.model import Json
from rules.policy import POLICY_KEY, POLICY_LABEL, Policy, default_policy, policy_from_document
from testkit import sourceobjects
from testkit.exposerchain import backup_chain, data_upload
from testkit.sourceobjects import present
from testkit.velero import node_agent_pod

NAMESPACE = "shop"
OWN_NAMESPACE = "saw"
VELERO_CONFIG = ("velero", "node-agent-config")
NODES = ("node-a", "node-b", "ip-10-0-1-17.ec2.internal")
POD_NAMES = ("mover-1", "db-0", "db-1", "web-0", "volsync-src")
VOLUME_NAMES = ("data", "eph", "cache", "scratch")
#: Claims of the state: plain names and the `<pod>-<volume>` names of generic ephemeral volumes.
CLAIMS = ("data", "cache", "mover-1-eph", "db-0-eph")
CLASSES = ("gp3", "efs", "local-disk", "missing-class")
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
LABEL_KEYS = (HOSTNAME, ZONE, "disk", "team", "app")
LABEL_VALUES = ("a", "b", "ssd", "us-east-1a", "us-east-1b", "node-a", "ip-10-0-1-17", "db", "1", "10")
ROLE_LABELS: tuple[tuple[str, str], ...] = (
    ("app.kubernetes.io/created-by", "volsync"),
    ("velero.io/exposer-pod-group", "snapshot-exposer"),
    ("velero.io/exposer-pod-group", "generic-restore-exposer"),
    ("team", "movers"),
)
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany")
VALID_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
ODD_OPERATORS = ("Wat", "in", "")
TIMESTAMPS = ("2026-11-20T08:00:00Z", "2026-11-20T09:00:00Z", "2026-11-21T08:00:00Z", "not-a-time")
#: Data sources and CDI (rules/datasource): snapshots, VMs, a CSI driver of the default policy's node-local list
#: beside a network one, and CDI's populator claim of `data` (`prime-<target uid>`, owned by the target claim).
SNAPSHOTS = ("snap-1", "snap-2")
VMS = ("vm-1", "vm-2")
DRIVERS = ("example.csi", "topolvm.io")
PRIME_CLAIM = "prime-5d3c2b1a-0f9e-4d8c-b7a6-958473625140"
CDI_COMPONENTS = ("importer", "cdi-upload-server", "cdi-clone-source")
#: The provisioner of each class the state may hold: a PV of a class is made by its class's driver.
PROVISIONERS = {"gp3": DRIVERS[0], "efs": DRIVERS[0], "local-disk": DRIVERS[1]}


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


# --- selectors and node affinity ----------------------------------------------------------------------------


@functools.cache
@st.composite
def requirement(draw: st.DrawFn, *, valid: bool, operators: tuple[str, ...] = VALID_OPERATORS) -> Json:
    """A label selector / node selector requirement; valid ones carry exactly the values their operator needs."""
    key = draw(st.sampled_from(LABEL_KEYS))
    if not valid:
        operator = draw(st.sampled_from(operators + ODD_OPERATORS))
        values = draw(_maybe(st.lists(st.sampled_from((*LABEL_VALUES, "x y", "")), max_size=3)))
        return present(key=key, operator=operator, values=values)
    operator = draw(st.sampled_from(operators))
    if operator in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=3, unique=True))
    elif operator in ("Gt", "Lt"):
        values = [str(draw(st.integers(-5, 20)))]
    else:
        values = None
    return present(key=key, operator=operator, values=values)


@functools.cache
@st.composite
def selector_term(draw: st.DrawFn, *, valid: bool = True) -> Json:
    """A node selector term; sometimes empty (matches no node) or pinned by `metadata.name`."""
    expressions = draw(st.lists(requirement(valid=valid), max_size=3))
    fields = draw(
        st.lists(
            st.builds(
                lambda op, node: {"key": "metadata.name", "operator": op, "values": [node]},
                st.sampled_from(("In", "NotIn")),
                st.sampled_from(NODES),
            ),
            max_size=1,
        )
    )
    return present(matchExpressions=expressions or None, matchFields=fields or None)


@functools.cache
def node_affinity() -> st.SearchStrategy[Json]:
    required = st.builds(
        lambda terms: {"nodeSelectorTerms": terms},
        st.lists(selector_term(valid=True) | selector_term(valid=False), min_size=0, max_size=3),
    )
    preferred = st.lists(
        st.builds(lambda w, t: {"weight": w, "preference": t}, st.integers(1, 100), selector_term()), max_size=1
    )
    return st.builds(
        lambda r, p: present(
            requiredDuringSchedulingIgnoredDuringExecution=r, preferredDuringSchedulingIgnoredDuringExecution=p or None
        ),
        _maybe(required),
        preferred,
    )


@functools.cache
@st.composite
def label_selector(draw: st.DrawFn, *, operators: tuple[str, ...], non_empty: bool) -> Json:
    """A valid LabelSelector whose requirements are on distinct keys, so it cannot contradict itself."""
    keys = draw(st.lists(st.sampled_from(LABEL_KEYS), min_size=1 if non_empty else 0, max_size=3, unique=True))
    split = draw(st.integers(0, len(keys)))
    match_labels = {k: draw(st.sampled_from(LABEL_VALUES)) for k in keys[:split]}
    expressions = []
    for key in keys[split:]:
        req = draw(requirement(valid=True, operators=operators))
        expressions.append({**req, "key": key})
    return present(matchLabels=match_labels or None, matchExpressions=expressions or None)


@functools.cache
def load_affinity_entries(*, valid: bool = True) -> st.SearchStrategy[list[Json]]:
    entry = st.builds(
        lambda sel, sc: present(nodeSelector=sel, storageClass=sc),
        label_selector(operators=VALID_OPERATORS, non_empty=True),
        _maybe(st.sampled_from((*CLASSES, ""))),
    )
    if valid:
        return st.lists(entry, max_size=3)
    broken = st.sampled_from(
        (
            {"nodeSelector": {}},
            {"nodeSelector": {"matchLabel": {"disk": "ssd"}}},
            {"storageClass": "gp3"},
            {"nodeSelector": {"matchExpressions": [{"key": "disk", "operator": "In"}]}},
            {
                "nodeSelector": {
                    "matchLabels": {"disk": "ssd"},
                    "matchExpressions": [{"key": "disk", "operator": "DoesNotExist"}],
                }
            },
            {"nodeSelector": {"matchLabels": {"disk": "ssd"}}, "storageClass": "Not_A_Class"},
            {"nodeSelector": {"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["x"]}]}},
            "not an object",
        )
    )
    # At least one broken entry, anywhere among valid ones.
    return st.builds(
        lambda before, bad, after: [*before, bad, *after],
        st.lists(entry, max_size=1),
        broken,
        st.lists(entry, max_size=1),
    )


# --- pods ---------------------------------------------------------------------------------------------------


@functools.cache
def tolerations() -> st.SearchStrategy[list[Json]]:
    toleration = st.builds(
        present,
        key=_maybe(st.sampled_from(("dedicated", "disk", "node.kubernetes.io/not-ready", ""))),
        operator=_maybe(st.sampled_from(("Equal", "Exists", "Foo", ""))),
        value=_maybe(st.sampled_from(("databases", "ssd", ""))),
        effect=_maybe(st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute", "", "Bogus"))),
        tolerationSeconds=_maybe(st.sampled_from((0, 30, -1))),
    )
    repeated = st.tuples(st.lists(toleration, max_size=3), st.booleans())
    return repeated.map(lambda tr: tr[0] + tr[0][:1] if tr[1] else tr[0])  # duplicates too


@functools.cache
def _access_modes() -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(ACCESS_MODES), min_size=1, max_size=2, unique=True)


@functools.cache
def volumes() -> st.SearchStrategy[list[Json]]:
    """Up to three volumes of distinct names: mostly claims of the pools (or one that is absent), generic ephemeral
    ones, and kinds the rules pass over."""
    claim_volume = st.builds(
        lambda claim, ro: {"persistentVolumeClaim": present(claimName=claim, readOnly=ro)},
        st.sampled_from((*CLAIMS, "absent-claim")),
        _maybe(st.booleans()),
    )
    ephemeral = st.builds(
        lambda modes, sc: {
            "ephemeral": {
                "volumeClaimTemplate": {
                    "spec": present(accessModes=modes, storageClassName=sc, resources={"requests": {"storage": SIZE}})
                }
            }
        },
        _access_modes(),
        _maybe(st.sampled_from(CLASSES)),
    )
    source = st.one_of(  # built, not `just`: each draw its own objects, which a scenario may change
        claim_volume,
        claim_volume,
        ephemeral,
        st.builds(lambda: {"emptyDir": {}}),
        st.builds(lambda: {"configMap": {"name": "settings"}}),
        st.builds(lambda: {"hostPath": {"path": "/var/lib/x"}}),
    )
    named = st.tuples(st.sampled_from(VOLUME_NAMES), source)
    return st.lists(named, max_size=3, unique_by=lambda nv: nv[0]).map(
        lambda nvs: [{"name": name, **body} for name, body in nvs]
    )


@functools.cache
def _comma_list(items: tuple[str, ...]) -> st.SearchStrategy[str]:
    joined = st.tuples(st.lists(st.sampled_from(items), min_size=0, max_size=3), st.sampled_from((",", ", ", ",+")))
    return joined.map(lambda xj: xj[1].rstrip("+").join(xj[0]) + ("," if xj[1] == ",+" else ""))


@functools.cache
def _own_annotation_values() -> dict[str, st.SearchStrategy[str]]:
    return {
        ROLE: st.sampled_from(("none", "mover", "backup", "restore", "Mover", "")),
        PLACEMENT: st.sampled_from(("requiredAffinity", "nodeSelector", "nodeName", "nodename", "")),
        CO_SCHEDULE_WITH: st.sampled_from((*CLAIMS, "absent-claim", "Bad_Name")),
        LOAD_AFFINITY: st.one_of(
            load_affinity_entries(valid=True).map(json.dumps),
            load_affinity_entries(valid=False).map(json.dumps),
            st.sampled_from(("not json", "{}", "[]", "null", "[{}]")),
        ),
        STORAGE_CLASS: st.sampled_from((*CLASSES, "BAD", "")),
        CO_SCHEDULED_WITH: st.sampled_from(
            ("db-0/node-a", "db-0/node-b", "db-0/ip-10-0-1-17.ec2.internal", "garbage", "db-0/")
        ),
        LOAD_AFFINITY_APPLIED: st.sampled_from(("*", "gp3", "BAD!")),
        "storage-affinity.io/placment": st.just("nodeName"),
    }


@functools.cache
def _disk_annotation_values() -> dict[str, st.SearchStrategy[str]]:
    return {
        disk.AFFINITY_TYPES: _comma_list((*disk.AFFINITY_KINDS, "pod-label-required", "bogus")),
        disk.ANTI_TYPES: _comma_list((*disk.ANTI_KINDS, "pod-bound-required", "bogus")),
        disk.ANTI_LABELS: _comma_list(("app=db:shop", "team=movers:shop", "a=b", "bad key=x:shop", "app=db:Bad_NS")),
        disk.DEDICATED: st.sampled_from(("true", "false", "yes")),
        disk.TOLERATIONS: _comma_list(("ssd", "nvme")),
        "affinity.volumes.csi-baremetal.dell.com/type": st.just("pod-bound-required"),
        disk.TAINT: st.just("dedicated"),
    }


@functools.cache
def _annotation_values() -> dict[str, st.SearchStrategy[str]]:
    return {
        **_own_annotation_values(),
        **_disk_annotation_values(),
        "kubernetes.io/config.mirror": st.just("abc"),
        "kubevirt.io/ephemeral-provisioning": st.sampled_from(("true", "false")),
        "example.com/note": st.just("kept as is"),
    }


@functools.cache
@st.composite
def annotation_maps(draw: st.DrawFn, *, at_least: int = 0) -> Json:
    """Our own annotations, the csi-baremetal ones, the role-exempting ones, and a foreign one; none half the time
    unless `at_least` are asked for."""
    if not at_least and draw(st.booleans()):
        return {}
    values = _annotation_values()
    keys = draw(st.lists(st.sampled_from(sorted(values)), min_size=at_least, max_size=max(4, at_least), unique=True))
    return {key: draw(values[key]) for key in keys}


@functools.cache
def labels(role_label: tuple[str, str] | None = None) -> st.SearchStrategy[Json]:
    extra = st.dictionaries(st.sampled_from(("app", "team")), st.sampled_from(("db", "movers", "web")), max_size=2)
    chosen = st.just([role_label]) if role_label else st.lists(st.sampled_from(ROLE_LABELS), max_size=1)
    return st.builds(lambda e, r: {**e, **dict(r)}, extra, chosen)


@functools.cache
def _pod_fields() -> dict[str, st.SearchStrategy[Any]]:
    """The optional fields of a pod spec, each drawn or left out."""
    return {
        "volumes": volumes(),
        "affinity": st.builds(lambda na: {"nodeAffinity": na} if na else {}, node_affinity()),
        "nodeSelector": st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2),
        "nodeName": st.sampled_from((*NODES, "")),
        "tolerations": tolerations(),
        "schedulingGates": st.builds(lambda: [{"name": "example.com/gate"}]),
    }


@functools.cache
@st.composite
def pod_spec(draw: st.DrawFn, *, template: bool = False, with_claim: bool = False) -> Json:
    """A pod spec; `with_claim` makes sure it mounts a claim of the pool (what placement rules act on)."""
    spec: Json = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
    spec["restartPolicy"] = "Never" if template else draw(st.sampled_from(("Never", "Always")))
    rare = ("nodeName", "schedulingGates")  # both stop a mover from being placed: drawn less often
    for name, strategy in _pod_fields().items():
        wanted = st.sampled_from((False, False, False, True)) if name in rare else st.booleans()
        if draw(wanted):
            spec[name] = draw(strategy)
    if with_claim and not any("persistentVolumeClaim" in v or "ephemeral" in v for v in spec.get("volumes", ())):
        claim = draw(st.sampled_from(CLAIMS[:2]))
        spec["volumes"] = [{"name": "held", "persistentVolumeClaim": {"claimName": claim}}, *spec.get("volumes", ())]
    return spec


@functools.cache
@st.composite
def pods(draw: st.DrawFn, role_label: tuple[str, str] | None = None) -> Json:
    """A Pod under review; `role_label` makes it a mover / backup / restore pod by the default selectors."""
    namespaces = (NAMESPACE,) * 6 + ("velero", "kube-system", OWN_NAMESPACE)
    metadata: Json = {"namespace": draw(st.sampled_from(namespaces))}
    name = draw(_maybe(st.sampled_from(POD_NAMES)))
    if name:
        metadata["name"] = name
    else:
        metadata["generateName"] = "mover-"
    metadata["labels"] = draw(labels(role_label))
    metadata["annotations"] = draw(annotation_maps())
    metadata = {k: v for k, v in metadata.items() if v != {}}
    with_claim = role_label is not None and draw(st.sampled_from((True, True, True, False)))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": draw(pod_spec(with_claim=with_claim))}


MOVER, BACKUP, RESTORE = ROLE_LABELS[0], ROLE_LABELS[1], ROLE_LABELS[2]


@functools.cache
def any_pods() -> st.SearchStrategy[Json]:
    """Pods of every role, weighted towards the ones the mutating rules act on."""
    return st.one_of(pods(), pods(MOVER), pods(BACKUP), pods(RESTORE), cdi_worker_pods())


@st.composite
def jobs(draw: st.DrawFn) -> Json:
    """A Job wrapping a pod template, as VolSync creates its movers."""
    role = draw(st.sampled_from((MOVER, MOVER, BACKUP, None)))
    template_meta = present(labels=draw(labels(role)) or None, annotations=draw(annotation_maps()) or None)
    name = draw(st.sampled_from(("volsync-src-db", "job-1")))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": draw(st.sampled_from((NAMESPACE, "kube-system"))),
            "labels": dict([role]) if role else {"app": "x"},
        },
        "spec": {
            "backoffLimit": 2,
            "template": {"metadata": template_meta, "spec": draw(pod_spec(template=True, with_claim=role is not None))},
        },
    }


#: Workload kinds other than Job, whose pod templates the template rules check (rules/kube/workloads.py).
WORKLOAD_KINDS = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "ReplicaSet": "apps/v1"}


@st.composite
def workloads(draw: st.DrawFn) -> Json:
    """A Deployment, StatefulSet (maybe with `volumeClaimTemplates`), DaemonSet, ReplicaSet or CronJob as its
    author applies it (k8s.io/api apps/v1 and batch/v1 types.go): a selector its template's labels match, a pod
    template of any role with the restart policy its kind requires."""
    kind = draw(st.sampled_from((*WORKLOAD_KINDS, "CronJob")))
    role = draw(st.sampled_from((MOVER, BACKUP, RESTORE, None)))
    app = {"app": draw(st.sampled_from(("db", "web")))}
    # A template carries the pods' settings: the project's and csi-baremetal's annotations, whose checks need no
    # cluster and so run on templates (rules/registry.py TEMPLATE_VALIDATORS).
    settings = {**_own_annotation_values(), **_disk_annotation_values()}
    keys = draw(st.lists(st.sampled_from(sorted(settings)), max_size=3, unique=True))
    annotated = {key: draw(settings[key]) for key in keys}
    pod_meta = present(labels={**app, **dict([role] if role else [])}, annotations=annotated or None)
    spec = draw(pod_spec(template=True, with_claim=role is not None))
    name = draw(st.sampled_from(("db", "web", "backup-agent")))
    metadata = {"name": name, "namespace": draw(st.sampled_from((NAMESPACE, NAMESPACE, "kube-system")))}
    if kind == "CronJob":
        job = {"backoffLimit": 2, "template": {"metadata": pod_meta, "spec": spec}}
        cron = {"schedule": "0 3 * * *", "concurrencyPolicy": "Forbid", "jobTemplate": {"spec": job}}
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": metadata, "spec": cron}
    workload: Json = {"selector": {"matchLabels": app}, "template": {"metadata": pod_meta, "spec": spec}}
    spec["restartPolicy"] = "Always"
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        workload["replicas"] = draw(st.integers(0, 3))
    if kind == "StatefulSet":
        workload["serviceName"] = name
        templates = draw(st.lists(st.sampled_from(("data", "wal")), max_size=2, unique=True))
        workload["volumeClaimTemplates"] = [
            {
                "metadata": {"name": t},
                "spec": present(
                    accessModes=draw(_access_modes()),
                    storageClassName=draw(_maybe(st.sampled_from(CLASSES))),
                    resources={"requests": {"storage": SIZE}},
                ),
            }
            for t in templates
        ] or None
        workload = present(**workload)
    return {"apiVersion": WORKLOAD_KINDS[kind], "kind": kind, "metadata": metadata, "spec": workload}


# --- cluster state ------------------------------------------------------------------------------------------


@functools.cache
@st.composite
def node(draw: st.DrawFn, name: str) -> Json:
    hostname = draw(st.sampled_from((name, name.split(".", maxsplit=1)[0] + "-host", None)))
    node_labels = draw(
        st.dictionaries(st.sampled_from((ZONE, "disk", "team")), st.sampled_from(LABEL_VALUES), max_size=3)
    )
    if hostname:
        node_labels[HOSTNAME] = hostname
    taints = draw(
        st.lists(
            st.builds(
                present,
                key=st.sampled_from(("dedicated", "disk")),
                value=_maybe(st.sampled_from(("databases", "ssd"))),
                effect=st.sampled_from(("NoSchedule", "NoExecute")),
            ),
            max_size=2,
        )
    )
    spec = {"taints": taints} if taints else {}
    ready = draw(st.sampled_from(("True", "True", "True", "False", "Unknown")))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3800m", "memory": "15Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", **_SINCE}],
        },
    }


_SINCE = {"lastHeartbeatTime": "2026-11-20T08:00:00Z", "lastTransitionTime": "2026-11-20T08:00:00Z"}
#: The size every pooled claim asks for and every bound one got: rules never compare sizes (docs/development.md).
SIZE = "1Gi"


def pvc(
    name: str,
    namespace: str = NAMESPACE,
    *,
    modes: list[str] | None = None,
    storage_class: str | None = None,
    volume: str | None = None,
    source: tuple[str, Json] | None = None,
    **metadata: Any,
) -> Json:
    """A PersistentVolumeClaim as kube-apiserver stores it (k8s.io/api core/v1 PersistentVolumeClaimSpec): its
    access modes, requested size and volume mode; Bound to `volume` with the status the PV controller writes
    (phase, access modes, capacity), else Pending; `source` is `(dataSource or dataSourceRef, the reference)`."""
    modes = modes or ["ReadWriteOnce"]
    spec = present(
        accessModes=modes,
        resources={"requests": {"storage": SIZE}},
        storageClassName=storage_class,
        volumeMode="Filesystem",
        volumeName=volume,
    )
    if source is not None:
        spec[source[0]] = source[1]
    status = {"phase": "Bound", "accessModes": modes, "capacity": {"storage": SIZE}} if volume else {"phase": "Pending"}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": spec,
        "status": status,
    }


def persistent_volume(name: str, claimed: Json, *, driver: str, node_terms: list[Json] | None = None) -> Json:
    """The PV a claim is bound to, as the provisioner and the PV controller leave it: its capacity, modes, class,
    the claimRef naming the claim back (with its uid), the CSI volume and maybe the node affinity of a
    node-local driver."""
    meta, spec = claimed["metadata"], claimed["spec"]
    ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"]}
    pv_spec = present(
        accessModes=spec["accessModes"],
        capacity={"storage": SIZE},
        claimRef={**ref, "uid": f"uid-{meta['namespace']}-{meta['name']}"},
        csi={"driver": driver, "volumeHandle": name},
        persistentVolumeReclaimPolicy="Delete",
        storageClassName=spec.get("storageClassName"),
        volumeMode="Filesystem",
        nodeAffinity={"required": {"nodeSelectorTerms": node_terms}} if node_terms else None,
    )
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": driver}},
        "spec": pv_spec,
        "status": {"phase": "Bound"},
    }


@functools.cache
@st.composite
def claim_objects(draw: st.DrawFn, name: str) -> list[Json]:
    """A PVC (maybe bound to a PV with node affinity, maybe carrying a selected node), or nothing."""
    modes = draw(st.sampled_from(([ACCESS_MODES[0]],) * 3 + ([ACCESS_MODES[1]],)) | _access_modes())
    storage_class = draw(_maybe(st.sampled_from(CLASSES)))
    bound = draw(st.booleans())
    namespace = draw(st.sampled_from((NAMESPACE,) * 4 + ("velero",)))
    extra: Json = {}
    if draw(st.booleans()):
        extra["annotations"] = {"volume.kubernetes.io/selected-node": draw(st.sampled_from(NODES))}
    if not bound:
        source = None
        if draw(st.booleans()):
            source = (draw(st.sampled_from(("dataSource", "dataSourceRef"))), draw(data_source_refs()))
        return [pvc(name, namespace, modes=modes, storage_class=storage_class, source=source, **extra)]
    pv_name = f"pv-{name}"
    bound_claim = pvc(name, namespace, modes=modes, storage_class=storage_class, volume=pv_name, **extra)
    terms = None
    if draw(st.booleans()):
        term = st.lists(requirement(valid=True), min_size=1, max_size=2).map(lambda e: {"matchExpressions": e})
        terms = draw(st.lists(term, min_size=1, max_size=2))
    driver = PROVISIONERS.get(storage_class or "") or draw(st.sampled_from(DRIVERS))
    return [bound_claim, persistent_volume(pv_name, bound_claim, driver=driver, node_terms=terms)]


@functools.cache
@st.composite
def anchor_pod(draw: st.DrawFn) -> Json:
    """A pod of the state that may hold the claims a mover needs."""
    name = draw(st.sampled_from(POD_NAMES))
    metadata = present(
        name=name,
        namespace=NAMESPACE,
        labels=draw(labels()) or None,
        creationTimestamp=draw(_maybe(st.sampled_from(TIMESTAMPS))),
        deletionTimestamp=draw(st.sampled_from((None, None, None, TIMESTAMPS[2]))),
    )
    spec = draw(pod_spec())
    spec.pop("schedulingGates", None)
    # Anchors mostly hold a claim of the pool on a known node: that is when a mover gets placed.
    claims = draw(st.lists(st.sampled_from(CLAIMS), min_size=1, max_size=2, unique=True))
    held = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    spec["volumes"] = draw(st.sampled_from((held, held, held, spec.get("volumes") or held)))
    spec["nodeName"] = draw(st.sampled_from((*NODES, *NODES, "")))
    phase = draw(st.sampled_from(("Running", "Running", "Running", "Pending", "Succeeded", "Failed")))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": pod_status(phase, spec)}


def pod_status(phase: str, spec: Json) -> Json:
    """A pod's status as the scheduler and the kubelet write it (k8s.io/api core/v1 PodStatus): PodScheduled once it
    has a node, Ready while Running, the start time once the kubelet took it."""
    scheduled = bool(spec.get("nodeName"))
    conditions = [
        {"type": "PodScheduled", "status": str(scheduled)}
        | ({} if scheduled else {"reason": "Unschedulable", "message": "0/3 nodes are available"}),
        {"type": "Ready", "status": str(phase == "Running")},
    ]
    started = {"startTime": TIMESTAMPS[0]} if scheduled and phase != "Pending" else {}
    return {"phase": phase, "conditions": [{**c, "lastTransitionTime": TIMESTAMPS[0]} for c in conditions], **started}


@functools.cache
def storage_class(name: str) -> st.SearchStrategy[Json]:
    """A StorageClass as stored: kube-apiserver defaults `volumeBindingMode` (Immediate) and `reclaimPolicy`."""
    return st.builds(
        lambda mode, provisioner: {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": provisioner,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": mode,
        },
        st.sampled_from(("WaitForFirstConsumer", "Immediate")),
        st.just(PROVISIONERS.get(name, DRIVERS[0])),
    )


#: Tolerations of Velero's node-agent ConfigMap: for the nodes' taints (`node`) and every operator.
VELERO_TOLERATIONS: tuple[Json, ...] = (
    {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "disk", "operator": "Equal", "value": "ssd"},
    {"operator": "Exists"},
)


@functools.cache
def velero_config_map() -> st.SearchStrategy[Json]:
    valid = st.builds(
        lambda la, bp, rp, tol, labels, cache: json.dumps(
            present(loadAffinity=la, backupPVC=bp, restorePVC=rp, tolerations=tol, podLabels=labels, cachePVC=cache)
        ),
        load_affinity_entries(valid=True),
        _maybe(
            st.dictionaries(
                st.sampled_from(CLASSES), st.builds(lambda c: {"storageClass": c}, st.sampled_from(CLASSES)), max_size=2
            )
        ),
        _maybe(st.builds(lambda b: {"ignoreDelayBinding": b}, st.booleans())),
        _maybe(st.lists(st.sampled_from(VELERO_TOLERATIONS), max_size=2)),  # velero-io/velero#9575
        _maybe(st.just({"team": "backup"})),  # vmware-tanzu/velero#9452
        _maybe(st.builds(lambda c: {"storageClass": c, "residentThresholdInMB": 1024}, st.sampled_from(CLASSES))),
    )
    invalid = st.one_of(
        load_affinity_entries(valid=False).map(lambda es: json.dumps({"loadAffinity": es})),
        st.sampled_from(
            (
                "{",
                "[]",
                '{"loadAffinity": {}}',
                '{"backupPVC": {"gp3": {"storageClass": 5}}}',
                '{"tolerations": [{"key": "backup", "operator": "In"}]}',
                '{"podLabels": {"team/": "x"}}',
            )
        ),
    )
    data = st.one_of(
        st.builds(lambda text: {"node-agent-config.json": text}, valid | invalid),
        st.just({}),
        st.just({"a.json": "{}", "b.json": "{}"}),
    )
    return st.builds(
        lambda d: {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": VELERO_CONFIG[1], "namespace": VELERO_CONFIG[0]},
            "data": d,
        },
        data,
    )


@functools.cache
@st.composite
def cluster_states(draw: st.DrawFn) -> list[Json]:
    """Nodes, StorageClasses, PVCs/PVs and anchor pods drawn from the shared name pools."""
    objects: list[Json] = []
    for name in NODES:
        if draw(st.sampled_from((True, True, True, False))):
            objects.append(draw(node(name)))
    for name in CLASSES[:3]:
        if draw(st.booleans()):
            objects.append(draw(storage_class(name)))
    for claim in CLAIMS:
        if draw(st.sampled_from((True, True, True, False))):
            objects.extend(draw(claim_objects(claim)))
    objects.extend(draw(st.lists(anchor_pod(), max_size=3, unique_by=lambda p: p["metadata"]["name"])))
    if draw(st.booleans()):
        objects.append(draw(velero_config_map()))
    if draw(st.booleans()):
        objects.extend(draw(node_agent_pods()))
    if draw(st.booleans()):
        objects.extend(draw(data_source_objects()))
    return objects


@st.composite
def pod_scenarios(draw: st.DrawFn) -> tuple[list[Json], Json]:
    """A cluster state and a pod of any role that, three times in four, mounts a claim the state holds, from the
    claim's namespace: the pods the storage rules act on mount claims that exist."""
    state = draw(cluster_states())
    pod = draw(any_pods())
    claims = [o["metadata"] for o in state if o["kind"] == "PersistentVolumeClaim"]
    if claims and draw(st.sampled_from((True, True, True, False))):
        held = draw(st.sampled_from(claims))
        pod["metadata"]["namespace"] = held["namespace"]
        volumes = [v for v in pod["spec"].get("volumes", ()) if v["name"] != "held"]
        pod["spec"]["volumes"] = [{"name": "held", "persistentVolumeClaim": {"claimName": held["name"]}}, *volumes]
    return state, pod


@functools.cache
def data_source_refs() -> st.SearchStrategy[Json]:
    """A claim's `dataSource`/`dataSourceRef`: a snapshot or a claim of the pools (one that may not exist), or a
    kind the rules leave alone (CDI's VolumeImportSource)."""
    return st.one_of(
        st.sampled_from((*SNAPSHOTS, "absent-snap")).map(
            lambda n: {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": n}
        ),
        st.sampled_from((*CLAIMS, "absent-claim")).map(lambda n: {"kind": "PersistentVolumeClaim", "name": n}),
        st.just({"apiGroup": "cdi.kubevirt.io", "kind": "VolumeImportSource", "name": "import-1"}),
        st.sampled_from((DESTINATION, "absent-dest")).map(
            lambda n: {"apiGroup": "volsync.backube", "kind": "ReplicationDestination", "name": n}
        ),
    )


#: The VolSync ReplicationDestination a claim's `dataSourceRef` may name (its volume populator).
DESTINATION = "dest-1"


@functools.cache
def replication_destination() -> st.SearchStrategy[Json]:
    """VolSync's ReplicationDestination as its controller leaves it (backube/volsync api/v1alpha1
    replicationdestination_types.go): no sync yet, or `status.latestImage` naming a pooled snapshot, one that is
    gone, or a claim (Direct copy method, which the populator refuses)."""
    images = st.one_of(
        st.sampled_from((*SNAPSHOTS, "absent-snap")).map(
            lambda n: {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": n}
        ),
        st.just({"kind": "PersistentVolumeClaim", "name": "volsync-dest-1-dest"}),
    )
    return st.builds(
        lambda image: {
            "apiVersion": "volsync.backube/v1alpha1",
            "kind": "ReplicationDestination",
            "metadata": {"name": DESTINATION, "namespace": NAMESPACE},
            "spec": {"restic": {"repository": "restic-secret", "copyMethod": "Snapshot"}},
            **({"status": {"latestImage": image}} if image is not None else {}),
        },
        _maybe(images),
    )


@functools.cache
@st.composite
def snapshot_objects(draw: st.DrawFn, name: str) -> list[Json]:
    """A VolumeSnapshot of a pooled claim (or of one that is gone), ready or not, maybe with its content
    (external-snapshotter client/apis/volumesnapshot/v1/types.go)."""
    content_name = f"content-{name}"
    claim = draw(st.sampled_from((*CLAIMS, "gone-claim")))
    ready = draw(st.sampled_from((True, True, False, None)))
    bound = draw(st.sampled_from((content_name, content_name, None)))
    snapshot = _snapshot(name, claim, content=bound, ready=ready)
    if not draw(st.booleans()):
        return [snapshot]
    driver, handle = draw(st.sampled_from(DRIVERS)), f"pv-{draw(st.sampled_from(CLAIMS))}"
    return [snapshot, _snapshot_content(content_name, name, driver=driver, handle=handle)]


def _snapshot(name: str, source: str, *, content: str | None, ready: bool | None = True) -> Json:
    """A VolumeSnapshot of the claim `source`; a ready one has its restore size and creation time, as
    external-snapshotter's controller sets them with `readyToUse`."""
    snapshot = sourceobjects.volume_snapshot(name, NAMESPACE, source, content=content, ready=ready)
    if ready:
        snapshot["status"] |= {"restoreSize": SIZE, "creationTime": TIMESTAMPS[0]}
    return snapshot


def _snapshot_content(name: str, snapshot: str, *, driver: str, handle: str) -> Json:
    """The content of a dynamically provisioned snapshot: the CSI driver's snapshot handle and size (bytes, as
    VolumeSnapshotContentStatus has them), and the snapshot it names back with its uid."""
    back = {"name": snapshot, "namespace": NAMESPACE, "uid": f"uid-{snapshot}"}
    status = {"readyToUse": True, "restoreSize": 1 << 30, "snapshotHandle": f"snapshot-{handle}"}
    return sourceobjects.snapshot_content(name, driver=driver, handle=handle, snapshot=back, status=status)


@functools.cache
@st.composite
def virtual_machine(draw: st.DrawFn, name: str) -> Json:
    """A KubeVirt VM using pooled claims as `dataVolumeTemplates` and `dataVolume` or `persistentVolumeClaim`
    volumes (kubevirt/kubevirt staging/src/kubevirt.io/api/core/v1/types.go), with or without node constraints."""
    disks = draw(st.lists(st.sampled_from(CLAIMS), min_size=1, max_size=2, unique=True))
    split = draw(st.integers(0, len(disks)))
    volumes = [{"name": f"disk{i}", "dataVolume": {"name": d}} for i, d in enumerate(disks[:split])]
    volumes += [{"name": f"pvc{i}", "persistentVolumeClaim": {"claimName": d}} for i, d in enumerate(disks[split:])]
    spec: Json = {"domain": {"devices": {}}, "volumes": volumes}
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(
            st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), min_size=1, max_size=2)
        )
    if draw(st.booleans()):
        terms = draw(st.lists(selector_term(valid=True), min_size=1, max_size=2))
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    if draw(st.booleans()):
        spec["tolerations"] = draw(_policy_tolerations())
    templates = [
        {
            "metadata": {"name": d},
            "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}},
        }
        for d in disks[:split]
    ]
    return sourceobjects.virtual_machine(name, NAMESPACE, spec, disks=templates, run_strategy="Halted")


#: A DataVolume's `spec.storage` as its author writes it (CDI api/v1beta1 StorageSpec): the size at least.
DV_STORAGE: Json = {"resources": {"requests": {"storage": SIZE}}}


@functools.cache
def data_volume(name: str) -> st.SearchStrategy[Json]:
    """CDI's DataVolume of a claim: same name and namespace, its phase and claim in the status."""
    return st.builds(
        lambda phase: sourceobjects.data_volume(name, NAMESPACE, source={"blank": {}}, storage=DV_STORAGE, phase=phase),
        _maybe(st.sampled_from(("WaitForFirstConsumer", "PendingPopulation", "ImportInProgress", "Succeeded"))),
    )


def prime_claim(target: str = "data") -> Json:
    """CDI's populator claim of `target` (pkg/controller/populators/populator-base.go createPVCPrime)."""
    owner = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "name": target,
        "uid": PRIME_CLAIM.removeprefix("prime-"),
        "controller": True,
    }
    labels = {"app": "containerized-data-importer"}
    return pvc(PRIME_CLAIM, storage_class="local-disk", labels=labels, ownerReferences=[owner])


@functools.cache
@st.composite
def data_source_objects(draw: st.DrawFn) -> list[Json]:
    """Up to two snapshots, two VMs and two DataVolumes, and maybe the prime claim of `data`."""
    out: list[Json] = []
    for name in draw(st.lists(st.sampled_from(SNAPSHOTS), max_size=2, unique=True)):
        out.extend(draw(snapshot_objects(name)))
    out.extend(draw(virtual_machine(name)) for name in draw(st.lists(st.sampled_from(VMS), max_size=2, unique=True)))
    out.extend(draw(data_volume(c)) for c in draw(st.lists(st.sampled_from(CLAIMS[:2]), max_size=2, unique=True)))
    if draw(st.booleans()):
        out.append(prime_claim())
    if draw(st.booleans()):
        out.append(draw(replication_destination()))
    return out


@functools.cache
@st.composite
def node_agent_pods(draw: st.DrawFn) -> list[Json]:
    """Velero's node-agent DaemonSet pods (label role: node-agent, vmware-tanzu/velero pkg/install/daemonset.go) on
    some of the nodes, each Ready, not Ready, Pending or being deleted."""
    states = st.sampled_from(("ready", "ready", "unready", "pending", "evicting"))
    return [node_agent_pod(name, draw(states)) for name in draw(st.lists(st.sampled_from(NODES), unique=True))]


# --- policies -----------------------------------------------------------------------------------------------


@functools.cache
def _selector_lists() -> st.SearchStrategy[list[Json]]:
    role_ops = ("In", "NotIn", "Exists", "DoesNotExist")
    return st.lists(
        st.one_of(
            st.sampled_from(ROLE_LABELS).map(lambda kv: {"matchLabels": {kv[0]: kv[1]}}),
            label_selector(operators=role_ops, non_empty=False),
        ),
        max_size=2,
    )


def _accepted_by_the_api(toleration: Json) -> Json:
    """The toleration made one the API server accepts in a pod: Exists without a value when it has no key,
    NoExecute when it has tolerationSeconds."""
    if not toleration.get("key"):
        toleration["operator"] = "Exists"
    if toleration.get("operator") == "Exists":
        toleration.pop("value", None)
    if "tolerationSeconds" in toleration:
        toleration["effect"] = "NoExecute"
    return toleration


@functools.cache
def _policy_tolerations() -> st.SearchStrategy[list[Json]]:
    return st.lists(
        st.builds(
            present,
            key=_maybe(st.sampled_from(("dedicated", "velero"))),
            operator=_maybe(st.sampled_from(("Equal", "Exists"))),
            value=_maybe(st.sampled_from(("databases", "backup"))),
            effect=_maybe(st.sampled_from(("", "NoSchedule", "NoExecute"))),
            tolerationSeconds=_maybe(st.sampled_from((0, 60))),
        )
        .map(_accepted_by_the_api)
        .filter(lambda t: not toleration_problems(t, "")),
        max_size=2,
    )


@st.composite
def policy_documents(draw: st.DrawFn) -> Json:
    """Valid variations of rules/default_policy.yaml: every field optional, each drawn from its valid values."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        "enforcement": st.sampled_from(("deny", "warn")),
        "onLookupFailure": st.sampled_from(("allow", "deny")),
        "excludedNamespaces": st.lists(st.sampled_from(("kube-system", "velero", NAMESPACE)), max_size=2, unique=True),
        "roles": st.dictionaries(
            st.sampled_from(("mover", "backup", "restore")),
            st.builds(lambda s: {"selectors": s}, _selector_lists()),
            max_size=3,
        ),
        "coScheduling": st.builds(
            present,
            placement=_maybe(st.sampled_from(("requiredAffinity", "nodeSelector", "nodeName"))),
            copyTolerations=_maybe(st.booleans()),
            readWriteOncePod=_maybe(st.sampled_from(("deny", "warn"))),
        ),
        "loadAffinity": load_affinity_entries(valid=True),
        "backupPVC": st.dictionaries(
            st.sampled_from(CLASSES),
            st.builds(lambda c: present(storageClass=c), _maybe(st.sampled_from(CLASSES))),
            max_size=2,
        ),
        "restorePVC": st.builds(lambda b: {"ignoreDelayBinding": b}, st.booleans()),
        "tolerations": _policy_tolerations(),
        "loadAffinitySource": st.sampled_from(
            ({}, {"configMap": {"namespace": VELERO_CONFIG[0], "name": VELERO_CONFIG[1]}})
        ),
        "validation": st.dictionaries(
            st.sampled_from(("annotations", "diskAnnotations", "placement", "loadAffinity", "coScheduling")),
            st.builds(lambda e: {"enforcement": e}, st.sampled_from(("deny", "warn"))),
            max_size=3,
        ),
        "audit": st.builds(
            lambda a, f: present(stuckAfterSeconds=a, failedWithinSeconds=f),
            _maybe(st.integers(0, 86400)),
            _maybe(st.integers(0, 604800)),
        ),
        "nodeAgent": st.builds(
            present,
            mode=_maybe(st.sampled_from(("require", "warn", "off"))),
            maxNodeNames=_maybe(st.integers(1, 8)),
            namespace=_maybe(st.sampled_from(("", "velero", NAMESPACE))),
        ),
        "dataSource": st.builds(
            present,
            scope=_maybe(st.sampled_from(("roles", "all", "off"))),
            nodeLocalDrivers=_maybe(st.lists(st.sampled_from(DRIVERS), max_size=2, unique=True)),
            zoneFollowingDrivers=_maybe(st.lists(st.sampled_from(DRIVERS), max_size=2, unique=True)),
        ),
        "cdi": st.builds(lambda follow: present(followVM=follow), _maybe(st.booleans())),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), max_size=len(fields), unique=True))
    return {name: draw(fields[name]) for name in chosen}


@functools.cache
def policies() -> st.SearchStrategy[Policy]:
    """The policy a fuzzed review runs under: the default one, or a valid variation of it."""
    return st.just(default_policy()) | policy_documents().map(policy_from_document)


#: One defect each: every one must make the policy refused with PolicyError.
POLICY_DEFECTS: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("enforcement",), "block"),
    (("onLookupFailure",), True),
    (("excludedNamespaces",), ["Bad_NS"]),
    (("excludedNamespaces",), "kube-system"),
    (("roles", "mover"), {"selectors": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}]}),
    (("roles", "mover"), {"selectors": [{"matchLabels": {"bad key": "x"}}]}),
    (("roles", "movers"), {"selectors": []}),
    (("coScheduling", "placement"), "hostname"),
    (("coScheduling", "copyTolerations"), "yes"),
    (("audit", "stuckAfterSeconds"), -1),
    (("audit", "stuckAfterSeconds"), "2m"),
    (("audit", "failedWithinSeconds"), -60),
    (("audit", "failedWithinSeconds"), 1.5),
    (("placment",), "nodeName"),
    (("loadAffinity",), [{"nodeSelector": {}}]),
    (("loadAffinity",), {"nodeSelector": {"matchLabels": {"disk": "ssd"}}}),
    (("loadAffinity",), [{"nodeSelector": {"matchLabels": {"disk": "ssd"}}, "storageClas": "gp3"}]),
    (("backupPVC", "Bad_Class"), {"storageClass": "gp3"}),
    (("backupPVC", "gp3"), {"storageClass": "Not_A_Class"}),
    (("restorePVC", "ignoreDelayBinding"), "no"),
    (("tolerations",), [{"operator": "Foo"}]),
    (("loadAffinitySource", "configMap"), {"namespace": "velero"}),
    (("validation", "disk"), {"enforcement": "warn"}),
    (("validation", "placement", "enforcement"), "off"),
    (("nodeAgent", "mode"), "deny"),
    (("nodeAgent", "maxNodeNames"), 0),
    (("nodeAgent", "namespace"), "Bad_NS"),
)


@st.composite
def invalid_policy_documents(draw: st.DrawFn) -> Json:
    doc = draw(policy_documents())
    path, value = draw(st.sampled_from(POLICY_DEFECTS))
    node = doc
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value
    return doc


@functools.cache
def load_affinity_policies() -> st.SearchStrategy[Json]:
    """A valid policy with load affinity entries: what an operator writes the policy ConfigMap for, and what the
    policy's checks against the cluster read (its entries, backupPVC and node-agents)."""
    return st.tuples(policy_documents(), load_affinity_entries(valid=True).filter(bool)).map(
        lambda de: {**de[0], "loadAffinity": de[1]}
    )


def policy_config_map(doc: Any, *, labelled: bool = True) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": present(
            name="storage-affinity-policy",
            namespace=OWN_NAMESPACE,
            labels={POLICY_LABEL: "true"} if labelled else None,
        ),
        "data": {POLICY_KEY: yaml.safe_dump(doc) if not isinstance(doc, str) else doc},
    }


@functools.cache
def config_maps() -> st.SearchStrategy[Json]:
    """ConfigMaps the validating webhook reviews: policy ones (valid, invalid, unparsable) and Velero's."""
    return st.one_of(
        policy_documents().map(policy_config_map),
        load_affinity_policies().map(policy_config_map),
        invalid_policy_documents().map(policy_config_map),
        st.sampled_from(("{", "- a\n- b", "a: [", "---\n{}\n---\n{}")).map(policy_config_map),
        velero_config_map(),
    )


def json_values() -> st.SearchStrategy[Any]:
    """Arbitrary JSON, for documents that are not what they should be at all."""
    scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=10,
    )


# --- coherent scenarios: where the mutating rules act -------------------------------------------------------


@st.composite
def mover_scenarios(draw: st.DrawFn, *, job: bool = False) -> tuple[list[Json], Json]:
    """A ReadWriteOnce claim held by a Running pod on a known node, and a mover (or mover Job) mounting it;
    everything else (the mover's own constraints, tolerations, annotations, more state) still random."""
    state = draw(cluster_states())
    node_name = draw(st.sampled_from(NODES))
    state = [o for o in state if (o["kind"], o["metadata"].get("name")) not in (("Node", node_name),)]
    state.append(draw(node(node_name)))
    claim = draw(st.sampled_from(CLAIMS[:2]))
    state = [o for o in state if not (o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"] == claim)]
    objects = draw(claim_objects(claim))
    objects[0]["metadata"]["namespace"] = NAMESPACE
    objects[0]["spec"]["accessModes"] = [draw(st.sampled_from(("ReadWriteOnce", "ReadWriteOnce", "ReadWriteOncePod")))]
    if "accessModes" in objects[0]["status"]:
        objects[0]["status"]["accessModes"] = objects[0]["spec"]["accessModes"]
    state.extend(objects)
    anchor = draw(anchor_pod())
    anchor["metadata"]["name"] = "app-0"
    anchor["spec"]["nodeName"] = node_name
    anchor["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    anchor["status"] = pod_status("Running", anchor["spec"])
    anchor["metadata"].pop("deletionTimestamp", None)
    anchor["metadata"]["labels"] = {"app": "db"}
    state.append(anchor)
    if job:
        obj = draw(jobs())
        obj["metadata"]["namespace"] = NAMESPACE
        pod = obj["spec"]["template"]
        pod.setdefault("metadata", {})["labels"] = dict([MOVER])
    else:
        obj = pod = draw(pods(MOVER))
        pod["metadata"]["namespace"] = NAMESPACE
    volumes = [v for v in pod["spec"].get("volumes", ()) if v["name"] != "held"]
    pod["spec"]["volumes"] = [{"name": "held", "persistentVolumeClaim": {"claimName": claim}}, *volumes]
    pinned = draw(st.sampled_from(("unpinned", "unpinned", "as drawn", "elsewhere")))
    if pinned == "unpinned":
        pod["spec"].pop("nodeName", None)
    elif pinned == "elsewhere":  # pinned by its author away from the claim's holder, which co-scheduling refuses
        pod["spec"]["nodeName"] = draw(st.sampled_from([n for n in NODES if n != node_name]))
    return state, obj


@st.composite
def velero_scenarios(draw: st.DrawFn, role: tuple[str, str] | None = None) -> tuple[list[Json], Json, Json]:
    """A backup or restore pod (`role`: BACKUP or RESTORE, else either), a policy with load affinity entries for its
    class, and a state around them."""
    state = draw(cluster_states())
    doc = draw(load_affinity_policies())
    pod = draw(pods(role or draw(st.sampled_from((BACKUP, RESTORE)))))
    pod["metadata"]["namespace"] = draw(st.sampled_from((NAMESPACE, "velero")))
    # The pod's own load-affinity settings (docs/annotations.md), which replace the policy's for it.
    settings = {
        LOAD_AFFINITY: load_affinity_entries(valid=True).filter(bool).map(json.dumps),
        STORAGE_CLASS: st.sampled_from(CLASSES),
    }
    for key, value in settings.items():
        if draw(st.sampled_from((True, False, False))):
            pod["metadata"].setdefault("annotations", {})[key] = draw(value)
    return state, doc, pod


@functools.cache
@st.composite
def cdi_worker_pods(draw: st.DrawFn) -> Json:
    """A CDI worker as CDI builds it (pkg/controller/import-controller.go, upload-controller.go,
    clone-controller.go): its labels, and `cdi-data-vol` mounting a pooled claim or the prime claim of `data`."""
    pod = draw(pods())
    pod["metadata"]["namespace"] = NAMESPACE
    pod["metadata"]["labels"] = {
        "app": "containerized-data-importer",
        "cdi.kubevirt.io": draw(st.sampled_from(CDI_COMPONENTS)),
    }
    claim = draw(st.sampled_from(("data", "cache", PRIME_CLAIM)))
    volumes = [v for v in pod["spec"].get("volumes", ()) if v["name"] != "cdi-data-vol"]
    pod["spec"]["volumes"] = [{"name": "cdi-data-vol", "persistentVolumeClaim": {"claimName": claim}}, *volumes]
    return pod


def _local_node(draw: st.DrawFn, name: str) -> Json:
    found = draw(node(name))
    found["metadata"]["labels"][HOSTNAME] = name
    return found


#: The node-local WaitForFirstConsumer class of the data-source and CDI scenarios (TopoLVM's provisioner).
LOCAL_DISK_CLASS: Json = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "local-disk"},
    "provisioner": "topolvm.io",
    "volumeBindingMode": "WaitForFirstConsumer",
}


#: How `data_source_scenarios` fills `cache`: restored from a snapshot of `data`, Velero's exposer chain, cloned
#: from `data`, or VolSync's populator through a ReplicationDestination.
DATA_SOURCE_KINDS = ("snapshot", "exposer", "clone", "populator")


@st.composite
def data_source_scenarios(draw: st.DrawFn, kind: str | None = None) -> tuple[list[Json], Json]:
    """A mover, backup or restore pod (or a CDI worker) mounting `cache`, unbound and WaitForFirstConsumer,
    restored from a snapshot of `data` or cloned from it, `data` bound to a node-local PV on one node
    (backube/volsync#1019, kubevirt/containerized-data-importer#3287); the rest of the state still random."""
    state = [o for o in draw(cluster_states()) if o["kind"] != "Node" and o["metadata"].get("name") not in CLAIMS]
    state = [o for o in state if o["kind"] != "StorageClass" or o["metadata"]["name"] != "local-disk"]
    source_node = draw(st.sampled_from(NODES))
    state.extend(_local_node(draw, n) if n == source_node else draw(node(n)) for n in NODES)
    state.append(copy.deepcopy(LOCAL_DISK_CLASS))
    pinned = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [source_node]}]}
    source_claim = pvc("data", storage_class="local-disk", volume="pv-data")
    state.extend((source_claim, persistent_volume("pv-data", source_claim, driver="topolvm.io", node_terms=[pinned])))
    kind = kind or draw(st.sampled_from(DATA_SOURCE_KINDS))
    field = draw(st.sampled_from(("dataSource", "dataSourceRef")))
    if kind in ("snapshot", "populator"):
        state.append(_snapshot("snap-1", "data", content="content-snap-1"))
        state.append(_snapshot_content("content-snap-1", "snap-1", driver="topolvm.io", handle="pv-data"))
        ref = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap-1"}
    elif kind == "exposer":  # Velero's exposer chain: `cache` is the backup claim of the DataUpload `cache`
        state.extend(draw(_exposer_chain(source_node)))
        ref = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "cache"}
    else:
        ref = {"kind": "PersistentVolumeClaim", "name": "data"}
    if kind == "populator":  # VolSync's volume populator: only a dataSourceRef names a ReplicationDestination
        state = [o for o in state if o["kind"] != "ReplicationDestination"]
        state.append(draw(replication_destination()) | {"status": {"latestImage": ref}})
        ref, field = (
            {"apiGroup": "volsync.backube", "kind": "ReplicationDestination", "name": DESTINATION},
            "dataSourceRef",
        )
    state.append(pvc("cache", storage_class="local-disk", source=(field, ref)))
    pod = draw(st.one_of(pods(MOVER), pods(BACKUP), pods(RESTORE), cdi_worker_pods()))
    pod["metadata"]["namespace"] = NAMESPACE
    if kind == "exposer" and draw(st.booleans()):
        pod["metadata"].setdefault("labels", {})[DATA_UPLOAD_LABEL] = "cache"
    if draw(st.sampled_from((False, False, False, True))):  # pinned by its author, maybe away from the source
        pod["spec"]["nodeSelector"] = {HOSTNAME: draw(st.sampled_from(NODES))}
    volumes = [v for v in pod["spec"].get("volumes", ()) if v["name"] not in ("held", "cdi-data-vol")]
    pod["spec"]["volumes"] = [{"name": "held", "persistentVolumeClaim": {"claimName": "cache"}}, *volumes]
    if draw(st.sampled_from((True, True, False))):
        pod["spec"].pop("nodeName", None)
    return state, pod


@st.composite
def _exposer_chain(draw: st.DrawFn, source_node: str) -> list[Json]:
    """Velero's exposer chain for the backup claim `cache` (vmware-tanzu/velero pkg/exposer/csi_snapshot.go): the
    DataUpload `cache` of `data` (or of a claim that is gone), its snapshot, and the content it re-created with only
    a snapshot handle, maybe with KEP-5943 `nodeAffinity` or the distributed snapshotter's managed-by label."""
    upload = data_upload("cache", NAMESPACE, draw(st.sampled_from(("data", "data", "gone-claim"))), namespace=NAMESPACE)
    snapshot, content, _ = backup_chain("cache", namespace=NAMESPACE)
    content["spec"]["driver"] = draw(st.sampled_from(DRIVERS))
    extra = draw(st.sampled_from(("none", "none", "nodeAffinity", "managed-by")))
    if extra == "nodeAffinity":
        key = draw(st.sampled_from((HOSTNAME, *LABEL_KEYS)))
        values = draw(st.lists(st.sampled_from((source_node, *NODES, *LABEL_VALUES)), min_size=1, max_size=2))
        content["spec"]["nodeAffinity"] = [{"matchLabelExpressions": [{"key": key, "values": values}]}]
    elif extra == "managed-by":
        content["metadata"]["labels"] = {MANAGED_BY: draw(st.sampled_from((source_node, *NODES)))}
    return [upload, snapshot, content]


@st.composite
def cdi_scenarios(draw: st.DrawFn) -> tuple[list[Json], Json]:
    """A CDI worker filling `data`, unbound and WaitForFirstConsumer, directly or through its prime claim, and
    a VM that will use it (kubevirt/containerized-data-importer#4275); the rest of the state still random."""
    state = [o for o in draw(cluster_states()) if o["metadata"].get("name") not in ("data", PRIME_CLAIM, "local-disk")]
    state = [o for o in state if o["kind"] != "VirtualMachine"]
    state.append(copy.deepcopy(LOCAL_DISK_CLASS))
    state.append(pvc("data", storage_class="local-disk"))
    state.append(prime_claim())
    vm = draw(virtual_machine("vm-1"))
    vm["spec"]["template"]["spec"]["volumes"].append({"name": "root", "dataVolume": {"name": "data"}})
    state.append(vm)
    if draw(st.booleans()):
        state.append(draw(virtual_machine("vm-2")))
    if draw(st.booleans()):
        state.append(draw(data_volume("data")))
    pod = draw(cdi_worker_pods())
    claim = draw(st.sampled_from(("data", PRIME_CLAIM)))
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = claim
    return state, pod
