"""The one denial message of a decision, as the API server shows it to the user (and `review` prints it).

Every finding goes into one message, numbered, each with its field path, up to a size bound after which the
rest are counted: hostile input (100,000 bad list items, a 1 MB key) must not make a megabyte answer. Input
quoted in it was escaped when its finding or failure was made (rules/quoting.py `ShownText`), so the message
composes escaped parts and escapes nothing itself.
"""

from __future__ import annotations

from rules.model import Decision
from rules.quoting import clip

PREFIX = "storage-affinity-webhook denied"
FIELD_LIMIT = 400  # a valid annotation key is at most 317 characters
FINDING_TEXT_LIMIT = 1000
DENIAL_MESSAGE_LIMIT = 8192


def denial_message(decision: Decision) -> str:
    """Why the decision denies: the unreadable state (policy `onLookupFailure: deny`) or every finding."""
    if decision.denied_by_failure:
        return f"{PREFIX}: {decision.failure} (policy onLookupFailure: deny)"
    findings = decision.denials
    count = len(findings)
    message = f"{PREFIX}: {counted(count, 'problem')}: "
    for i, found in enumerate(findings, 1):
        text = f"{clip(found.field, FIELD_LIMIT)}: {found.message}" if found.field else found.message
        item = f"({i}) {clip(text, FINDING_TEXT_LIMIT)}"
        if i > 1 and len(message) + len(item) > DENIAL_MESSAGE_LIMIT:
            return message + f"; and {count - i + 1} more (fix these first)"
        message += item if i == 1 else "; " + item
    return message


def counted(count: int, noun: str) -> str:
    """`1 finding`, `2 findings`, `2 StorageClasses`: the count and its noun agreeing in number."""
    return f"{count} {noun if count == 1 else plural(noun)}"


def plural(noun: str) -> str:
    """The English plural of a noun or a Kubernetes kind (its last word): `StorageClasses`, `entries`, `Pods`."""
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"
