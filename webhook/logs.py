"""Log format and level for the server and the certificate rotator (both write to the pod log)."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping

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


#: Seconds between two lines of one kind that any client can cause (`Throttle`).
LOG_EVERY = 60.0


class Throttle:
    """Lines that any client can cause, as often as it likes (a refused certificate, a broken request body): each
    kind is logged at most once every `every` seconds, the line saying how many events it stands for, so that the
    log shows the problem and its rate without a line per event. `due(kind)` counts one event and returns the
    count to log when a line of that kind is due, else None. Kinds are the caller's own constants: a value taken
    from a request would make one entry per distinct value."""

    def __init__(self, every: float = LOG_EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self._clock = clock
        self._kinds: dict[Hashable, tuple[int, float]] = {}  # kind -> (events not logged yet, when a line is due)
        self._lock = threading.Lock()

    def due(self, kind: Hashable) -> int | None:
        now = self._clock()
        with self._lock:
            unlogged, next_line = self._kinds.get(kind, (0, 0.0))
            unlogged += 1
            if now < next_line:
                self._kinds[kind] = (unlogged, next_line)
                return None
            self._kinds[kind] = (0, now + self.every)
            return unlogged


class ThrottledLines(logging.Filter):
    """A logger's lines that any client can cause, known by how they start (`kinds`: start -> kind): each kind
    passes at most once a minute (`Throttle`), saying how many lines it stands for; every other line passes."""

    def __init__(self, kinds: Mapping[str, str], throttle: Throttle | None = None) -> None:
        super().__init__()
        self.kinds = dict(kinds)
        self.throttle = throttle or Throttle()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        kind = next((kind for start, kind in self.kinds.items() if message.startswith(start)), None)
        if kind is None:
            return True
        count = self.throttle.due(kind)
        if count is None:
            return False
        record.msg, record.args = f"{message} ({count} like it; at most one line a minute)", None
        return True
