"""Structured logs for both processes: one JSON object per line on stderr.

Each line carries ``ts``, ``level``, ``logger`` and ``msg``, plus every field passed with
``logger.info("...", extra={...})``. Extra keys must not collide with ``logging.LogRecord``
attributes (``name``, ``msg``, ``args``...); the standard library raises if they do.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """Formats a record as one compact JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
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
