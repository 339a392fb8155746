"""shared.cli: a settings class becomes a command line (the one both processes use)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from shared.cli import settings_from_cli
from shared.settings import Settings, setting
from tests.settings_help import help_text


@dataclass(frozen=True)
class ToySettings(Settings):
    """A toy process."""

    env_prefix: ClassVar[str] = "TOY_"

    listen_port: int = setting(8000, ge=1, description="where to listen")
    verbose_mode: bool = setting(True, description="say more")
    name: str = setting("toy", description="what to call it")


def parse(argv: list[str]) -> ToySettings:
    return settings_from_cli(ToySettings, argv, prog="toy")


def test_a_flag_beats_the_environment_which_beats_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse([]).listen_port == 8000
    monkeypatch.setenv("TOY_LISTEN_PORT", "8100")
    assert parse([]).listen_port == 8100
    assert parse(["--listen-port", "8200"]).listen_port == 8200
    assert parse(["--listen-port=8300"]).listen_port == 8300


def test_a_boolean_is_a_flag_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse([]).verbose_mode is True
    assert parse(["--no-verbose-mode"]).verbose_mode is False
    monkeypatch.setenv("TOY_VERBOSE_MODE", "false")
    assert parse(["--verbose-mode"]).verbose_mode is True


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--listen-port", "eighty"], {}, "--listen-port / TOY_LISTEN_PORT: Input should be a valid integer"),
        (
            ["--listen-port", "0"],
            {},
            "--listen-port / TOY_LISTEN_PORT: Input should be greater than or equal to 1",
        ),
        ([], {"TOY_LISTEN_PORT": "x"}, "(given: 'x')"),
    ],
)
def test_an_invalid_value_exits_2_with_a_message_not_a_traceback(
    argv: list[str],
    env: dict[str, str],
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("toy: invalid settings:\n")
    assert expected in err
    assert "Traceback" not in err


def test_an_unknown_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(["--listen-prot", "1"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --listen-prot" in capsys.readouterr().err


def test_help_lists_every_setting_with_its_description_and_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = help_text(parse, ToySettings, "TOY_", capsys)
    assert "A toy process." in out
    assert "--no-verbose-mode" in out
