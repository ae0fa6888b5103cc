"""Keep backup and restore pods to nodes where a Velero node-agent is Ready
(docs/placement.md#node-agents-for-backup-and-restore-pods).

A data mover on a node without a Ready node-agent waits for Velero's prepare timeout (30 minutes by default) and
fails with a generic message (vmware-tanzu/velero#7243, vmware-tanzu/velero#9453). Velero itself only checks that
its DaemonSet exists. Here, after load affinity, the pod's admissible nodes (its nodeSelector and required terms,
load affinity and volume topology included, and the taints it tolerates) are split into those with and without a
Ready node-agent, and:

- all have one: nothing to do (this is also what a second review of a restricted pod sees: no patch);
- none has one: no restriction (it would leave the pod nowhere) and a warning naming the selector and the count;
- some have none (policy `nodeAgent.mode`): `require` restricts the pod to those with one, `warn` only warns.

The restriction names nodes with `matchFields metadata.name In [node]`, which the API server accepts with exactly
one value: one term per node (crossed with the terms of the pod it matches), so a node added later is not picked
before its node-agent is up, and the scheduler's NodeAffinity PreFilter filters only the named nodes. When that is
more than `nodeAgent.maxNodeNames` requirements, the few nodes without one are excluded instead (`NotIn [node]`
requirements in every term); when that is too, nothing and a warning. The state can change within seconds, so
this is never a denial; a changed state may narrow a pod reviewed again, never widen it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules import deadline
from rules.annotations import NODE_AGENT_RESTRICTED
from rules.cluster import ClusterView
from rules.context import Context, PodTarget
from rules.coscheduling.pinning import current_terms, write_required
from rules.kube.disclosed import EVERY_LABEL
from rules.kube.feasible import Feasibility, Filters, on_labels
from rules.kube.nodeaffinity import (
    label_selector_term,
    merge_terms,
    name_requirement,
    pinned_node,
    required_terms,
    terms_key,
)
from rules.kube.nodeset import NodeSet
from rules.kube.selectors import Problem
from rules.kube.tolerations import toleration_key
from rules.loadaffinity.agents import NodeAgents
from rules.loadaffinity.entries import load_affinity_problems
from rules.memo import Memo, json_weight
from rules.messages import counted
from rules.model import Json
from rules.policy import Policy

WARN, OFF = "warn", "off"  # `require`, the default, is neither
#: The audit's finding family for backup and restore pods and entries without a node-agent.
FAMILY = "nodeAgent"
NAMED, EXCLUDED = "In", "NotIn"


def velero_namespace(policy: Policy, pod_namespace: str) -> str:
    """Where Velero's node-agents run: the policy's `nodeAgent.namespace`, else the data mover pod's own."""
    return policy.node_agent_namespace or pod_namespace


def node_agent_ready(view: ClusterView, namespace: str, node: str) -> bool | None:
    """Whether `node` runs a Ready node-agent of the Velero in `namespace`; None when none is known there at all
    (the webhook cannot tell where they run, so it claims nothing)."""
    agents = view.node_agents(namespace)
    return None if not agents.known else node in agents.ready


def restrict_to_node_agents(
    ctx: Context, target: PodTarget, scope: str, velero_tolerations: Sequence[Json] = ()
) -> None:
    """The step after load affinity for backup and restore pods; `scope` names what chose the nodes (warnings).
    `velero_tolerations`, those of Velero's ConfigMap, count as the pod's own: Velero puts them on its data movers."""
    policy = ctx.policy
    if policy.node_agent_mode == OFF:
        return
    namespace = velero_namespace(policy, target.namespace)
    agents = ctx.view.node_agents(namespace)
    if not agents.known:
        ctx.reason(f"node-agent: no Velero node-agent pod known in namespace {namespace}: not checked")
        return
    node = target.patch.get("spec", "nodeName", default=None)
    if node:
        if pinned_without_node_agent(ctx.view, policy, target.namespace, str(node)):
            ctx.warn(f"node {node} has no Ready Velero node-agent: the data mover would wait for one")
        return
    terms = current_terms(target)
    selector = dict(target.patch.get("spec", "nodeSelector", default=None) or {})
    tolerations = [*(target.patch.get("spec", "tolerations", default=None) or ()), *velero_tolerations]
    found = split(ctx.view, agents, Constraints(terms, selector, tolerations), policy.node_agent_max_names)
    if not found.admissible or not found.without:
        return
    admissible = f"{counted(found.admissible, 'node')} matching {scope}"
    counts = f"{found.without} of {admissible}"
    if not found.with_agent:
        ctx.warn(f"no Ready node-agent on any of {admissible}: the data mover would wait")
        return
    if policy.node_agent_mode == WARN:
        ctx.warn(f"no Ready node-agent on {counts}: not restricted (nodeAgent.mode warn)")
        return
    if found.restricted is None:
        ctx.warn(f"no Ready node-agent on {counts}: over nodeAgent.maxNodeNames, not restricted")
        return
    how, new_terms = found.restricted
    write_required(target, new_terms)
    mark = f"{how} {found.with_agent if how == NAMED else found.without}"
    target.patch.set("metadata", "annotations", NODE_AGENT_RESTRICTED, value=mark)
    ctx.audit("node-agent-restricted", mark)
    ctx.reason(f"node-agent: {counts} have no Ready node-agent; restricted by metadata.name {mark}")


@dataclass(frozen=True)
class Split:
    """A pod's admissible nodes split by node-agent, and the restriction for the policy's cap (when both sides
    are non-empty and it fits)."""

    admissible: int
    with_agent: int
    without: int
    restricted: tuple[str, list[Json]] | None


#: Data movers of one class and zone have the same constraints: split once per node and node-agent snapshot, so a
#: review costs a lookup whatever the node count (set operations over 10,000 names were most of a review). The
#: snapshots are held weakly: a replaced one is freed at once.
_SPLITS: Memo[Split] = Memo(256, budget=4 << 20, weigh=lambda split: json_weight(split.restricted))


@dataclass(frozen=True)
class Constraints:
    """What decides a pod's admissible nodes: its required terms, nodeSelector and tolerations (a node with a taint
    the pod does not tolerate is no place for it, as Velero's exposers exclude such nodes themselves)."""

    terms: Sequence[Mapping[str, Any]] | None
    selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]

    def key(self) -> Hashable:
        return (
            None if self.terms is None else terms_key(self.terms),
            tuple(sorted(self.selector.items())),
            tuple(sorted({toleration_key(t) for t in self.tolerations}, key=repr)),
        )


def split(view: ClusterView, agents: NodeAgents, constraints: Constraints, cap: int) -> Split:
    nodes = view.node_set()

    def compute() -> Split:
        admissible = admissible_nodes(nodes, constraints)
        with_agent, without = admissible & agents.ready, admissible - agents.ready
        restricted = restriction(nodes, constraints.terms, with_agent, without, cap) if with_agent and without else None
        return Split(len(admissible), len(with_agent), len(without), restricted)

    return _SPLITS.by_snapshot((nodes, agents), (constraints.key(), cap), compute)


def pinned_without_node_agent(view: ClusterView, policy: Policy, namespace: str, node: str) -> bool:
    """Whether a backup or restore pod of `namespace` on, or pinned to, `node` would wait there for a node-agent: the
    check is on, node-agents of its Velero are known, and none is Ready on that node. The one test behind the
    warnings of admission and the audit's finding and cause."""
    if not node or policy.node_agent_mode == OFF:
        return False
    return node_agent_ready(view, velero_namespace(policy, namespace), node) is False


def warn_selected_node(ctx: Context, target: PodTarget, node: str) -> None:
    """A WaitForFirstConsumer restore pinned to the node its claim selected: a warning if no node-agent is there
    (the volume is provisioned on that node, so no other node would do)."""
    if pinned_without_node_agent(ctx.view, ctx.policy, target.namespace, node):
        ctx.warn(f"restore pinned to node {node}, selected for its claim, which has no Ready Velero node-agent")


def admissible_nodes(nodes: NodeSet, constraints: Constraints) -> frozenset[str]:
    """The known nodes a pod with these constraints may be scheduled on: its terms and nodeSelector evaluated
    against every node at once, then the taints of only the nodes they admit."""
    return Feasibility(
        nodes,
        _TAINTED,
        selector=constraints.selector,
        terms=constraints.terms,
        tolerations=constraints.tolerations,
        key=("admissible", constraints.key()),
    ).names()


#: A data mover's admissible nodes: Velero's exposers leave out the nodes whose taints it does not tolerate, and
#: not cordoned ones (the scheduler does). Only the operator reads the answer: on every label.
_TAINTED = Filters(taints=True, cordon=False, volumes=False, labels=EVERY_LABEL)
#: A node question on labels alone (the terms the split writes, the operator's entries).
_LABELS = on_labels(EVERY_LABEL, volumes=False)


def restriction(
    nodes: NodeSet,
    terms: Sequence[Mapping[str, Any]] | None,
    with_agent: frozenset[str],
    without: frozenset[str],
    cap: int,
) -> tuple[str, list[Json]] | None:
    """(how, terms): the nodes with a node-agent named while that fits under `cap`, else the others excluded.

    A named node is crossed only with the pod's terms it matches: the others could never hold on it. The nodes
    come from the snapshot the split was made on: no cluster lookup in the admission path.
    """
    base = [dict(term) for term in terms] if terms is not None else None
    if len(with_agent) <= cap:  # each named node makes at least one term: past the cap, do not even try
        named = _named(nodes, base, with_agent, cap)
        if named is not None:
            return NAMED, named
    if len(without) * len(base or [{}]) > cap:
        return None
    exclude = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [n]} for n in sorted(without)]}
    return EXCLUDED, [merge_terms(term, exclude) for term in base] if base is not None else [exclude]


def _named(nodes: NodeSet, base: list[Json] | None, with_agent: frozenset[str], cap: int) -> list[Json] | None:
    """Each node of `with_agent` pinned by name, crossed with the terms of `base` it matches, by node name; None
    past `cap` terms. Each term is evaluated once against every node and visits only the nodes it matches, so the
    cost is the terms plus what is written, never terms × nodes."""
    pins = {name: {"matchFields": [name_requirement(name)]} for name in sorted(with_agent)}
    if base is None:
        return list(pins.values()) if len(pins) <= cap else None
    within = nodes.mask_of(with_agent)
    matched: dict[str, list[int]] = {}
    written = 0
    for i, term in enumerate(base):
        deadline.check()
        names = nodes.names(Feasibility(nodes, _LABELS, terms=[term]).mask & within)
        written += len(names)
        if written > cap:
            return None
        for name in names:
            matched.setdefault(name, []).append(i)
    return [merge_terms(base[i], pin) for name, pin in pins.items() for i in matched.get(name, ())]


@dataclass(frozen=True)
class EntryNodes:
    """One loadAffinity entry's matching nodes, and how many of them run a Ready node-agent."""

    index: int
    storage_class: str
    matching: int
    with_agent: int

    @property
    def without(self) -> int:
        return self.matching - self.with_agent


def entry_nodes(entries: Iterable[Any], view: ClusterView, namespace: str) -> list[EntryNodes]:
    """Per valid entry, its matching known nodes and those with a Ready node-agent in `namespace`: each selector
    parsed once and evaluated against every node at once, the counts read off bit sets."""
    nodes = view.node_set()
    ready = nodes.mask_of(view.node_agents(namespace).ready)
    out = []
    for i, entry in enumerate(entries):
        deadline.check()
        if load_affinity_problems([entry], "")[0]:
            continue  # reported as errors elsewhere
        matching = Feasibility(nodes, _LABELS, terms=[label_selector_term(entry["nodeSelector"])]).mask
        storage_class = str(entry.get("storageClass") or "")
        out.append(EntryNodes(i, storage_class, matching.bit_count(), (matching & ready).bit_count()))
    return out


def entry_node_agent_problems(
    entries: Sequence[Any], path: str, view: ClusterView, policy: Policy, namespace: str
) -> list[Problem]:
    """A warning for each entry whose matching nodes all lack a Ready node-agent: its data movers would wait.

    Nothing when the check is off or no node-agent is known in `namespace` (the webhook cannot tell where they run),
    and nothing for an entry that matches no node (the node check already says so).
    """
    if policy.node_agent_mode == OFF or not view.node_agents(namespace).known:
        return []
    return [
        (
            f"{path}[{found.index}].nodeSelector",
            f"no Ready node-agent on any of the {counted(found.matching, 'node')} it matches "
            f"(StorageClass {found.storage_class or '*'}): its data movers would wait",
        )
        for found in entry_nodes(entries, view, namespace)
        if found.matching and not found.with_agent
    ]


def pending_pod_problem(view: ClusterView, policy: Policy, namespace: str, spec: Mapping[str, Any]) -> Problem | None:
    """A Pending backup or restore pod on, or pinned to (nodeName, or `metadata.name In [node]` in every term), a
    node without a Ready node-agent: it waits there for the prepare timeout. `spec` is the pod's final spec."""
    node = str(spec.get("nodeName") or "") or pinned_node(required_terms(spec)) or ""
    if not pinned_without_node_agent(view, policy, namespace, node):
        return None
    where = "spec.nodeName" if spec.get("nodeName") else "spec.affinity"
    return where, f"Pending on node {node}, which has no Ready Velero node-agent: the data mover waits for one"
