"""values.yaml, values.schema.json and the policy ConfigMap rendered from them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from rules.policy import Policy, PolicyError, policy_from_config_map, validation_families
from testkit import yamldocs
from tests.chart.chart_helpers import CHART, NAMESPACE, ROOT, SCENARIOS, one, render, render_error
from tests.support import load_script

SYNC_SCRIPT = ROOT / "scripts" / "sync-chart-policy-schema.py"


def _policy(values: dict[str, Any], namespace: str = NAMESPACE) -> Policy:
    config_map = one(render(values, namespace=namespace), "ConfigMap", "storage-affinity-policy")
    assert config_map["metadata"]["labels"]["storage-affinity.io/policy"] == "true"
    assert list(config_map["data"]) == ["policy.yaml"]
    return policy_from_config_map(config_map)


def test_default_policy_configmap_parses() -> None:
    policy = _policy({})
    assert policy.excluded_namespaces == {NAMESPACE, "kube-system", "kube-node-lease"}
    assert policy.enforcement == "deny"
    assert policy.placement == "requiredAffinity"
    assert policy.role_selectors["mover"] == ({"matchLabels": {"app.kubernetes.io/created-by": "volsync"}},)
    assert policy.load_affinity_source is None


def test_policy_excluded_namespaces_get_the_webhook_ones() -> None:
    policy = _policy(SCENARIOS["excluded-namespaces"], namespace="ops")
    assert policy.excluded_namespaces == {"ops", "kube-system", "kube-node-lease", "velero", "volsync-system", "team-a"}


def test_policy_values_reach_the_configmap() -> None:
    values = {
        "policy": {
            "enforcement": "warn",
            "coScheduling": {"placement": "nodeSelector"},
            "loadAffinity": [{"nodeSelector": {"matchLabels": {"role": "backup"}}, "storageClass": "fast"}],
            "loadAffinitySource": {"configMap": {"namespace": "velero", "name": "node-agent-config"}},
        }
    }
    policy = _policy(values)
    assert policy.enforcement == "warn"
    assert policy.placement == "nodeSelector"
    assert policy.load_affinity == ({"nodeSelector": {"matchLabels": {"role": "backup"}}, "storageClass": "fast"},)
    assert policy.load_affinity_source == ("velero", "node-agent-config")


def test_policy_parser_really_checks_the_rendered_configmap() -> None:
    config_map = one(render(), "ConfigMap", "storage-affinity-policy")
    config_map["data"]["policy.yaml"] += "coScheduling: {placement: somewhere}\n"
    with pytest.raises(PolicyError):
        policy_from_config_map(config_map)


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"replicaCount": 2, "replicas": 3}, "additional properties 'replicas' not allowed"),
        ({"webhook": {"timeoutSecond": 3}}, "additional properties 'timeoutSecond' not allowed"),
        ({"certificates": {"mode": "certManager", "certManager": {"isuerRef": {}}}}, "'isuerRef' not allowed"),
        ({"policy": {"enforcment": "warn"}}, "additional properties 'enforcment' not allowed"),
        ({"policy": {"coScheduling": {"placement": "somewhere"}}}, "/policy/coScheduling/placement"),
        ({"webhook": {"mutate": {"failurePolicy": "Sometimes"}}}, "/webhook/mutate/failurePolicy"),
        ({"webhook": {"timeoutSeconds": 31}}, "/webhook/timeoutSeconds"),
        ({"webhook": {"excludedNamespaces": ["Not_A_Namespace"]}}, "/webhook/excludedNamespaces/0"),
        ({"certificates": {"mode": "vault"}}, "/certificates/mode"),
        ({"server": {"port": 443}}, "/server/port"),
    ],
)
def test_schema_rejects(values: dict[str, object], where: str) -> None:
    assert where in render_error(values)


def test_schema_is_strict_everywhere() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_objects = {"global", "podSecurityContext", "securityContext", "affinity"}

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, f"{path} accepts unknown keys"
            for key, value in node.items():
                if key == "properties":
                    for name, sub in value.items():
                        walk(sub, f"{path}.{name}")
                elif key not in open_objects:
                    walk(value, path)

    # `$defs` is the policy schema, copied from rules/policy.schema.json: the server's rules, not the chart's.
    walk({k: v for k, v in schema.items() if k != "$defs"}, "values")
    assert set(schema["properties"]) - {"global"} == set(yamldocs.load((CHART / "values.yaml").read_text()))


def test_policy_schema_is_in_sync_with_the_server() -> None:
    result = subprocess.run(
        [sys.executable, str(SYNC_SCRIPT), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _sync_script() -> Any:
    return load_script(SYNC_SCRIPT)


@pytest.mark.parametrize(
    "keyword",
    ["dependentRequired", "prefixItems", "unevaluatedProperties", "unevaluatedItems", "minContains", "maxContains"],
)
def test_policy_schema_sync_refuses_a_keyword_draft_07_ignores(keyword: str) -> None:
    """Helm validates draft-07 and skips unknown keywords: the chart would accept what the server refuses."""
    policy_schema = {"$defs": {"entry": {"type": "object", "properties": {"names": {"type": "array", keyword: 1}}}}}
    with pytest.raises(SystemExit, match=keyword):
        _sync_script().chart_defs(policy_schema)


def test_policy_schema_sync_takes_a_property_named_like_a_keyword() -> None:
    policy_schema = {"properties": {"prefixItems": {"type": "array"}}, "required": ["prefixItems"]}
    assert _sync_script().chart_defs(policy_schema)["policy"]["properties"] == {"prefixItems": {"type": "array"}}


# Values whose content is one documented unit (a Kubernetes structure or the policy document).
DOCUMENTED_AS_A_WHOLE = {"resources", "podSecurityContext", "securityContext"}
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][\w.-]*):")


def test_every_values_key_has_a_comment() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    parents: list[tuple[int, str]] = []
    undocumented = []
    for number, line in enumerate(lines):
        match = KEY.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        if not any(p in DOCUMENTED_AS_A_WHOLE for _, p in parents):
            previous = next((lines[i] for i in range(number - 1, -1, -1) if lines[i].strip()), "")
            if not previous.strip().startswith("#"):
                undocumented.append(f"line {number + 1}: {line.strip()}")
        parents.append((indent, match["key"]))
    assert undocumented == []


def test_policy_enforcement_warn_alone_relaxes_every_family() -> None:
    """The chart lists no family override, so `policy.enforcement: warn` is the gradual rollout it says it is."""
    relaxed = _policy({"policy": {"enforcement": "warn"}})
    assert {family: relaxed.enforcement_for(family) for family in validation_families()} == dict.fromkeys(
        validation_families(), "warn"
    )
    one_kept = _policy({"policy": {"enforcement": "warn", "validation": {"placement": {"enforcement": "deny"}}}})
    assert one_kept.enforcement_for("placement") == "deny"
    assert one_kept.enforcement_for("diskAnnotations") == "warn"


def test_values_list_every_policy_section_with_the_embedded_defaults() -> None:
    """values.yaml's `policy:` names every section of the policy schema, each at the embedded default's values, so
    that an operator reads there what they may set (OADP's nodeAgent.namespace, TopoLVM's dataSource drivers) and
    a default install judges as the embedded policy does."""
    from rules.policy import default_policy

    values = yamldocs.load((CHART / "values.yaml").read_text())["policy"]
    schema = json.loads((ROOT / "rules" / "policy.schema.json").read_text())
    assert sorted(values) == sorted(schema["properties"])
    embedded = default_policy().document
    rendered = _policy({}).document
    assert {k: v for k, v in rendered.items() if k != "excludedNamespaces"} == {
        k: v for k, v in embedded.items() if k != "excludedNamespaces"
    }
