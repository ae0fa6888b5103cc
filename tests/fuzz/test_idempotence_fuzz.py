"""The first answer is the final one, for every input: reviewing a patched object yields no patch.

Seeds are the structural fuzz's (foreign fixtures, examples, what the schema-valid strategies build), hollowed by
tests/fuzz/hollow.py: empty lists and objects wherever one is expected, nulls inside scheduling fields, Pods made
Job templates. Each answer must be sound (tests/fuzz/verdict.py); a patch must apply (and leave a schema-valid
object when the input was one), the patched object reviewed again must get no patch and a sound validation; an
UPDATE between the seed and its hollowed form gets no patch.
Policy ConfigMaps whose YAML has anchors, tags, duplicate and null keys are denied exactly when they do not load,
never by a crash.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

import jsonpatch
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from rules.model import Json
from rules.policy import PolicyError, policy_from_config_map
from testkit.reviews import admission_review
from tests.fuzz import hollow
from tests.fuzz import mutations as m
from tests.fuzz import strategies as s
from tests.fuzz.inprocess import InProcessWebhook, serving
from tests.fuzz.profiles import examples
from tests.fuzz.verdict import FuzzFailure, judge
from tests.support import validate_strict
from tests.webhook.review_checks import patch_of
from webhook.app.endpoints import DEFAULT_MAX_BODY


class Webhook(InProcessWebhook):
    """The in-process app; `answer` judges each answer sound before the property looks at it."""

    def answer(self, endpoint: str, review: Json) -> Json | None:
        """The sound answer's response (None for a sound 400); FuzzFailure otherwise, or when a rule logged."""
        body = json.dumps(review).encode()
        got = self.client.post(f"/{endpoint}", data=body, content_type="application/json")
        judge(body, endpoint, got.status_code, got.content_type, got.get_data(), max_body=DEFAULT_MAX_BODY)
        if (logged := self.errors.take()) is not None:
            raise FuzzFailure("logged at ERROR", f"/{endpoint}: {logged}")
        response: Json | None = got.get_json()["response"] if got.status_code == 200 else None
        return response


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    yield from serving(Webhook())


def _pods_and_jobs(seed: tuple[str, Json, tuple[Json, ...]]) -> bool:
    obj = seed[1]["request"].get("object")
    return isinstance(obj, dict) and obj.get("kind") in ("Pod", "Job") and seed[1]["request"]["operation"] == "CREATE"


#: The examples the mutating rules act on (a mover next to its anchor, backup and restore pods): drawn twice as
#: often as every other Pod and Job seed together, so that a hollowing lands where a patch is made.
ACTING = ("admissionreview-mover.json", "mover-pod.yaml", "backup-pod.yaml", "restore-pod.yaml")


def _seeds() -> st.SearchStrategy[tuple[str, Json, tuple[Json, ...]]]:
    static = [(name, review, m.cluster_state()) for name, review in m.static_seeds()]
    static = [seed for seed in static if _pods_and_jobs(seed)]
    acting = [seed for seed in static if seed[0] in ACTING]
    acted_on = st.integers(0, len(acting) - 1).map(lambda i: acting[i])
    return st.one_of(
        acted_on,
        acted_on,
        st.integers(0, len(static) - 1).map(lambda i: static[i]),
        m.built_seeds().filter(_pods_and_jobs),
    )


def _schema_valid(obj: Json) -> bool:
    """Valid against the official schema, which lets a null pod spec through (the API would not: no containers)."""
    pod = obj["spec"]["template"] if obj.get("kind") == "Job" and isinstance(obj.get("spec"), dict) else obj
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return False
    try:
        validate_strict(obj)
    except Exception:
        return False
    return True


def _resent(review: Json, operation: str, obj: Json, old: Json | None = None) -> Json:
    """The review's envelope (namespace, name, kind: what kube-apiserver sends again) around another object."""
    request = {**review["request"], "uid": operation.lower(), "operation": operation, "object": obj, "oldObject": old}
    return {**review, "request": request}


@st.composite
def hollow_cases(draw: st.DrawFn) -> tuple[str, Json, Json, tuple[Json, ...]]:
    name, review, state = draw(_seeds())
    return name, review, draw(hollow.hollowed(review)), state


@settings(max_examples=examples(1500))
@given(case=hollow_cases())
def test_a_hollowed_pod_or_job_is_answered_once_and_for_all(
    webhook: Webhook, case: tuple[str, Json, Json, tuple[Json, ...]]
) -> None:
    name, seed, review, state = case
    webhook.use(state)
    response = webhook.answer("mutate", review)
    webhook.answer("validate", review)
    patch = patch_of(response)
    if currently_in_test_context():
        outcome = "400" if response is None else "patched" if patch else "not patched"
        event(f"{review['request']['object']['kind']} from {name}: {outcome}")
    if patch:
        patched = jsonpatch.apply_patch(copy.deepcopy(review["request"]["object"]), patch)
        if _schema_valid(review["request"]["object"]):  # a hollowed input may already be off-schema
            validate_strict(patched)
        again = _resent(review, "CREATE", patched)
        second = patch_of(webhook.answer("mutate", again))
        assert second == [], f"{name}: re-review produced a patch: {second}\nfirst patch: {patch}"
        webhook.answer("validate", again)
    if response is None or seed["request"]["object"]["kind"] != review["request"]["object"]["kind"]:
        return
    before, after = seed["request"]["object"], review["request"]["object"]
    for new, old in ((before, after), (after, before)):
        update = _resent(review, "UPDATE", new, old)
        for endpoint in ("mutate", "validate"):
            assert patch_of(webhook.answer(endpoint, update)) == [], f"{name}: an UPDATE was patched"


@settings(max_examples=examples(150))
@given(text=hollow.odd_policy_texts(), operation=st.sampled_from(("CREATE", "UPDATE")))
def test_a_policy_with_odd_yaml_is_denied_exactly_when_it_does_not_load(
    webhook: Webhook, text: str, operation: str
) -> None:
    config_map = s.policy_config_map(text)
    try:
        policy_from_config_map(config_map)
        loads = True
    except PolicyError:
        loads = False
    review = admission_review(
        operation, config_map, config_map if operation == "UPDATE" else None, uid="policy", userInfo={"username": "x"}
    )
    assert patch_of(webhook.answer("mutate", review)) == []
    response = webhook.answer("validate", review)
    assert response is not None and response["allowed"] is loads, (text, response)
