"""How `serve` picks live state: the CLI's checks and the runtime bootstrap builds for each worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.fakeapi import FakeKubeAPI
from tests.state.conftest import NAMESPACE, eventually
from tests.state.objects import policy_map
from webhook.cli import main as cli
from webhook.serving.bootstrap import _writers, build_runtime
from webhook.settings import Settings
from webhook.state.live import LiveClusterState
from webhook.state.static import load_static_state


@pytest.fixture
def pem_files(tmp_path: Path) -> list[str]:
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_text("not read by these tests\n")
    return ["--cert", str(tmp_path / "tls.crt"), "--key", str(tmp_path / "tls.key")]


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POD_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.mark.usefixtures("no_cluster")
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--namespace", "x"], "no Kubernetes API to read live state from: not in a cluster, no --kubeconfig"),
        (["--namespace", "x", "--kubeconfig", "/nonexistent"], "cannot load the Kubernetes API settings: "),
        ([], "live state needs --namespace (or $POD_NAMESPACE) to find the policy ConfigMap"),
        (["--namespace", "x", "--lookup-timeout", "5"], "--lookup-timeout 5: must be more than 0 and less than 5"),
        (
            ["--namespace", "x", "--lease-duration", "10", "--lease-renew-deadline", "10"],
            "--lease-retry-period 2 < --lease-renew-deadline 10 < --lease-duration 10 is required",
        ),
    ],
)
def test_serve_without_cluster_files_refuses_to_start_without_an_api(
    pem_files: list[str], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve", *pem_files, *extra]) == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith(f"storage-affinity-webhook: {message}")


def test_bootstrap_builds_live_state_that_reloads_the_named_policy(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    fake_api.create(policy_map({"enforcement": "warn"}, name="custom"))
    settings = Settings(
        cert=tmp_path / "tls.crt",
        key=tmp_path / "tls.key",
        live=True,
        kubeconfig=fake_api.write_kubeconfig(tmp_path / "kubeconfig"),
        namespace=NAMESPACE,
        policy_configmap="custom",
        lookup_timeout=0.3,
    )
    runtime = build_runtime(settings)
    state = runtime.view
    assert isinstance(state, LiveClusterState)
    try:
        assert state.options.lookup_timeout == 0.3
        eventually(lambda: runtime.policy.enforcement == "warn", timeout=10)
        assert runtime.policy_source == f"ConfigMap {NAMESPACE}/custom"
        assert set(runtime.checks) >= {"pods", "nodes", "policy-configmap", "velero-configmap"}
    finally:
        state.stop()


def test_static_mode_is_unchanged(tmp_path: Path) -> None:
    runtime = build_runtime(Settings(cert=tmp_path / "c", key=tmp_path / "k", cluster_files=()))
    assert type(runtime.view) is type(load_static_state([]))
    assert runtime.checks == {}


@pytest.mark.parametrize(
    ("reports", "events", "wanted"),
    [("off", "off", (False, False, False)), ("off", "on", (True, False, True)), ("auto", "off", (True, True, False)),
     ("auto", "on", (True, True, True))],
)  # fmt: skip
def test_the_lease_is_taken_when_reports_or_events_are_written(
    fake_api: FakeKubeAPI, tmp_path: Path, reports: str, events: str, wanted: tuple[bool, bool, bool]
) -> None:
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    settings = Settings(
        cert=tmp_path / "c", key=tmp_path / "k", namespace=NAMESPACE, live=True, kubeconfig=kubeconfig,
        reports=reports, events=events,
    )  # fmt: skip
    lease, writer, recorder = _writers(settings)
    assert (lease is not None, writer is not None, recorder is not None) == wanted
    if recorder is not None:
        assert lease is not None and recorder.may_write == lease.remaining  # Events only while the Lease is held
