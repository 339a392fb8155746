"""The real webhook process (``python -m webhook``) over real TLS on loopback, for the tests that
attack it as a hostile client would."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.localcluster.procs import free_port

from .test_webhook_tls import client_context
from .tls_helpers import serving_bundle, write_pair

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Webhook:
    process: subprocess.Popen[bytes]
    port: int
    context: ssl.SSLContext
    log_path: Path

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def log_lines(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines()

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=self.context, server_hostname="localhost"
        )


@contextmanager
def running_webhook(directory: Path, *flags: str, log_level: str = "WARNING") -> Iterator[Webhook]:
    """Start the webhook with ``flags``, wait until it is ready, stop it (SIGTERM) at the end."""
    bundle = serving_bundle()
    write_pair(directory, bundle)
    port, health = free_port(), free_port()
    log_path = directory / "webhook.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "webhook", "--bind-address", "127.0.0.1", "--port", str(port)),
            *("--health-port", str(health), "--cert-dir", str(directory), "--log-level", log_level),
            *("--shutdown-delay-seconds", "0", *flags),
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                assert time.monotonic() < deadline, "webhook not ready"
                time.sleep(0.1)
        yield Webhook(process, port, client_context(bundle.ca_crt), log_path)
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()
