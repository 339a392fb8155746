"""kubectl phalanx's command line: flags before or after the command, the context's namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli.__main__ import _context_namespace, _kubeconfig, main, parser
from controller.cli.render import duration, table


def test_flags_count_before_and_after_the_command() -> None:
    before = parser().parse_args(["-n", "a", "-o", "json", "top"])
    assert (before.namespace, before.output, before.command) == ("a", "json", "top")
    after = parser().parse_args(["top", "-n", "b", "-A"])
    assert (after.namespace, after.output, after.all_namespaces) == ("b", "table", True)
    both = parser().parse_args(["-n", "a", "explain", "job/x", "-n", "c"])
    assert (both.namespace, both.target) == ("c", "job/x")


def test_unknown_output_format_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["top", "-o", "xml"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_namespace_and_kubeconfig_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config"
    config.write_text(
        "current-context: b\ncontexts:\n"
        "- name: a\n  context: {namespace: wrong}\n"
        "- name: b\n  context: {cluster: x, namespace: ml-team}\n"
    )
    assert _context_namespace(str(config)) == "ml-team"
    assert _context_namespace(str(tmp_path / "missing")) == "default"
    monkeypatch.setenv("KUBECONFIG", f"{config}:/other")
    assert _kubeconfig(None) == str(config)
    assert _kubeconfig("/given") == "/given"


def test_missing_kubeconfig_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["top", "--kubeconfig", str(tmp_path / "none")]) == 3
    assert "cannot use kubeconfig" in capsys.readouterr().err


def test_rendering() -> None:
    assert [duration(s) for s in (None, 5, 600, 3 * 3600 + 300, 3 * 86400)] == [
        "-",
        "5s",
        "10m",
        "3h05m",
        "3d0h",
    ]
    assert table([{"a": "x", "b": None}], [("a", "A"), ("b", "LONGER")]).splitlines() == [
        "A   LONGER",
        "x   -",
    ]
