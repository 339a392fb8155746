"""Both processes build their command line from a settings model (shared/cli.py): one check that
``--help`` shows every setting, its description and its environment variable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from shared.cli import flag
from shared.settings import Settings, description, fields


def help_text(
    parse_settings: Callable[[list[str]], Any],
    settings: type[Settings],
    env_prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """``--help``'s text, on one line, after checking that it lists every setting."""
    with pytest.raises(SystemExit) as exited:
        parse_settings(["--help"])
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    unwrapped = "".join(out.split())  # ... also after a hyphen
    for field in fields(settings):
        name, meaning = field.name, description(field)
        assert meaning, f"{name} has no description for --help"
        assert f"{flag(name)} " in out
        assert "".join(meaning.split()) in unwrapped
        assert f"{env_prefix}{name.upper()}" in out
    return out
