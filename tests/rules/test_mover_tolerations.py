"""Velero's ConfigMap tolerations count as a data mover's own wherever its nodes are judged
(rules/loadaffinity/movertolerations.py): the same nodes as if the pod carried them, as Velero makes it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rules.cluster import ClusterView
from rules.kube.disclosed import EVERY_LABEL
from rules.kube.feasible import Filters, feasibility
from rules.loadaffinity.movertolerations import data_mover_tolerations
from rules.model import Json
from testkit import velero
from tests.support import DATA, load_yaml, policy, view_from

CLUSTER = load_yaml(DATA / "loadaffinity" / "cluster.yaml")
SOURCE = {"loadAffinitySource": {"configMap": {"namespace": "velero", "name": "node-agent-config"}}}
KEYS = ("dedicated", "backup", "spot")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")


def config_map(tolerations: list[Json]) -> Json:
    data = {"node-agent-config.json": json.dumps({"tolerations": tolerations})}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "node-agent-config", "namespace": "velero"},
        "data": data,
    }


def tainted(name: str, taints: list[Json]) -> Json:
    labels = {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
    }


taints = st.lists(
    st.builds(
        lambda k, v, e: {"key": k, "value": v, "effect": e},
        st.sampled_from(KEYS),
        st.sampled_from(["", "true"]),
        st.sampled_from(EFFECTS),
    ),
    max_size=2,
)
tolerations = st.lists(
    st.one_of(
        st.builds(
            lambda k, e: {"key": k, "operator": "Exists", "effect": e},
            st.sampled_from(KEYS),
            st.sampled_from(["", *EFFECTS]),
        ),
        st.builds(lambda k: {"key": k, "operator": "Equal", "value": "true"}, st.sampled_from(KEYS)),
    ),
    max_size=3,
)


@given(node_taints=st.lists(taints, min_size=1, max_size=4), configured=tolerations)
def test_configmap_tolerations_judge_as_if_on_the_pod(node_taints: list[list[Json]], configured: list[Json]) -> None:
    nodes = [tainted(f"w{i}", t) for i, t in enumerate(node_taints)]
    view = view_from(*CLUSTER, *nodes, config_map(configured))
    pod = velero.exposer_pod("backup", claims=())
    counted = data_mover_tolerations(view, policy(SOURCE), "velero", pod["metadata"])
    assert list(counted) == configured
    carried = {**pod["spec"], "tolerations": configured}
    assert scheduled(view, pod["spec"], counted) == scheduled(view, carried)


def scheduled(view: ClusterView, spec: Json, tolerations: Sequence[Json] = ()) -> frozenset[str]:
    """Where the scheduler may put a pod of no claims, `tolerations` counted as its own (the suites' `nodes`)."""
    filters = Filters(taints=True, cordon=True, volumes=True, labels=EVERY_LABEL, tolerations=tolerations)
    return feasibility(view, spec, filters).names()


def test_a_node_tainted_for_backups_fits_a_backup_pod() -> None:
    taint = {"key": "backup", "value": "true", "effect": "NoSchedule"}
    view = view_from(*CLUSTER, tainted("w0", [taint]), config_map([{"key": "backup", "operator": "Exists"}]))
    pod = velero.exposer_pod("backup", claims=())
    counted = data_mover_tolerations(view, policy(SOURCE), "velero", pod["metadata"])
    assert "w0" in scheduled(view, pod["spec"], counted)
    assert "w0" not in scheduled(view, pod["spec"])


def test_only_a_trusted_backup_or_restore_pod_counts_them() -> None:
    view = view_from(*CLUSTER, config_map([{"key": "backup", "operator": "Exists"}]))
    pod = velero.exposer_pod("restore", claims=())
    assert data_mover_tolerations(view, policy(SOURCE), "velero", pod["metadata"]) != ()
    untrusted = policy({**SOURCE, "trust": {"namespaces": ["velero-system"]}})
    assert data_mover_tolerations(view, untrusted, "velero", pod["metadata"]) == ()
    plain = {"name": "app", "namespace": "velero"}
    assert data_mover_tolerations(view, policy(SOURCE), "velero", plain) == ()
    assert data_mover_tolerations(view, policy(), "velero", pod["metadata"]) == ()  # no loadAffinitySource


def test_a_trusted_requester_earns_them_for_a_pod_but_not_for_a_workload_template() -> None:
    """Requester trust counts for the Pods a requester creates: a Job's pods are its controller's, so a Job template
    in a namespace the policy does not trust gets none of Velero's tolerations, whoever creates the Job."""
    view = view_from(*CLUSTER, config_map([{"key": "backup", "operator": "Exists"}]))
    requester = "system:serviceaccount:velero:velero"
    trusting = policy({**SOURCE, "trust": {"requesters": [requester]}})
    pod = velero.exposer_pod("backup", claims=())
    metadata = {**pod["metadata"], "namespace": "shop"}
    assert data_mover_tolerations(view, trusting, "shop", metadata, requester) != ()
    assert data_mover_tolerations(view, trusting, "shop", metadata, requester, kind="Job") == ()


def test_a_test_suite_counts_them_for_a_backup_pod(tmp_path: Path) -> None:
    """`storage-affinity-webhook test`: a backup pod's `nodes` include the node tainted for backups that Velero's
    ConfigMap tolerates, though the suite's pod, written before Velero made it, carries no toleration."""
    import yaml

    from webhook.cli.suitefile import load_suite
    from webhook.cli.suites import run_case

    taint = {"key": "backup", "value": "true", "effect": "NoSchedule"}
    cluster = [tainted("w0", [taint]), tainted("w1", []), config_map([{"key": "backup", "operator": "Exists"}])]
    pod = velero.exposer_pod("backup", claims=())
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": cluster}))
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(SOURCE))
    suite_doc = {
        "policy": "policy.yaml",
        "cluster": ["cluster.yaml"],
        "cases": [{"name": "backup", "resource": pod, "expect": {"allowed": True, "nodes": ["w0", "w1"]}}],
    }
    (tmp_path / "storage-affinity-test.yaml").write_text(yaml.safe_dump(suite_doc))
    suite = load_suite(tmp_path / "storage-affinity-test.yaml", None, root=tmp_path)
    assert suite.problems == []
    (case,) = suite.cases
    assert run_case(suite, case) == []
