"""`python -m bench.datasources`: readiness time and memory of one replica when the cluster also holds
VolumeSnapshots (with their contents), KubeVirt VirtualMachines and CDI DataVolumes, which the server follows only
because their API groups are served (docs/design.md#12-data-sources).

The cluster is the benchmark's (`bench.workload`: pods, a fifth with a claim and a PV, pods/100 nodes) plus
`--snapshots` VolumeSnapshots of those claims with their VolumeSnapshotContents and `--vms` VirtualMachines, each
with a DataVolume template and a node selector, and that DataVolume (CDI's, once imported). The same run without the
optional groups served is the baseline: the difference is what following them costs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import servers, workload
from bench.replica import LISTED, loaded
from bench.report import header, save, step
from rules.model import Json
from testkit.server import issue_certs
from testkit.sourceobjects import data_volume, snapshot_content, virtual_machine, volume_snapshot

OPTIONAL = ("VolumeSnapshot", "VolumeSnapshotContent", "VirtualMachine", "DataVolume")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.datasources", description=__doc__)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--snapshots", type=int, default=10_000)
    parser.add_argument("--vms", type=int, default=1_000)
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    args = parser.parse_args(argv)
    servers.off_server_cpus()
    result = header(pods=args.pods, snapshots=args.snapshots, vms=args.vms)
    with tempfile.TemporaryDirectory(prefix="saw-datasources-") as tmp_dir:
        tmp = Path(tmp_dir)
        certs = tmp / "certs"
        issue_certs(certs)
        objects = workload.base_objects() + workload.bulk_objects(args.pods)
        result |= both(tmp, certs, objects, args.snapshots, args.vms)
    print(save(result, keep=args.keep))
    return 0


def both(tmp: Path, certs: Path, objects: list[Json], snapshots: int, vms: int) -> dict[str, Any]:
    """The replica without the optional groups served, then with them and `snapshots` snapshots and `vms` VMs."""
    objects = objects + source_objects(objects, snapshots, vms)
    out: dict[str, Any] = {}
    for served in (False, True):
        name = "with_groups" if served else "without_groups"
        step(f"{name}: {snapshots:,} snapshots, {vms:,} VMs")
        out[name] = measure(tmp / name, certs, objects, served)
    return out


def source_objects(objects: list[Json], snapshots: int, vms: int) -> list[Json]:
    """Snapshots (and contents) of the first `snapshots` bound claims, and `vms` VMs, one DataVolume each (its
    object too, as CDI leaves it once the import succeeded)."""
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim" and o["spec"].get("volumeName")]
    out: list[Json] = []
    for i, claim in enumerate(claims[:snapshots]):
        namespace, name = claim["metadata"]["namespace"], f"snap-{i:06d}"
        content = f"snapcontent-{i:06d}"
        out.append(volume_snapshot(name, namespace, claim["metadata"]["name"], content=content, uid=f"snap-uid-{i}"))
        out.append(
            snapshot_content(
                content,
                driver="ebs.csi.aws.com",
                handle=f"vol-{claim['spec']['volumeName']}",
                snapshot={"kind": "VolumeSnapshot", "name": name, "namespace": namespace},
                status={"readyToUse": True, "snapshotHandle": f"snap-{i:017x}"},
            )
        )
    for i in range(vms):
        disk, namespace = f"vm-{i:05d}-root", f"team-{i % 50:02d}"
        template = {
            "nodeSelector": {"kubevirt.io/schedulable": "true"},
            "domain": {"devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]}},
            "volumes": [{"name": "root", "dataVolume": {"name": disk}}],
        }
        templates = [{"metadata": {"name": disk}, "spec": {"source": {"blank": {}}}}]
        out.append(virtual_machine(f"vm-{i:05d}", namespace, template, disks=templates, run_strategy="Always"))
        storage = {"resources": {"requests": {"storage": "30Gi"}}}
        out.append(
            data_volume(disk, namespace, source={"blank": {}}, storage=storage, phase="Succeeded", progress="100.0%")
        )
    return out


def measure(tmp: Path, certs: Path, objects: list[Json], served: bool) -> dict[str, Any]:
    kinds = LISTED + (OPTIONAL if served else ())
    total = sum(1 for obj in objects if obj["kind"] in kinds)
    with servers.live_server(tmp, certs, objects, workload.POLICY, tmp.name, served_groups=served) as srv:
        return loaded(srv, kinds, total)


if __name__ == "__main__":
    sys.exit(main())
