"""What rules take and give: the subject under review and the decision about it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rules.quoting import ShownText

Json = dict[str, Any]


def namespaced_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an object, "" for what it lacks: how every store and list here keys one."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


#: The prefix of every annotation this project reads or writes.
PREFIX = "storage-affinity.io/"


class Severity(StrEnum):
    DENY = "deny"
    WARN = "warn"


@dataclass(frozen=True)
class Finding(ShownText):
    """One validation result: where, what, and how bad before enforcement is applied. Its field and message are
    escaped when it is made (rules/quoting.py `ShownText`): they quote the object.

    `family` names the policy switch (`validation.<family>.enforcement`) that can turn a denial into a warning.
    """

    field: str
    message: str
    family: str
    severity: Severity = Severity.DENY

    def text(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass(frozen=True)
class Subject:
    """The object under review, as the API server describes it (transport-independent)."""

    kind: str
    operation: str
    namespace: str
    name: str
    obj: Json | None
    old: Json | None = None
    dry_run: bool = False
    group: str = ""
    #: The requester's user name (`userInfo.username`); None where no API server said who asks (`review` of a
    #: bare manifest, the audit), so only namespace trust applies.
    user: str | None = None


@dataclass
class Decision(ShownText):
    """What the pipeline concluded: JSON Patch operations, warnings, findings and short reasons.

    `reasons` are one-line explanations (for `review -o json` and the audit log); `audit` holds the audit
    annotations (keys without '/', the API server prefixes them with the webhook's name). Every text in it is
    escaped when it is made: `failure` when set, findings by their type, warnings, reasons and audit values by
    the Context that rules write them through.
    """

    patch: list[Json] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    audit: dict[str, str] = field(default_factory=dict)
    failure: str | None = None
    denied_by_failure: bool = False
    rule_errors: list[str] = field(default_factory=list)  # rules that raised: a bug, counted by the transport
    over_budget: str | None = None  # the review limit the object passed (rules/budget.py): no rule went further

    @property
    def denials(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.DENY]

    @property
    def allowed(self) -> bool:
        return not self.denied_by_failure and not self.denials
