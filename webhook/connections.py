"""What one client connection may hold, and for how long (docs/operations.md, "Security").

The API server opens a few keep-alive connections and sends each request whole within milliseconds.
Other clients of the port could otherwise hold any number of connections, each with its TLS state
and buffers, for as long as they like (aiohttp keeps an idle connection for an hour). So:

- at most ``max_connections`` are open; a new one beyond that closes the connection idle longest
  (an attacker's idle connections cannot lock the API server out), or, when none is idle, itself;
- a request's headers must arrive within ``header_timeout`` of its first byte (of connecting, for
  the first request): a client trickling headers is cut;
- an idle keep-alive connection is closed after ``keepalive_timeout`` (aiohttp's own timer).

aiohttp's protocol errors (malformed HTTP) are logged as one WARNING line that never quotes what
the client sent (its default is an ERROR traceback quoting the start of the request).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger("phalanx.webhook")

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
# Why the server closed a connection (counted in ``GuardedServer.closed``).
CLOSED_IDLE_FOR_NEW = "displaced_while_idle"
CLOSED_OVER_LIMIT = "over_limit"
CLOSED_HEADER_TIMEOUT = "header_timeout"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int
    header_timeout: float
    keepalive_timeout: float


class _Connection(RequestHandler):
    """aiohttp's connection protocol, telling its server when a request's first byte arrives."""

    __slots__ = ("header_timer", "in_request")

    def __init__(self, manager: GuardedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.header_timer: asyncio.TimerHandle | None = None
        self.in_request = False

    def data_received(self, data: bytes) -> None:
        if self.header_timer is None and not self.in_request and isinstance(self._manager, GuardedServer):
            self._manager.headers_due(self)
        super().data_received(data)


class GuardedServer(web.Server):
    """``web.Server`` with the connection limits above."""

    def __init__(
        self,
        handler: Handler,
        limits: ConnectionLimits,
        closed: Callable[[str], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            self._serve,
            keepalive_timeout=limits.keepalive_timeout,
            logger=ProtocolLog(),
            **kwargs,
        )
        self.handler = handler
        self._limits = limits
        self.closed: Counter[str] = Counter()
        self._count_closed = closed  # also told each close's reason (the metrics)
        # Open connections not in a request, oldest first (dicts keep insertion order).
        self._idle: dict[_Connection, None] = {}
        self._open = 0

    @property
    def open_connections(self) -> int:
        return self._open

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    def __call__(self) -> RequestHandler:
        return _Connection(self, loop=self._loop, **self._kwargs)

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        assert isinstance(handler, _Connection)
        self._open += 1
        if self._open > self._limits.max_connections:
            victim = self._idle_longest()
            if victim is None:  # every connection is in a request (or closing): not this one
                self._close(handler, CLOSED_OVER_LIMIT)
                return
            self._close(victim, CLOSED_IDLE_FOR_NEW)
        self._idle[handler] = None
        self.headers_due(handler)

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        assert isinstance(handler, _Connection)
        self._open -= 1
        self._idle.pop(handler, None)
        if handler.header_timer is not None:
            handler.header_timer.cancel()
            handler.header_timer = None

    def _idle_longest(self) -> _Connection | None:
        """The open connection idle longest; those already closing (still counted until closed,
        as they still hold their buffers) are forgotten on the way."""
        while self._idle:
            connection = next(iter(self._idle))
            if connection.transport is not None:
                return connection
            del self._idle[connection]
        return None

    def headers_due(self, connection: _Connection) -> None:
        """A request's first byte came (or the connection opened): its headers are due."""
        connection.header_timer = self._loop.call_later(
            self._limits.header_timeout, self._close, connection, CLOSED_HEADER_TIMEOUT
        )

    def _close(self, connection: _Connection, reason: str) -> None:
        if connection.header_timer is not None:  # a displaced connection's (or this very timer)
            connection.header_timer.cancel()
            connection.header_timer = None
        self._idle.pop(connection, None)
        # Not logged (an attacker's thousand idle connections would be a thousand lines): counted.
        self.closed[reason] += 1
        if self._count_closed is not None:
            self._count_closed(reason)
        connection.force_close()

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        connection = request.protocol
        if not isinstance(connection, _Connection):  # pragma: no cover - always one of ours
            return await self.handler(request)
        if connection.header_timer is not None:
            connection.header_timer.cancel()
            connection.header_timer = None
        connection.in_request = True
        self._idle.pop(connection, None)
        try:
            return await self.handler(request)
        finally:
            connection.in_request = False
            if connection.transport is not None:
                self._idle[connection] = None  # the most recently active: displaced last


class ProtocolLog(logging.LoggerAdapter[logging.Logger]):
    """The logger aiohttp's connection protocol writes to.

    Its errors are a client's malformed HTTP (``BadHttpMessage`` and friends), which aiohttp logs
    with ``logger.exception``: a traceback whose message quotes the bytes the client sent. Here
    each is one WARNING line with the exception's type and, from the HTTP parser, its reason.
    """

    def __init__(self) -> None:
        super().__init__(log, {})

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else None
        self.logger.warning(
            "bad HTTP request",
            extra={"error": type(error).__name__ if error else str(msg), "reason": _reason(error)},
        )

    def debug(self, msg: object, *args: object, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, BaseException):
            # A request that is not HTTP at all (aiohttp logs only that one at DEBUG): bad input too.
            self.exception(msg, exc_info=exc_info)
        elif self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug(str(msg) % args if args else str(msg))


def _reason(error: BaseException | None) -> str:
    """The HTTP parser's reason without the bytes it quotes after it (``reason:\\n\\n  b'...'``)."""
    message = str(getattr(error, "message", "") or "")
    reason, quoted, _ = message.partition(":\n")
    return reason[:120] if quoted else ""
