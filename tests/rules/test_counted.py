"""Counts in messages agree with their noun (rules/messages.py `counted`): the audit's progress names the kinds it
lists (`listed 2 StorageClasses`), the audit summary, a denial's problems and the warnings not shown all use it.
Lists in messages show a few items, then count the rest (rules/quoting.py `listed`)."""

from __future__ import annotations

import pytest

from rules.messages import counted
from rules.quoting import listed
from webhook.audit.command import LIVE_KINDS


@pytest.mark.parametrize(
    ("count", "noun", "expected"),
    [
        (1, "StorageClass", "1 StorageClass"),
        (2, "StorageClass", "2 StorageClasses"),
        (0, "finding", "0 findings"),
        (2, "stuck storage pod", "2 stuck storage pods"),
        (1, "Velero entry", "1 Velero entry"),
        (3, "Velero entry", "3 Velero entries"),
        (2, "more warning", "2 more warnings"),
        (2, "VolumeSnapshotClass", "2 VolumeSnapshotClasses"),
        (2, "key", "2 keys"),
        (2, "box", "2 boxes"),
        (2, "batch", "2 batches"),
    ],
)
def test_the_noun_agrees_with_the_count(count: int, noun: str, expected: str) -> None:
    assert counted(count, noun) == expected


def test_every_kind_the_live_audit_lists_has_its_plural() -> None:
    """The live audit's progress lines (`listed 2 Pods`) name each kind it lists (derived from
    webhook/state/kinds.py and the workload kinds) in its plural; those that are not the singular plus an `s` are
    spelled out."""
    irregular = {"StorageClass": "StorageClasses"}
    assert [counted(2, kind) for kind in LIVE_KINDS] == [f"2 {irregular.get(kind, kind + 's')}" for kind in LIVE_KINDS]
    assert "Pod" in LIVE_KINDS and "CronJob" in LIVE_KINDS  # the list is the live one, not empty


@pytest.mark.parametrize(
    ("items", "sep", "expected"),
    [
        ([], ", ", ""),
        (["a"], ", ", "a"),
        (["a", "b", "c"], ", ", "a, b, c"),
        (["a", "b", "c", "d"], ", ", "a, b, c, and 1 more"),
        ([f"n{i}" for i in range(5_000)], "; ", "n0; n1; n2; and 4,997 more"),
    ],
)
def test_a_list_in_a_message_shows_three_then_counts(items: list[str], sep: str, expected: str) -> None:
    assert listed(items, sep=sep) == expected


def test_only_the_items_shown_are_written() -> None:
    written: list[int] = []

    def show(i: int) -> str:
        written.append(i)
        return f"#{i}"

    assert listed(range(10_000), show) == "#0, #1, #2, and 9,997 more"
    assert written == [0, 1, 2]
