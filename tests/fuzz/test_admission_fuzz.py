"""Property-based fuzzing of the admission endpoints, through the real Flask app in-process.

For any well-formed review: HTTP 200 with an AdmissionReview kube-apiserver accepts; a patch only from /mutate on
CREATE; a patch that applies and leaves a strictly valid object; no patch on re-review; no change outside the
fields the webhook owns (tests/fuzz/owned.py); never a node admitted that the user's own constraints excluded.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import assume, event, given
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from rules import pipeline
from rules.annotations import CO_SCHEDULED_WITH
from rules.model import Json
from rules.policy import Policy, PolicyError, default_policy, policy_from_document
from testkit.reviews import admission_review
from tests.fuzz import strategies as s
from tests.fuzz.owned import foreign_changes, loosened_on, owned_paths
from tests.support import app_client, check_patch, subject, validate_strict, view_from
from tests.webhook.review_checks import check_response
from webhook.runtime import Runtime
from webhook.state.index import ClusterIndex

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
_uids = itertools.count()


class Webhook:
    """One in-process app whose runtime each example points at its own state and policy."""

    def __init__(self) -> None:
        self.runtime = Runtime(policy=default_policy(), view=ClusterIndex(), namespace=s.OWN_NAMESPACE)
        self.client = app_client(self.runtime)

    def use(self, state: list[Json], policy: Policy) -> None:
        self.runtime.view = view_from(*state)
        self.runtime.policy = policy

    def review(self, endpoint: str, review: Json) -> list[Json]:
        """POST a review; assert the answer is one the API server accepts; return its decoded patch."""
        answer = self.client.post(f"/{endpoint}", data=json.dumps(review), content_type="application/json")
        assert answer.status_code == 200, f"{endpoint}: HTTP {answer.status_code}: {answer.text}"
        document = answer.get_json()
        return check_response(review, document, mutating=endpoint == "mutate")


@pytest.fixture(scope="module")
def webhook() -> Webhook:
    return Webhook()


def review_of(operation: str, obj: Json | None, old: Json | None = None, api_version: str = API_VERSIONS[0]) -> Json:
    return admission_review(
        operation, obj, old, api_version=api_version, uid=f"fuzz-{next(_uids)}", userInfo={"username": "fuzzer"}
    )


def _probe_nodes() -> st.SearchStrategy[list[Json]]:
    """Nodes of every pooled name with random labels, to look for ones a patch newly admits."""
    return st.tuples(*(s.node(name) for name in s.NODES), *(s.node(name) for name in s.NODES)).map(list)


def _pod_part(obj: Json) -> Json:
    return obj["spec"]["template"] if obj["kind"] == "Job" else obj


def _role(decision: Any) -> str:
    return next((r.split()[1] for r in decision.reasons if r.startswith("role: ")), "-")


def check_create(webhook: Webhook, state: list[Json], obj: Json, probes: list[Json], api_version: str) -> Json:
    """Properties 1-4 on one CREATE; returns the object as the API server would store it."""
    try:
        validate_strict(obj)
    except Exception:
        assume(False)
    review = review_of("CREATE", obj, api_version=api_version)
    patch = webhook.review("mutate", review)
    direct = pipeline.mutate(subject(obj), webhook.runtime.view, webhook.runtime.policy, s.OWN_NAMESPACE)
    assert patch == (direct.patch if direct.allowed else []), "the transport must send the pipeline's patch"
    if currently_in_test_context():
        event(f"{obj['kind']}: role {_role(direct)}, {'patched' if patch else 'not patched'}")
    result = obj
    if patch:
        result = check_patch(obj, patch)
        changes = foreign_changes(obj, result, owned_paths(obj["kind"], result))
        assert not changes, f"changed outside the owned fields: {changes}\npatch: {patch}"
        before, after = _pod_part(obj), _pod_part(result)
        if CO_SCHEDULED_WITH not in ((before.get("metadata") or {}).get("annotations") or {}):
            nodes = [o for o in state if o["kind"] == "Node"] + probes
            wider = loosened_on(before.get("spec") or {}, after["spec"], nodes)
            assert not wider, f"the patch admits nodes {wider} the pod's own constraints excluded\npatch: {patch}"
        again = webhook.review("mutate", review_of("CREATE", result, api_version=api_version))
        assert again == [], f"re-review produced a patch: {again}\nfirst patch: {patch}"
    webhook.review("validate", review_of("CREATE", result, api_version=api_version))
    return result


@given(
    scenario=s.pod_scenarios(),
    policy=s.policies(),
    probes=_probe_nodes(),
    api_version=st.sampled_from(API_VERSIONS),
)
def test_pod_create(
    webhook: Webhook, *, scenario: tuple[list[Json], Json], policy: Policy, probes: list[Json], api_version: str
) -> None:
    """A pod of any role, mostly mounting a claim of the state."""
    state, pod = scenario
    webhook.use(state, policy)
    check_create(webhook, state, pod, probes, api_version)


@given(
    scenario=s.mover_scenarios(),
    policy=s.policies(),
    probes=_probe_nodes(),
    api_version=st.sampled_from(API_VERSIONS),
)
def test_mover_create(
    webhook: Webhook, *, scenario: tuple[list[Json], Json], policy: Policy, probes: list[Json], api_version: str
) -> None:
    """A mover next to a Running holder of its claim: the co-scheduling path, with everything else random."""
    state, obj = scenario
    webhook.use(state, policy)
    check_create(webhook, state, obj, probes, api_version)


@given(
    scenario=s.mover_scenarios(job=True),
    policy=s.policies(),
    probes=_probe_nodes(),
)
def test_mover_job_create(
    webhook: Webhook, *, scenario: tuple[list[Json], Json], policy: Policy, probes: list[Json]
) -> None:
    """A mover Job whose template is placed, then the pod made from the placed template (the anchor may be
    elsewhere by then): the pod-level decision replaces the template's own pin and nothing else."""
    state, job = scenario
    webhook.use(state, policy)
    stored = check_create(webhook, state, job, probes, API_VERSIONS[0])
    template = stored["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**(template.get("metadata") or {}), "name": "volsync-src-db-x1", "namespace": s.NAMESPACE},
        "spec": template["spec"],
    }
    check_create(webhook, state, pod, probes, API_VERSIONS[0])


@given(
    scenario=s.data_source_scenarios(),
    policy=s.policies(),
    probes=_probe_nodes(),
    api_version=st.sampled_from(API_VERSIONS),
)
def test_data_source_create(
    webhook: Webhook, *, scenario: tuple[list[Json], Json], policy: Policy, probes: list[Json], api_version: str
) -> None:
    """A pod mounting a claim restored from a snapshot of, or cloned from, a node-local claim on one node."""
    state, obj = scenario
    webhook.use(state, policy)
    check_create(webhook, state, obj, probes, api_version)


@given(scenario=s.cdi_scenarios(), policy=s.policies(), probes=_probe_nodes())
def test_cdi_worker_create(
    webhook: Webhook, *, scenario: tuple[list[Json], Json], policy: Policy, probes: list[Json]
) -> None:
    """A CDI worker filling a WaitForFirstConsumer disk that a VM will use: the worker follows the VM."""
    state, obj = scenario
    webhook.use(state, policy)
    check_create(webhook, state, obj, probes, API_VERSIONS[0])


@given(scenario=s.velero_scenarios(), probes=_probe_nodes())
def test_velero_create(webhook: Webhook, scenario: tuple[list[Json], Json, Json], probes: list[Json]) -> None:
    """A backup or restore pod under a policy with load affinity entries: the load affinity path."""
    state, doc, pod = scenario
    webhook.use(state, policy_from_document(doc))
    check_create(webhook, state, pod, probes, API_VERSIONS[0])


@given(
    state=s.cluster_states(),
    policy=s.policies(),
    job=s.jobs() | s.workloads(),
    probes=_probe_nodes(),
    api_version=st.sampled_from(API_VERSIONS),
)
def test_job_create(
    webhook: Webhook, *, state: list[Json], policy: Policy, job: Json, probes: list[Json], api_version: str
) -> None:
    """A Job, or another workload whose template only the template rules check: never patched but a Job."""
    webhook.use(state, policy)
    check_create(webhook, state, job, probes, api_version)


@given(
    state=s.cluster_states(),
    policy=s.policies(),
    old=s.any_pods() | s.jobs(),
    new=s.any_pods() | s.jobs(),
    operation=st.sampled_from(("UPDATE", "DELETE", "CONNECT")),
    api_version=st.sampled_from(API_VERSIONS),
)
def test_update_delete_connect_never_patched(
    webhook: Webhook, *, state: list[Json], policy: Policy, old: Json, new: Json, operation: str, api_version: str
) -> None:
    """Property 5: only CREATE is mutated; UPDATE compares with the old object, DELETE has none."""
    webhook.use(state, policy)
    if operation == "UPDATE":
        new = (
            {**new, "kind": old["kind"], "apiVersion": old["apiVersion"], "metadata": old["metadata"]}
            if (new["kind"] != old["kind"])
            else new
        )
        review = review_of("UPDATE", new, old, api_version)
    elif operation == "DELETE":
        review = review_of("DELETE", None, old, api_version)
    else:
        review = review_of("CONNECT", None, old, api_version)
    for endpoint in ("mutate", "validate"):
        assert webhook.review(endpoint, review) == []


@given(
    state=s.cluster_states(),
    policy=s.policies(),
    config_map=s.config_maps(),
    operation=st.sampled_from(("CREATE", "UPDATE")),
)
def test_config_maps_validated_never_patched(
    webhook: Webhook, *, state: list[Json], policy: Policy, config_map: Json, operation: str
) -> None:
    """A policy ConfigMap is denied exactly when it would not load; Velero's is checked; neither is patched."""
    webhook.use(state, policy)
    review = review_of(operation, config_map, config_map if operation == "UPDATE" else None)
    assert webhook.review("mutate", review) == []
    answer = webhook.client.post("/validate", data=json.dumps(review), content_type="application/json")
    assert answer.status_code == 200
    check_response(review, answer.get_json(), mutating=False)
    if config_map["metadata"].get("name") == "storage-affinity-policy":
        from rules.policy import policy_from_config_map

        try:
            policy_from_config_map(config_map)
            loads = True
        except PolicyError:
            loads = False
        assert answer.get_json()["response"]["allowed"] is loads


def test_hand_made_mover_is_placed(webhook: Webhook) -> None:
    """The fuzz harness can see a patch at all: the example mover next to its anchor gets one."""
    from tests.support import EXAMPLES, load_yaml

    state = load_yaml(EXAMPLES / "cluster.yaml")["items"]
    webhook.use(state, default_policy())
    pod = load_yaml(EXAMPLES / "mover-pod.yaml")
    result = check_create(webhook, state, pod, [], API_VERSIONS[0])
    assert result != pod
