"""What rules take and give: the subject under review and the decision about it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from rules.quoting import EscapedText, ShownText

if TYPE_CHECKING:
    from rules.roles import RoleDecision

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


@dataclass
class Subject:
    """The object under review, as the API server describes it (transport-independent).

    Its fields are `Final` (the type checker refuses any assignment) rather than the dataclass frozen: a frozen
    one sets each field through `object.__setattr__`, which made building it a fifth of decoding a review."""

    kind: Final[str]
    operation: Final[str]
    namespace: Final[str]
    name: Final[str]
    obj: Final[Json | None]
    old: Final[Json | None] = None
    dry_run: Final[bool] = False
    group: Final[str] = ""
    #: The requester's user name (`userInfo.username`); None where no API server said who asks (`review` of a
    #: bare manifest, the audit), so only namespace trust applies.
    user: Final[str | None] = None


@dataclass
class Decision:
    """What the pipeline concluded: JSON Patch operations, warnings, findings and short reasons.

    `reasons` are one-line explanations (for `review -o json` and the audit log); `audit` holds the audit
    annotations (keys without '/', the API server prefixes them with the webhook's name). Every text in it is
    escaped when it is made: `failure` and `over_budget` when set (`EscapedText`), findings by their type,
    warnings, reasons and audit values by the Context that rules write them through.
    """

    patch: list[Json] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    audit: dict[str, str] = field(default_factory=dict)
    #: Why cluster state could not be read (`onLookupFailure`): `str | None`, escaped when set. The call makes a
    #: descriptor, not a default every Decision would share (the default is None).
    failure: EscapedText = EscapedText()  # noqa: RUF009
    denied_by_failure: bool = False
    rule_errors: list[str] = field(default_factory=list)  # rules that raised: a bug, counted by the transport
    #: The review limit the object passed (rules/budget.py), so no rule went further: `str | None`, escaped when set.
    over_budget: EscapedText = EscapedText()  # noqa: RUF009
    #: The role the mutation placed the pod under (None: not a pod's mutation): what rules/outcomes.py counts by.
    role: RoleDecision | None = None

    @property
    def denials(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.DENY]

    @property
    def allowed(self) -> bool:
        """No failure denies and no finding does (a loop, not `denials`: every answer asks, and most have none)."""
        if self.denied_by_failure:
            return False
        for found in self.findings:  # noqa: SIM110
            if found.severity is Severity.DENY:
                return False
        return True
