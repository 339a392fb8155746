"""``python -m certs``: exit codes and one-line errors."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from certs.__main__ import main
from certs.bundle import problem_with
from certs.files import read_bundle
from certs.kube import service_dns_names


def test_generate_is_idempotent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    args = ["generate", "--out", str(out), "--dns", "localhost", "--ip", "127.0.0.1", "--days", "7"]
    assert main(args) == 0
    assert capsys.readouterr().out == f"created: {out}/tls.crt (CA {out}/ca.crt)\n"
    assert main(args) == 0
    assert capsys.readouterr().out == f"unchanged: {out}/tls.crt (CA {out}/ca.crt)\n"
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]


def test_generate_defaults_to_the_service_names_and_localhost(tmp_path: Path) -> None:
    assert main(["generate", "--out", str(tmp_path)]) == 0
    bundle = read_bundle(tmp_path)
    assert bundle is not None
    dns = [*service_dns_names("phalanx-webhook", "phalanx-system"), "localhost"]
    assert problem_with(bundle, dns, ["127.0.0.1"], datetime.now(UTC)) is None


def test_bad_days_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["generate", "--out", str(tmp_path), "--days", "0"])
    assert exit_info.value.code == 2


def test_inject_with_a_missing_ca_file_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inject", "--kubeconfig", "k", "--ca-file", str(tmp_path / "nope.crt")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m certs inject: error:") and "nope.crt" in err


def test_inject_refuses_a_file_that_is_not_a_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "ca.crt"
    bogus.write_text("hello")
    assert main(["inject", "--kubeconfig", "k", "--ca-file", str(bogus)]) == 1
    assert "error:" in capsys.readouterr().err


def test_bootstrap_with_a_missing_kubeconfig_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bootstrap", "--cert-dir", str(tmp_path), "--once", "--kubeconfig", str(tmp_path / "kc")]
    assert main(args) == 1
    assert "kubeconfig" in capsys.readouterr().err


def test_module_entry_point_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "certs", "generate", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
