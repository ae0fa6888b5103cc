"""`audit -o table` on a terminal and off it: sized to the terminal ($COLUMNS first, as `shutil` reads it), long
columns wrapped rather than cut, a block a finding below the narrowest table, a finding a line when written to a
file or a pipe; `-o wide` adds columns and never wraps. The terminal is a real pseudo-terminal (pty), with its
window size set."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from rules.audit import AuditFinding, ObjectAudit
from tests.support import DATA, EXAMPLES, ROOT
from webhook.audit.command import AuditRun
from webhook.audit.output import WRAPPED, render_table

FILES = [str(EXAMPLES / "cluster.yaml"), str(DATA / "audit" / "findings.yaml")]
POLICY = str(EXAMPLES / "policy-load-affinity.yaml")
ARGS = ["audit", "--cluster", *FILES, "--policy", POLICY]


def environment(columns: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT)
    return env if columns is None else {**env, "COLUMNS": columns}


def on_terminal(args: list[str], width: int, columns: str | None = None) -> str:
    """What the command writes to a terminal `width` characters wide (with $COLUMNS when given)."""
    main_fd, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    command = [sys.executable, "-m", "webhook", *args]
    with subprocess.Popen(command, stdout=terminal, stderr=subprocess.PIPE, env=environment(columns)) as proc:
        os.close(terminal)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 1, proc.stderr.read() if proc.stderr else ""
    os.close(main_fd)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def piped(args: list[str], columns: str | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        check=False,
        capture_output=True,
        text=True,
        env=environment(columns),
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def messages() -> list[str]:
    report = json.loads(piped([*ARGS, "-o", "json"]))
    found = [f["message"] for o in report["objects"] for f in o["findings"]]
    assert max(len(m) for m in found) > 200, "the corpus must have messages longer than a terminal line"
    return found


def rows(table: str) -> list[str]:
    """The lines of the table proper: no summary, no blank line, no trailing newline."""
    return table.rstrip("\n").split("\n")[:-2]


def assert_whole(table: str, messages: list[str]) -> None:
    """Every word of every message is in the table, whole (a message wraps at spaces only)."""
    words = set(table.split())
    for message in messages:
        assert set(message.split()) <= words, message


def test_off_a_terminal_without_columns_a_finding_is_a_line(messages: list[str]) -> None:
    table = piped([*ARGS, "-o", "table"])
    assert len(rows(table)) == 1 + len(messages)
    for message in messages:
        assert any(line.endswith("  " + message) for line in rows(table)), message


def test_off_a_terminal_columns_set_wraps_to_it(messages: list[str]) -> None:
    table = piped([*ARGS, "-o", "table"], columns="200")
    assert len(rows(table)) > 3 * len(messages)
    assert max(len(line) for line in table.splitlines()) <= 200
    assert_whole(table, messages)


def test_on_a_terminal_the_table_is_the_default_and_fits_its_width(messages: list[str]) -> None:
    table = on_terminal(ARGS, 210)
    assert table.startswith("OBJECT ")
    assert max(len(line) for line in table.splitlines()) <= 210
    assert len(rows(table)) > 2 * len(messages)
    assert_whole(table, messages)


def test_on_a_terminal_columns_comes_first(messages: list[str]) -> None:
    table = on_terminal([*ARGS, "-o", "table"], 210, columns="300")
    assert 210 < max(len(line) for line in table.splitlines()) <= 300
    assert_whole(table, messages)


def test_wide_adds_phase_and_remedy_and_never_wraps(messages: list[str]) -> None:
    table = on_terminal([*ARGS, "-o", "wide"], 100)
    header = rows(table)[0].split()
    assert header[:3] == ["OBJECT", "ROLE", "PHASE"] and header[-2:] == ["MESSAGE", "REMEDY"]
    assert len(rows(table)) == 1 + len(messages)
    assert_whole(table, messages)


def test_a_stuck_pod_s_remedy_is_in_the_wide_table() -> None:
    table = piped(
        ["audit", "--cluster", str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "stuck-mover-pod.yaml"), "-o", "wide"]
    )
    report = json.loads(
        piped(
            ["audit", "--cluster", str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "stuck-mover-pod.yaml"), "-o", "json"]
        )
    )
    remedies = [o["cause"]["remedy"] for o in report["objects"] if "cause" in o]
    assert remedies and all(any(line.endswith("  " + r) for line in rows(table)) for r in remedies)


def blocks(text: str) -> list[str]:
    """The findings of a narrow terminal's output: one block each, the summary last."""
    return text.rstrip("\n").split("\n\n")[:-1]


def assert_blocks_fit(text: str, messages: list[str], width: int) -> None:
    """One `OBJECT …` block a finding, every line within `width`, every message whole."""
    found = blocks(text)
    assert len(found) == len(messages)
    assert all(block.startswith("OBJECT ") for block in found)
    assert all(line.startswith("  ") for block in found for line in block.splitlines()[1:])
    assert max(len(line) for line in text.splitlines()) <= width
    assert_whole(text, messages)


@pytest.mark.parametrize("width", [80, 100])
def test_on_a_terminal_narrower_than_the_table_a_finding_is_a_block(messages: list[str], width: int) -> None:
    """The narrowest table is wider than these terminals (its columns' minimums): rows the terminal itself wrapped
    would be unreadable, so each finding is a block of `key: value` lines."""
    text = on_terminal([*ARGS, "-o", "table"], width)
    assert_blocks_fit(text, messages, width)
    assert f" objects audited: {len(messages)} findings in " in text.split("\n\n")[-1]


def test_off_a_terminal_columns_80_gives_blocks_too(messages: list[str]) -> None:
    assert_blocks_fit(piped([*ARGS, "-o", "table"], columns="80"), messages, 80)


def test_on_a_terminal_columns_80_comes_first(messages: list[str]) -> None:
    assert_blocks_fit(on_terminal([*ARGS, "-o", "table"], 210, columns="80"), messages, 80)


@pytest.mark.parametrize("columns", ["²", "-3", "80x", ""])
def test_a_columns_that_is_no_width_is_ignored(messages: list[str], columns: str) -> None:
    table = piped([*ARGS, "-o", "table"], columns=columns)
    assert len(rows(table)) == 1 + len(messages)


def test_narrower_than_the_columns_need_nothing_is_cut() -> None:
    """Below the narrowest the wrapping columns go (WRAPPED), each finding is a block within the width; a node name
    stays whole, a field path wraps after a dot."""
    node = "ip-10-0-1-17.ec2.internal"
    report = ObjectAudit("Pod", "shop", "db-0", node=node, placement="misplaced", wanted=f"node {node} (with pod a)")
    message = f"claim data is in use on node {node} " + "detail " * 20 + "remedy"
    report.findings.append(
        AuditFinding("placement", "spec.volumes[0].persistentVolumeClaim.claimName", message, "deny")
    )
    table = render_table(AuditRun([report]), 50)
    lines = table.splitlines()
    assert lines[0] == "OBJECT pod/shop/db-0"
    assert lines[1] == "  role:      -"
    assert max(len(line) for line in lines) <= 50
    assert sum(WRAPPED.values()) > 50
    assert table.split().count(node) == 3  # node, placement and message
    assert set(message.split()) <= set(table.split())
    assert [w for w in table.split() if w.startswith(("spec.", "persistentVolumeClaim.", "claimName"))] == [
        "spec.volumes[0].",
        "persistentVolumeClaim.claimName",
    ]
