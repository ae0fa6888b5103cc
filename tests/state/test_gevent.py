"""Live state under gevent monkey-patching (what a gunicorn gevent worker runs): it syncs and never stalls the hub."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


def test_live_state_syncs_in_a_gevent_patched_process_without_stalling_it(tmp_path: Path) -> None:
    probe = Path(__file__).with_name("gevent_probe.py")
    result = subprocess.run(
        [sys.executable, str(probe), str(tmp_path)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r"^ok max-gap=([\d.]+)$", result.stdout, re.MULTILINE)
    assert match, result.stdout
    assert float(match[1]) < 1.0  # 3000 pods listed and indexed; request greenlets kept being scheduled
