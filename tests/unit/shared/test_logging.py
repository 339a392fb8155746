"""shared.logging.log_fields: the line written straight by the JSON handler is the line logging
would have written, and anything else that should see the record still does."""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from shared.logging import JsonHandler, log_fields

FIELDS = {"uid": "u-1", "kind": "Job", "ops": 2, "warnings": ["phalanx: a"], "path": Path("/x")}


@pytest.fixture
def root_json() -> Iterator[tuple[logging.Logger, io.StringIO, JsonHandler]]:
    """A logger whose records reach only a JsonHandler on its parent, as configure_logging leaves
    the root logger. Not the root itself, and ``_alone`` takes off pytest's capture handlers, which
    it puts on the root and on every logger that does not propagate as each test starts."""
    stream = io.StringIO()
    handler = JsonHandler(stream)
    parent = logging.getLogger("phalanx-test")
    parent.propagate = False
    saved = parent.handlers[:]
    parent.handlers[:] = [handler]
    parent.setLevel(logging.INFO)
    logger = logging.getLogger("phalanx-test.log-fields")
    try:
        yield logger, stream, handler
    finally:
        parent.handlers[:] = saved
        parent.propagate = True
        parent.setLevel(logging.NOTSET)
        logger.handlers.clear()
        logger.filters.clear()


def _alone(logger: logging.Logger, handler: JsonHandler) -> None:
    assert logger.parent is not None
    logger.parent.handlers[:] = [handler]


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_the_direct_line_is_the_line_logging_writes(
    root_json: tuple[logging.Logger, io.StringIO, JsonHandler],
) -> None:
    logger, stream, handler = root_json
    _alone(logger, handler)
    with pytest.MonkeyPatch.context() as patch:
        calls: list[object] = []
        patch.setattr(handler, "handle", calls.append)  # the logging path
        log_fields(logger, logging.INFO, "admission", FIELDS, created=1_700_000_000.25)
        assert calls == [], "the record went through logging"
    logger.info("admission", extra=FIELDS)
    direct, through_logging = _lines(stream)
    assert direct["ts"] == "2023-11-14T22:13:20.250+00:00"
    assert list(direct) == list(through_logging)  # the same keys, in the same order
    assert {k: v for k, v in direct.items() if k != "ts"} == {
        k: v for k, v in through_logging.items() if k != "ts"
    }
    assert direct["path"] == "/x"  # not JSON-serialisable as is, as for logging


def test_a_level_below_the_logger_or_the_handler_writes_nothing(
    root_json: tuple[logging.Logger, io.StringIO, JsonHandler],
) -> None:
    logger, stream, handler = root_json
    _alone(logger, handler)
    log_fields(logger, logging.DEBUG, "admission", FIELDS, created=time.time())
    logger.setLevel(logging.DEBUG)
    handler.setLevel(logging.WARNING)
    try:
        log_fields(logger, logging.INFO, "admission", FIELDS, created=time.time())
    finally:
        logger.setLevel(logging.NOTSET)
    assert stream.getvalue() == ""


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_another_handler_or_a_filter_sees_the_record(
    root_json: tuple[logging.Logger, io.StringIO, JsonHandler],
) -> None:
    logger, stream, handler = root_json
    _alone(logger, handler)
    kept = _Kept()
    logger.addHandler(kept)
    log_fields(logger, logging.INFO, "admission", FIELDS, created=time.time())
    assert [(r.getMessage(), r.__dict__["uid"]) for r in kept.records] == [("admission", "u-1")]
    assert _lines(stream)[0]["uid"] == "u-1"  # and the JSON handler still writes its line
    logger.removeHandler(kept)

    logger.addFilter(lambda record: record.__dict__.get("kind") != "Job")
    log_fields(logger, logging.INFO, "admission", FIELDS, created=time.time())
    assert len(_lines(stream)) == 1, "the filter was bypassed"


class _Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError("stderr went away")


def test_a_failing_stream_is_reported_as_logging_reports_it_never_raised(
    root_json: tuple[logging.Logger, io.StringIO, JsonHandler], monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, _, handler = root_json
    _alone(logger, handler)
    handler.setStream(_Broken())
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", reported.append)
    log_fields(logger, logging.INFO, "admission", FIELDS, created=time.time())  # does not raise
    assert [(r.getMessage(), r.__dict__["uid"]) for r in reported] == [("admission", "u-1")]


class _CountedWrites(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_batched_lines_are_written_together_when_the_scheduled_call_runs_and_keep_their_order(
    root_json: tuple[logging.Logger, io.StringIO, JsonHandler],
) -> None:
    logger, _, handler = root_json
    _alone(logger, handler)
    stream = _CountedWrites()
    handler.setStream(stream)
    scheduled: list[Callable[[], None]] = []
    handler.batch_direct_lines(scheduled.append)
    try:
        for uid in ("u-1", "u-2"):
            log_fields(logger, logging.INFO, "admission", {**FIELDS, "uid": uid}, created=time.time())
        assert (stream.getvalue(), len(scheduled)) == ("", 1), "written before the loop ran the write"
        scheduled[0]()
        assert [line["uid"] for line in _lines(stream)] == ["u-1", "u-2"]
        assert stream.writes == 1

        log_fields(logger, logging.INFO, "admission", {**FIELDS, "uid": "u-3"}, created=time.time())
        logger.warning("not an admission")  # written after the batch before it, not before
        assert [line.get("uid", line["msg"]) for line in _lines(stream)][2:] == ["u-3", "not an admission"]
        scheduled[1]()  # the batch is gone already: nothing more
        assert len(_lines(stream)) == 4

        log_fields(logger, logging.INFO, "admission", {**FIELDS, "uid": "u-4"}, created=time.time())
        handler.flush()  # as logging.shutdown() does at exit
        log_fields(logger, logging.INFO, "admission", {**FIELDS, "uid": "u-5"}, created=time.time())
    finally:
        handler.batch_direct_lines(None)  # writes the batch so far
    log_fields(logger, logging.INFO, "admission", {**FIELDS, "uid": "u-6"}, created=time.time())
    assert [line.get("uid") for line in _lines(stream)][4:] == ["u-4", "u-5", "u-6"]


def test_a_batch_that_cannot_be_scheduled_or_written_is_never_raised(
    root_json: tuple[logging.Logger, io.StringIO, JsonHandler], monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, stream, handler = root_json
    _alone(logger, handler)

    def closed_loop(callback: Callable[[], None]) -> None:
        raise RuntimeError("Event loop is closed")

    handler.batch_direct_lines(closed_loop)
    log_fields(logger, logging.INFO, "admission", FIELDS, created=time.time())
    assert _lines(stream)[0]["uid"] == "u-1", "not written at once when nothing could run the write"

    scheduled: list[Callable[[], None]] = []
    handler.batch_direct_lines(scheduled.append)
    handler.setStream(_Broken())
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", reported.append)
    log_fields(logger, logging.INFO, "admission", FIELDS, created=time.time())
    scheduled[0]()  # does not raise
    handler.batch_direct_lines(None)
    assert [r.getMessage() for r in reported] == ["1 log lines not written"]
