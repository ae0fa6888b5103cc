"""The exposer chain's placement as a property (rules/loadaffinity/source.py, rules/datasource/exposer.py): for any
terms Velero wrote (none, the OS requirement, the 1.18.1 form with the volume's topology), any load affinity and
any node-agents, a trusted backup pod of Velero's namespace ends with required terms that imply its source PV's,
so no node it may land on lacks the snapshot, and a second review adds nothing; a pod of another namespace, or a
policy that names no Velero namespace, never gets them (the DataUpload is not read)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rules.kube.nodeaffinity import required_terms, terms_imply
from rules.model import Json
from rules.policy import policy_from_document
from testkit.exposerchain import backup_chain, backup_pod, data_upload, source_volume
from testkit.velero import node_agent_pod
from tests.support import mutate_checked, view_from

NAME = "nightly-20261120-7hx2q"
NODES = ("node-a", "node-b", "node-c")
SOURCE_TERMS = [{"matchExpressions": [{"key": "topology.topolvm.io/node", "operator": "In", "values": ["node-a"]}]}]
OS = {"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]}
LOAD = (
    {"nodeSelector": {"matchLabels": {"topology.kubernetes.io/zone": "zone-a"}}},
    {"nodeSelector": {"matchLabels": {"kubernetes.io/hostname": "node-b"}}},
    {"nodeSelector": {"matchExpressions": [{"key": "backup", "operator": "Exists"}]}},
)


def _cluster(agents: list[tuple[str, str]]) -> list[Json]:
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "topology.topolvm.io/node": name,
                    "topology.kubernetes.io/zone": "zone-a" if name != "node-c" else "zone-b",
                    **({"backup": "true"} if name != "node-a" else {}),
                },
            },
        }
        for name in NODES
    ]
    agent_pods = [node_agent_pod(node, state) for node, state in agents]
    return [*nodes, *source_volume("node-a"), data_upload(NAME, "shop", "db"), *backup_chain(NAME), *agent_pods]


_POD_TERMS = st.sampled_from(
    (
        None,  # no affinity at all
        [{"matchExpressions": [OS]}],  # Velero before 1.18.1
        [{"matchExpressions": [*SOURCE_TERMS[0]["matchExpressions"], OS]}],  # 1.18.1, no load affinity
        [{"matchExpressions": [*SOURCE_TERMS[0]["matchExpressions"], {"key": "backup", "operator": "Exists"}, OS]}],
        [{"matchExpressions": [OS]}, {"matchExpressions": [{"key": "backup", "operator": "Exists"}]}],
    )
)
_AGENTS = st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(("ready", "unready"))), unique_by=lambda a: a[0])


def _pod(terms: list[Json] | None, namespace: str = "velero") -> Json:
    pod = backup_pod(NAME, namespace=namespace, terms=copy.deepcopy(terms) if terms else None)
    if terms is None:
        del pod["spec"]["affinity"]
    return pod


@given(
    terms=_POD_TERMS,
    load=st.lists(st.sampled_from(LOAD), max_size=2, unique_by=str),
    agents=_AGENTS,
    mode=st.sampled_from(("require", "warn")),
)
def test_a_trusted_backup_pod_always_ends_where_its_snapshot_can_be_restored(
    terms: list[Json] | None, load: list[Json], agents: list[tuple[str, str]], mode: str
) -> None:
    policy = policy_from_document({"nodeAgent": {"namespace": "velero", "mode": mode}, "loadAffinity": load})
    view = view_from(*_cluster(agents))
    _, result = mutate_checked(_pod(terms), view, policy)  # the patch applies, is schema-valid, and is final
    final = required_terms(result["spec"])
    assert final is not None and terms_imply(final, SOURCE_TERMS), final
    if terms is not None and terms_imply(terms, SOURCE_TERMS) and not load:
        assert final == terms  # Velero wrote them: no second copy


@given(terms=_POD_TERMS, elsewhere=st.booleans())
def test_no_data_upload_is_read_for_a_pod_the_policy_does_not_trust_with_it(
    terms: list[Json] | None, elsewhere: bool
) -> None:
    """Elsewhere: a pod of another namespace claiming the label; else a policy that names no Velero namespace."""
    document: dict[str, Any] = {"nodeAgent": {"namespace": "velero"}} if elsewhere else {}
    view = view_from(*_cluster([]))
    pod = _pod(terms, namespace="shop" if elsewhere else "velero")
    decision, result = mutate_checked(pod, view, policy_from_document(document))
    assert not [r for r in decision.reasons if "DataUpload" in r or "pvc-6a1f0c2e" in r]
    assert required_terms(result["spec"]) == (copy.deepcopy(terms) if terms else None)
