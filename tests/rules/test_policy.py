from __future__ import annotations

from typing import Any

import pytest

from rules.policy import (
    POLICY_KEY,
    PolicyError,
    default_policy,
    parse_policy_text,
    policy_from_config_map,
    policy_from_document,
    policy_problems,
)
from tests.support import DATA, table_cases

VALID_KEYS = {"name", "policy", "source"}
INVALID_KEYS = {"name", "policy", "problems", "source"}


@pytest.mark.parametrize("case", table_cases(DATA / "policy" / "cases.yaml", VALID_KEYS, section="valid"))
def test_valid_policies_load(case: dict[str, Any]) -> None:
    assert policy_problems(case["policy"]) == []
    policy_from_document(case["policy"])


@pytest.mark.parametrize("case", table_cases(DATA / "policy" / "cases.yaml", INVALID_KEYS, section="invalid"))
def test_invalid_policies_report_every_problem_with_its_path(case: dict[str, Any]) -> None:
    expected = [tuple(p) for p in case["problems"]]
    assert policy_problems(case["policy"]) == expected
    with pytest.raises(PolicyError) as err:
        policy_from_document(case["policy"])
    assert err.value.problems == expected


def test_defaults_fill_missing_fields() -> None:
    policy = policy_from_document({"coScheduling": {"placement": "nodeName"}, "roles": {"restore": {"selectors": []}}})
    assert policy.placement == "nodeName"
    assert policy.copy_tolerations is True
    assert policy.read_write_once_pod == "deny"
    assert policy.role_selectors["restore"] == ()
    assert policy.role_selectors["mover"] == ({"matchLabels": {"app.kubernetes.io/created-by": "volsync"}},)
    assert policy.excluded_namespaces == frozenset({"kube-system", "kube-node-lease"})


def test_embedded_default_matches_the_design() -> None:
    policy = default_policy()
    assert policy.enforcement == "deny"
    assert policy.on_lookup_failure == "allow"
    assert policy.placement == "requiredAffinity"
    assert policy.role_selectors["backup"] == ({"matchLabels": {"velero.io/exposer-pod-group": "snapshot-exposer"}},)
    assert policy.role_selectors["restore"] == (
        {"matchLabels": {"velero.io/exposer-pod-group": "generic-restore-exposer"}},
    )
    assert policy.enforcement_for("diskAnnotations") == "deny"
    assert policy.load_affinity_source is None


def test_family_enforcement_falls_back_to_the_global_one() -> None:
    policy = policy_from_document({"enforcement": "warn", "validation": {"placement": {"enforcement": "deny"}}})
    assert policy.enforcement_for("placement") == "deny"
    assert policy.enforcement_for("annotations") == "warn"


def test_config_map_paths_are_prefixed_with_the_data_key() -> None:
    cm = {"kind": "ConfigMap", "data": {POLICY_KEY: "coScheduling:\n  placement: nodename\n"}}
    with pytest.raises(PolicyError) as err:
        policy_from_config_map(cm)
    assert err.value.problems == [
        (
            "data[policy.yaml].coScheduling.placement",
            '"nodename" is not one of requiredAffinity, nodeSelector, nodeName',
        )
    ]


def test_config_map_without_the_key() -> None:
    with pytest.raises(PolicyError) as err:
        policy_from_config_map({"kind": "ConfigMap", "data": {"policy.yml": "{}"}})
    assert err.value.problems == [("data", "the policy ConfigMap must hold the policy under key 'policy.yaml'")]


def test_text_forms_bare_and_config_map() -> None:
    assert parse_policy_text("enforcement: warn\n").enforcement == "warn"
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata:\n  policy.yaml: |\n    enforcement: warn\n"
    assert parse_policy_text(text).enforcement == "warn"


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy_text("enforcement: deny\ncoScheduling: [\n", "p.yaml")
    assert "p.yaml: YAML syntax error at line 3" in str(err.value)


def test_yaml_aliases_are_refused() -> None:
    bomb = 'a: &a ["x","x"]\nb: &b [*a,*a]\nc: [*b,*b]\n'
    with pytest.raises(PolicyError) as err:
        parse_policy_text(bomb, "bomb.yaml")
    assert "YAML aliases are not accepted" in str(err.value)
