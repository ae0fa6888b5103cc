"""The one list of the cluster-state kinds (webhook/state/kinds.py) is what everything else names: the chart's
ClusterRole, the written list of the server's API calls, the fake API and the docs' lists of kinds. Adding a kind
to the list and forgetting one of them fails here (docs/development.md, "Adding a cluster-state kind")."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from rules.kube.shapes import object_problems
from rules.messages import plural
from tests.chart.chart_helpers import FULLNAME, render
from tests.rbac_calls import Grant, calls, rendered_grants
from tests.support import ROOT
from webhook.state.kinds import STATE_KINDS, StateKind

CLUSTER_WIDE = tuple(entry for entry in STATE_KINDS if entry.verbs)
CORE = tuple(entry for entry in CLUSTER_WIDE if entry.feature is None)
OPTIONAL = tuple(entry for entry in STATE_KINDS if entry.feature is not None)
#: How the docs shorten some kinds.
SHORT = {"PersistentVolumeClaim": "PVC", "PersistentVolume": "PV"}


def test_the_chart_cluster_role_grants_each_kind_exactly_the_verbs_the_server_uses() -> None:
    """Of the state kinds' resources (the role may grant others: what the audit reads, say)."""
    (role,) = [d for d in render() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == FULLNAME]
    resources = {(e.group, e.plural) for e in STATE_KINDS}
    granted = {g for g in rendered_grants([role]) if (g.group, g.resource) in resources}
    assert granted == {Grant(e.group, e.plural, verb) for e in CLUSTER_WIDE for verb in e.verbs}


def test_the_written_list_of_api_calls_names_each_kind_with_its_verbs() -> None:
    """tests/data/rbac/server-calls.yaml, which the chart is checked against in every mode."""
    state_calls = {
        (call["group"], call["resource"]): sorted(call["verbs"])
        for call in calls()
        if call["where"] == "cluster" and str(call["by"]).startswith("webhook/state/")
    }
    assert state_calls == {(e.group, e.plural): sorted(e.verbs) for e in CLUSTER_WIDE}
    by_name = {call["resource"] for call in calls() if "name" in call and str(call["by"]).startswith("webhook/state/")}
    assert by_name == {e.plural for e in STATE_KINDS if e.watched == "by-name"}


def test_the_kinds_read_in_velero_namespace_are_granted_there_alone() -> None:
    """A Role in Velero's namespace as the policy names it, never the ClusterRole (checked above), and the written
    list says so; the server lists them only there (webhook/state/optional.py)."""
    in_velero = {(e.group, e.plural): sorted(e.namespace_verbs) for e in STATE_KINDS if e.namespace_verbs}
    assert in_velero
    written = {
        (call["group"], call["resource"]): sorted(call["verbs"])
        for call in calls()
        if call["where"] == "datamover" and str(call["by"]).startswith("webhook/state/")
    }
    assert written == in_velero
    docs = render({"policy": {"nodeAgent": {"namespace": "openshift-adp"}}})
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == f"{FULLNAME}-datamover"]
    assert role["metadata"]["namespace"] == "openshift-adp"
    granted = {(g.group, g.resource, g.verb) for g in rendered_grants([role])}
    assert granted == {(group, plural, verb) for (group, plural), verbs in in_velero.items() for verb in verbs}
    assert not [d for d in render() if d["kind"] == "Role" and d["metadata"]["name"] == f"{FULLNAME}-datamover"]


def test_the_kinds_without_a_feature_gate_are_the_ones_listed_through_typed_clients() -> None:
    # The index, the fake API's resources and the optional groups are built from the list itself.
    assert {e.kind for e in STATE_KINDS if e.feature is None} == {e.kind for e in STATE_KINDS if e.lister}


@pytest.mark.parametrize("entry", STATE_KINDS, ids=lambda e: e.kind)
def test_each_kind_has_a_shape_at_the_typed_boundary(entry: StateKind) -> None:
    """The static loader checks every object against rules/kube/shapes.py: a kind without a shape would take
    any value, and crash the rule that reads it."""
    broken = {"kind": entry.kind, "metadata": {"name": ["not", "a", "string"]}}
    assert object_problems(entry.kind, broken).types, f"rules/kube/shapes.py has no shape for {entry.kind}"


@dataclass(frozen=True)
class Passage:
    """A doc's list of kinds: the text from `start` to the next `end`, and which kinds it must name."""

    path: str
    start: str
    end: str
    kinds: tuple[StateKind, ...]
    by: str = "kind"  # or "resource": the API's plural in backquotes, or "group"


PASSAGES = (
    Passage("docs/cli.md", "takes YAML/JSON manifests", "(the last", STATE_KINDS),
    Passage("docs/design.md", "State: the index keeps", "(trimmed", OPTIONAL),
    Passage("docs/operations.md", "Each gunicorn worker lists", "then watches", CORE),
    Passage("docs/operations.md", "while their resources (", ")", OPTIONAL, by="resource"),
    Passage("docs/operations.md", "The optional API groups have a line each:", "say `ok`", OPTIONAL, by="group"),
    Passage("docs/placement.md", "are read from the cluster only while", "are served", OPTIONAL, by="group"),
    Passage("docs/operations.md", "A PVC,", "not yet in the cache", tuple(e for e in STATE_KINDS if e.getter)),
    Passage(
        "charts/storage-affinity-webhook/templates/clusterrole.yaml", "# Read-only view", "apiVersion:", CLUSTER_WIDE
    ),
)


def _names(entry: StateKind, by: str) -> list[str]:
    if by == "resource":
        return [f"`{entry.plural}`"]
    if by == "group":
        return [f"`{entry.group}`"]
    names = [entry.kind, plural(entry.kind), entry.plural]
    if entry.kind in SHORT:
        names += [SHORT[entry.kind], plural(SHORT[entry.kind])]
    return names


@pytest.mark.parametrize("passage", PASSAGES, ids=lambda p: f"{p.path}:{p.start}")
def test_the_docs_lists_of_kinds_name_every_kind(passage: Passage) -> None:
    text = " ".join((ROOT / passage.path).read_text(encoding="utf-8").split())
    begin = text.find(passage.start)
    assert begin >= 0, f"{passage.path} no longer says {passage.start!r}: point this test at its list of kinds"
    end = text.find(passage.end, begin + len(passage.start))
    listed = text[begin : end if end >= 0 else None]
    missing = [
        e.kind
        for e in passage.kinds
        if not any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", listed) for n in _names(e, passage.by))
    ]
    assert not missing, f"{passage.path}: {passage.start!r}… lacks {missing}"


#: What docs/operations.md's read-only RBAC table covers: the state kinds' resources and the workloads the audit lists.
READ_RESOURCES = {entry.plural for entry in STATE_KINDS} | {
    f"{kind.lower()}s" for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")
}


def _rbac_table() -> list[tuple[set[str], set[str], set[str]]]:
    """docs/operations.md's RBAC table: (groups, resources, verbs) per row."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    start = text.index("| API group | Resource | Scope | Verbs |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        group, resource, _, verbs = (cell.strip() for cell in line.strip("|").split("|"))
        groups = {g.strip('"') for g in re.findall(r"`([^`]*)`", group)}
        resources = set(re.findall(r"`([^`]*)`", resource)) & READ_RESOURCES
        rows.append((groups, resources, set(re.findall(r"\b(get|list|watch)\b", verbs))))
    return rows


def test_the_rbac_table_of_operations_md_is_the_list_of_calls() -> None:
    """Each read of the cluster state in tests/data/rbac/server-calls.yaml is a row of the table with exactly its
    verbs, and the table names nothing the server does not read."""
    table = _rbac_table()
    reads = [c for c in calls() if c["resource"] in READ_RESOURCES and set(c["verbs"]) <= {"get", "list", "watch"}]
    for call in reads:
        rows = [
            verbs for groups, resources, verbs in table if call["group"] in groups and call["resource"] in resources
        ]
        assert rows, f"docs/operations.md's RBAC table lacks `{call['resource']}` ({call['group'] or 'core'})"
        assert set(call["verbs"]) in rows, f"`{call['resource']}`: the table says {rows}, the server {call['verbs']}"
    extra = {r for _, resources, _ in table for r in resources} - {c["resource"] for c in reads}
    assert not extra, f"the table names resources the server does not read: {extra}"


def test_the_cache_not_synced_runbook_names_every_cache_series() -> None:
    """The `resource` label of storage_affinity_cache_synced is a watched kind's plural (ConfigMaps are two series
    of their own, policy-configmap and velero-configmap): the runbook lists every core one."""
    text = " ".join((ROOT / "docs" / "runbooks.md").read_text(encoding="utf-8").split())
    begin = text.index("(`resource` label:")
    listed = text[begin : text.index(")", begin)]
    expected = [e.plural for e in CORE if e.kind != "ConfigMap"] + ["policy-configmap", "velero-configmap"]
    assert [name for name in expected if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", listed)] == []
    assert "optional API groups" in listed
