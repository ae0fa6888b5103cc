"""Velero's node-agent ConfigMap: parsing as Velero does, and its validation through the validating pipeline."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules import pipeline
from rules.loadaffinity.velero import VeleroConfigError, config_document, read_config
from rules.messages import denial_message
from rules.model import Json
from tests.support import DATA, EXAMPLES, load_yaml, policy, subject, table_cases, view_from

INVALID_KEYS = {"config", "data", "name", "source", "violations", "warnings"}
VALID_KEYS = {"config", "name", "source", "warnings"}

TABLE = load_yaml(DATA / "loadaffinity" / "validation.yaml")
CLUSTER = load_yaml(DATA / "loadaffinity" / "cluster.yaml")
SOURCE = {"loadAffinitySource": {"configMap": {"namespace": "velero", "name": "node-agent-config"}}}


def config_map(case: Json, name: str = "node-agent-config", namespace: str = "velero") -> Json:
    data = case["data"] if "data" in case else {"config.json": json.dumps(case["config"], indent=2)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def validate(obj: Json, doc: Json | None = None, operation: str = "CREATE") -> Any:
    old = obj if operation == "UPDATE" else None
    return pipeline.validate(subject(obj, operation, old), view_from(*CLUSTER), policy(SOURCE if doc is None else doc))


@pytest.mark.parametrize(
    "case", table_cases(DATA / "loadaffinity" / "validation.yaml", INVALID_KEYS, section="invalid")
)
def test_invalid_config_map_is_denied_with_every_error(case: Json) -> None:
    decision = validate(config_map(case))
    assert not decision.allowed
    assert [[f.field, f.message] for f in decision.denials] == case["violations"]
    assert decision.warnings == case.get("warnings", [])
    assert all(f.family == "loadAffinity" for f in decision.findings)


@pytest.mark.parametrize("case", table_cases(DATA / "loadaffinity" / "validation.yaml", VALID_KEYS, section="valid"))
def test_valid_config_map_passes(case: Json) -> None:
    decision = validate(config_map(case))
    assert decision.allowed
    assert decision.denials == []
    assert decision.warnings == case.get("warnings", [])


def test_update_is_validated_too() -> None:
    decision = validate(config_map(TABLE["invalid"][0]), operation="UPDATE")
    assert not decision.allowed


def test_enforcement_warn_turns_errors_into_warnings() -> None:
    case = TABLE["invalid"][0]
    decision = validate(config_map(case), {**SOURCE, "validation": {"loadAffinity": {"enforcement": "warn"}}})
    assert decision.allowed
    assert decision.warnings == [f"{p}: {m}" for p, m in case["violations"]]


@pytest.mark.parametrize(
    ("name", "namespace", "doc"),
    [("other-config", "velero", SOURCE), ("node-agent-config", "backup", SOURCE), ("node-agent-config", "velero", {})],
    ids=["other name", "other namespace", "no loadAffinitySource"],
)
def test_only_the_config_map_named_by_the_policy_is_checked(name: str, namespace: str, doc: Json) -> None:
    decision = validate(config_map(TABLE["invalid"][0], name, namespace), doc)
    assert decision.allowed
    assert decision.findings == []


def test_denial_message_lists_every_error() -> None:
    case = next(c for c in TABLE["invalid"] if c["name"] == "operators and the values they need")
    decision = validate(config_map(case))
    message = denial_message(decision)
    assert message.startswith("storage-affinity-webhook denied: 10 problems: (1) data[config.json].loadAffinity[0]")
    assert "(10) data[config.json].loadAffinity[0].nodeSelector.matchExpressions[9].values" in message


# --- parsing ------------------------------------------------------------------------------------------------


def test_two_data_keys_are_refused() -> None:
    with pytest.raises(VeleroConfigError) as err:
        config_document({"data": {"a.json": "{}", "b.json": "{}"}})
    assert err.value.problems == [
        ("data", "must hold exactly one key with the node-agent configuration as JSON (found 2: a.json, b.json)")
    ]


def test_invalid_json_names_key_line_and_column() -> None:
    with pytest.raises(VeleroConfigError) as err:
        config_document({"data": {"node-agent-config.json": '{\n  "loadAffinity": [\n    {"nodeSelector": }\n  ]\n}'}})
    assert err.value.problems == [
        ("data[node-agent-config.json]", "is not valid JSON: Expecting value at line 3, column 22")
    ]


def test_non_string_value_is_refused() -> None:
    with pytest.raises(VeleroConfigError) as err:
        config_document({"data": {"config.json": {"loadAffinity": []}}})
    assert err.value.problems == [("data[config.json]", "must be a string holding JSON, not object")]


def test_read_config_keeps_what_velero_keeps() -> None:
    cm = config_map(
        {
            "config": {
                "loadAffinity": [
                    {
                        "nodeSelector": {
                            "matchLabels": {"zone": "a"},
                            "matchExpressions": [{"key": "os", "operator": "In", "values": ["linux"], "x": 1}],
                            "matchFields": [],
                        },
                        "storageClass": "gp3",
                        "note": "dropped",
                    },
                    {"nodeSelector": {"matchLabels": {"zone": "b"}}, "storageClass": ""},
                ],
                "backupPVC": {"gp3": {"storageClass": "gp3-backup", "readOnly": True}},
                "restorePVC": {"ignoreDelayBinding": True},
                "loadConcurrency": {"globalConfig": 2},
            }
        }
    )
    config = read_config(cm)
    assert config.key == "config.json"
    assert config.load_affinity == (
        {
            "nodeSelector": {
                "matchLabels": {"zone": "a"},
                "matchExpressions": [{"key": "os", "operator": "In", "values": ["linux"]}],
            },
            "storageClass": "gp3",
        },
        {"nodeSelector": {"matchLabels": {"zone": "b"}}},
    )
    assert config.backup_pvc == {"gp3": {"storageClass": "gp3-backup", "readOnly": True}}
    assert config.restore_pvc == {"ignoreDelayBinding": True}


def test_read_config_refuses_an_invalid_document_with_every_error() -> None:
    case = next(c for c in TABLE["invalid"] if c["name"] == "backupPVC and restorePVC fields")
    with pytest.raises(VeleroConfigError) as err:
        read_config(config_map(case))
    assert [list(p) for p in err.value.problems] == case["violations"]


# --- the example ----------------------------------------------------------------------------------------------


def test_broken_example_is_denied_with_every_error() -> None:
    cm = load_yaml(EXAMPLES / "velero-node-agent-config-broken.yaml")
    cluster = load_yaml(EXAMPLES / "cluster.yaml")["items"]
    pol = policy(load_yaml(EXAMPLES / "policy-velero-source.yaml"))
    decision = pipeline.validate(subject(cm), view_from(*cluster), pol)
    base = "data[node-agent-config.json]"
    assert [f.field for f in decision.denials] == [
        f"{base}.loadAffinity[0].nodeSelector.matchExpressions[0].operator",
        f"{base}.loadAffinity[1].nodeSelector",
        f"{base}.loadAffinity[2].nodeSelector.matchExpressions[0].values",
        f"{base}.loadAffinity[2].storageClass",
        f"{base}.loadAffinity[3].nodeSelector",
        f"{base}.restorePVC.ignoreDelayBinding",
    ]
    assert decision.warnings == [
        f'{base}.loadAffinity[1].storageClas: unknown field (did you mean "storageClass"?)',
        f"{base}.loadAffinity[4].nodeSelector: matches none of the 2 known nodes: pods stay Pending",
        f'{base}.backupPVC[gp3].storageClass: StorageClass "gp3-backup" does not exist in the cluster',
    ]


def test_backup_pods_follow_each_new_version_of_the_config_map() -> None:
    """The ConfigMap is read once per version of it: a replaced ConfigMap is read again, an invalid one falls
    back to the policy's own lists."""
    view = view_from(*CLUSTER)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "vgdp-1",
            "namespace": "velero",
            "labels": {"velero.io/exposer-pod-group": "snapshot-exposer"},
        },
        "spec": {"containers": [{"name": "m", "image": "velero/velero:v1.17.0"}]},
    }

    def disks() -> tuple[list[Any], list[str]]:
        decision = pipeline.mutate(subject(pod), view, policy(SOURCE))
        terms = [op["value"]["nodeAffinity"] for op in decision.patch if op["path"] == "/spec/affinity"]
        values = [t["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] for t in terms]
        return values, decision.warnings

    def on(disk: str) -> list[Any]:
        return [[{"matchExpressions": [{"key": "disk", "operator": "In", "values": [disk]}]}]]

    view.apply(config_map({"config": {"loadAffinity": [{"nodeSelector": {"matchLabels": {"disk": "ssd"}}}]}}))
    assert disks()[0] == on("ssd")
    assert disks()[0] == on("ssd")
    view.apply(config_map({"config": {"loadAffinity": [{"nodeSelector": {"matchLabels": {"disk": "nvme"}}}]}}))
    assert disks()[0] == on("nvme")
    view.apply(config_map({"config": {"loadAffinity": [{"nodeSelector": {}}]}}))
    assert (
        "loadAffinitySource ConfigMap velero/node-agent-config is invalid: using the policy's own lists" in (disks()[1])
    )
