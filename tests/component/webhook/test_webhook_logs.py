"""Hostile input does not fill the webhook's log: each bad request -- a review whose names are lists
or objects, a body that is not JSON, malformed HTTP -- is one WARNING line that quotes none of
what the client sent, never an ERROR or a traceback. Against the real process over TLS."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import orjson

from .process import Webhook, running_webhook
from .test_webhook_tls import REVIEW

MARKER = "hostile-bytes-7f3a"  # in every bad request; must never reach the log


def _review_with(path: tuple[str, ...], value: object) -> bytes:
    doc = orjson.loads(orjson.dumps(REVIEW))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return orjson.dumps(doc)


def _post(body: bytes, extra: str = "") -> bytes:
    return (
        f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


BAD_REVIEWS = [
    _post(_review_with(("apiVersion",), [MARKER])),
    _post(_review_with(("apiVersion",), {MARKER: 1})),
    _post(_review_with(("kind",), [MARKER])),
    _post(_review_with(("request", "operation"), [MARKER, "CREATE"])),
    _post(_review_with(("request", "operation"), {"CREATE": MARKER})),
    _post(_review_with(("request", "kind"), [MARKER])),
    _post(_review_with(("request", "kind", "kind"), {MARKER: "Pod"})),
    _post(_review_with(("request", "uid"), {MARKER: 1})),
    _post(f'{{"apiVersion": "{MARKER}'.encode()),
    _post(MARKER.encode() * 100),
    _post(b"[" * 5000 + MARKER.encode()),
]
MALFORMED_HTTP = [
    f"{MARKER} /mutate HTTP/1.1\r\nHost: localhost\r\n\r\n".encode(),
    f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nBad Header {MARKER}: x\r\n\r\n".encode(),
    f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Long: {'a' * 9000}{MARKER}\r\n\r\n".encode(),
    (
        f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n{MARKER}"
    ).encode(),
    (
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Transfer-Encoding: chunked\r\n\r\nZZ{MARKER}\r\n{MARKER}\r\n"
    ).encode(),
    f"POST /mutate HTTP/9.{MARKER}\r\nHost: localhost\r\n\r\n".encode(),
]


async def _send(hook: Webhook, raw: bytes) -> int:
    reader, writer = await hook.open()
    try:
        writer.write(raw)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 30)
        return int(line.split()[1])
    finally:
        writer.transport.abort()


async def _plaintext(port: int) -> None:
    """Plain HTTP to the TLS port: the handshake fails (no request, so no line expected)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post(MARKER.encode()))
    with contextlib.suppress(OSError, TimeoutError):
        await asyncio.wait_for(reader.read(1024), 30)
    writer.transport.abort()


def test_bad_requests_are_one_warning_line_each_without_what_was_sent(tmp_path: Path) -> None:
    with running_webhook(tmp_path, log_level="INFO") as hook:

        async def attack() -> list[int]:
            statuses = [await _send(hook, raw) for raw in BAD_REVIEWS + MALFORMED_HTTP]
            await _plaintext(hook.port)
            return statuses

        statuses = asyncio.run(attack())
    lines = hook.log_lines()
    print("\n".join(lines))
    entries = [orjson.loads(line) for line in lines]  # every line is one JSON entry
    assert all(400 <= status < 500 for status in statuses), statuses
    assert not [e for e in entries if e["level"] in {"ERROR", "CRITICAL"}]
    assert not any("Traceback" in line or MARKER in line for line in lines)
    warnings = [e for e in entries if e["level"] == "WARNING"]
    assert len(warnings) == len(BAD_REVIEWS) + len(MALFORMED_HTTP), warnings
