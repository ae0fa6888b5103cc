"""Log format and level for the server and the certificate rotator (both write to the pod log)."""

from __future__ import annotations

import copy
import logging

from rules.quoting import escaped

LOG_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S %z"


class EscapingFormatter(logging.Formatter):
    """Every line printable, as every message the rules make (rules/quoting.py `escaped`): a log line may quote
    an object's names or an exception about its values, and an operator reads the pod log on a terminal. The
    message is escaped whole, so a newline in it cannot forge a second line; a traceback keeps its lines, each
    escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        shown = copy.copy(record)  # the record is shared with every other handler
        shown.message = escaped(record.message)
        return super().formatMessage(shown)

    def format(self, record: logging.LogRecord) -> str:
        """The line, and a traceback or stack after it line by line (the message holds no newline by now)."""
        return "\n".join(escaped(line) for line in super().format(record).split("\n"))


def configure_logging(level: str) -> None:
    """Our loggers print like gunicorn's own lines, at the `--log-level` chosen, escaped (`EscapingFormatter`).

    Without this the webhook's info lines (lists, policy reloads) were dropped and its warnings printed bare,
    with no time or level, through Python's last-resort handler.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter(LOG_FORMAT, DATE_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
