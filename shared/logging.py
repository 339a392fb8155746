"""Structured logs for both processes: one JSON object per line on stderr.

Each line carries ``ts``, ``level``, ``logger`` and ``msg``, plus every field passed with
``logger.info("...", extra={...})``. Extra keys must not collide with ``logging.LogRecord``
attributes (``name``, ``msg``, ``args``...); the standard library raises if they do.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from itertools import islice
from typing import Any

import orjson

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
# LogRecord.__init__ sets its own attributes first; ``extra`` (and anything a filter adds) comes
# after them in the record's __dict__, so only that tail needs looking at.
_OWN_ATTRIBUTES = len(vars(logging.LogRecord("", 0, "", 0, "", None, None)))


class JsonFormatter(logging.Formatter):
    """Formats a record as one compact JSON object.

    Cheap, because the webhook writes a line per patched object on the API server's path: the
    timestamp's date and time are formatted once per second, and only the record's extras are
    scanned.
    """

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._second_text = ""

    def _timestamp(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._second = second
            self._second_text = datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._second_text}.{int((created - second) * 1000):03d}+00:00"

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self._timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in islice(record.__dict__.items(), _OWN_ATTRIBUTES, None):
            if key not in _RECORD_ATTRIBUTES:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = record.stack_info
        # default=str: a log line must never fail because a field is not JSON-serialisable.
        return orjson.dumps(entry, default=str).decode()


def configure_logging(level: str, json: bool = True) -> None:
    """Send every logger's records to stderr, as JSON lines or (for people at a terminal) text."""
    handler = logging.StreamHandler(sys.stderr)
    if json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    # Neither format shows threads, processes or call sites; not collecting them makes every
    # record cheaper (the logging HOWTO's "Optimization" section). Tracebacks are unaffected.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
