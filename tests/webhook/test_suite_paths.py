"""A policy test suite is its author's, and may come from a pull request: every file it names must lead under
`test --root` (default: the working directory) to a regular file of bounded size (webhook/files.py). Devices,
FIFOs, `/proc` files, paths out of the root and symlinks out of it each give exit 2 with a problem naming the
suite's key, never a traceback, a hang, an allocation without end or a word of the file's contents; the same
reader serves `review -f`, `--policy` and `--cluster`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DATA
from tests.webhook.commands import run_command
from webhook.files import read_text

PASSING = DATA / "suites" / "passing"
SECRET = "hunter2-do-not-echo"
#: The subprocess's bound: past it the test calls the command hung.
HANG = 60


def suite(tmp_path: Path, **keys: str) -> Path:
    """A suite in `tmp_path/repo/suites` over the passing suite's cluster and pod, with `keys` replaced."""
    where = tmp_path / "repo" / "suites"
    where.mkdir(parents=True)
    for name in ("cluster.yaml", "pod.yaml"):
        (where / name).write_text((PASSING / name).read_text())
    fields = {"policy": "", "cluster": "[cluster.yaml]", "object": "pod.yaml", **keys}
    policy = f"policy: {fields['policy']}\n" if fields["policy"] else ""
    text = (
        f"{policy}cluster: {fields['cluster']}\n"
        f"cases:\n  - name: one\n    object: {fields['object']}\n    expect: {{allowed: true}}\n"
    )
    (where / "storage-affinity-test.yaml").write_text(text)
    return where


def run_suite(tmp_path: Path, where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_command("test", str(where), "--root", str(tmp_path / "repo"), *args, timeout=HANG)


def refused(result: subprocess.CompletedProcess[str], key: str, why: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert SECRET not in result.stderr + result.stdout
    problem = next(line for line in result.stdout.splitlines() + result.stderr.splitlines() if f": {key}" in line)
    assert f"cannot read: {why}" in problem, problem


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file next to the repository, outside its root: `../../secret.yaml` from its suite."""
    path = tmp_path / "secret.yaml"
    path.write_text(f"token: {SECRET}\n{SECRET}: 1\n")
    return path


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("cluster", "[/dev/zero]", "outside"),
        ("cluster", "[/dev/stdin]", "outside"),
        ("policy", "../../secret.yaml", "outside"),
        ("policy", "/etc/passwd", "outside"),
        ("policy", "/proc/self/environ", "outside"),
        ("cases[0].object", "/proc/self/environ", "outside"),
        ("cases[0].object", "../../secret.yaml", "outside"),
    ],
)
def test_a_path_out_of_the_root_is_a_problem_naming_its_key(
    tmp_path: Path, secret: Path, key: str, value: str, why: str
) -> None:
    field = "object" if key.startswith("cases") else key
    result = run_suite(tmp_path, suite(tmp_path, **{field: value}))
    refused(result, key, why)


def test_a_symlink_out_of_the_root_is_followed_and_refused(tmp_path: Path, secret: Path) -> None:
    where = suite(tmp_path, policy="innocent.yaml")
    (where / "innocent.yaml").symlink_to(secret)
    refused(run_suite(tmp_path, where), "policy", "outside")


@pytest.mark.parametrize("make", ["fifo", "device"])
def test_under_the_root_only_regular_files_are_read(tmp_path: Path, make: str) -> None:
    where = suite(tmp_path, cluster="[special]")
    if make == "fifo":
        os.mkfifo(where / "special")  # opening it would wait for a writer for ever
    else:
        (where / "special").symlink_to("/dev/zero")  # read whole, it never ends
        result = run_command("test", str(where), "--root", "/", timeout=HANG)
        refused(result, "cluster", "not a regular file")
        return
    refused(run_suite(tmp_path, where), "cluster", "not a regular file")


def test_the_root_defaults_to_the_working_directory(tmp_path: Path, secret: Path) -> None:
    """Run from the repository (as CI runs from its checkout), with no --root: `../` out of it is refused, a
    suite's `../` inside it is not (the shipped examples share one cluster file)."""
    where = suite(tmp_path, policy="../../secret.yaml")
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "test", "suites"],
        cwd=tmp_path / "repo",
        env={**os.environ, "PYTHONPATH": str(Path.cwd())},
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    refused(result, "policy", "outside")
    (where / "storage-affinity-test.yaml").write_text(
        (where / "storage-affinity-test.yaml").read_text().replace("policy: ../../secret.yaml\n", "")
    )
    assert run_command("test", str(where), "--root", str(tmp_path)).returncode == 0


def test_review_reads_regular_files_of_bounded_size(tmp_path: Path) -> None:
    for args, where in [
        (("-f", "/dev/zero"), "/dev/zero"),
        (("-f", str(PASSING / "pod.yaml"), "--cluster", "/dev/zero"), "/dev/zero"),
        (("-f", str(PASSING / "pod.yaml"), "--policy", "/dev/zero"), "/dev/zero"),
    ]:
        result = run_command("review", *args, timeout=HANG)
        assert result.returncode == 2, result.stderr
        assert f"{where}: cannot read: not a regular file" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_file_past_the_size_bound_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 2048 + "\n")
    with pytest.raises(OSError, match="larger than 0 MiB"):
        read_text(big, limit=1024)
    assert read_text(big, limit=4096).startswith("a: x")
