"""Policy hot reload: what the policy ConfigMap watch and the Velero ConfigMap watch do with what they see.

A change lands only when it is valid; otherwise the last good version stays in effect and the problems show in
`/readyz`, the log and the `storage_affinity_policy_errors` gauge. Deleting the policy ConfigMap (or removing its
label) reverts to the base policy — the `--policy` file, else the embedded default — so what runs is always
something an operator can read. A worker that starts while the ConfigMap is invalid applies what its siblings
have in effect (recorded in the replica's file, `webhook.policy.lastgood`); with none, it has no policy and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rules.kube.selectors import Problem
from rules.loadaffinity.velero import config_problems
from rules.model import Json, namespaced_name
from rules.policy import POLICY_LABEL, Policy, PolicyError, is_policy_config_map, policy_from_config_map
from webhook import metrics
from webhook.policy.lastgood import ReplicaPolicy
from webhook.runtime import Runtime

log = logging.getLogger(__name__)


class ConfigMapStore(Protocol):
    """Where the Velero ConfigMap's last good version is kept (the cluster index)."""

    def apply(self, obj: Json) -> None: ...

    def remove(self, obj: Json) -> None: ...


class ProblemBoard:
    """The refused changes of every source, published together (each source's change replaces its own entry)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._errors: dict[str, list[Problem]] = {}

    def set(self, source: str, problems: list[Problem], *, republish: bool = False) -> None:
        """Record a source's problems; `republish` after `Runtime.set_policy`, which clears what /readyz shows."""
        if self._errors.get(source, []) == problems and not republish:
            return
        if problems:
            self._errors[source] = problems
        else:
            self._errors.pop(source, None)
        self.publish()

    def publish(self) -> None:
        problems = [(f"{source} {path}".rstrip(), m) for source, ps in self._errors.items() for path, m in ps]
        if problems:
            self.runtime.reject_policy(PolicyError(problems, "policy reload"))
        else:
            self.runtime.policy_problems = []
        metrics.POLICY_ERRORS.set(len(problems))


class PolicyConfigMapSink:
    """Feeds the policy ConfigMap (watched by name, and labelled `storage-affinity.io/policy=true`) to the runtime."""

    def __init__(
        self,
        runtime: Runtime,
        board: ProblemBoard,
        *,
        namespace: str,
        name: str,
        base: tuple[Policy, str],
        on_policy: Callable[[Policy], None] = lambda policy: None,
        replica: ReplicaPolicy | None = None,
    ) -> None:
        self.runtime, self.board, self.namespace, self.name = runtime, board, namespace, name
        self.base = base
        self.on_policy = on_policy
        self.replica = replica
        self.source = f"ConfigMap {namespace}/{name}"
        self._seen: Any = None  # the data last acted on, so a re-list of the same ConfigMap is a no-op

    def adopt(self) -> None:
        """Before the first list: what the replica's other workers have in effect, else no policy yet (never the
        base policy, which applies only once the ConfigMap is known to be absent)."""
        if not self._adopt_kept():
            self.runtime.lack_policy(f"{self.source} not read yet")

    def _adopt_kept(self) -> bool:
        """Apply what a sibling recorded as in effect; False when nothing (usable) is recorded."""
        kept = self.replica.load() if self.replica is not None else None
        if kept is None:
            return False
        if kept.data is None:
            policy, source = self.base
        else:
            try:
                policy, source = policy_from_config_map({"data": kept.data}, self.source), self.source
            except PolicyError as error:  # written by a worker that accepted it: only a damaged file gets here
                log.error("ignoring the recorded policy: %s", error)
                return False
        self.runtime.set_policy(policy, source)
        log.info("applying the policy in effect in this replica (%s)", source)
        return True

    def replace(self, objects: Iterable[Json]) -> None:
        mine = [obj for obj in objects if namespaced_name(obj) == (self.namespace, self.name)]
        if mine:
            self.apply(mine[0])
        else:
            self._revert("absent")

    def apply(self, obj: Json) -> None:
        if namespaced_name(obj) != (self.namespace, self.name):
            return
        if not is_policy_config_map(obj):
            self._revert(f"label {POLICY_LABEL}=true removed")
            return
        data = obj.get("data")
        if self._seen == ("data", data):
            return
        self._seen = ("data", data)
        try:
            policy = policy_from_config_map(obj, self.source)
        except PolicyError as error:
            # A sibling may have put a policy in effect (and recorded it) after this worker started.
            if self.runtime.policy_missing is not None and not self._adopt_kept():
                self.runtime.lack_policy(f"{self.source} is invalid and this replica has had no valid policy from it")
            self.board.set(self.source, error.problems)
            return
        self.runtime.set_policy(policy, self.source)
        log.info("policy loaded from %s", self.source)
        if self.replica is not None:
            self.replica.save(dict(data or {}))
        self.board.set(self.source, [], republish=True)
        self.on_policy(policy)

    def remove(self, obj: Json) -> None:
        if namespaced_name(obj) == (self.namespace, self.name):
            self._revert("deleted")

    def _revert(self, why: str) -> None:
        if self._seen == ("base", None):
            return
        self._seen = ("base", None)
        policy, source = self.base
        self.runtime.set_policy(policy, source)
        log.warning("%s %s: using the base policy (%s)", self.source, why, source)
        if self.replica is not None:
            self.replica.save(None)
        self.board.set(self.source, [], republish=True)
        self.on_policy(policy)


class VeleroConfigMapSink:
    """Keeps the last good Velero node-agent ConfigMap in the index; refuses an invalid change."""

    def __init__(self, index: ConfigMapStore, board: ProblemBoard, namespace: str, name: str) -> None:
        self.index, self.board, self.namespace, self.name = index, board, namespace, name
        self.source = f"ConfigMap {namespace}/{name}"

    def replace(self, objects: Iterable[Json]) -> None:
        objects = list(objects)
        mine = [obj for obj in objects if namespaced_name(obj) == (self.namespace, self.name)]
        if mine:
            self.apply(mine[0])
        else:
            self.remove({"metadata": {"namespace": self.namespace, "name": self.name}})

    def apply(self, obj: Json) -> None:
        if namespaced_name(obj) != (self.namespace, self.name):
            return
        problems, _unknown = config_problems(obj)  # unknown fields: Velero drops them, so do we
        self.board.set(self.source, problems)
        if not problems:
            self.index.apply({**obj, "kind": "ConfigMap"})

    def remove(self, obj: Json) -> None:
        if namespaced_name(obj) == (self.namespace, self.name):
            self.index.remove({**obj, "kind": "ConfigMap"})
            self.board.set(self.source, [])

    def forget(self) -> None:
        """The policy stopped naming this ConfigMap."""
        self.remove({"metadata": {"namespace": self.namespace, "name": self.name}})
