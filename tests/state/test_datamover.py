"""Velero's DataUploads (webhook/state/kinds.py, watched in Velero's namespace alone): listed and watched in the
namespace the policy names, under the chart's Role there (the fake API refuses anything else), trimmed to the
claim they back up; not at all while the policy names none; followed to another namespace when a reloaded policy
names another."""

from __future__ import annotations

from rules.datasource.exposer import data_mover_namespace
from rules.policy import policy_from_document
from testkit.exposerchain import data_upload
from testkit.fakeapi import FakeKubeAPI
from testkit.fakeapi.resources import PATH
from tests.state.conftest import Live, eventually
from tests.state.objects import policy_map

FEATURE = "backup pods of Velero's CSI data mover placed by their source volume"


def _namespaces_listed(fake_api: FakeKubeAPI) -> set[str | None]:
    matches = [PATH.match(r.path) for r in list(fake_api.requests)]
    return {m["ns"] for m in matches if m and m["plural"] == "datauploads"}


def test_data_uploads_are_read_in_the_namespace_the_policy_names(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.seed([data_upload("nightly-7hx2q", "shop", "db"), data_upload("spoof-1", "shop", "db", namespace="shop")])
    fake_api.create(policy_map({"nodeAgent": {"namespace": "velero"}}))
    state, runtime = live()

    eventually(lambda: state.data_upload("velero", "nightly-7hx2q"), what="the DataUpload listed")
    eventually(runtime.ready, what="ready with the DataUploads synced")
    assert runtime.readiness()["velero.io"] == "ok"
    assert state.data_upload("velero", "nightly-7hx2q") == {
        "kind": "DataUpload",
        "metadata": {"name": "nightly-7hx2q", "namespace": "velero"},
        "spec": {"sourceNamespace": "shop", "sourcePVC": "db"},
    }
    assert state.data_upload("shop", "spoof-1") is None
    assert _namespaces_listed(fake_api) == {"velero"}
    fake_api.create(data_upload("nightly-9zq4w", "shop", "logs"))  # the watch brings later ones
    eventually(lambda: state.data_upload("velero", "nightly-9zq4w"), what="a watched DataUpload")

    fake_api.update(policy_map({"nodeAgent": {"namespace": "openshift-adp"}}))  # reloaded: another namespace
    eventually(lambda: data_mover_namespace(runtime.policy) == "openshift-adp", what="the policy reloaded")
    eventually(lambda: state.data_upload("velero", "nightly-7hx2q") is None, what="the old namespace's forgotten")
    fake_api.create(data_upload("adp-1", "shop", "db", namespace="openshift-adp"))
    eventually(lambda: state.data_upload("openshift-adp", "adp-1"), what="the new namespace's listed")
    assert _namespaces_listed(fake_api) == {"velero", "openshift-adp"}


def test_a_policy_that_names_no_velero_namespace_reads_no_data_upload(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.seed([data_upload("nightly-7hx2q", "shop", "db")])
    state, runtime = live()

    eventually(runtime.ready, what="ready")
    off = f"ok (the policy names no Velero namespace: {FEATURE} off)"
    eventually(lambda: runtime.readiness()["velero.io"] == off, what="discovery answered")
    assert state.data_upload("velero", "nightly-7hx2q") is None
    assert fake_api.count("GET", "DataUpload") == 0


def test_a_cluster_without_velero_stays_ready(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.served_groups.discard("velero.io")
    _, runtime = live(base=policy_from_document({"nodeAgent": {"namespace": "velero"}}))
    eventually(runtime.ready, what="ready")
    off = f"ok (not served: {FEATURE} off)"
    eventually(lambda: runtime.readiness()["velero.io"] == off, what="discovery answered")
    assert fake_api.count("GET", "DataUpload") == 0
