"""Certificates on disk: modes, atomic writes, and the idempotent ensure_local."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from certs.bundle import load_cert, problem_with
from certs.files import ensure_local, read_bundle, write_atomic, write_files

from .conftest import DNS, IPS, NOW


def _snapshot(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in directory.iterdir()}


def test_ensure_local_writes_all_files_with_private_keys_0600(tmp_path: Path) -> None:
    assert ensure_local(tmp_path, DNS, IPS, NOW) == "created"
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"ca.crt": 0o644, "tls.crt": 0o644, "ca.key": 0o600, "tls.key": 0o600}
    bundle = read_bundle(tmp_path)
    assert bundle is not None and problem_with(bundle, DNS, IPS, NOW) is None


def test_ensure_local_is_idempotent(tmp_path: Path) -> None:
    ensure_local(tmp_path, DNS, IPS, NOW)
    before = _snapshot(tmp_path)
    assert ensure_local(tmp_path, DNS, IPS, NOW + timedelta(days=30)) == "unchanged"
    assert _snapshot(tmp_path) == before  # same inodes and mtimes: nothing rewritten


def test_ensure_local_renews_an_expiring_cert_and_keeps_the_ca(tmp_path: Path) -> None:
    ensure_local(tmp_path, DNS, IPS, NOW)
    old = read_bundle(tmp_path)
    later = NOW + timedelta(days=300)
    assert ensure_local(tmp_path, DNS, IPS, later) == "renewed"
    new = read_bundle(tmp_path)
    assert old is not None and new is not None
    assert new.tls_crt != old.tls_crt
    assert new.ca_crt == old.ca_crt  # an injected caBundle stays valid
    assert problem_with(new, DNS, IPS, later) is None


def test_ensure_local_reissues_when_names_change(tmp_path: Path) -> None:
    ensure_local(tmp_path, DNS, IPS, NOW)
    assert ensure_local(tmp_path, [*DNS, "localhost"], IPS, NOW) == "renewed"
    bundle = read_bundle(tmp_path)
    assert bundle is not None and problem_with(bundle, [*DNS, "localhost"], IPS, NOW) is None


def test_ensure_local_replaces_garbage_and_missing_files(tmp_path: Path) -> None:
    ensure_local(tmp_path, DNS, IPS, NOW)
    (tmp_path / "tls.crt").write_bytes(b"not a certificate")
    assert ensure_local(tmp_path, DNS, IPS, NOW) == "renewed"
    (tmp_path / "tls.key").unlink()
    assert ensure_local(tmp_path, DNS, IPS, NOW) == "created"
    bundle = read_bundle(tmp_path)
    assert bundle is not None and problem_with(bundle, DNS, IPS, NOW) is None


def test_force_reissues_the_serving_cert(tmp_path: Path) -> None:
    ensure_local(tmp_path, DNS, IPS, NOW)
    old = (tmp_path / "tls.crt").read_bytes()
    assert ensure_local(tmp_path, DNS, IPS, NOW, force=True) == "renewed"
    assert (tmp_path / "tls.crt").read_bytes() != old
    load_cert((tmp_path / "tls.crt").read_bytes())


def test_write_files_skips_unchanged_and_fixes_modes(tmp_path: Path) -> None:
    assert write_files(tmp_path, {"tls.crt": b"a", "tls.key": b"b"}) == ["tls.key", "tls.crt"]
    assert write_files(tmp_path, {"tls.crt": b"a", "tls.key": b"b"}) == []
    os.chmod(tmp_path / "tls.key", 0o644)
    assert write_files(tmp_path, {"tls.crt": b"a", "tls.key": b"b"}) == ["tls.key"]
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600


def test_write_atomic_replaces_in_one_step_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "tls.crt"
    target.write_bytes(b"old")
    inode = target.stat().st_ino
    write_atomic(target, b"new", 0o644)
    assert target.read_bytes() == b"new"
    assert target.stat().st_ino != inode  # a rename, not an in-place rewrite a reader could see half of
    assert [p.name for p in tmp_path.iterdir()] == ["tls.crt"]
