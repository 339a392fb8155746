"""Read one admission request body, within bounds: type, size, time, and bytes held at once.

Every refusal is a ``BodyError`` with the HTTP status and a plain message. The API server always
sends ``Content-Type: application/json`` and a body well below its own request limit within
milliseconds; anything else is a client that is not the API server, or one that stalls.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import StreamReader

from webhook.memory import BodyBudget, BudgetBusy

JSON_TYPE = "application/json"
# Bodies announced at most this large are read without reserving (a pod review is ~5-20 KiB).
SMALL_BODY_BYTES = 64 * 1024


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class BodyLimits:
    max_bytes: int
    read_timeout: float  # the whole body, from the handler's start


def check_content_type(header: str | None) -> None:
    """415 unless the body says it is JSON (parameters such as charset are fine)."""
    if header == JSON_TYPE:  # what the API server sends
        return
    media_type = (header or "").split(";", 1)[0].strip().lower()
    if media_type != JSON_TYPE:
        # Cut: the header is the client's text, and it is logged.
        raise BodyError(415, f"Content-Type must be {JSON_TYPE}, not {media_type[:64] or 'missing'!r}")


class Upload:
    """One body being read; ``received`` says how far it got, also when it failed."""

    def __init__(self, stream: StreamReader, content_length: int | None) -> None:
        self.stream = stream
        self.content_length = content_length
        self.received = 0

    @property
    def size(self) -> int:
        """Bytes this upload held or announced: what its memory was sized by."""
        return max(self.received, self.content_length or 0)

    async def read(self, limits: BodyLimits, budget: BodyBudget) -> bytes | bytearray:
        if self.content_length is not None and self.content_length > limits.max_bytes:
            raise BodyError(413, f"body larger than {limits.max_bytes} bytes")
        if self.content_length is not None and self.stream.is_eof():
            # All of it came with the headers (as a review from the API server nearly always
            # does): nothing to wait for, so neither a timer nor a reservation, and no copy.
            body = self.stream.read_nowait(-1)
            self.received = len(body)
            return body
        too_large = BodyError(413, f"body larger than {limits.max_bytes} bytes")
        try:
            async with asyncio.timeout(limits.read_timeout):
                if self.content_length is not None and self.content_length <= SMALL_BODY_BYTES:
                    return await self._read_all(limits.max_bytes, too_large)
                # An unknown length may grow to the limit: that much is reserved.
                async with budget.reserve(self.content_length or limits.max_bytes):
                    return await self._read_all(limits.max_bytes, too_large)
        except BudgetBusy as err:
            raise BodyError(503, str(err)) from None
        except TimeoutError:
            raise BodyError(
                408, f"body not received within {limits.read_timeout:g}s ({self.received} bytes came)"
            ) from None

    async def _read_all(self, max_bytes: int, too_large: BodyError) -> bytearray:
        # One growing buffer, never a list of chunks plus their join (twice the memory).
        body = bytearray()
        try:
            while chunk := await self.stream.readany():
                self.received += len(chunk)
                if self.received > max_bytes:
                    raise too_large
                body += chunk
        except BaseException:
            # An aborted upload's traceback keeps this frame (and the request) alive in a reference
            # cycle until a full collection: free the buffer now, not then.
            body.clear()
            raise
        return body
