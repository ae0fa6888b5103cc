"""The audit of VirtualMachines against the node their disks are bound on (docs/design.md#12-data-sources): the
table in tests/data/vmaudit, over the CDI/KubeVirt objects of tests/data/datasource/library.yaml and each case's
`state`."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from rules.audit import audit_objects
from rules.model import Json
from rules.policy import default_policy
from tests.support import DATA, load_yaml, table_cases, view_from

DISKS_KEYS = {"findings", "name", "pv_node", "source", "state"}

LIBRARY = load_yaml(DATA / "datasource" / "library.yaml")


def cluster(pv_node: str) -> list[Json]:
    """The CDI set with the DataVolume's claim bound to a TopoLVM PV on `pv_node`, and a third node in zone-b."""
    objects: list[Json] = copy.deepcopy(LIBRARY["objects-cdi"])
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "virt-2",
                "labels": {
                    "kubevirt.io/schedulable": "true",
                    "topology.kubernetes.io/zone": "zone-b",
                    "topology.topolvm.io/node": "virt-2",
                },
            },
        }
    )
    claim = next(o for o in objects if o["metadata"]["name"] == "fedora-root")
    claim["spec"]["volumeName"] = "pvc-fedora-root"
    claim["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"]}
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pvc-fedora-root"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "topolvm-provisioner",
                "csi": {"driver": "topolvm.io", "volumeHandle": "7d1e"},
                "claimRef": {"namespace": claim["metadata"]["namespace"], "name": "fedora-root"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "topology.topolvm.io/node", "operator": "In", "values": [pv_node]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    return objects


@pytest.mark.parametrize("case", table_cases(DATA / "vmaudit" / "disks.yaml", DISKS_KEYS))
def test_vm_disk_audit(case: dict[str, Any]) -> None:
    assert case["source"]
    objects = cluster(case["pv_node"]) + copy.deepcopy(case.get("state", []))
    reader = dataclasses.replace(default_policy(), nodes_readable=True)  # the `audit` command's: every label counts
    reports = audit_objects(objects, view_from(*objects), reader)
    (vm,) = [r for r in reports if r.kind == "VirtualMachine"]
    assert [f.as_json() for f in vm.findings] == case["findings"]
