"""Hypothesis strategies for what reaches the webhook: pods, Jobs, cluster states, policies and ConfigMaps.

Names come from small pools so that generated pods mount claims the generated state holds, anchors sit on nodes
the state knows, and selectors hit the labels nodes carry. Objects the API server would have decoded are
type-valid (they pass `tests.support.validate_strict`), but their values may be semantically odd: a mutating
webhook sees objects before the API server's validation, so odd operators, empty terms and duplicate tolerations
are exactly what it must cope with.
"""

from __future__ import annotations

import copy
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
from rules.policy import POLICY_KEY, POLICY_LABEL
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


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


# --- selectors and node affinity ----------------------------------------------------------------------------


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


def tolerations() -> st.SearchStrategy[list[Json]]:
    toleration = st.builds(
        present,
        key=_maybe(st.sampled_from(("dedicated", "disk", "node.kubernetes.io/not-ready", ""))),
        operator=_maybe(st.sampled_from(("Equal", "Exists", "Foo", ""))),
        value=_maybe(st.sampled_from(("databases", "ssd", ""))),
        effect=_maybe(st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute", "", "Bogus"))),
        tolerationSeconds=_maybe(st.sampled_from((0, 30, -1))),
    )
    return st.lists(toleration, max_size=3).flatmap(
        lambda ts: st.sampled_from((ts, ts + ts[:1])) if ts else st.just(ts)  # duplicates too
    )


def _access_modes() -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(ACCESS_MODES), min_size=1, max_size=2, unique=True)


def volumes() -> st.SearchStrategy[list[Json]]:
    def volume(name: str) -> st.SearchStrategy[Json]:
        claim_volume = st.builds(
            lambda claim, ro: {"name": name, "persistentVolumeClaim": present(claimName=claim, readOnly=ro)},
            st.sampled_from((*CLAIMS, "absent-claim")),
            _maybe(st.booleans()),
        )
        return st.one_of(
            claim_volume,
            claim_volume,
            st.builds(
                lambda modes, sc: {
                    "name": name,
                    "ephemeral": {
                        "volumeClaimTemplate": {
                            "spec": present(
                                accessModes=modes, storageClassName=sc, resources={"requests": {"storage": "1Gi"}}
                            )
                        }
                    },
                },
                _access_modes(),
                _maybe(st.sampled_from(CLASSES)),
            ),
            st.just({"name": name, "emptyDir": {}}),
            st.just({"name": name, "configMap": {"name": "settings"}}),
            st.just({"name": name, "hostPath": {"path": "/var/lib/x"}}),
        )

    names = st.lists(st.sampled_from(VOLUME_NAMES), max_size=3, unique=True)
    return names.flatmap(lambda ns: st.tuples(*(volume(n) for n in ns)).map(list))


def _comma_list(items: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(items), min_size=0, max_size=3).flatmap(
        lambda xs: st.sampled_from((",".join(xs), ", ".join(xs), ",".join(xs) + ","))
    )


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


def annotation_maps() -> st.SearchStrategy[Json]:
    """Our own annotations, the csi-baremetal ones, the role-exempting ones, and a foreign one."""
    values = {
        **_own_annotation_values(),
        **_disk_annotation_values(),
        "kubernetes.io/config.mirror": st.just("abc"),
        "kubevirt.io/ephemeral-provisioning": st.sampled_from(("true", "false")),
        "example.com/note": st.just("kept as is"),
    }
    keys = st.lists(st.sampled_from(sorted(values)), max_size=4, unique=True)
    return st.just({}) | keys.flatmap(lambda ks: st.fixed_dictionaries({k: values[k] for k in ks}))


def labels(role_label: tuple[str, str] | None = None) -> st.SearchStrategy[Json]:
    extra = st.dictionaries(st.sampled_from(("app", "team")), st.sampled_from(("db", "movers", "web")), max_size=2)
    chosen = st.just([role_label]) if role_label else st.lists(st.sampled_from(ROLE_LABELS), max_size=1)
    return st.builds(lambda e, r: {**e, **dict(r)}, extra, chosen)


@st.composite
def pod_spec(draw: st.DrawFn, *, template: bool = False, with_claim: bool = False) -> Json:
    """A pod spec; `with_claim` makes sure it mounts a claim of the pool (what placement rules act on)."""
    spec: Json = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
    spec["restartPolicy"] = "Never" if template else draw(st.sampled_from(("Never", "Always")))
    optional = {
        "volumes": volumes(),
        "affinity": st.builds(lambda na: {"nodeAffinity": na} if na else {}, node_affinity()),
        "nodeSelector": st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2),
        "nodeName": st.sampled_from((*NODES, "")),
        "tolerations": tolerations(),
        "schedulingGates": st.just([{"name": "example.com/gate"}]),
    }
    rare = ("nodeName", "schedulingGates")  # both stop a mover from being placed: drawn less often
    for name, strategy in optional.items():
        wanted = st.sampled_from((False, False, False, True)) if name in rare else st.booleans()
        if draw(wanted):
            spec[name] = draw(strategy)
    if with_claim and not any("persistentVolumeClaim" in v or "ephemeral" in v for v in spec.get("volumes", ())):
        claim = draw(st.sampled_from(CLAIMS[:2]))
        spec["volumes"] = [{"name": "held", "persistentVolumeClaim": {"claimName": claim}}, *spec.get("volumes", ())]
    return spec


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


# --- cluster state ------------------------------------------------------------------------------------------


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
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}, "spec": spec}


@st.composite
def claim_objects(draw: st.DrawFn, claim: str) -> list[Json]:
    """A PVC (maybe bound to a PV with node affinity, maybe carrying a selected node), or nothing."""
    modes = draw(st.sampled_from(([ACCESS_MODES[0]],) * 3 + ([ACCESS_MODES[1]],)) | _access_modes())
    storage_class = draw(_maybe(st.sampled_from(CLASSES)))
    bound = draw(st.booleans())
    pvc_meta: Json = {"name": claim, "namespace": draw(st.sampled_from((NAMESPACE,) * 4 + ("velero",)))}
    if draw(st.booleans()):
        pvc_meta["annotations"] = {"volume.kubernetes.io/selected-node": draw(st.sampled_from(NODES))}
    pvc: Json = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": pvc_meta,
        "spec": present(accessModes=modes, storageClassName=storage_class, resources={"requests": {"storage": "1Gi"}}),
        "status": {"phase": "Bound", "accessModes": modes} if bound else {"phase": "Pending"},
    }
    if not bound:
        if draw(st.booleans()):
            pvc["spec"][draw(st.sampled_from(("dataSource", "dataSourceRef")))] = draw(data_source_refs())
        return [pvc]
    pv_name = f"pv-{claim}"
    pvc["spec"]["volumeName"] = pv_name
    pv_spec: Json = {
        "accessModes": modes,
        "capacity": {"storage": "1Gi"},
        "claimRef": {"namespace": pvc_meta["namespace"], "name": claim},
        "csi": {"driver": draw(st.sampled_from(DRIVERS)), "volumeHandle": pv_name},
    }
    if storage_class:
        pv_spec["storageClassName"] = storage_class
    if draw(st.booleans()):
        term = st.lists(requirement(valid=True), min_size=1, max_size=2).map(lambda e: {"matchExpressions": e})
        terms = draw(st.lists(term, min_size=1, max_size=2))
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name}, "spec": pv_spec}
    return [pvc, pv]


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
    status = {"phase": draw(st.sampled_from(("Running", "Running", "Running", "Pending", "Succeeded", "Failed")))}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def storage_class(name: str) -> st.SearchStrategy[Json]:
    return st.builds(
        lambda mode: present(
            apiVersion="storage.k8s.io/v1",
            kind="StorageClass",
            metadata={"name": name},
            provisioner="example.csi",
            volumeBindingMode=mode,
        ),
        _maybe(st.sampled_from(("WaitForFirstConsumer", "Immediate"))),
    )


#: Tolerations of Velero's node-agent ConfigMap: for the nodes' taints (`node`) and every operator.
VELERO_TOLERATIONS: tuple[Json, ...] = (
    {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "disk", "operator": "Equal", "value": "ssd"},
    {"operator": "Exists"},
)


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


@st.composite
def snapshot_objects(draw: st.DrawFn, name: str) -> list[Json]:
    """A VolumeSnapshot of a pooled claim (or of one that is gone), ready or not, maybe with its content
    (external-snapshotter client/apis/volumesnapshot/v1/types.go)."""
    content_name = f"content-{name}"
    claim = draw(st.sampled_from((*CLAIMS, "gone-claim")))
    ready = draw(st.sampled_from((True, True, False, None)))
    bound = draw(st.sampled_from((content_name, content_name, None)))
    snapshot = sourceobjects.volume_snapshot(name, NAMESPACE, claim, content=bound, ready=ready)
    if not draw(st.booleans()):
        return [snapshot]
    driver, handle = draw(st.sampled_from(DRIVERS)), f"pv-{draw(st.sampled_from(CLAIMS))}"
    back = {"name": name, "namespace": NAMESPACE}
    content = sourceobjects.snapshot_content(
        content_name, driver=driver, handle=handle, snapshot=back, status={"readyToUse": True}
    )
    return [snapshot, content]


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


def data_volume(claim: str) -> st.SearchStrategy[Json]:
    """CDI's DataVolume of a claim: same name and namespace, its phase and claim in the status."""
    return st.builds(
        lambda phase: sourceobjects.data_volume(claim, NAMESPACE, source={"blank": {}}, storage={}, phase=phase),
        _maybe(st.sampled_from(("WaitForFirstConsumer", "PendingPopulation", "ImportInProgress", "Succeeded"))),
    )


def prime_claim(target: str = "data") -> Json:
    """CDI's populator claim of `target` (pkg/controller/populators/populator-base.go createPVCPrime)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": PRIME_CLAIM,
            "namespace": NAMESPACE,
            "labels": {"app": "containerized-data-importer"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "name": target,
                    "uid": PRIME_CLAIM.removeprefix("prime-"),
                    "controller": True,
                }
            ],
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-disk"},
        "status": {"phase": "Pending"},
    }


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


@st.composite
def node_agent_pods(draw: st.DrawFn) -> list[Json]:
    """Velero's node-agent DaemonSet pods (label role: node-agent, vmware-tanzu/velero pkg/install/daemonset.go) on
    some of the nodes, each Ready, not Ready, Pending or being deleted."""
    states = st.sampled_from(("ready", "ready", "unready", "pending", "evicting"))
    return [node_agent_pod(name, draw(states)) for name in draw(st.lists(st.sampled_from(NODES), unique=True))]


# --- policies -----------------------------------------------------------------------------------------------


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


def config_maps() -> st.SearchStrategy[Json]:
    """ConfigMaps the validating webhook reviews: policy ones (valid, invalid, unparsable) and Velero's."""
    return st.one_of(
        policy_documents().map(policy_config_map),
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
    anchor["status"] = {"phase": "Running"}
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
    if draw(st.sampled_from((True, True, False))):
        pod["spec"].pop("nodeName", None)
    return state, obj


@st.composite
def velero_scenarios(draw: st.DrawFn) -> tuple[list[Json], Json, Json]:
    """A backup or restore pod, a policy with load affinity entries for its class, and a state around them."""
    state = draw(cluster_states())
    doc = draw(policy_documents())
    entries = draw(load_affinity_entries(valid=True).filter(bool))
    doc["loadAffinity"] = entries
    pod = draw(pods(draw(st.sampled_from((BACKUP, RESTORE)))))
    pod["metadata"]["namespace"] = draw(st.sampled_from((NAMESPACE, "velero")))
    return state, doc, pod


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


@st.composite
def data_source_scenarios(draw: st.DrawFn) -> tuple[list[Json], Json]:
    """A mover, backup or restore pod (or a CDI worker) mounting `cache`, unbound and WaitForFirstConsumer,
    restored from a snapshot of `data` or cloned from it, `data` bound to a node-local PV on one node
    (backube/volsync#1019, kubevirt/containerized-data-importer#3287); the rest of the state still random."""
    state = [o for o in draw(cluster_states()) if o["kind"] != "Node" and o["metadata"].get("name") not in CLAIMS]
    state = [o for o in state if o["kind"] != "StorageClass" or o["metadata"]["name"] != "local-disk"]
    source_node = draw(st.sampled_from(NODES))
    state.extend(_local_node(draw, n) if n == source_node else draw(node(n)) for n in NODES)
    state.append(copy.deepcopy(LOCAL_DISK_CLASS))
    pinned = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [source_node]}]}
    state.append(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": NAMESPACE},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-disk", "volumeName": "pv-data"},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"]},
        }
    )
    state.append(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"},
                "claimRef": {"namespace": NAMESPACE, "name": "data"},
                "csi": {"driver": "topolvm.io", "volumeHandle": "pv-data"},
                "storageClassName": "local-disk",
                "nodeAffinity": {"required": {"nodeSelectorTerms": [pinned]}},
            },
        }
    )
    kind = draw(st.sampled_from(("snapshot", "exposer", "clone", "populator", "snapshot")))
    field = draw(st.sampled_from(("dataSource", "dataSourceRef")))
    if kind in ("snapshot", "populator"):
        state.append(sourceobjects.volume_snapshot("snap-1", NAMESPACE, "data", content="content-snap-1"))
        back = {"name": "snap-1", "namespace": NAMESPACE}
        state.append(
            sourceobjects.snapshot_content(
                "content-snap-1", driver="topolvm.io", handle="pv-data", snapshot=back, status={"readyToUse": True}
            )
        )
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
    state.append(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "cache", "namespace": NAMESPACE},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local-disk",
                field: ref,
            },
            "status": {"phase": "Pending"},
        }
    )
    pod = draw(st.one_of(pods(MOVER), pods(BACKUP), pods(RESTORE), cdi_worker_pods()))
    pod["metadata"]["namespace"] = NAMESPACE
    if kind == "exposer" and draw(st.booleans()):
        pod["metadata"].setdefault("labels", {})[DATA_UPLOAD_LABEL] = "cache"
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
    state.append(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": NAMESPACE},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-disk"},
            "status": {"phase": "Pending"},
        }
    )
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
