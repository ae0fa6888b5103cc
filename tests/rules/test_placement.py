"""Placement consistency and the node affinity evaluation it rests on: tables in tests/data/placement/."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from rules import pipeline
from rules.checks.placement import LocalVolume, local_volumes
from rules.kube.nodeaffinity import pod_fits_node, terms_match, volume_terms_match
from rules.kube.volumes import claim_volumes
from rules.model import Json
from tests.support import DATA, load_yaml, mutate_checked, policy, subject, table_cases, validate_strict, view_from

NODE_AFFINITY_KEYS = {"matches", "name", "node", "pod_fits", "terms"}
CONSISTENCY_KEYS = {"name", "namespace", "no_nodes", "source", "spec", "violations", "warnings"}

AFFINITY = load_yaml(DATA / "placement" / "node_affinity.yaml")
CONSISTENCY = load_yaml(DATA / "placement" / "consistency.yaml")
NODES: dict[str, Json] = AFFINITY["nodes"]


@pytest.mark.parametrize(
    "case", table_cases(DATA / "placement" / "node_affinity.yaml", NODE_AFFINITY_KEYS, section="cases")
)
def test_node_affinity_table(case: Json) -> None:
    node = NODES[case.get("node", "a")]
    assert terms_match(case["terms"], node) is case["matches"]
    spec: Json = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = case[
        "terms"
    ]
    assert pod_fits_node(spec, node) is case.get("pod_fits", case["matches"])


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        ({}, True),
        ({"nodeSelector": {}}, True),
        ({"nodeSelector": {"zone": "z1", "disk": "ssd"}}, True),
        ({"nodeSelector": {"zone": "z1", "disk": "hdd"}}, False),
        ({"nodeSelector": {"empty": ""}}, True),
        ({"nodeSelector": {"rack": ""}}, False),
        ({"affinity": {}}, True),
        ({"affinity": {"nodeAffinity": {}}}, True),
        # present but without terms: no required node affinity (the API server refuses it unless mutated)
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}, True),
        (
            {
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": None}}
                }
            },
            True,
        ),
        (
            {
                "nodeSelector": {"zone": "z2"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]
                        }
                    }
                },
            },
            False,
        ),
    ],
)
def test_pod_fits_node_nodeselector_and_affinity(spec: Json, fits: bool) -> None:
    assert pod_fits_node(spec, NODES["a"]) is fits


def test_pv_node_affinity_is_checked_on_labels_only() -> None:
    by_name = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a.example.internal"]}]}]
    by_label = [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}]
    assert terms_match(by_name, NODES["a"]) is True  # a pod's matchFields see the node name
    assert volume_terms_match(by_name, NODES["a"]) is False  # CheckNodeAffinity builds a Node without a name
    assert volume_terms_match(by_label, NODES["a"]) is True
    assert volume_terms_match(by_label, NODES["b"]) is False
    assert volume_terms_match([], NODES["a"]) is False


# --- placement consistency ---------------------------------------------------------------------------------


def cluster(case: Json) -> list[Json]:
    objects = [*CONSISTENCY["cluster"], *case.get("cluster", ())]
    if case.get("no_nodes"):
        objects = [o for o in objects if o["kind"] != "Node"]
    return objects


def pod(spec: Json, namespace: str = "shop") -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app-0", "namespace": namespace},
        "spec": {"containers": [{"name": "app", "image": "busybox"}], **copy.deepcopy(spec)},
    }


def test_cluster_objects_are_valid() -> None:
    for obj in CONSISTENCY["cluster"]:
        validate_strict(obj)


@pytest.mark.parametrize(
    "case", table_cases(DATA / "placement" / "consistency.yaml", CONSISTENCY_KEYS, section="cases")
)
def test_consistency_table(case: Json) -> None:
    obj = pod(case["spec"], case.get("namespace", "shop"))
    validate_strict(obj)
    # as the operator's `audit` reads them (every label counts); what a tenant is told: tests/rules/test_disclosure.py
    reader = dataclasses.replace(policy(), nodes_readable=True)
    decision = pipeline.validate(subject(obj), view_from(*cluster(case)), reader)
    assert [f.text() for f in decision.denials] == case.get("violations", [])
    assert decision.warnings == case.get("warnings", [])
    assert all(f.family == "placement" for f in decision.findings)
    assert all(len(w) <= 120 for w in decision.warnings), "placement warnings must fit the API server's limit"
    assert decision.failure is None


def test_only_pod_and_job_create_are_checked() -> None:
    away = pod(
        {
            "nodeName": "node-b.example.internal",
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-a"}}],
        }
    )
    view = view_from(*CONSISTENCY["cluster"])
    assert [f.field for f in pipeline.validate(subject(away), view, policy()).denials] == ["spec.nodeName"]
    # UPDATE: placement is immutable after creation; the binding is not ours to judge
    assert pipeline.validate(subject(away, "UPDATE", old=away), view, policy()).findings == []
    # A Job's template is the pod its controller creates at once: denied as it, the field under spec.template
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "shop"},
        "spec": {"template": {"spec": {**away["spec"], "restartPolicy": "Never"}}},
    }
    validate_strict(job)
    job_denials = pipeline.validate(subject(job), view, policy()).denials
    assert [f.field for f in job_denials] == ["spec.template.spec.nodeName"]
    # A Deployment's pods come later, on whatever nodes exist then
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "shop"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": away["spec"]},
        },
    }
    validate_strict(deployment)
    assert pipeline.validate(subject(deployment), view, policy()).findings == []


def test_placement_is_relaxed_by_its_family_only() -> None:
    away = pod(
        {
            "nodeName": "node-b.example.internal",
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-a"}}],
        }
    )
    view = view_from(*CONSISTENCY["cluster"])
    relaxed = pipeline.validate(subject(away), view, policy({"validation": {"placement": {"enforcement": "warn"}}}))
    assert relaxed.allowed and len(relaxed.warnings) == 1
    assert relaxed.warnings[0].startswith('spec.nodeName: pins the pod to node "node-b.example.internal"')
    other = pipeline.validate(subject(away), view, policy({"validation": {"diskAnnotations": {"enforcement": "warn"}}}))
    assert not other.allowed


def test_local_volumes_are_the_bound_pvs_with_required_node_affinity() -> None:
    view = view_from(*CONSISTENCY["cluster"])
    spec = {
        "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data-a"}},
            {"name": "p", "persistentVolumeClaim": {"claimName": "pending"}},
            {"name": "s", "persistentVolumeClaim": {"claimName": "shared"}},
            {"name": "z", "persistentVolumeClaim": {"claimName": "zonal"}},
            {"name": "e", "emptyDir": {}},
        ]
    }
    hostname = [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}]
    found = local_volumes(claim_volumes(view, "shop", {"name": "app-0"}, spec))
    assert [(lv.volume, lv.claim, lv.pv) for lv in found] == [("a", "data-a", "local-a"), ("z", "zonal", "zonal")]
    assert found[0] == LocalVolume("a", "data-a", "local-a", hostname)
    assert len(found[1].terms) == 2
    assert local_volumes(claim_volumes(view, "other", {"name": "app-0"}, spec)) == []


# --- the two webhooks never contradict each other ------------------------------------------------------------


def load_affinity_outputs() -> list[Any]:
    from tests.rules import test_loadaffinity as la

    return [pytest.param(la, case, id=case["name"]) for case in la.TABLE["cases"]]


@pytest.mark.parametrize(("la", "case"), load_affinity_outputs())
def test_load_affinity_output_passes_validation(la: Any, case: Json) -> None:
    """Whatever load affinity writes, placement consistency never denies, and it calls a pod Pending exactly when
    the mutation said no node is left: the two webhooks agree."""
    view = view_from(*la.CLUSTER, *(case.get("cluster") or ()))
    pol = policy(case.get("policy") or {})
    mutation, result = mutate_checked(la.build(case["pod"]), view, pol)
    decision = pipeline.validate(subject(result), view, pol)
    assert [f.text() for f in decision.denials if f.family in ("placement", "diskAnnotations")] == []
    pending = [w for w in decision.warnings if w.startswith("spec: no known node fits")]
    assert bool(pending) == any("stay Pending" in w for w in mutation.warnings), (pending, mutation.warnings)


def test_a_replaced_pv_is_judged_by_its_new_terms() -> None:
    """The key of a PV's terms is remembered by the PV object's identity: the index replaces a changed PV, so the
    same claim bound to a PV now pinned to a node that does not exist gets the warning at once."""
    view = view_from(*CONSISTENCY["cluster"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app-0", "namespace": "shop"},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-a"}}],
        },
    }
    validate_strict(pod)
    assert pipeline.validate(subject(copy.deepcopy(pod)), view, policy()).warnings == []
    moved = copy.deepcopy(next(o for o in CONSISTENCY["cluster"] if o["metadata"]["name"] == "local-a"))
    moved["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["gone"]
    view.apply(moved)
    assert pipeline.validate(subject(copy.deepcopy(pod)), view, policy()).warnings == [
        'spec: no known node fits volume "data" (PV local-a): the pod would stay Pending'
    ]
