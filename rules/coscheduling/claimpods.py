"""The live pods of one claim, read and sorted once (`ClaimPods`), and what one pod under review sees of them
(`Hold`): the facts co-scheduling and the stuck-pod causes read about who else mounts a claim."""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, overload

from rules import deadline
from rules.cluster import ClusterView
from rules.context import PodTarget
from rules.kube.volumes import ClaimVolume
from rules.memo import Memo
from rules.model import Json
from rules.policy import Policy
from rules.roles import classify

FINISHED = ("Succeeded", "Failed")
_LAST = datetime.max.replace(tzinfo=UTC)


class ClaimPods:
    """The live pods that mount one claim (not finished, not terminating), sorted once into holders and users:
    what every mover of the claim and every audited pod on it reads again, less the pod under review: each answer
    then skips only that pod, whatever the claim's size. What only some answers need (pods by uid and name, holders
    by node) is built on first use, so a single review pays no more than one walk. Read-only once built."""

    __slots__ = (
        "_by_node",
        "_live",
        "_movers",
        "_named",
        "_nodes",
        "_pending",
        "_running",
        "_running_users",
        "holders",
        "users",
    )

    def __init__(self, pods: Iterable[Json], namespace: str, policy: Policy) -> None:
        self.users: list[Json] = []  # not movers
        self.holders: list[Json] = []  # Running or on a node, oldest first
        self._live: list[Json] = []
        self._movers: set[int] = set()
        self._running: list[Json] = []  # users Running on a node: anchors, by preference
        self._pending: list[Json] = []  # users Pending on a node
        self._running_users: list[Json] = []  # users Running, with a node or not
        self._nodes: dict[str, int] = {}  # how many users run on each node
        self._named: dict[str, list[Json]] | None = None
        self._by_node: tuple[dict[str, list[Json]], dict[int, int]] | None = None
        ages: dict[int, tuple[bool, datetime, str]] = {}  # each holder's age, read once
        for pod in pods:
            deadline.check()
            metadata = pod.get("metadata") or {}
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if phase in FINISHED or metadata.get("deletionTimestamp"):
                continue
            self._live.append(pod)
            node = (pod.get("spec") or {}).get("nodeName")
            if phase == "Running" or node:
                self.holders.append(pod)
                ages[id(pod)] = age_key(pod)
            if _is_mover(metadata, namespace, policy):
                self._movers.add(id(pod))
                continue
            self.users.append(pod)
            if phase == "Running":
                self._running_users.append(pod)
                if node:
                    self._running.append(pod)
                    self._nodes[str(node)] = self._nodes.get(str(node), 0) + 1
            elif node and phase == "Pending":
                self._pending.append(pod)
        # Oldest first; stable, so pods of one age keep the index's order, as `min` picks them. Every list sorted
        # here holds holders only: a Running user, or a user on a node, is one.
        for holders in (self.holders, self._running_users, self._running, self._pending):
            if len(holders) > 1:
                holders.sort(key=lambda pod: ages[id(pod)])

    def hold(self, volume: ClaimVolume, uid: object, name: object) -> Hold:
        """The claim as the pod with this uid or name sees it: every pod but itself."""
        own = self._own(uid, name)
        mine = frozenset(map(id, own))
        anchor = _first(self._running, mine) or _first(self._pending, mine)
        emptied = sum(1 for node, count in self._own_nodes(own).items() if self._nodes[node] == count)
        split = len(self._nodes) - emptied > 1  # counted, not listed: a claim's users may run on every node
        return Hold(volume, self, tuple(own), mine, anchor, split, node_of(anchor) if anchor else None)

    def _own_nodes(self, own: Sequence[Json]) -> dict[str, int]:
        """How many of the pods under review are users Running on each node (what the node counts hold)."""
        counts: dict[str, int] = {}
        for pod in own:
            if self._user(pod, "on a node"):
                counts[str(node_of(pod))] = counts.get(str(node_of(pod)), 0) + 1
        return counts

    def running_nodes(self, own: Sequence[Json]) -> tuple[str, ...]:
        """The distinct nodes of Running users but the pods under review, sorted (a walk of the nodes)."""
        less = self._own_nodes(own)
        return tuple(sorted(node for node, count in self._nodes.items() if count > less.get(node, 0)))

    def _own(self, uid: object, name: object) -> list[Json]:
        """The live pods with this uid or name (one in the API; a manifest may repeat either). The first pod asks
        by a walk, as one review does; from the second, an index of the pods answers."""
        if self._named is None:
            self._named = {}
            return [pod for pod in self._live if _is_named(pod.get("metadata") or {}, uid, name)]
        if not self._named:
            for pod in self._live:
                metadata = pod.get("metadata") or {}
                for key in {f"u{metadata.get('uid') or ''}", f"n{metadata.get('name') or ''}"} - {"u", "n"}:
                    self._named.setdefault(key, []).append(pod)
        found = {id(pod): pod for key in (f"u{uid or ''}", f"n{name or ''}") for pod in self._named.get(key, ())}
        return list(found.values())

    def _user(self, pod: Json, running: str | None = None) -> bool:
        """Whether one of the claim's live pods is a user (not a mover), Running with `running="Running"`, and
        on a node as well with `running="on a node"` (what the node counts hold)."""
        if id(pod) in self._movers or (running and phase_of(pod) != "Running"):
            return False
        return running != "on a node" or node_of(pod) is not None

    def oldest(self, mine: frozenset[int], away_from: str | None = None) -> Json | None:
        """The oldest holder but the pod under review; with `away_from`, the oldest on another node (not none).
        Nodes are tried in the order of their oldest holder, so the walk ends at the first node whose oldest is
        not `mine`, after at most one more node per pod of `mine`."""
        if away_from is None:
            return _first(self.holders, mine)
        if self._by_node is None:
            rank = {id(pod): place for place, pod in enumerate(self.holders)}  # ties keep the index's order
            on_node: dict[str, list[Json]] = {}
            for pod in self.holders:
                if (node := node_of(pod)) is not None:
                    on_node.setdefault(node, []).append(pod)
            self._by_node = (on_node, rank)
        on_node, rank = self._by_node
        best: Json | None = None
        for node, pods in on_node.items():
            if node == away_from:
                continue
            if best is not None and rank[id(pods[0])] >= rank[id(best)]:
                break
            found = _first(pods, mine)
            if found is not None and (best is None or rank[id(found)] < rank[id(best)]):
                best = found
        return best

    def running_users(self, own: Sequence[Json]) -> Sequence[Json]:
        """The Running users by age, but the pod under review (`own`)."""
        return _Less(self._running_users, frozenset(id(pod) for pod in own if self._user(pod, "Running")))


class _Less(Sequence[Json]):
    """A list less a few of its items (the pod under review), read from the front as `listed` reads it: the
    first items and the length, whatever the list's length."""

    def __init__(self, items: list[Json], less: frozenset[int]) -> None:
        self._items = items
        self._less = less  # ids of items of `items`

    def __len__(self) -> int:
        return len(self._items) - len(self._less)

    @overload
    def __getitem__(self, index: int) -> Json: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Json]: ...

    def __getitem__(self, index: int | slice) -> Json | Sequence[Json]:
        if isinstance(index, slice):
            if min(index.start or 0, 0 if index.stop is None else index.stop) < 0:
                return list(self)[index]
            return list(itertools.islice(self, index.start, index.stop, index.step))
        position = index + len(self) if index < 0 else index
        for item in itertools.islice(self, max(position, 0), None):
            if position >= 0:
                return item
        raise IndexError(index)

    def __iter__(self) -> Iterator[Json]:
        return (item for item in self._items if id(item) not in self._less)


def _is_named(metadata: Mapping[str, Any], uid: object, name: object) -> bool:
    return bool((uid and metadata.get("uid") == uid) or (name and metadata.get("name") == name))


def _first(pods: list[Json], mine: frozenset[int] | set[int]) -> Json | None:
    for pod in pods:
        if id(pod) not in mine:
            return pod
    return None


@dataclass
class Hold:
    """One owned or single-pod claim of the mover and the other pods that mount it (the claim's `pods`, less the
    pod under review: `mine`). Read-only by convention, not frozen: a frozen dataclass sets each field through
    `object.__setattr__`, which made building one (for every claim of every mover review) about four times
    dearer."""

    volume: ClaimVolume
    pods: ClaimPods
    own: tuple[Json, ...]  # the pod under review among `pods`: none for a template, one in the API
    mine: frozenset[int]  # their ids
    anchor: Json | None
    split: bool  # Running users on more than one node
    node: str | None  # the anchor's node (every anchor has one)

    @property
    def claim(self) -> str:
        return self.volume.claim or ""

    @property
    def running_nodes(self) -> tuple[str, ...]:
        """Distinct nodes of Running users, sorted: a walk of the claim's nodes, for messages and tests."""
        return self.pods.running_nodes(self.own)

    def oldest_holder(self, away_from: str | None = None) -> Json | None:
        """The oldest other holder; with `away_from`, the oldest on a node other than that one."""
        return self.pods.oldest(self.mine, away_from)


def name_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def node_of(pod: Mapping[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def phase_of(pod: Mapping[str, Any]) -> str:
    """A pod just created has no status yet: it is Pending."""
    return str((pod.get("status") or {}).get("phase") or "Pending")


def age_key(pod: Mapping[str, Any]) -> tuple[bool, datetime, str]:
    """Oldest first, then by name; pods without a readable creationTimestamp sort last."""
    stamp = (pod.get("metadata") or {}).get("creationTimestamp")
    when = _parsed(str(stamp)) if stamp else None
    return (when is None, when or _LAST, name_of(pod))


def parse_time(stamp: object) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339) as an aware datetime; None when missing or unreadable."""
    return _parsed(str(stamp)) if stamp else None


@functools.lru_cache(maxsize=4096)  # a claim's holders are compared again for every mover of the claim
def _parsed(stamp: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


#: Within `claims_read_once`: each claim's pods as first read, by (view, policy, namespace, claim).
_READ_ONCE: ContextVar[dict[tuple[int, int, str, str], ClaimPods] | None] = ContextVar("claims_read_once", default=None)


@contextmanager
def claims_read_once() -> Iterator[None]:
    """Read and sort each claim's pods once for everything reviewed within: an audit reviews every pod of a claim
    that N pods share, and each review would otherwise walk all N (N² for the claim). The pods are those of the
    first review that asks; a pod that comes or goes later in the run counts from the next run."""
    token = _READ_ONCE.set({})
    try:
        yield
    finally:
        _READ_ONCE.reset(token)


def claim_hold(view: ClusterView, policy: Policy, target: PodTarget, volume: ClaimVolume) -> Hold:
    """The pods that mount the claim, sorted into users and holders, with the anchor. Users: live, not the pod
    under review, not a mover (docs/design.md#4-co-scheduling-movers); holders: any live other pod that is
    Running or has a node. The anchor is a Running user with a node; if none, a Pending user with a node; oldest
    first, then by name."""
    claim = volume.claim or ""
    shared = _READ_ONCE.get()
    key = (id(view), id(policy), target.namespace, claim)  # view and policy outlive the scope
    pods = shared.get(key) if shared is not None else None
    if pods is None:
        pods = ClaimPods(view.pods_using_claim(target.namespace, claim), target.namespace, policy)
        if shared is not None:
            shared[key] = pods
    name = None if target.is_template else target.metadata.get("name")
    return pods.hold(volume, target.metadata.get("uid"), name)


#: The memo holds each pod's metadata (its id is the key) after the index lets it go, weighed as an entry: only
#: metadata whose labels are at most this many, of at most this many characters in all, is kept, so 4,096 deleted
#: pods hold a few MB whatever labels a tenant gives them. Pods carry a handful of short ones.
_MEMO_LABELS, _MEMO_LABEL_CHARACTERS = 16, 1024


def _past_the_caps(found: tuple[bool, bool]) -> int:
    """An entry's weight beyond its own: none within the caps; past them, more than the whole memo, which then
    computes the role and keeps nothing (weighed on a miss only, so a hit costs what it did)."""
    return sys.maxsize if found[1] else 0


#: The role of a pod of the index, which the index replaces rather than changes: asked again for every mover of
#: the claim that pod holds. A value is (whether it is a mover, whether its labels are past the caps).
_ROLES: Memo[tuple[bool, bool]] = Memo(4096, weigh=_past_the_caps)


def _is_mover(metadata: Mapping[str, Any], namespace: str, policy: Policy) -> bool:
    def compute() -> tuple[bool, bool]:
        labels = metadata.get("labels") or {}
        past = len(labels) > _MEMO_LABELS or sum(len(k) + len(str(v)) for k, v in labels.items()) > (
            _MEMO_LABEL_CHARACTERS
        )
        return classify(metadata, namespace, policy).role == "mover", past

    return _ROLES.by_identity((metadata, policy), namespace, compute)[0]
