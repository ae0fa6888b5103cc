"""A mover Job's life across a move of the anchor: placed at Job CREATE, then each pod the Job controller makes
from the template is placed afresh, replacing exactly what the webhook wrote into the template."""

from __future__ import annotations

import copy

from rules import pipeline
from rules.model import Json
from tests.rules.test_coschedule import LIBRARY, shorthand_pod, state_object
from tests.support import mutate_checked, policy, subject, view_from
from webhook.state.index import ClusterIndex

NODE_A, NODE_B = "node-a.internal", "node-b.internal"
USER_TERM = {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}


def cluster(node: str, tolerations: list[Json]) -> ClusterIndex:
    db = shorthand_pod(
        {"pod": "db-0", "claims": ["data"], "phase": "Running", "node": node, "tolerations": tolerations}
    )
    return view_from(state_object("node-a"), state_object("node-b"), state_object("data"), db)


def pod_from_template(job: Json) -> Json:
    """What the Job controller creates: the template's metadata and spec, a generated name, an owner."""
    template = copy.deepcopy(job["spec"]["template"])
    metadata = {
        **template.get("metadata", {}),
        "name": "volsync-src-data-x7k2p",
        "generateName": "volsync-src-data-",
        "namespace": job["metadata"]["namespace"],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def mover_job() -> Json:
    job: Json = copy.deepcopy(LIBRARY["job"])
    job["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [USER_TERM]}}
    }
    return job


def required(pod: Json) -> list[Json]:
    terms: list[Json] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return terms


def test_pod_of_a_placed_job_follows_the_anchor_to_its_new_node() -> None:
    at_a = cluster(NODE_A, [{"key": "a", "operator": "Exists"}])
    _, job = mutate_checked(mover_job(), at_a)
    template_pod = pod_from_template(job)
    assert template_pod["metadata"]["annotations"]["storage-affinity.io/co-scheduled-with"] == f"db-0/{NODE_A}"

    # Anchor still on A: the pod is created exactly as the template says.
    same, _ = mutate_checked(template_pod, at_a)
    assert same.patch == []

    at_b = cluster(NODE_B, [{"key": "b", "operator": "Exists"}])
    moved, pod = mutate_checked(template_pod, at_b)
    pin_b = {"key": "metadata.name", "operator": "In", "values": [NODE_B]}
    assert required(pod) == [{**USER_TERM, "matchFields": [pin_b]}]
    assert pod["metadata"]["annotations"]["storage-affinity.io/co-scheduled-with"] == f"db-0/{NODE_B}"
    assert pod["spec"]["tolerations"] == [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    assert any(f"(moved from {NODE_A})" in r for r in moved.reasons)
    assert pipeline.validate(subject(pod), at_b, policy()).allowed


def test_pod_of_a_placed_job_is_unpinned_when_nothing_holds_the_claim() -> None:
    _, job = mutate_checked(mover_job(), cluster(NODE_A, []))
    empty = view_from(state_object("node-a"), state_object("data"))
    _, pod = mutate_checked(pod_from_template(job), empty)
    assert required(pod) == [USER_TERM]
    assert "storage-affinity.io/co-scheduled-with" not in pod["metadata"].get("annotations", {})
