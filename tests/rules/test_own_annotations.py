from __future__ import annotations

import difflib
from typing import Any

import pytest

from rules import pipeline
from rules.annotations import key_problems
from rules.messages import denial_message
from tests.support import DATA, policy, subject, table_cases, view_from

OWN_ANNOTATIONS_KEYS = {"annotations", "findings", "name"}


@pytest.mark.parametrize("case", table_cases(DATA / "own_annotations.yaml", OWN_ANNOTATIONS_KEYS))
def test_own_annotation_findings(case: dict[str, Any]) -> None:
    found = [problem for key, value in case["annotations"].items() for problem in key_problems(key, value)]
    assert found == [tuple(f) for f in case["findings"]]


def _pod(annotations: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "apps", "annotations": annotations, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_pipeline_denies_with_every_problem_numbered() -> None:
    pod = _pod({"storage-affinity.io/role": "x", "storage-affinity.io/placment": "nodeName"})
    decision = pipeline.validate(subject(pod), view_from(), policy())
    assert not decision.allowed
    assert denial_message(decision) == (
        "storage-affinity-webhook denied: 2 problems: "
        '(1) metadata.annotations[storage-affinity.io/role]: "x" is not one of none, mover, backup, restore; '
        '(2) metadata.annotations[storage-affinity.io/placment]: unknown annotation (did you mean "placement"?)'
    )


def test_job_template_paths_are_prefixed() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "apps"},
        "spec": {"template": _pod({"storage-affinity.io/role": "x"})},
    }
    decision = pipeline.validate(subject(job), view_from(), policy())
    assert [f.field for f in decision.denials] == ["spec.template.metadata.annotations[storage-affinity.io/role]"]


def test_update_checks_only_changed_annotations() -> None:
    old = _pod({"storage-affinity.io/role": "x"})
    new = _pod({"storage-affinity.io/role": "x", "storage-affinity.io/storage-class": "Bad Class"})
    decision = pipeline.validate(subject(new, "UPDATE", old=old), view_from(), policy())
    assert [f.field for f in decision.denials] == ["metadata.annotations[storage-affinity.io/storage-class]"]


def test_warn_enforcement_turns_denials_into_warnings() -> None:
    pod = _pod({"storage-affinity.io/role": "x"})
    decision = pipeline.validate(
        subject(pod), view_from(), policy({"validation": {"annotations": {"enforcement": "warn"}}})
    )
    assert decision.allowed
    assert decision.warnings == [
        'metadata.annotations[storage-affinity.io/role]: "x" is not one of none, mover, backup, restore'
    ]


def test_excluded_namespace_is_not_validated() -> None:
    pod = _pod({"storage-affinity.io/role": "x"})
    pod["metadata"]["namespace"] = "kube-system"
    assert pipeline.validate(subject(pod), view_from(), policy()).allowed


def test_unknown_keys_past_the_first_ten_are_counted_not_suggested(monkeypatch: pytest.MonkeyPatch) -> None:
    """storage-affinity-webhook issue 'Bounded by construction': a did-you-mean for each of 999 unknown keys cost
    seconds; the first ten get theirs, in annotation order, and one finding counts the rest."""
    compared: list[str] = []
    real = difflib.get_close_matches

    def counted(name: str, *args: Any, **kwargs: Any) -> list[str]:
        compared.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", counted)
    keys = {f"storage-affinity.io/placment-{i}": "x" for i in range(999)}
    decision = pipeline.validate(subject(_pod({"storage-affinity.io/role": "x", **keys})), view_from(), policy())
    assert [(f.field, f.message) for f in decision.findings] == [
        ("metadata.annotations[storage-affinity.io/role]", '"x" is not one of none, mover, backup, restore'),
        *(
            (
                f"metadata.annotations[storage-affinity.io/placment-{i}]",
                'unknown annotation (did you mean "placement"?)',
            )
            for i in range(10)
        ),
        ("metadata.annotations", "and 989 more unknown storage-affinity.io/ annotations (the first 10 are named)"),
    ]
    assert compared == [f"placment-{i}" for i in range(10)]
