"""Counts in messages agree with their noun (rules/messages.py `counted`): the audit's progress names the kinds it
lists (`listed 2 StorageClasses`), the audit summary, a denial's problems and the warnings not shown all use it."""

from __future__ import annotations

import pytest

from rules.messages import counted
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
    assert [counted(2, kind) for kind in LIVE_KINDS] == [
        "2 PersistentVolumes",
        "2 StorageClasses",
        "2 Nodes",
        "2 PersistentVolumeClaims",
        "2 ConfigMaps",
        "2 Pods",
        "2 Deployments",
        "2 StatefulSets",
        "2 DaemonSets",
        "2 ReplicaSets",
        "2 Jobs",
        "2 CronJobs",
    ]
