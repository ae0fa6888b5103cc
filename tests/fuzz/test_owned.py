"""The owned-fields checker must be able to fail: hand cases for each kind of change it must catch or allow."""

from __future__ import annotations

import copy

import pytest

from rules.model import Json
from tests.fuzz.owned import foreign_changes, loosened_on, owned_paths

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
POD: Json = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "m", "labels": {"a": "b"}, "annotations": {"storage-affinity.io/role": "mover"}},
    "spec": {
        "containers": [{"name": "c", "image": "i"}],
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {"podAffinity": {"x": 1}, "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchFields": []}]}}},
    },
}


def _changed(edit: str) -> Json:
    pod = copy.deepcopy(POD)
    spec, meta = pod["spec"], pod["metadata"]
    if edit == "pin":
        spec["affinity"]["nodeAffinity"][REQUIRED] = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name"}]}]
        }
    elif edit == "append toleration":
        spec["tolerations"].append({"key": "dedicated"})
    elif edit == "hostname selector":
        spec["nodeSelector"]["kubernetes.io/hostname"] = "h"
    elif edit == "node name":
        spec["nodeName"] = "n"
    elif edit == "record":
        meta["annotations"]["storage-affinity.io/co-scheduled-with"] = "a/n"
    elif edit == "drop toleration":
        spec["tolerations"] = [{"key": "dedicated"}]
    elif edit == "reorder tolerations":
        spec["tolerations"].insert(0, {"key": "dedicated"})
    elif edit == "change node selector":
        spec["nodeSelector"]["disk"] = "hdd"
    elif edit == "remove pod affinity":
        del spec["affinity"]["podAffinity"]
    elif edit == "add preferred":
        spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = []
    elif edit == "change role annotation":
        meta["annotations"]["storage-affinity.io/role"] = "none"
    elif edit == "remove label":
        del meta["labels"]
    elif edit == "add container field":
        spec["containers"][0]["args"] = ["x"]
    elif edit == "add empty map":
        spec["securityContext"] = {}
    return pod


@pytest.mark.parametrize("edit", ["pin", "append toleration", "hostname selector", "node name", "record"])
def test_owned_changes_pass(edit: str) -> None:
    assert foreign_changes(POD, _changed(edit), owned_paths("Pod")) == []


@pytest.mark.parametrize(
    "edit",
    [
        "drop toleration",
        "reorder tolerations",
        "change node selector",
        "remove pod affinity",
        "add preferred",
        "change role annotation",
        "remove label",
        "add container field",
        "add empty map",
    ],
)
def test_foreign_changes_are_caught(edit: str) -> None:
    assert foreign_changes(POD, _changed(edit), owned_paths("Pod")) != []


def test_repinning_is_caught() -> None:
    pinned = copy.deepcopy(POD)
    pinned["spec"]["nodeName"] = "a"
    moved = copy.deepcopy(pinned)
    moved["spec"]["nodeName"] = "b"
    assert foreign_changes(pinned, moved, owned_paths("Pod")) == [
        "spec.nodeName: owned field not set when empty: 'a' -> 'b'"
    ]


def test_job_paths_are_under_the_template() -> None:
    job = {"kind": "Job", "spec": {"template": {"spec": {"nodeSelector": {}}}}}
    placed = {"kind": "Job", "spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": "h"}}}}}
    assert foreign_changes(job, placed, owned_paths("Job")) == []
    assert foreign_changes(job, placed, owned_paths("Pod")) != []


def test_loosening_is_caught() -> None:
    node = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}
    zone_b = {
        "affinity": {
            "nodeAffinity": {
                REQUIRED: {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
                }
            }
        }
    }
    pinned = {
        "affinity": {
            "nodeAffinity": {
                REQUIRED: {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                    ]
                }
            }
        }
    }
    assert loosened_on(zone_b, pinned, [node]) == ["n1"]
    assert loosened_on(pinned, zone_b, [node]) == []


def test_a_vm_selector_is_owned_only_where_follows_vm_is_recorded() -> None:
    """A CDI worker following a VM gets the VM's nodeSelector keys: added, never changed, and only when the patch
    records `follows-vm`."""
    following = copy.deepcopy(POD)
    following["spec"]["nodeSelector"]["kubevirt.io/schedulable"] = "true"
    assert foreign_changes(POD, following, owned_paths("Pod", following)) != []
    following["metadata"]["annotations"]["storage-affinity.io/follows-vm"] = "fedora"
    assert foreign_changes(POD, following, owned_paths("Pod", following)) == []
    following["spec"]["nodeSelector"]["disk"] = "hdd"  # the worker's own key changed: never
    assert foreign_changes(POD, following, owned_paths("Pod", following)) == [
        "spec.nodeSelector.disk: owned field not set when empty: 'ssd' -> 'hdd'"
    ]
