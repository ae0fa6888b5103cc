"""Certificate mode `self` wired through the CLI: `rotate-certs --once` against a Kubernetes API test server."""

from __future__ import annotations

import argparse
import base64
import subprocess
import sys
from pathlib import Path

from certs.issue import load_pair
from tests.certs.kube import SECRETS, api_server
from tests.support import ROOT
from webhook.serving.selfcerts import rotator_command

NS = "saw-system"


def test_rotate_once_issues_into_the_secret_and_the_files(tmp_path: Path) -> None:
    with api_server() as (api, url):
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
            f"clusters: [{{name: t, cluster: {{server: '{url}'}}}}]\n"
            "contexts: [{name: t, context: {cluster: t, user: t}}]\nusers: [{name: t, user: {}}]\n"
        )
        command = [
            sys.executable,
            "-m",
            "webhook",
            "rotate-certs",
            "--once",
            "--namespace",
            NS,
            "--kubeconfig",
            str(kubeconfig),
            "--cert-dir",
            str(tmp_path / "tls"),
            "--cert-secret",
            "saw-tls",
            "--service",
            "saw",
        ]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        secret = api.stored(SECRETS, NS, "saw-tls")
    assert secret is not None
    stored = base64.b64decode(secret["data"]["tls.crt"])
    served = (tmp_path / "tls" / "tls.crt").read_bytes()
    assert (
        load_pair(served, (tmp_path / "tls" / "tls.key").read_bytes()).cert
        == load_pair(stored, base64.b64decode(secret["data"]["tls.key"])).cert
    ), "the server's files hold the certificate stored in the Secret"
    assert (tmp_path / "tls" / "tls.key").stat().st_mode & 0o777 == 0o600


def test_serve_passes_its_settings_to_the_rotator() -> None:
    args = argparse.Namespace(
        namespace=NS,
        cert_dir=Path("/tmp/certs"),
        cert_secret="s",
        service="svc",
        mutating_webhook="m",
        validating_webhook=None,
        kubeconfig=None,
    )
    assert rotator_command(args, once=True)[3:] == [
        "rotate-certs",
        "--namespace",
        NS,
        "--cert-dir",
        "/tmp/certs",
        "--cert-secret",
        "s",
        "--service",
        "svc",
        "--mutating-webhook",
        "m",
        "--once",
    ]


def test_self_mode_without_its_settings_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--cert", "x", "--key", "y", "--cert-mode", "self"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip() == "storage-affinity-webhook: --cert-mode self needs --cert-dir, --cert-secret, --service"
    )
