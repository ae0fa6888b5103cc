"""The optional API groups (webhook/state/optional.py): VolumeSnapshots, their contents, KubeVirt VirtualMachines,
CDI DataVolumes and Gateway API ReferenceGrants are listed and watched only while discovery finds their group
served; an absent group is a readiness detail that stays "ok", never an error or a failed start."""

from __future__ import annotations

import time

from rules.model import Json
from testkit import sourceobjects
from testkit.fakeapi import OPTIONAL_GROUPS, FakeKubeAPI
from tests.state.conftest import Live, eventually
from tests.support import dig


def snapshot(name: str = "snap-1", claim: str = "db") -> Json:
    return sourceobjects.volume_snapshot(name, "apps", claim, content=f"content-{name}")


def content(name: str = "content-snap-1") -> Json:
    return sourceobjects.snapshot_content(name, driver="topolvm.io", handle="h-1")


def vm(name: str = "fedora", disk: str = "fedora-root") -> Json:
    template = {"nodeSelector": {"kubevirt.io/schedulable": "true"}}
    return sourceobjects.virtual_machine(name, "apps", template, disks=[{"metadata": {"name": disk}}])


def data_volume(name: str = "fedora-root", phase: str = "ImportInProgress") -> Json:
    source = {"http": {"url": "https://example.invalid/disk.qcow2"}}
    return sourceobjects.data_volume(
        name, "apps", source=source, storage={}, phase=phase, progress="12.5%", restartCount=0
    )


def reference_grant(name: str = "payroll-clones", to_name: str = "payroll") -> Json:
    """A grant in `hr` letting claims of `tenant-a` clone `hr/payroll` (gateway-api apis/v1beta1
    referencegrant_types.go; the example of kubernetes/enhancements keps/sig-storage/3294)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": name, "namespace": "hr"},
        "spec": {
            "from": [{"group": "", "kind": "PersistentVolumeClaim", "namespace": "tenant-a"}],
            "to": [{"group": "", "kind": "PersistentVolumeClaim", "name": to_name}],
        },
    }


def test_served_groups_are_listed_and_watched(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.create(snapshot())
    fake_api.create(content())
    fake_api.create(vm())
    fake_api.create(data_volume())
    fake_api.create(reference_grant())
    state, runtime = live()

    eventually(lambda: state.volume_snapshot("apps", "snap-1"), what="the snapshot listed")
    eventually(runtime.ready, what="ready with every optional group synced")
    assert dig(state.volume_snapshot_content("content-snap-1"), "spec", "driver") == "topolvm.io"
    assert [v["metadata"]["name"] for v in state.virtual_machines_using("apps", "fedora-root")] == ["fedora"]
    assert runtime.readiness()["snapshot.storage.k8s.io"] == "ok"
    assert runtime.readiness()["cdi.kubevirt.io"] == "ok"
    assert runtime.readiness()["gateway.networking.k8s.io"] == "ok"
    # trimmed to what the grant check reads
    assert state.reference_grants("hr") == [
        {
            "kind": "ReferenceGrant",
            "metadata": {"name": "payroll-clones", "namespace": "hr"},
            "spec": {
                "from": [{"group": "", "kind": "PersistentVolumeClaim", "namespace": "tenant-a"}],
                "to": [{"group": "", "kind": "PersistentVolumeClaim", "name": "payroll"}],
            },
        }
    ]
    assert state.reference_grants("tenant-a") == []
    # trimmed to what the rules read: the phase and the claim, not the spec or the progress; the UID an audit Event
    # names it by
    stored = fake_api.get("DataVolume", "apps", "fedora-root")
    assert stored is not None
    assert state.data_volume("apps", "fedora-root") == {
        "kind": "DataVolume",
        "metadata": {"name": "fedora-root", "namespace": "apps", "uid": stored["metadata"]["uid"]},
        "status": {"phase": "ImportInProgress", "claimName": "fedora-root"},
    }

    fake_api.update(data_volume(phase="Succeeded"))
    eventually(
        lambda: (state.data_volume("apps", "fedora-root") or {}).get("status", {}).get("phase") == "Succeeded",
        what="a watched DataVolume's phase",
    )
    fake_api.create(snapshot("snap-2"))  # the watch brings later changes
    eventually(lambda: state.volume_snapshot("apps", "snap-2"), what="a watched snapshot")
    fake_api.delete("VirtualMachine", "apps", "fedora")
    eventually(lambda: not state.virtual_machines_using("apps", "fedora-root"), what="a deleted VM forgotten")
    fake_api.delete("ReferenceGrant", "hr", "payroll-clones")
    eventually(lambda: not state.reference_grants("hr"), what="a revoked grant forgotten")


def test_absent_groups_turn_their_features_off_and_stay_ready(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.served_groups.clear()
    state, runtime = live()

    eventually(runtime.ready, what="ready without the optional groups")
    off = "ok (not served: placement from snapshot sources off)"
    eventually(lambda: runtime.readiness()["snapshot.storage.k8s.io"] == off, what="discovery answered")
    readiness = runtime.readiness()
    assert runtime.ready()
    assert readiness["snapshot.storage.k8s.io"] == "ok (not served: placement from snapshot sources off)"
    assert readiness["kubevirt.io"] == "ok (not served: CDI workers following their VM off)"
    assert readiness["cdi.kubevirt.io"] == "ok (not served: DataVolumes named in CDI reasons and VM audits off)"
    assert readiness["gateway.networking.k8s.io"] == "ok (not served: cross-namespace data sources off)"
    assert state.reference_grants("hr") == []
    assert state.volume_snapshot("apps", "snap-1") is None
    assert state.virtual_machines_using("apps", "fedora-root") == []
    assert fake_api.count("GET", "VolumeSnapshot") == 0
    assert fake_api.count("GET", "VirtualMachine") == 0
    assert fake_api.count("GET", "DataVolume") == 0
    assert fake_api.count("GET", "ReferenceGrant") == 0


def test_a_group_that_appears_is_followed_and_one_that_goes_is_dropped(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.served_groups.clear()
    state, runtime = live(rediscover_every=0.2)
    eventually(runtime.ready, what="ready without the optional groups")

    fake_api.served_groups.update(OPTIONAL_GROUPS)
    fake_api.create(snapshot())
    eventually(lambda: state.volume_snapshot("apps", "snap-1"), what="a group that appeared is followed")
    eventually(lambda: runtime.readiness()["snapshot.storage.k8s.io"] == "ok", what="its watch synced")

    fake_api.served_groups.clear()
    eventually(lambda: state.volume_snapshot("apps", "snap-1") is None, what="a group that went away is dropped")
    assert runtime.readiness()["snapshot.storage.k8s.io"] == "ok (not served: placement from snapshot sources off)"


def test_a_discovery_answered_after_stop_starts_no_watch(fake_api: FakeKubeAPI, live: Live) -> None:
    """The first discovery runs in the background: a state stopped before it answers leaves no watch behind."""
    with fake_api.holding(lambda r: r.path.rstrip("/") == "/apis"):
        state, _ = live()
        eventually(lambda: fake_api.held() == 1, what="discovery under way")
        state.stop()
    time.sleep(0.5)  # the held discovery answers now, after stop()
    assert not state.optional.watches()
    assert fake_api.count("GET", "VolumeSnapshot") == 0


def test_loading_waits_for_the_first_discovery_and_the_groups_it_finds(fake_api: FakeKubeAPI, live: Live) -> None:
    """A server must not take reviews before it knows whether snapshots exist: a restore from one reviewed in that
    window would get no placement. Until discovery answers, the state is not loaded; then the served groups' lists
    must land too."""
    fake_api.seed([snapshot()])
    with fake_api.holding(lambda r: r.path.rstrip("/") == "/apis"):
        state, _ = live()
        eventually(lambda: fake_api.held() == 1, what="discovery under way")
        eventually(lambda: all(w.synced for w in state.watches.values()), what="the core lists")
        assert not state.loaded()
    eventually(state.loaded, what="loaded after discovery")
    assert state.optional.watches() and all(w.synced for w in state.optional.watches())
