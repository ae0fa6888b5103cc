"""Policies: every valid variation of the default loads, every defect is refused with PolicyError naming a path,
and no document at all, however odd, escapes as another exception."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given

from rules.loadaffinity.velero import VeleroConfigError, read_config
from rules.model import Json
from rules.policy import Policy, PolicyError, parse_policy_text, policy_from_config_map, policy_from_document
from tests.fuzz import strategies as s


@given(doc=s.policy_documents())
def test_valid_policies_load(doc: Json) -> None:
    policy = policy_from_document(doc)
    assert isinstance(policy, Policy)
    # The same document through a ConfigMap and through YAML text gives the same policy.
    assert policy_from_config_map(s.policy_config_map(doc)) == policy
    assert parse_policy_text(yaml.safe_dump(doc)) == policy


@given(doc=s.invalid_policy_documents())
def test_invalid_policies_are_refused_with_their_paths(doc: Json) -> None:
    try:
        policy_from_document(doc)
    except PolicyError as exc:
        assert exc.problems
        assert all(isinstance(path, str) and message for path, message in exc.problems)
        return
    raise AssertionError(f"accepted an invalid policy: {doc}")


@given(doc=s.json_values() | s.policy_documents().flatmap(lambda d: s.json_values().map(lambda v: {**d, "roles": v})))
def test_any_document_is_a_policy_or_a_policy_error(doc: Any) -> None:
    try:
        policy_from_document(doc)
    except PolicyError as exc:
        assert exc.problems


@given(config_map=s.velero_config_map())
def test_velero_config_maps_read_or_refused(config_map: Json) -> None:
    try:
        config = read_config(config_map)
    except VeleroConfigError as exc:
        assert exc.problems
        return
    assert all("nodeSelector" in entry for entry in config.load_affinity)
