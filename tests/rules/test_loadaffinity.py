"""Load affinity mutation of backup and restore pods (docs/design.md#5-load-affinity), table-driven from
tests/data/loadaffinity."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import suggest
from rules.loadaffinity import entries as entries_module
from rules.model import Json
from tests.support import DATA, dig, load_yaml, mutate_checked, policy, table_cases, view_from

MUTATION_KEYS = {"cluster", "expect", "name", "pod", "policy", "source", "why"}
POLICY_KEYS = {"doc", "name", "problems"}
POLICY_CONFIG_MAP_KEYS = {"doc", "name", "warnings"}
POD_ANNOTATIONS_KEYS = {"annotations", "name", "namespace", "role", "source", "violations", "warnings"}

TABLE = load_yaml(DATA / "loadaffinity" / "mutation.yaml")
CLUSTER = load_yaml(DATA / "loadaffinity" / "cluster.yaml")
ROLE_LABELS = {"backup": "snapshot-exposer", "restore": "generic-restore-exposer"}
REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def build(spec: Json) -> Json:
    """A complete Pod (or Job) from a case's short description."""
    role = spec.get("role", "backup")
    metadata: Json = {"name": "vgdp-7hx2q", "namespace": spec.get("namespace", "velero")}
    if role in ROLE_LABELS:
        metadata["labels"] = {"velero.io/exposer-pod-group": ROLE_LABELS[role]}
    else:
        metadata["annotations"] = {"storage-affinity.io/role": role}
    if spec.get("annotations"):
        metadata["annotations"] = {**metadata.get("annotations", {}), **spec["annotations"]}
    pod_spec: Json = {
        "restartPolicy": "Never",
        "containers": [{"name": "data-mover", "image": "velero/velero:v1.17.0"}],
        "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(spec["claims"])],
    }
    extra = copy.deepcopy(spec.get("spec") or {})
    pod_spec["volumes"] += extra.pop("volumes", [])
    if not pod_spec["volumes"]:
        del pod_spec["volumes"]
    pod_spec.update(extra)
    if spec.get("kind") == "Job":
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "vgdp-7hx2q", "namespace": "velero"},
            "spec": {"template": {"metadata": metadata, "spec": pod_spec}},
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def pod_of(obj: Json) -> Json:
    return obj["spec"]["template"] if obj["kind"] == "Job" else obj


@pytest.mark.parametrize("case", table_cases(DATA / "loadaffinity" / "mutation.yaml", MUTATION_KEYS, section="cases"))
def test_mutation(case: Json) -> None:
    obj = build(case["pod"])
    view = view_from(*CLUSTER, *(case.get("cluster") or ()))
    decision, result = mutate_checked(obj, view, policy(case.get("policy") or {}))
    expect = case["expect"]
    pod = pod_of(result)
    assert decision.failure is None
    assert decision.warnings == expect.get("warnings", [])
    if "patch" in expect:
        assert decision.patch == expect["patch"]
        if expect["patch"] == [] and set(expect) == {"patch"}:
            return
    terms = dig(pod["spec"], *REQUIRED, "nodeSelectorTerms")
    assert terms == expect.get("terms")
    assert dig(pod, "metadata", "annotations", "storage-affinity.io/load-affinity-applied") == expect.get("applied")
    assert pod["spec"].get("tolerations") == expect.get("tolerations")
    assert pod["spec"].get("nodeSelector") == expect.get("nodeSelector")
    assert pod["spec"].get("nodeName") == expect.get("nodeName")


def test_job_patch_is_rooted_at_the_template() -> None:
    case = next(c for c in TABLE["cases"] if c["pod"].get("kind") == "Job")
    obj = build(case["pod"])
    decision, _ = mutate_checked(obj, view_from(*CLUSTER), policy(case["policy"]))
    assert decision.patch
    assert all(op["path"].startswith("/spec/template/") for op in decision.patch)


def test_every_source_design_example_is_covered() -> None:
    names = [c["name"] for c in TABLE["cases"]]
    assert sum(name.startswith("design ") for name in names) == 7


def test_lookup_failure_is_contained() -> None:
    """A cluster view that cannot answer makes the pipeline follow onLookupFailure, never a half patch."""
    from rules import pipeline
    from rules.cluster import LookupFailed
    from tests.support import subject

    class Broken(type(view_from())):  # type: ignore[misc]
        def pvc(self, namespace: str, name: str) -> Json | None:
            raise LookupFailed("pvc lookup timed out")

    case = TABLE["cases"][0]
    view = Broken()
    for obj in CLUSTER:
        view.apply(obj)
    decision = pipeline.mutate(subject(build(case["pod"])), view, policy(case["policy"]))
    assert decision.patch == []
    assert decision.failure == "cluster state unavailable: pvc lookup timed out"


# --- validation of the policy's lists and of a pod's annotations ------------------------------------------------

VALIDATION = load_yaml(DATA / "loadaffinity" / "validation.yaml")


@pytest.mark.parametrize("case", table_cases(DATA / "loadaffinity" / "validation.yaml", POLICY_KEYS, section="policy"))
def test_policy_load_affinity_problems(case: Json) -> None:
    from rules.policy import policy_problems

    assert [list(p) for p in policy_problems(case["doc"])] == case["problems"]


@pytest.mark.parametrize(
    "case", table_cases(DATA / "loadaffinity" / "validation.yaml", POLICY_CONFIG_MAP_KEYS, section="policy_config_map")
)
def test_policy_config_map_cluster_warnings(case: Json) -> None:
    decision = validate_policy_config_map(case["doc"], view_from(*CLUSTER))
    assert decision.allowed
    assert decision.warnings == case["warnings"]


def validate_policy_config_map(doc: Json, view: Any) -> Any:
    """The validating webhook's decision on the policy ConfigMap holding `doc`."""
    import yaml

    from rules import pipeline
    from tests.support import subject

    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "storage-affinity-policy",
            "namespace": "storage-affinity",
            "labels": {"storage-affinity.io/policy": "true"},
        },
        "data": {"policy.yaml": yaml.safe_dump(doc)},
    }
    return pipeline.validate(subject(cm), view, policy())


def test_a_count_of_one_known_node_is_singular() -> None:
    """A count in a message agrees with its noun (rules.messages.counted), with one node known as with three."""
    only_n1 = view_from(*(o for o in CLUSTER if o["kind"] != "Node" or o["metadata"]["name"] == "n1"))
    doc = {"loadAffinity": [{"nodeSelector": {"matchLabels": {"beta.kubernetes.io/instance-type": "Standard_D16s"}}}]}
    decision, _ = mutate_checked(build({"role": "backup", "claims": ["data-kibishii"]}), only_n1, policy(doc))
    assert decision.warnings == ["load affinity leaves none of the 1 known node for this pod: it would stay Pending"]
    assert validate_policy_config_map(doc, only_n1).warnings == [
        "data[policy.yaml].loadAffinity[0].nodeSelector: matches none of the 1 known node: pods stay Pending"
    ]


@pytest.mark.parametrize(
    "case", table_cases(DATA / "loadaffinity" / "validation.yaml", POD_ANNOTATIONS_KEYS, section="pod_annotations")
)
def test_pod_annotation_validation(case: Json) -> None:
    from rules import pipeline
    from tests.support import subject

    pod = build(
        {
            "role": case["role"],
            "claims": ["data-kibishii"],
            "annotations": case["annotations"],
            "namespace": case.get("namespace", "velero"),
        }
    )
    decision = pipeline.validate(subject(pod), view_from(*CLUSTER), policy())
    assert [[f.field, f.message] for f in decision.denials] == case["violations"]
    assert decision.warnings == case["warnings"]


def test_pod_annotation_unchanged_on_update_is_not_warned_again() -> None:
    from rules import pipeline
    from tests.support import subject

    case = VALIDATION["pod_annotations"][0]
    pod = build({"role": case["role"], "claims": ["data-kibishii"], "annotations": case["annotations"]})
    decision = pipeline.validate(subject(pod, "UPDATE", old=pod), view_from(*CLUSTER), policy())
    assert decision.warnings == []


# --- the examples the README shows ------------------------------------------------------------------------------


def _example(name: str) -> Any:
    from tests.support import EXAMPLES

    return load_yaml(EXAMPLES / name)


def test_example_backup_pod_gets_the_gp3_entries_ored_and_anded_with_its_volume_zone() -> None:
    view = view_from(*_example("cluster.yaml")["items"])
    decision, result = mutate_checked(_example("backup-pod.yaml"), view, policy(_example("policy-load-affinity.yaml")))
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}
    assert dig(result["spec"], *REQUIRED, "nodeSelectorTerms") == [
        {
            "matchExpressions": [
                zone,
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]},
            ]
        },
        {
            "matchExpressions": [
                zone,
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.2xlarge", "m5.4xlarge"]},
            ]
        },
    ]
    assert result["metadata"]["annotations"] == {"storage-affinity.io/load-affinity-applied": "gp3"}
    assert result["spec"]["tolerations"] == [
        {"key": "node-role.example.com/backup", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert decision.warnings == []


def test_example_restore_pod_is_pinned_to_its_selected_node() -> None:
    view = view_from(*_example("cluster.yaml")["items"])
    decision, result = mutate_checked(_example("restore-pod.yaml"), view, policy(_example("policy-load-affinity.yaml")))
    assert dig(result["spec"], *REQUIRED, "nodeSelectorTerms") == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["ip-10-0-2-42.ec2.internal"]}]}
    ]
    assert "annotations" not in result["metadata"]
    assert decision.warnings == [
        "load affinity skipped: StorageClass gp3 is WaitForFirstConsumer and restorePVC.ignoreDelayBinding is not true"
    ]


def test_written_terms_share_no_objects_so_yaml_output_has_no_aliases() -> None:
    import yaml

    view = view_from(*_example("cluster.yaml")["items"])
    _, result = mutate_checked(_example("backup-pod.yaml"), view, policy(_example("policy-load-affinity.yaml")))
    assert "&id" not in yaml.safe_dump(result)


@given(
    requirements=st.integers(min_value=0, max_value=60),
    per_requirement=st.integers(min_value=1, max_value=3),
)
@settings(max_examples=25, deadline=None)
def test_unknown_entry_fields_past_the_first_ten_are_counted_not_suggested(
    requirements: int, per_requirement: int
) -> None:
    """storage-affinity-webhook issue 'Bounded by construction': a did-you-mean for every unknown field of every
    requirement of a load-affinity list (10,000 within the budget) cost a suggestion each; the first ten get
    theirs, in order, and one finding counts the rest, whatever the shape."""
    entries = (
        [
            {
                "nodeSelector": {
                    "matchExpressions": [
                        {
                            "key": "zone",
                            "operator": "In",
                            "values": ["a"],
                            **{f"valuez{k}": 1 for k in range(per_requirement)},
                        }
                        for _ in range(requirements)
                    ]
                }
            }
        ]
        if requirements
        else []
    )
    suggested: list[str] = []
    real = suggest.unknown_field

    def counted(name: str, *args: Any, **kwargs: Any) -> str:
        suggested.append(name)
        return real(name, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(entries_module, "unknown_field", counted)
        _, unknown = entries_module.load_affinity_problems(entries, "loadAffinity")
    total = requirements * per_requirement
    assert len(suggested) == min(total, suggest.SUGGESTED)
    assert unknown[: len(suggested)] == [
        (f"loadAffinity[0].nodeSelector.matchExpressions[{i // per_requirement}].valuez{i % per_requirement}", message)
        for i, (_, message) in enumerate(unknown[: len(suggested)])
    ]
    if total > suggest.SUGGESTED:
        assert unknown[-1] == (
            "loadAffinity",
            f"and {total - suggest.SUGGESTED:,} more unknown fields (the first {suggest.SUGGESTED} are named)",
        )
    assert len(unknown) == min(total, suggest.SUGGESTED + 1)
