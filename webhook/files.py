"""Reading a file the command line was given: a regular file only, of bounded size, and for a policy test suite
only under the suite's directory (or `test --root`).

Suites run in CI from pull requests, so a path in a suite is its author's: `cluster: [/dev/zero]` must not
allocate until the machine gives out, `/dev/stdin` or a FIFO must not block, and `../../secret.yaml`,
`/etc/passwd` or `/proc/self/environ` must not be read and their keys echoed back in a parse error. Every refusal
is an OSError whose message `rules.safeload.unreadable` words like any other unreadable file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: The largest file read: a dump of a large cluster's Pods, PVs and Nodes is tens of MB.
MAX_FILE_BYTES = 256 << 20


def refused(path: str | Path, why: str) -> OSError:
    return OSError(errno.EACCES, why, str(path))


def inside(path: Path, root: Path) -> Path:
    """`path` with its symlinks and `..` resolved, if that is under `root` (resolved too); else OSError."""
    resolved, base = path.resolve(), root.resolve()
    if not resolved.is_relative_to(base):
        raise refused(path, f"outside {base} (a suite reads files under --root, default the working directory)")
    return resolved


def read_text(path: str | Path, *, root: Path | None = None, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (under `root` when given). Opened without
    blocking (a FIFO's open would wait for a writer) and checked on the descriptor opened, not on the name."""
    chosen = inside(Path(path), root) if root is not None else Path(path)
    fd = os.open(chosen, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise refused(path, "not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)  # a /proc file says size 0 and holds more: the read is the bound
    finally:
        os.close(fd)
    if len(data) > limit:
        raise refused(path, f"larger than {limit >> 20} MiB")
    return data.decode("utf-8")
