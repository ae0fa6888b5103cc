"""Every command shown in README.md and docs/ runs as shown (or, for a cluster, is checked as far as a machine
without one can): documentation that drifts from the code fails here.

Commands live in ```console blocks, one per `$ ` line (a trailing `\\` continues it); a trailing `# exit N` says
the exit code it must end with (0 otherwise). Lines after a command are its shown output and are not compared:
they are often shortened. How each command is run:

- `storage-affinity-webhook ...`, `python -m ...`: run from the repository root, `.venv/bin` first on PATH
  (`python -m bench...`, which takes minutes, with `--help`);
- `make TARGET`: `make -n TARGET` (what it would do), except `make run`, which is started in the background for
  the page's `curl` commands (on a free port);
- `helm template|lint ...` run with the helm `make unit` installs; `helm install|upgrade ...` are rendered with
  `helm template` and the same arguments;
- `pipx install ...` installs into the reader's environment: its argument is the repository (`.`) or a pattern
  that matches the wheel `make dist` builds of this version;
- `kubectl ...`, `helm uninstall ...`, `docker ...` need a cluster or a container runtime: every file they name
  must exist (and parse, for YAML), and nothing more.

Any other command fails the test, so a new kind of command in the docs must be taught here first.
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
import requests

from testkit import yamldocs
from testkit.server import free_port
from tests.support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
_EXIT = re.compile(r"\s+#\s*exit (\d+)\b.*$")
CLUSTER_ONLY = ("kubectl", "docker")
_ASSIGNMENT = re.compile(r"[A-Z_]+=\S+")


@dataclass(frozen=True)
class Command:
    page: Path
    line: str
    exit_code: int

    @property
    def words(self) -> list[str]:
        return shlex.split(self.line, comments=True)

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}: $ {self.line}"


def commands(page: Path) -> list[Command]:
    found: list[Command] = []
    for block in _FENCE.finditer(page.read_text()):
        lines = [line.removeprefix(block["indent"]) for line in block["body"].splitlines()]
        if block["info"].strip() in ("sh", "bash", "shell", "shell-session"):
            raise AssertionError(f"{page.name}: use ```console with `$ ` prompts, so the commands are run")
        if block["info"].strip() != "console":
            continue
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ "):
                line = lines[i][2:]
                while line.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line[:-1].rstrip() + " " + lines[i].strip()
                code = _EXIT.search(line)
                line = _EXIT.sub("", line)
                found.append(Command(page, line.strip(), int(code[1]) if code else 0))
            i += 1
    return found


ALL = [command for page in PAGES for command in commands(page)]


def test_the_docs_show_commands_and_none_outside_console_blocks() -> None:
    assert len(ALL) >= 20
    for page in PAGES:
        text = _FENCE.sub("", page.read_text())
        indented = [line for line in text.splitlines() if re.match(r"^ {4}\$ ", line)]
        assert indented == [], f"{page.name}: commands in an indented block are not run: {indented[:2]}"


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT / ".venv" / "bin"), str(ROOT / ".tools" / "bin"), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path}


def _run(words: list[str], expected: int, what: Command, *, cwd: Path = ROOT, timeout: float = 120) -> str:
    result = subprocess.run(words, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False)
    out = result.stdout + result.stderr
    assert result.returncode == expected, f"{what}\nexit {result.returncode}, expected {expected}:\n{out[-2000:]}"
    assert "Traceback" not in out, f"{what}\n{out[-2000:]}"
    return out


def _check_files(command: Command) -> None:
    """A cluster-only command: the files it names must exist, and YAML ones parse."""
    words = command.words
    for flag, value in itertools.pairwise(words):
        if flag in ("-f", "--filename") or (flag == "build" and value != "-"):
            path = ROOT / (value if flag != "build" else f"{value}/Dockerfile")
            assert path.exists(), f"{command}: {path} does not exist"
            if path.suffix in (".yaml", ".yml"):
                list(yamldocs.load_all(path.read_text()))


def _helm() -> str:
    found = shutil.which("helm", path=str(ROOT / ".tools" / "bin"))
    assert found, "no helm in .tools/bin: `make unit` and `make chart-test` install it (scripts/install-helm.sh)"
    return found


def _helm_words(command: Command) -> list[str]:
    """`helm install|upgrade RELEASE CHART ...` as `helm template RELEASE CHART ...`: what would be applied, through
    bash, since the docs may compute a value (`$(base64 -w0 ca.crt)`)."""
    dropped = {"--create-namespace", "--reuse-values", "--wait", "--atomic", "--install"}
    line = command.line.split("#", 1)[0].split(maxsplit=2)[2]
    kept = " ".join(w for w in line.split(" ") if w not in dropped)
    return ["bash", "-c", f"{shlex.quote(_helm())} template {kept}"]


def _helm_dir(stack: ExitStack) -> Path:
    """A directory where the docs' relative paths work (`charts/`) and that has a CA (`ca.crt`) to pass."""
    directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="docs-helm-")))
    (directory / "charts").symlink_to(ROOT / "charts")
    subprocess.run(
        ["storage-affinity-webhook", "certs", "--service", "s", "--namespace", "n", "--out", str(directory)],
        env=_env(),
        check=True,
        capture_output=True,
    )
    return directory


@contextmanager
def _make_run() -> Iterator[int]:
    """`make run` on a free port, until the page's commands are done; its own process group, stopped whole."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            ["make", "run", f"BIND=127.0.0.1:{port}"],
            cwd=ROOT,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            ca = ROOT / "dev-certs" / "ca.crt"  # `make run` issues it first on a fresh clone
            deadline = time.monotonic() + 120
            while not _ready(port, ca):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise AssertionError(f"make run did not become ready:\n{log.read().decode()[-3000:]}")
                time.sleep(0.2)
            yield port
        finally:
            with contextlib.suppress(ProcessLookupError):  # make run may have ended already, which the error says
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def _ready(port: int, ca: Path) -> bool:
    try:
        return ca.is_file() and requests.get(f"https://localhost:{port}/readyz", verify=str(ca), timeout=1).ok
    except requests.RequestException:
        return False


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_command_of_the_page_runs_as_shown(page: Path) -> None:
    shown = commands(page)
    if not shown:
        pytest.skip("no commands on this page")
    with ExitStack() as stack:
        port: int | None = None
        for command in shown:
            words = command.words
            program = Path(words[0]).name
            if program == "storage-affinity-webhook" or words[:3] == ["python", "-m", "webhook"]:
                _run(words, command.exit_code, command)
            elif program == "python" and words[1] == "-m" and words[2].split(".")[0] == "bench":
                _run([*words[:3], "--help"], 0, command)
            elif program == "python" and words[1] == "-m":
                _run(words, command.exit_code, command)
            elif program == "make" and words[1] == "run":
                if port is None:
                    port = stack.enter_context(_make_run())
            elif program == "make":
                _run(["make", "-n", *words[1:]], 0, command)
            elif program == "curl":
                if port is None:
                    port = stack.enter_context(_make_run())
                line = command.line.replace("127.0.0.1:8443", f"127.0.0.1:{port}")
                _run([*shlex.split(line), "--fail-with-body", "-sS"], command.exit_code, command)
            elif program == "helm" and words[1] in ("install", "upgrade"):
                _run(_helm_words(command), 0, command, cwd=_helm_dir(stack))
            elif program == "helm" and words[1] in ("template", "lint"):
                _run([_helm(), *words[1:]], command.exit_code, command)
            elif len(words) == 1 and _ASSIGNMENT.fullmatch(words[0]):
                continue  # a shell variable the page's cluster commands use
            elif words[:2] == ["pipx", "install"]:
                _check_pipx(command)
            elif program in CLUSTER_ONLY or words[:2] == ["helm", "uninstall"]:
                _check_files(command)
            else:
                raise AssertionError(
                    f"{command}: no way to run or check this command: teach tests/docs/test_commands.py"
                )


def _check_pipx(command: Command) -> None:
    """`pipx install .` or `pipx install dist/<the wheel make dist builds>`."""
    (target,) = command.words[2:]
    wheel = f"dist/storage_affinity_webhook-{metadata.version('storage-affinity-webhook')}-py3-none-any.whl"
    assert target == "." or fnmatch.fnmatch(wheel, target), f"{command}: installs neither the clone nor {wheel}"
