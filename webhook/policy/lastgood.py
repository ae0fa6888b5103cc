"""The policy in effect in a replica, kept in a file its workers share.

Each gunicorn worker watches the policy ConfigMap itself. A worker that starts while the ConfigMap is invalid has
no policy of its own to keep, but its siblings still apply the last valid one: reading it from here, the new worker
applies the same policy as they do. The file is replaced whole (written aside, then renamed), so a reader sees one
version or the other, never a mix. It lives in a directory the master creates before forking (in the chart, on the
pod's /tmp emptyDir), so it belongs to one replica and starts empty with each server.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rules.model import Json

log = logging.getLogger(__name__)

FILE_NAME = "policy-in-effect.json"


@dataclass(frozen=True)
class Kept:
    """What a worker of this replica last put in effect: the policy ConfigMap's data, or None for the base policy
    (the ConfigMap was absent or unlabelled)."""

    data: Json | None


class ReplicaPolicy:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def save(self, data: Json | None) -> None:
        """Record the policy now in effect: the ConfigMap's `data`, or None for the base policy."""
        text = json.dumps({"configMapData": data}, separators=(",", ":"), sort_keys=True)
        try:
            fd, aside = tempfile.mkstemp(dir=self.path.parent, prefix=".policy-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(aside, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(aside)
                raise
        except OSError as exc:  # the workers still run; only a worker started later cannot adopt this policy
            log.error("cannot record the policy in effect in %s: %s", self.path, exc)

    def load(self) -> Kept | None:
        """What a sibling last put in effect, or None when no worker of this replica has had a policy yet."""
        try:
            doc: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.error("cannot read the policy in effect from %s: %s", self.path, exc)
            return None
        data = doc.get("configMapData") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or "configMapData" not in doc or not (data is None or isinstance(data, dict)):
            log.error("ignoring %s: not a recorded policy", self.path)
            return None
        return Kept(data)
