"""Why a storage pod ended Failed (rules/causes/ended.py): the table in tests/data/audit/failed.yaml, run through
the real audit on the pod as the API lists it and as the server's index holds it, and a generated property: every
Failed storage pod in the window gets exactly one ended-pod cause, the one its DisruptionTarget condition, status
reason or containers name, and the index keeps every field that decides it."""

from __future__ import annotations

import copy
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.audit import FAILED, STUCK, audit_objects
from rules.causes import CODES, ENDED_CAUSES, ENDED_CODES, duration, ended_seconds
from rules.causes.scheduler import MESSAGE_LIMIT
from rules.model import Json
from rules.reports import OPENREPORTS, REPORT_NAME, build_reports
from tests.support import DATA, ROOT, load_yaml, policy, table_cases, validate_strict, view_from
from webhook.state.index import trim
from webhook.state.secondary import claims_of

KEYS = {"name", "source", "ended", "policy", "cause", "says", "not_says"}
TABLE = load_yaml(DATA / "audit" / "failed.yaml")
NOW = datetime.fromisoformat(TABLE["now"])
CASES = table_cases(DATA / "audit" / "failed.yaml", KEYS, section="cases")


def audited(case: dict[str, Any], *, indexed: bool) -> Any:
    state = copy.deepcopy([*TABLE["base"], case["ended"]])
    pod = trim(case["ended"]) if indexed else copy.deepcopy(case["ended"])
    (report,) = audit_objects([pod], view_from(*state), policy(case.get("policy")), now=NOW)
    return report


@pytest.mark.parametrize("case", CASES)
def test_case_is_well_formed(case: dict[str, Any]) -> None:
    assert case["cause"] is None or case["cause"] in ENDED_CODES
    assert claims_of(case["ended"]), "the server's index keeps only pods that mount a claim"
    validate_strict(case["ended"])


@pytest.mark.parametrize("indexed", [False, True], ids=["as listed", "as indexed"])
@pytest.mark.parametrize("case", CASES)
def test_an_ended_storage_pod_gets_its_one_cause(case: dict[str, Any], indexed: bool) -> None:
    report = audited(case, indexed=indexed)
    failed = [f for f in report.findings if f.family == FAILED]
    assert not [f for f in report.findings if f.family == STUCK]
    if case["cause"] is None:
        assert (report.cause, failed) == (None, [])
        return
    assert report.cause is not None
    assert report.cause.code == case["cause"], report.cause.message
    for words in case["says"]:
        assert words in report.cause.message
    for words in case.get("not_says", ()):
        assert words not in report.cause.message
    (finding,) = failed
    assert (finding.severity, finding.field) == ("warn", "status")
    ago = ended_seconds(case["ended"], NOW)
    assert ago is not None
    assert finding.message == f"ended Failed {duration(ago)} ago: {report.cause.message}"
    assert report.as_json()["cause"] == {"code": case["cause"], "message": report.cause.message,
                                         "remedy": report.cause.remedy}  # fmt: skip


def test_every_ended_cause_has_a_case_and_codes_are_their_own() -> None:
    assert len(set(ENDED_CODES)) == len(ENDED_CODES)
    assert not set(ENDED_CODES) & set(CODES), "a code means one thing: stuck or ended"
    assert set(ENDED_CODES) == {case["cause"] for case in TABLE["cases"]} - {None}
    assert all(cause.remedy and "\n" not in cause.remedy for cause in ENDED_CAUSES)


def test_the_runbook_names_every_ended_code_with_its_remedy_in_the_order_tried() -> None:
    """docs/runbooks.md holds the one table of ended causes (docs/design.md links to it)."""
    text = (ROOT / "docs" / "runbooks.md").read_text()
    rows = [code for code in re.findall(r"^ *\| `(\w+)` \|", text, flags=re.M) if code in ENDED_CODES]
    assert rows == [cause.code for cause in ENDED_CAUSES]
    for cause in ENDED_CAUSES:
        assert cause.remedy in text, f"docs/runbooks.md: the remedy of {cause.code}"


def test_the_index_keeps_a_termination_message_only_as_far_as_a_cause_quotes_it() -> None:
    """A container writes its own termination message (up to 4 KiB): a tenant's Failed pods must not grow the index
    by it, and the cause the in-server audit names is the one `audit` names."""
    (case,) = [c for c in TABLE["cases"] if c["cause"] == "ContainerFailed" and "rclone" in c["name"]]
    long = copy.deepcopy(case)
    terminated = long["ended"]["status"]["containerStatuses"][0]["state"]["terminated"]
    terminated["message"] = "x" * 4096
    kept = trim(long["ended"])["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    assert len(kept) == MESSAGE_LIMIT + 1
    listed, indexed = audited(long, indexed=False), audited(long, indexed=True)
    assert listed.cause is not None and indexed.cause is not None
    assert listed.cause.message == indexed.cause.message
    assert "x" * MESSAGE_LIMIT + "…" in listed.cause.message


def test_the_policy_report_carries_the_cause_of_an_ended_pod() -> None:
    (case,) = [c for c in TABLE["cases"] if c["cause"] == "OOMKilled"]
    report = audited(case, indexed=False)
    written = build_reports([report], OPENREPORTS, now=1)[("shop", REPORT_NAME)]
    (result,) = [r for r in written["results"] if r["policy"] == FAILED]
    assert result["properties"] == {"field": "status", "cause": "OOMKilled", "remedy": report.cause.remedy}


# The generated property. A storage pod's ending as Kubernetes writes it: who disrupted it (or nobody), the status
# reason the kubelet wrote, and its containers' terminations.
DISRUPTORS = {
    "EvictionByEvictionAPI": "EvictedByAPI",
    "PreemptionByScheduler": "Preempted",
    "DeletionByTaintManager": "DeletedByTaintManager",
    "DeletionByPodGC": "NodeShutdown",
}
KUBELET_REASONS = {"Evicted": "NodePressureEviction", "Terminated": "NodeShutdown", "Shutdown": "NodeShutdown",
                   "Preempting": "Preempted"}  # fmt: skip
ROLE_LABELS = [
    {"app.kubernetes.io/created-by": "volsync"},
    {"velero.io/exposer-pod-group": "snapshot-exposer", "velero.io/data-upload": "du-1"},
    {"velero.io/exposer-pod-group": "generic-restore-exposer", "velero.io/data-download": "dd-1"},
    {"app": "containerized-data-importer", "cdi.kubevirt.io": "importer"},
]


def _stamp(minutes_ago: int) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


_terminations = st.lists(
    st.fixed_dictionaries(
        {"exitCode": st.sampled_from([0, 1, 2, 137, 143])},
        optional={
            "reason": st.sampled_from(["Error", "OOMKilled", "Completed", "ContainerStatusUnknown"]),
            "startedAt": st.just(_stamp(50)),
            "finishedAt": st.integers(0, 59).map(_stamp),
            "message": st.text(max_size=20),
        },
    ),
    max_size=3,
)


@st.composite
def ended_pods(draw: st.DrawFn) -> Json:
    status: Json = {"phase": "Failed", "conditions": []}
    disruptor = draw(st.sampled_from([None, *DISRUPTORS, "TerminationByKubelet", "SomethingNew"]))
    if disruptor is not None:
        status["conditions"].append({"type": "DisruptionTarget", "status": draw(st.sampled_from(["True", "False"])),
                                     "reason": disruptor, "message": draw(st.text(max_size=30)),
                                     "lastTransitionTime": _stamp(draw(st.integers(0, 59)))})  # fmt: skip
    if reason := draw(st.sampled_from([None, *KUBELET_REASONS, "OutOfcpu", "UnexpectedAdmissionError"])):
        status["reason"] = reason
        status["message"] = draw(st.text(max_size=30))
    status["conditions"].append({"type": "Ready", "status": "False", "reason": "PodFailed",
                                 "lastTransitionTime": _stamp(draw(st.integers(0, 59)))})  # fmt: skip
    status["containerStatuses"] = [
        {"name": f"c{i}", "ready": False, "restartCount": 0, "image": "i", "imageID": "", "state": {"terminated": t}}
        for i, t in enumerate(draw(_terminations))
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "velero",
            "creationTimestamp": _stamp(60),
            "labels": draw(st.sampled_from(ROLE_LABELS)),
        },
        "spec": {
            "nodeName": "n1",
            "restartPolicy": "Never",
            "containers": [{"name": "c0", "image": "i"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}],
        },
        "status": status,
    }


def expected_code(pod: Json) -> str:
    """The cause the ending names, written from the table's rules independently of rules/causes/ended.py."""
    status = pod["status"]
    disruption = next((c for c in status["conditions"] if c["type"] == "DisruptionTarget"), None)
    by = disruption["reason"] if disruption is not None and disruption["status"] == "True" else ""
    if by in DISRUPTORS:
        return DISRUPTORS[by]
    if by in ("", "TerminationByKubelet") and status.get("reason") in KUBELET_REASONS:
        return KUBELET_REASONS[status["reason"]]
    terminated = [c["state"]["terminated"] for c in status["containerStatuses"]]
    if any(t.get("reason") == "OOMKilled" for t in terminated):
        return "OOMKilled"
    if any(t["exitCode"] != 0 for t in terminated):
        return "ContainerFailed"
    return "FailedUnexplained"


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(ended_pods())
def test_every_ended_storage_pod_gets_the_cause_its_status_names(pod: Json) -> None:
    view = view_from({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    causes = set()
    for audited_pod in (copy.deepcopy(pod), trim(pod)):
        (report,) = audit_objects([audited_pod], view, policy(), now=NOW)
        assert report.cause is not None
        causes.add((report.cause.code, report.cause.message))
        assert [f.family for f in report.findings if f.family in (FAILED, STUCK)] == [FAILED]
    assert len(causes) == 1, "the index keeps every field the cause is read from"
    ((code, message),) = causes
    assert code == expected_code(pod), message
    role = next(iter(pod["metadata"]["labels"].values()))
    started = any(c["state"]["terminated"].get("startedAt") for c in pod["status"]["containerStatuses"])
    disruption = next((c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"), None)
    deleted = disruption is not None and disruption["status"] == "True" and disruption["reason"] in DISRUPTORS
    velero = role in ("snapshot-exposer", "generic-restore-exposer")
    assert ("prepare timeout" in message) == (velero and deleted and not started), message


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(ended_pods(), st.sampled_from(["Pending", "Running", "Succeeded"]))
def test_a_pod_that_did_not_end_failed_gets_no_ended_cause(pod: Json, phase: str) -> None:
    pod["status"]["phase"] = phase
    view = view_from({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    (report,) = audit_objects([pod], view, policy(), now=NOW)
    assert report.cause is None or report.cause.code not in ENDED_CODES
    assert not [f for f in report.findings if f.family == FAILED]
