"""The command line run as a user runs it: `python -m webhook ...` from the repository root, in a subprocess."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT


def run_command(*args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `storage-affinity-webhook ARGS...` (stdout and stderr captured as text; never raises on the exit code)."""
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        check=False,
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
