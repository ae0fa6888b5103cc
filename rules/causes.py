"""Why a storage pod is stuck: one cause per pod, with a stable code and a one-line remedy.

The audit names the most specific cause it can prove from cluster state; the code is what reports, metrics and
scripts key on, so codes never change meaning once shipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.model import Json


@dataclass(frozen=True)
class StuckCause:
    """`code` is stable (CamelCase, e.g. `MultiAttach`); `message` says what holds the pod, naming objects and
    nodes; `remedy` says what an operator does about it, in one line."""

    code: str
    message: str
    remedy: str

    def as_json(self) -> Json:
        return {"code": self.code, "message": self.message, "remedy": self.remedy}
