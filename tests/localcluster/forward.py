"""Relay TCP connections: ``python -m tests.localcluster.forward LISTEN_HOST PORT TARGET_HOST PORT``.

The real node's pods reach the API server at the bridge's gateway address while the API server
itself listens on loopback only.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _serve(listen_host: str, listen_port: int, target_host: str, target_port: int) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))

    server = await asyncio.start_server(handle, listen_host, listen_port)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    listen_host, listen_port, target_host, target_port = argv
    asyncio.run(_serve(listen_host, int(listen_port), target_host, int(target_port)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
