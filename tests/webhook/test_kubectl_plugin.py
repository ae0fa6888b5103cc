"""`kubectl storage-affinity`: installing the package puts `kubectl-storage_affinity` in its bin directory, and the
real kubectl (`make kubectl-tools` installs it) runs it as a plugin: kubectl's naming turns the dash into `_`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from tests.support import EXAMPLES, ROOT

BIN = Path(sys.executable).parent  # the environment's bin directory, where console scripts are installed


def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("kubectl")
    assert found, "no kubectl on PATH: `make kubectl-tools` installs it (Debian package kubernetes-client)"
    path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
    return subprocess.run(
        [found, *args],
        check=False,
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_package_installs_the_plugin_command() -> None:
    assert (BIN / "kubectl-storage_affinity").is_file()


def test_kubectl_runs_the_plugin_for_its_version() -> None:
    result = kubectl("storage-affinity", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kubectl storage-affinity {version('storage-affinity-webhook')}\n"


def test_kubectl_passes_a_command_and_its_exit_code_through() -> None:
    allowed = kubectl("storage-affinity", "review", "-f", str(EXAMPLES / "plain-pod.yaml"), "-o", "patch")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "[]"
    denied = kubectl("storage-affinity", "review", "-f", str(EXAMPLES / "bad-annotations-pod.yaml"))
    assert denied.returncode == 1
    assert "Error: storage-affinity-webhook denied: 2 problems" in denied.stderr
    usage = kubectl("storage-affinity", "nonsense")
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: kubectl storage-affinity ")
