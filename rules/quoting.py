"""A user's text inside our messages, clipped and escaped: a message names the problem, it never carries a huge
input or raw control characters back.

Why: a 1 MB annotation value quoted in a denial made a 1 MB `status.message`, which the API server returns to
the client and records in events and audit logs; and kube-apiserver drops a warning with a control character in
it, while bidirectional-text controls (U+202E) can make a message read differently from what it says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

ECHO_LIMIT = 100
KEY_LIMIT = 60
#: Items a message lists (pods, nodes, volumes, claims) before it counts the rest: a claim mounted by 200 pods, or
#: a pod of 1,000 volumes, must not make a message of them all.
LISTED = 3
_T = TypeVar("_T")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH_PART = re.compile(r"\[([^\]]*)\]|\.?([^.\[]+)")


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text`, or its first `limit` characters and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"


def listed(items: Sequence[_T], show: Callable[[_T], str] = str, sep: str = ", ", limit: int = LISTED) -> str:
    """The first `limit` items as `show` writes them, joined by `sep`, then `and N more`: `a, b, c, and 2 more`.
    Only the items shown are written, so a message costs the same whatever the list's length."""
    shown = sep.join([show(item) for item in items[:limit]])
    return shown if len(items) <= limit else f"{shown}{sep}and {len(items) - limit:,} more"


def one_of(allowed: Iterable[object]) -> str:
    """The values a field may take, as a message lists them: `"", NoSchedule, NoExecute`; the empty string is
    shown as `""`, else it would read as nothing between two commas."""
    return ", ".join('""' if value == "" else str(value) for value in allowed)


def escaped(text: str) -> str:
    """`text` with every character Python does not consider printable (C0 and C1 controls, DEL, format characters
    such as the bidi marks, overrides and isolates, lone surrogates, separators other than the space) written as
    its escape: `\\x00`, `\\x1b`, `\\u202e`. The result is printable ASCII wherever it changed, so escaping
    twice changes nothing: a message escaped when it is made goes through any later escaping unchanged."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class ShownText:
    """A record people read (a finding, a stuck pod's cause, an audited object): every text field is escaped
    (`escaped`) when the record is made and, unless it is frozen, whenever a field is set, so that the audit
    table, JSON and YAML, the policy reports, the logs and the admission answer all carry one escaped text and
    no writer can forget it. Mixed into a dataclass."""

    def __post_init__(self) -> None:
        if not type(self).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return  # its __init__ set every field through __setattr__ below, escaping it
        fields = vars(self)
        for name, value in fields.items():
            if isinstance(value, str) and not value.isprintable():
                fields[name] = escaped(value)  # a value replaced, no key added: the loop goes on

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, escaped(value) if isinstance(value, str) else value)


class EscapedText:
    """A `str | None` field of a mutable record, escaped (`escaped`) whenever it is set, so that no writer can
    forget it. A descriptor on the one or two fields that hold text, rather than `ShownText`'s `__setattr__`,
    which a record of many fields (a Decision: nine, made for every review) pays on each of them. In a
    dataclass it is declared as the field's default; it reads as None on the class, which makes None the default."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = "_" + name

    def __get__(self, record: object, owner: type | None = None) -> str | None:
        if record is None:
            return None
        text: str | None = record.__dict__.get(self._slot)
        return text

    def __set__(self, record: object, text: str | None) -> None:
        record.__dict__[self._slot] = None if text is None else escaped(text)


def field_path(parts: Iterable[str | int], prefix: str = "") -> str:
    """Where a value stands in a document, as every message names it: `spec.tolerations[0].key`. A key that is an
    identifier follows a dot, any other key (`labels[app/x]`) and an index go in brackets; a key is clipped and
    escaped as all echoed text. `prefix`, a path already rendered, is continued."""
    out = prefix
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        shown = shown_key(part)
        if _IDENTIFIER.match(part):
            out += f".{shown}" if out else shown
        else:
            out += f"[{shown}]"
    return out


def shown_key(key: str) -> str:
    """A key as a path shows it: clipped and escaped."""
    return escaped(clip(key, KEY_LIMIT))


def path_parts(path: str) -> list[str]:
    """A rendered path's keys and indexes as `field_path` shows them: `a.b[c]` and `a[b].c` name fields alike
    (checks spell keys both ways), and a key is compared clipped and escaped, however the path was rendered."""
    return [shown_key(bracketed or plain) for bracketed, plain in _PATH_PART.findall(path)]
