"""Why a storage pod is stuck (rules/causes/): the table in tests/data/audit/causes.yaml, run through the real
audit twice: on the pod as the API lists it (`audit --cluster`, `audit` against the API) and as the server's index
holds it (the in-server audit), which must keep every field a cause reads."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from rules import pipeline
from rules.audit import STUCK, ObjectAudit, audit_objects
from rules.causes import CAUSES, CDI_WORKER, CODES, Stuck, duration, stuck_cause, stuck_seconds
from rules.cluster import LookupFailed
from rules.kube.tolerations import tolerates
from rules.model import Json, Subject
from tests.support import DATA, ROOT, load_yaml, policy, table_cases, validate_strict, view_from
from webhook.state.index import ClusterIndex, trim
from webhook.state.secondary import claims_of

CAUSES_KEYS = {"cause", "name", "policy", "says", "source", "state", "stuck"}

TABLE = load_yaml(DATA / "audit" / "causes.yaml")
NOW = datetime.fromisoformat(TABLE["now"])
CASES = table_cases(DATA / "audit" / "causes.yaml", CAUSES_KEYS, section="cases")
#: The causes of the cases whose stuck pod mounts a claim: the only pods the server's index keeps, so the ones the
#: in-server audit counts (tests/webhook/test_auditloop.py, tests/e2e/test_stuck_pods.py).
INDEXED_CAUSES = {
    "MultiAttach",
    "ReadWriteOncePodInUse",
    "NoNodeAgent",
    "DataSourceNotReady",
    "DataSourcesApart",
    "BackupSnapshotElsewhere",
    "DataSourceElsewhere",
    "VMPlacementConflict",
    "VolumeTopologyConflict",
}
CASE_KEYS = {"name", "source", "state", "stuck", "policy", "cause", "says"}
#: Custom resources the official schema does not cover: their shapes follow tests/data/datasource/library.yaml.
CUSTOM_KINDS = {"VolumeSnapshot", "VolumeSnapshotContent", "VirtualMachine", "DataUpload"}


#: The policy the in-server audits of tests/webhook and tests/e2e run: the default, naming Velero's namespace, where
#: a backup pod's DataUpload is read (`SERVER_POLICY_CONFIG_MAP` gives it to a real server).
INDEXED_POLICY = {"nodeAgent": {"namespace": "velero"}}
#: What the in-server audit says where the operator's `audit` says more: its causes reach tenants (namespace reports,
#: Events), so they are judged on the node labels a tenant may know, and a VM's constraint on another label
#: (`kubevirt.io/schedulable`) is the scheduler's Unschedulable to them (docs/design.md#13-what-a-review-may-tell).
SERVER_VIEW = {"VMPlacementConflict": "Unschedulable"}


def indexed_cases() -> list[dict[str, Any]]:
    """The cases with a cause whose stuck pod mounts a claim (what the in-server audit sees) under the policy the
    in-server audits of tests/webhook and tests/e2e run (`INDEXED_POLICY`)."""
    return [
        c
        for c in TABLE["cases"]
        if c["cause"] and claims_of(c["stuck"]) and c.get("policy", INDEXED_POLICY) == INDEXED_POLICY
    ]


def server_causes(cases: list[dict[str, Any]]) -> Counter[str]:
    """How many pods of `cases` the in-server audit counts under each cause (`SERVER_VIEW`)."""
    return Counter(SERVER_VIEW.get(c["cause"], c["cause"]) for c in cases)


def cluster_of(cases: list[dict[str, Any]]) -> list[Json]:
    """The table's base and the cases' objects, once each (cases share some through YAML anchors)."""
    listed = [*TABLE["base"], *(o for c in cases for o in [*c.get("state", ()), c["stuck"]])]
    unique = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in listed}
    return copy.deepcopy(list(unique.values()))


def audited(case: dict[str, Any], *, indexed: bool) -> ObjectAudit:
    """The audit as the operator reads it (`audit`, who may read the Nodes: every label counts); what a tenant reads
    of the same causes is tests/rules/test_disclosure.py's and tests/fuzz/test_label_oracle.py's."""
    state = copy.deepcopy([*TABLE["base"], *case.get("state", ()), case["stuck"]])
    pod = trim(case["stuck"]) if indexed else copy.deepcopy(case["stuck"])
    reader = dataclasses.replace(policy(case.get("policy")), nodes_readable=True)
    (report,) = audit_objects([pod], view_from(*state), reader, now=NOW)
    return report


@pytest.mark.parametrize("case", CASES)
def test_case_is_well_formed(case: dict[str, Any]) -> None:
    assert set(case) <= CASE_KEYS and case["source"], case["name"]
    assert case["cause"] is None or case["cause"] in CODES
    for obj in [*case.get("state", ()), case["stuck"]]:
        if obj["kind"] not in CUSTOM_KINDS:
            validate_strict(obj)


@pytest.mark.parametrize("indexed", [False, True], ids=["as listed", "as indexed"])
@pytest.mark.parametrize("case", CASES)
def test_stuck_pod_gets_its_one_cause(case: dict[str, Any], indexed: bool) -> None:
    report = audited(case, indexed=indexed)
    stuck = [f for f in report.findings if f.family == STUCK]
    if case["cause"] is None:
        assert (report.cause, stuck) == (None, [])
        assert "cause" not in report.as_json()
        return
    assert report.cause is not None
    assert report.cause.code == case["cause"], report.cause.message
    for words in case["says"]:
        assert words in report.cause.message
    (finding,) = stuck
    assert (finding.severity, finding.field) == ("warn", "status")
    waited = stuck_seconds(case["stuck"], NOW)
    assert waited is not None
    assert finding.message == f"stuck for {duration(waited)}: {report.cause.message}"
    assert report.as_json()["cause"] == {
        "code": case["cause"],
        "message": report.cause.message,
        "remedy": report.cause.remedy,
    }


def test_every_cause_has_a_case_and_codes_are_unique() -> None:
    assert len(set(CODES)) == len(CODES)
    assert set(CODES) == {case["cause"] for case in TABLE["cases"]} - {None}
    assert all(cause.remedy and "\n" not in cause.remedy for cause in CAUSES)


def test_the_multi_attach_cause_agrees_with_the_multi_attach_flag() -> None:
    (case,) = [c for c in TABLE["cases"] if c["cause"] == "MultiAttach"]
    report = audited(case, indexed=False)
    assert report.multi_attach


def test_cdi_workers_are_storage_pods_unless_left_alone() -> None:
    workers = [c for c in TABLE["cases"] if c["stuck"]["metadata"].get("labels", {}).get("cdi.kubevirt.io")]
    assert len(workers) >= 2
    for case in workers:
        report = audited(case, indexed=False)
        left_alone = case["stuck"]["metadata"].get("annotations", {}).get("storage-affinity.io/role") == "none"
        assert report.role == ("" if left_alone else CDI_WORKER), case["name"]
        assert (report.cause is None) is left_alone
        assert report.placement == ""  # CDI workers follow their VM: the movers' placement check is not theirs


def test_a_source_on_a_cordoned_node_is_named_before_the_cordon() -> None:
    """Both hold for the mover pinned to its source's cordoned node; the table names the more specific one."""
    (case,) = [c for c in TABLE["cases"] if c["stuck"]["metadata"]["name"] == "volsync-src-pos-db-w3n8c"]
    state = copy.deepcopy([*TABLE["base"], *case["state"], case["stuck"]])
    view, pod = view_from(*state), copy.deepcopy(case["stuck"])
    subject = Subject(kind="Pod", operation="CREATE", namespace="shop", name=pod["metadata"]["name"], obj=pod)
    stuck = Stuck(pod, pipeline.pod_target(subject, policy(), ""), view, policy(), 1800.0)
    codes = [cause.code for cause in CAUSES if cause.judge(stuck) is not None]
    assert codes[:2] == ["DataSourceElsewhere", "NodeCordoned"]
    assert stuck_cause(stuck).code == "DataSourceElsewhere"


def test_without_a_clock_no_pod_is_judged_stuck() -> None:
    case = TABLE["cases"][0]
    state = copy.deepcopy([*TABLE["base"], case["stuck"]])
    (report,) = audit_objects([case["stuck"]], view_from(*state), policy())
    assert report.cause is None


def test_the_runbook_names_every_code_with_its_remedy_in_the_order_tried() -> None:
    """docs/runbooks.md holds the one table of stuck causes (docs/design.md links to it): a row per code, in the
    order `CAUSES` tries them, with its remedy."""
    text = (ROOT / "docs" / "runbooks.md").read_text()
    rows = [code for code in re.findall(r"^ *\| `(\w+)` \|", text, flags=re.M) if code in CODES]
    assert rows == [cause.code for cause in CAUSES]
    for cause in CAUSES:
        assert cause.remedy in text, f"docs/runbooks.md: the remedy of {cause.code}"


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (59, "0 min"),
        (7199, "119 min"),
        (7200, "2 h"),
        (48 * 3600 - 1, "47 h"),
        (48 * 3600, "2 d"),
        (10 * 86400, "10 d"),
    ],
)
def test_a_wait_is_said_in_the_unit_people_use(seconds: float, said: str) -> None:
    assert duration(seconds) == said


class _NodesUnreadable(ClusterIndex):
    """The server's view while the API does not answer a node it has not cached."""

    def node(self, name: str) -> Json | None:
        found = super().node(name)
        if found is None:
            raise LookupFailed(f"GET node {name}: timed out")
        return found


def test_a_cause_whose_state_cannot_be_read_is_not_claimed() -> None:
    (case,) = [c for c in TABLE["cases"] if c["stuck"]["metadata"]["name"] == "restore-gone-9vx2d"]
    view = _NodesUnreadable()
    for obj in copy.deepcopy([*TABLE["base"], case["stuck"]]):
        view.apply(obj)
    (report,) = audit_objects([case["stuck"]], view, policy(), now=NOW)
    assert report.cause is not None
    assert report.cause.code == "Unexplained"  # not NodeGone: the node may only be unreadable


TOLERATIONS = load_yaml(DATA / "audit" / "tolerations.yaml")


@pytest.mark.parametrize(
    "case", table_cases(DATA / "audit" / "tolerations.yaml", {"name", "tolerations", "tolerated"}, section="cases")
)
def test_a_taint_is_tolerated_as_the_api_decides(case: dict[str, Any]) -> None:
    assert tolerates(case["tolerations"], TOLERATIONS["taint"]) is case["tolerated"]


def test_a_backup_pod_stuck_without_a_node_agent_is_told_so_once() -> None:
    """The stuck-pod finding names the cause; the node-agent finding of a Pending backup pod would say the same."""
    (case,) = [c for c in TABLE["cases"] if c["cause"] == "NoNodeAgent"]
    report = audited(case, indexed=False)
    assert report.cause is not None
    sentence = report.cause.message
    assert [f.family for f in report.findings if sentence in f.message] == [STUCK]
