"""One command line for both processes, generated from their settings classes by pydantic-settings.

Every setting is a kebab-case flag named after its field (``bind_address``: ``--bind-address``);
a boolean one is a pair (``--log-json`` / ``--no-log-json``). ``--help`` lists each setting with
its description, default and environment variable, under the class docstring. Precedence:
defaults < environment (the class's ``env_prefix``) < flags. An unknown flag or an invalid value
ends the process with exit code 2 and a message, as argparse does for its own errors.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsError

if TYPE_CHECKING:  # pydantic's own dependency; only its type is named here
    from pydantic_core import ErrorDetails

Settings = TypeVar("Settings", bound=BaseSettings)


def flag(field: str) -> str:
    """The command-line flag of a settings field."""
    return "--" + field.replace("_", "-")


def settings_from_cli(settings_class: type[Settings], argv: Sequence[str] | None, *, prog: str) -> Settings:
    """``settings_class`` from defaults, environment and ``argv`` (default: this process's)."""
    try:
        return settings_class(
            _cli_parse_args=list(sys.argv[1:] if argv is None else argv),
            _cli_prog_name=prog,
            _cli_kebab_case=True,
            _cli_implicit_flags=True,  # bool fields: --x and --no-x
            _cli_show_env_vars=True,
            _cli_hide_none_type=True,
            _cli_avoid_json=True,
        )
    except ValidationError as err:
        prefix = str(settings_class.model_config.get("env_prefix") or "")
        _exit(prog, "\n".join(_explain(error, prefix) for error in err.errors()))
    except SettingsError as err:  # e.g. an environment value that cannot be decoded at all
        _exit(prog, f"  {err}")


def _explain(error: ErrorDetails, env_prefix: str) -> str:
    """One line per invalid value: its flag and variable, what is wrong, what was given."""
    field = str(error["loc"][0]) if error["loc"] else ""
    where = f"{flag(field)} / {env_prefix}{field.upper()}" if field else "settings"
    return f"  {where}: {error['msg']} (given: {error['input']!r})"


def _exit(prog: str, message: str) -> NoReturn:
    print(f"{prog}: invalid settings:\n{message}", file=sys.stderr)
    raise SystemExit(2)
