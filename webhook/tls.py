"""The admission port's TLS context, and hot reload of its certificate when the files change.

Certificates rotate by replacing files on disk (a Secret volume swaps a symlink); polling their
stat is simple, works on every filesystem and costs nothing at a few seconds' interval. Loading
into the same SSLContext makes new handshakes use the new certificate without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

from webhook.certexpiry import not_after as pem_not_after
from webhook.metrics import WebhookMetrics

log = logging.getLogger("phalanx.webhook.tls")

# What identifies one version of a file: replaced files get a new inode or mtime.
Signature = tuple[tuple[int, int, int], tuple[int, int, int]]


def server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def not_after(cert_file: Path) -> float:
    """When the first (the serving) certificate of a PEM chain expires, in Unix seconds."""
    return pem_not_after(cert_file.read_bytes())


class CertReloader:
    def __init__(
        self, context: ssl.SSLContext, cert_file: Path, key_file: Path, metrics: WebhookMetrics
    ) -> None:
        self._context = context
        self._cert_file = cert_file
        self._key_file = key_file
        self._metrics = metrics
        self._seen: Signature | None = None
        self.loaded = False

    def _signature(self) -> Signature | None:
        try:
            cert, key = os.stat(self._cert_file), os.stat(self._key_file)
        except OSError:
            return None
        return (cert.st_mtime_ns, cert.st_size, cert.st_ino), (key.st_mtime_ns, key.st_size, key.st_ino)

    def check(self) -> bool:
        """Load the pair if it changed since the last attempt; True when a new one was loaded."""
        signature = self._signature()
        if signature is None or signature == self._seen:
            return False
        # Remember failures too: a half-written pair is retried when a file changes again,
        # without logging the same error every poll.
        self._seen = signature
        try:
            expiry = not_after(self._cert_file)
            self._context.load_cert_chain(self._cert_file, self._key_file)
        except (ssl.SSLError, OSError, ValueError) as err:
            self._metrics.certificate_reloads.labels("error").inc()
            log.warning(
                "serving certificate not loaded", extra={"cert": str(self._cert_file), "error": str(err)}
            )
            return False
        self._metrics.certificate_reloads.labels("ok").inc()
        self._metrics.certificate_expiry.set(expiry)
        log.info("serving certificate loaded", extra={"cert": str(self._cert_file)})
        self.loaded = True
        return True

    async def watch(self, interval: float) -> None:
        """Poll forever (until cancelled)."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.check()
            except Exception:  # a reload bug must not stop future reloads
                log.exception("certificate reload failed")
