"""The types a rule works with: the pod target it may patch and the context it reports through."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rules.cluster import ClusterView
from rules.kube.volumes import ClaimVolume, claim_volumes
from rules.model import Decision, Finding, Json, Severity, Subject
from rules.patch import PatchBuilder
from rules.policy import Policy
from rules.quoting import escaped
from rules.roles import RoleDecision

T = TypeVar("T")


class BadObject(ValueError):
    """The object's fields have the wrong types; `problems` name each field of `source` (the request's `object`
    or `oldObject`), escaped when made as every finding is."""

    def __init__(self, problems: list[tuple[str, str]], source: str = "object") -> None:
        self.problems = [(escaped(path), escaped(message)) for path, message in problems]
        self.source = source
        super().__init__(self.text("" if source == "object" else source))

    def text(self, root: str) -> str:
        """Every problem, its path under `root` ("request.object", or nothing for a bare manifest)."""
        return "; ".join(f"{'.'.join(filter(None, (root, path)))}: {message}" for path, message in self.problems)


@dataclass
class PodTarget:
    """A Pod, or the pod template of a workload (a Job, a Deployment...), with a patch builder rooted at it."""

    kind: str
    namespace: str
    metadata: Json
    spec: Json
    patch: PatchBuilder
    role: RoleDecision
    base: str = ""  # field path prefix: "" for a Pod, "spec.template" for a Job, "spec.jobTemplate.spec.template"...
    _volumes: list[ClaimVolume] | None = field(default=None, repr=False)
    #: What several rules of one review look up about the pod, looked up once (rules/datasource/exposer.py).
    shared: dict[str, Any] = field(default_factory=dict, repr=False)

    def volumes(self, view: ClusterView) -> list[ClaimVolume]:
        """The pod's claim volumes, looked up once per review: several rules classify them (rules never patch
        `spec.volumes`, so the answer cannot change during a review)."""
        if self._volumes is None:
            self._volumes = claim_volumes(view, self.namespace, self.metadata, self.spec)
        return self._volumes

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or self.metadata.get("generateName") or "")

    @property
    def is_template(self) -> bool:
        return self.kind != "Pod"

    def field(self, path: str) -> str:
        return f"{self.base}.{path}" if self.base else path


@dataclass
class Context:
    """What a rule is given besides its target: the subject, the cluster view and the policy, and where it
    reports. Rules never build a Decision themselves, so findings, warnings and reasons are kept uniformly: each
    is escaped here, when it is made (rules/quoting.py), as every message quoting the object must be."""

    subject: Subject
    view: ClusterView
    policy: Policy
    own_namespace: str = ""
    decision: Decision = field(default_factory=Decision)
    _warned: set[str] = field(default_factory=set, repr=False)
    _derived: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    def warn(self, message: str) -> None:
        message = escaped(message)
        if message not in self._warned:  # a set: a list lookup made 50,000 warnings take 20 s
            self._warned.add(message)
            self.decision.warnings.append(message)

    def once(self, key: Hashable, compute: Callable[[], T]) -> T:
        """What several rules of this review derive from the same input (`key` says which), computed once: it goes
        with the review, so unlike a memo it may hold the request's own data."""
        if key not in self._derived:
            self._derived[key] = compute()
        result: T = self._derived[key]
        return result

    def reason(self, message: str) -> None:
        self.decision.reasons.append(escaped(message))

    def audit(self, key: str, value: str) -> None:
        self.decision.audit[key] = escaped(value)

    def report(self, path: str, message: str, family: str, severity: Severity = Severity.DENY) -> None:
        """A finding about `path`; the pipeline applies enforcement to it afterwards."""
        self.decision.findings.append(Finding(path, message, family, severity))
