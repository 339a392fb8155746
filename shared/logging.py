"""Structured logs for both processes: one JSON object per line on stderr.

Each line carries ``ts``, ``level``, ``logger`` and ``msg``, plus every field passed with
``logger.info("...", extra={...})``. Extra keys must not collide with ``logging.LogRecord``
attributes (``name``, ``msg``, ``args``...); the standard library raises if they do.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from itertools import islice
from typing import Any, TextIO

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

    def entry(self, created: float, level: str, logger: str, msg: str) -> dict[str, Any]:
        """A line's leading fields; its record's extras follow them."""
        return {"ts": self._timestamp(created), "level": level, "logger": logger, "msg": msg}

    def format(self, record: logging.LogRecord) -> str:
        entry = self.entry(record.created, record.levelname, record.name, record.getMessage())
        for key, value in islice(record.__dict__.items(), _OWN_ATTRIBUTES, None):
            if key not in _RECORD_ATTRIBUTES:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = record.stack_info
        # default=str: a log line must never fail because a field is not JSON-serialisable.
        return orjson.dumps(entry, default=str).decode()


# Something that runs a callback soon, once: an event loop's ``call_soon``.
Scheduler = Callable[[Callable[[], None]], object]


class JsonHandler(logging.StreamHandler[TextIO]):
    """JSON lines on a stream: what ``configure_logging`` installs, and what ``log_fields`` writes
    to directly -- one line at a time, or in batches (``batch_direct_lines``)."""

    formatter: JsonFormatter

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter())
        self._batch: list[str] = []
        self._schedule: Scheduler | None = None

    def batch_direct_lines(self, schedule: Scheduler | None) -> None:
        """Write the lines of ``write_fields`` in batches: the first line of a batch calls
        ``schedule(self.write_batch)``, and any other record written before then first writes the
        batch, so lines keep their order. None: one line at a time again (after the batch so far).

        For the webhook, whose admission lines come from one event loop: with its ``call_soon``,
        the lines of every admission served in one pass of the loop take one write between them
        (a system call per line costs a saturated webhook throughput)."""
        self.write_batch()
        self._schedule = schedule

    def write_batch(self) -> None:
        if not self._batch:
            return
        lines, self._batch = "".join(self._batch), []
        try:
            self._write(lines)
        except RecursionError:  # as StreamHandler.emit
            raise
        except Exception:
            lost = f"{lines.count(chr(10))} log lines not written"
            self.handleError(logging.LogRecord("phalanx", logging.ERROR, "", 0, lost, None, None))

    def _write(self, text: str) -> None:
        with self.lock:  # type: ignore[union-attr]  # made by Handler.__init__
            self.stream.write(text)
            self.stream.flush()

    def emit(self, record: logging.LogRecord) -> None:
        if self._batch:
            self.write_batch()
        super().emit(record)

    def flush(self) -> None:
        self.write_batch()
        super().flush()

    def write_fields(
        self, created: float, level: int, logger: str, msg: str, fields: Mapping[str, Any]
    ) -> None:
        """The line ``format`` makes of a record with these extras, without the record; a failure
        (a closed stream, a broken pipe) is reported as ``emit`` reports it, never raised."""
        try:
            entry = self.formatter.entry(created, logging.getLevelName(level), logger, msg)
            entry.update(fields)
            line = orjson.dumps(entry, default=str).decode() + self.terminator
            if self._schedule is not None:
                self._batch.append(line)
                if len(self._batch) == 1:
                    try:
                        self._schedule(self.write_batch)
                    except RuntimeError:  # nothing left to run it (a closed loop): write now
                        self.write_batch()
                return
            self._write(line)
        except RecursionError:  # as StreamHandler.emit
            raise
        except Exception:
            record = logging.LogRecord(logger, level, "", 0, msg, None, None)
            record.__dict__.update(fields)
            self.handleError(record)


def log_fields(
    logger: logging.Logger, level: int, msg: str, fields: Mapping[str, Any], *, created: float
) -> None:
    """``logger.log(level, msg, extra=fields)``, for a line written per request (the webhook's
    admission log); ``created`` is the ``time.time()`` of the line (shared/ reads no clock).

    Where the record would reach nothing but the JSON handler ``configure_logging`` installed (no
    filters, no other handler), that handler writes the same line straight away: building the
    record and passing it through the logger and the handler cost a workload's admission more than
    its JSON patch did. Otherwise the record goes through ``logging`` as usual."""
    if not logger.isEnabledFor(level):
        return
    handler = _sole_json_handler(logger, level)
    if handler is None:
        logger.log(level, msg, extra=dict(fields))
    else:
        handler.write_fields(created, level, logger.name, msg, fields)


def _sole_json_handler(logger: logging.Logger, level: int) -> JsonHandler | None:
    """The one handler a record of ``logger`` at ``level`` would reach, if that is a JsonHandler
    and nothing on the way filters."""
    if logger.disabled:
        return None
    found: JsonHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if found is not None or type(handler) is not JsonHandler or handler.filters:
                return None
            if level < handler.level:
                return None
            found = handler
        current = current.parent if current.propagate else None
    return found


def batch_direct_lines(schedule: Scheduler | None) -> None:
    """``JsonHandler.batch_direct_lines`` for each JSON handler ``configure_logging`` installed."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, JsonHandler):
            handler.batch_direct_lines(schedule)


def configure_logging(level: str, json: bool = True) -> None:
    """Send every logger's records to stderr, as JSON lines or (for people at a terminal) text."""
    handler: logging.Handler
    if json:
        handler = JsonHandler(sys.stderr)
    else:
        handler = logging.StreamHandler(sys.stderr)
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
