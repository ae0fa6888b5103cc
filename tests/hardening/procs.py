"""The gunicorn master's worker processes, read from /proc (no psutil in the test environment)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(entry.name))
    return out


def wait_for_workers(master: int, count: int, timeout: float = 30.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while True:
        found = children(master)
        if len(found) == count:
            return found
        assert time.monotonic() < deadline, f"master {master} has workers {found}, expected {count}"
        time.sleep(0.05)


def client_connections(pid: int, port: int) -> int:
    """Established TCP connections process `pid` holds on local port `port` (its clients' connections)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            local_port = int(cols[1].rsplit(":", 1)[1], 16)
            if cols[3] == "01" and local_port == port and cols[9] in inodes:  # 01 = ESTABLISHED
                count += 1
    return count
