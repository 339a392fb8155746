"""What processes a cluster started, and where they listen (read from /proc, Linux only)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

_LISTEN = "0A"


def free_port() -> int:
    """A TCP port free on loopback right now (so several local clusters can run side by side)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_serving(
    url: str,
    process: subprocess.Popen[bytes],
    what: str,
    see: object,
    timeout: float = 90.0,
    interval: float = 0.3,
    context: ssl.SSLContext | None = None,
) -> None:
    """Until ``url`` answers 200; fails at once if ``process`` exits (``see``: where its log is)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}; see {see}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(interval)
    raise TimeoutError(f"{what} did not serve {url} within {timeout:.0f}s; see {see}")


def read_pids(pid_dir: Path) -> dict[str, int]:
    """component name -> pid, from kwokctl's pid files."""
    pids: dict[str, int] = {}
    if not pid_dir.is_dir():
        return pids
    for path in pid_dir.glob("*.pid"):
        try:
            pids[path.stem] = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def terminate(pids: list[int], grace_seconds: float = 10.0) -> None:
    """SIGTERM, wait, then SIGKILL whatever is left."""
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def _decode(hex_addr: str) -> str:
    ip_hex, _ = hex_addr.split(":")
    raw = bytes.fromhex(ip_hex)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    # /proc/net/tcp6 stores four little-endian 32-bit words.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


def listening_addresses(pids: list[int]) -> set[tuple[str, int, int]]:
    """(address, port, pid) of every TCP socket in LISTEN state owned by one of ``pids``."""
    owner = {inode: pid for pid in pids for inode in _socket_inodes(pid)}
    found: set[tuple[str, int, int]] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN or fields[9] not in owner:
                continue
            port = int(fields[1].split(":")[1], 16)
            found.add((_decode(fields[1]), port, owner[fields[9]]))
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback
