"""The abuse mix a hostile client of the webhook port can send -- fuzzed bodies, 10 MB bodies, slow
and aborted 3 MB uploads, 1,000 idle connections -- against the real webhook process over TLS on
loopback: its memory comes back near where it started, and it still admits afterwards.

Bounded in count and time; the figures are printed (docs/operations.md, "Security", quotes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable
from pathlib import Path

import orjson

from .process import Webhook, running_webhook
from .test_webhook_tls import REVIEW

MIB = 1024 * 1024
IDLE_CONNECTIONS = 1000
# The bound: what the process holds after the abuse, against what it held before it.
RSS_BOUND = 1.5


def _head(length: int | None, extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return (
        f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{size}{extra}\r\n"
    ).encode()


async def _quietly(work: Awaitable[object], within: float = 20.0) -> None:
    """Hostile clients do not care how they are answered: resets, timeouts and refusals are fine."""
    with contextlib.suppress(OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
        async with asyncio.timeout(within):
            await work


async def _send(hook: Webhook, head: bytes, chunks: int, chunk: bytes, pause: float = 0.0) -> None:
    """Send ``head`` and up to ``chunks`` chunks, then read whatever answer came, then drop."""
    reader, writer = await hook.open()
    try:
        writer.write(head)
        for _ in range(chunks):
            writer.write(chunk)
            await writer.drain()
            if pause:
                await asyncio.sleep(pause)
        await reader.read(1024)
    finally:
        writer.transport.abort()


def _fuzz_bodies(rng: random.Random, count: int) -> list[bytes]:
    review = orjson.dumps(REVIEW)
    bodies = []
    for n in range(count):
        match n % 5:
            case 0:
                bodies.append(rng.randbytes(rng.randint(1, 200_000)))
            case 1:
                bodies.append(review[: rng.randint(1, len(review) - 1)])
            case 2:
                bodies.append(b"[" * rng.randint(1, 300_000))
            case 3:
                doc = orjson.loads(review)
                doc["request"]["object"]["metadata"]["annotations"] = {"x": "y" * rng.randint(1, 2 * MIB)}
                bodies.append(orjson.dumps(doc))
            case _:
                doc = orjson.loads(review)
                doc["request"][rng.choice(["operation", "kind", "uid", "object"])] = [1, {"a": []}]
                bodies.append(orjson.dumps(doc))
    return bodies


async def _fuzz(hook: Webhook, bodies: list[bytes]) -> None:
    for body in bodies:
        await _quietly(_send(hook, _head(len(body)) + body, 0, b""))


async def _valid_review(hook: Webhook) -> int:
    reader, writer = await hook.open()
    try:
        body = orjson.dumps(REVIEW)
        writer.write(_head(len(body)) + body)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 30)
        return int(line.split()[1])
    finally:
        writer.close()


async def _hold_idle(hook: Webhook, count: int, held: list[asyncio.StreamWriter]) -> None:
    """Open ``count`` TLS connections that never send a request (a few at a time)."""
    for start in range(0, count, 50):
        results = await asyncio.gather(
            *(hook.open() for _ in range(min(50, count - start))), return_exceptions=True
        )
        held += [pair[1] for pair in results if isinstance(pair, tuple)]


async def _abuse(hook: Webhook, peak: list[float]) -> None:
    rng = random.Random(26)
    mb = 64 * 1024
    block = b" " * mb
    held: list[asyncio.StreamWriter] = []
    try:
        await _hold_idle(hook, IDLE_CONNECTIONS, held)
        peak.append(hook.rss_mib())
        work = [
            # 10 MB bodies, announced and chunked.
            *(_quietly(_send(hook, _head(10 * MIB), 160, block)) for _ in range(8)),
            *(_quietly(_send(hook, _head(None), 160, b"10000\r\n" + block + b"\r\n")) for _ in range(4)),
            # Slow 3 MB uploads: 64 KiB every 50 ms.
            *(_quietly(_send(hook, _head(3 * MIB), 48, block, pause=0.05)) for _ in range(16)),
            # Aborted 3 MB uploads: all but the last 64 KiB, then gone.
            *(_quietly(_send(hook, _head(3 * MIB), 47, block), within=3) for _ in range(96)),
            # Fuzzed bodies, four clients at a time.
            *(_fuzz(hook, _fuzz_bodies(rng, 40)) for _ in range(4)),
        ]
        sampler = asyncio.create_task(_sample(hook, peak))
        await asyncio.gather(*work)
        sampler.cancel()
        peak.append(hook.rss_mib())
    finally:
        for writer in held:
            writer.transport.abort()


async def _sample(hook: Webhook, peak: list[float]) -> None:
    while True:
        peak.append(hook.rss_mib())
        await asyncio.sleep(0.1)


async def _settled(hook: Webhook, bound: float, patience: float = 60.0) -> float:
    """The RSS once it is within ``bound``, or after ``patience`` seconds, whichever comes first:
    the assertion is on the memory, not on how fast it comes back."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + patience
    while (rss := hook.rss_mib()) > bound and loop.time() < give_up:  # noqa: ASYNC110 (another process)
        await asyncio.sleep(0.5)
    return rss


def test_memory_comes_back_after_the_abuse_mix_and_the_webhook_still_admits(tmp_path: Path) -> None:
    with running_webhook(tmp_path) as hook:

        async def run() -> tuple[float, float, float, int]:
            assert await _valid_review(hook) == 200
            baseline = hook.rss_mib()
            peak: list[float] = [baseline]
            await _abuse(hook, peak)
            after = await _settled(hook, RSS_BOUND * baseline)
            return baseline, max(peak), after, await _valid_review(hook)

        baseline, peak, after, status = asyncio.run(run())
    print(f"webhook RSS: baseline {baseline:.0f} MiB, peak {peak:.0f} MiB, after {after:.0f} MiB")
    assert after <= RSS_BOUND * baseline, (baseline, peak, after)
    assert status == 200
