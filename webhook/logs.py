"""Log format and level for the server and the certificate rotator (both write to the pod log)."""

from __future__ import annotations

import logging

LOG_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"


def configure_logging(level: str) -> None:
    """Our loggers print like gunicorn's own lines, at the `--log-level` chosen.

    Without this the webhook's info lines (lists, policy reloads) were dropped and its warnings printed bare,
    with no time or level, through Python's last-resort handler.
    """
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, datefmt="%Y-%m-%d %H:%M:%S %z", force=True)
