"""Certificates on local disk: atomic writes, and ``ensure_local`` for development and e2e runs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from certs.bundle import (
    CA_CRT,
    CA_DAYS,
    CA_KEY,
    PRIVATE,
    SERVING_DAYS,
    TLS_CRT,
    TLS_KEY,
    CertBundle,
    problem_with,
    reissue,
)

Outcome = Literal["unchanged", "created", "renewed"]
# Written in this order: the webhook reloads when tls.crt changes, so it goes last.
WRITE_ORDER = (CA_CRT, CA_KEY, TLS_KEY, TLS_CRT)


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write via a temp file in the same directory and rename, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_files(directory: Path, files: Mapping[str, bytes]) -> list[str]:
    """Write each file whose content differs (keys 0600, certificates 0644); return the names written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted(files, key=_write_rank):
        path = directory / name
        mode = 0o600 if name in PRIVATE else 0o644
        if _read(path) == files[name] and (path.stat().st_mode & 0o777) == mode:
            continue
        write_atomic(path, files[name], mode)
        written.append(name)
    return written


def read_bundle(directory: Path) -> CertBundle | None:
    """The bundle in ``directory``, or None when a required file is missing."""
    data = {name: content for name in WRITE_ORDER if (content := _read(directory / name)) is not None}
    return CertBundle.from_mapping(data)


def ensure_local(
    directory: Path,
    dns_names: Sequence[str],
    ips: Sequence[str],
    now: datetime,
    *,
    days: int = SERVING_DAYS,
    ca_days: int = CA_DAYS,
    force: bool = False,
) -> Outcome:
    """Make sure ``directory`` holds ca.crt, ca.key, tls.crt and tls.key valid for the names at ``now``.
    Files are rewritten only when missing, invalid or expiring (or ``force``); the CA is kept while it
    can still sign, so a caBundle injected earlier stays right."""
    current = read_bundle(directory)
    if current is not None and not force and problem_with(current, dns_names, ips, now) is None:
        return "unchanged"
    renewed = reissue(current, dns_names, ips, now, days=days, ca_days=ca_days)
    write_files(directory, renewed.as_mapping())
    return "created" if current is None else "renewed"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write_rank(name: str) -> int:
    return WRITE_ORDER.index(name) if name in WRITE_ORDER else -1
