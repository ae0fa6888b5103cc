"""Run `hey` (the HTTP load generator) and read its summary: answers by status code and errors by message."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_LINE = re.compile(r"^\s*\[(\d+)\]\s+(.*)$")


@dataclass(frozen=True)
class HeyResult:
    statuses: dict[int, int]  # status code -> responses
    errors: dict[str, int]  # error message -> requests that got no response
    summary: str
    rps: float = math.nan
    p50_ms: float = math.nan  # NaN when hey omits it: under 100 answers it prints its p99 as `0% in 0.0000`
    p99_ms: float = math.nan

    @property
    def sent(self) -> int:
        return sum(self.statuses.values()) + sum(self.errors.values())

    @property
    def failed(self) -> int:
        return sum(n for code, n in self.statuses.items() if code != 200) + sum(self.errors.values())

    @property
    def timeouts(self) -> int:
        return sum(n for text, n in self.errors.items() if "timeout" in text.lower() or "deadline" in text.lower())


def hey_binary() -> str:
    found = shutil.which("hey")
    assert found, "hey is not installed (Debian/Ubuntu: apt-get install hey); these load tests need it"
    return found


def start_hey(
    url: str, body: Path, *, seconds: float, concurrency: int, keepalive: bool, rate: int = 0
) -> subprocess.Popen[str]:
    """POST `body` as JSON to `url` for `seconds` from `concurrency` clients, each at most `rate` requests per
    second (0: as fast as answered). hey never verifies certificates."""
    command = [hey_binary(), "-z", f"{seconds}s", "-c", str(concurrency), "-q", str(rate), "-t", "10", "-m", "POST"]
    command += ["-T", "application/json", "-D", str(body)]
    if not keepalive:
        command.append("-disable-keepalive")  # a new connection, hence a new TLS handshake, per request
    return subprocess.Popen([*command, url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_hey(process: subprocess.Popen[str], timeout: float = 60) -> HeyResult:
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out
    return parse_summary(out)


def parse_summary(text: str) -> HeyResult:
    statuses: dict[int, int] = {}
    errors: dict[str, int] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("Status code distribution:"):
            section = "status"
        elif line.startswith("Error distribution:"):
            section = "error"
        elif line and not line[0].isspace():
            section = ""
        elif section and (match := _LINE.match(line)):
            if section == "status":
                statuses[int(match[1])] = int(match[2].split()[0])
            else:
                errors[match[2]] = int(match[1])
    assert statuses or errors, f"no hey summary in: {text[-2000:]}"
    return HeyResult(
        statuses,
        errors,
        text,
        rps=_number(r"Requests/sec:\s+([\d.]+)", text),
        p50_ms=_number(r"\s50% in ([\d.]+) secs", text) * 1000,
        p99_ms=_number(r"\s99% in ([\d.]+) secs", text) * 1000,
    )


def _number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    return float(found.group(1)) if found else math.nan
