"""One command line for both processes, generated from their settings classes (shared/settings.py).

Every setting is a kebab-case flag named after its field (``bind_address``: ``--bind-address``);
a boolean one is a pair (``--log-json`` / ``--no-log-json``). ``--help`` lists each setting with
its description, default and environment variable, under the class docstring. Precedence:
defaults < environment (the class's ``env_prefix``) < flags. An unknown flag or an invalid value
ends the process with exit code 2 and a message, as argparse does for its own errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import Any, Literal, NoReturn, get_args, get_origin

from shared.settings import (
    Invalid,
    InvalidSettings,
    S,
    Settings,
    description,
    field_types,
    fields,
    from_text,
    optional,
)

UNSET = "None"  # a flag's value that unsets an optional setting


def flag(field: str) -> str:
    """The command-line flag of a settings field."""
    return "--" + field.replace("_", "-")


def settings_from_cli(settings_class: type[S], argv: Sequence[str] | None, *, prog: str) -> S:
    """``settings_class`` from defaults, environment and ``argv`` (default: this process's)."""
    parsed = vars(parser(settings_class, prog).parse_args(list(sys.argv[1:] if argv is None else argv)))
    kinds = field_types(settings_class)
    flags = {
        name: None if value == UNSET and optional(kinds[name]) else value for name, value in parsed.items()
    }
    try:
        return from_text(settings_class, {**environment(settings_class), **flags})
    except InvalidSettings as err:
        _exit(prog, "\n".join(_explain(error, settings_class.env_prefix) for error in err.errors))


def environment(settings_class: type[Settings]) -> dict[str, str]:
    """The settings this process's environment sets (variable names in any case, as ever)."""
    variables = {name.upper(): value for name, value in os.environ.items()}
    prefix = settings_class.env_prefix.upper()
    return {
        name: variables[prefix + name.upper()]
        for name in field_types(settings_class)
        if prefix + name.upper() in variables
    }


def parser(settings_class: type[Settings], prog: str) -> argparse.ArgumentParser:
    """A flag per setting; only the flags given end up in the parsed namespace."""
    cli = argparse.ArgumentParser(
        prog=prog,
        description=settings_class.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
    )
    kinds = field_types(settings_class)
    for field in fields(settings_class):
        kind = kinds[field.name]
        default = (
            f"default factory: {getattr(field.default_factory, '__name__', '?')}"
            if field.default_factory is not dataclasses.MISSING
            else f"default: {field.default}"
        )
        text = f"{description(field)} ({default}) [env: {settings_class.env_prefix}{field.name.upper()}]"
        text = text.replace("%", "%%")  # argparse formats help with %
        if kind is bool:
            cli.add_argument(flag(field.name), action=argparse.BooleanOptionalAction, help=text)
        else:
            cli.add_argument(flag(field.name), metavar=_metavar(kind), help=text)
    return cli


def _metavar(kind: Any) -> str:
    if optional(kind):
        kind = next(arg for arg in get_args(kind) if arg is not type(None))
    if get_origin(kind) is Literal:
        return "{" + ",".join(str(choice) for choice in get_args(kind)) + "}"
    return str(kind) if get_origin(kind) else str(kind.__name__)


def _explain(error: Invalid, env_prefix: str) -> str:
    """One line per invalid value: its flag and variable, what is wrong, what was given."""
    where = f"{flag(error.field)} / {env_prefix}{error.field.upper()}" if error.field else "settings"
    return f"  {where}: {error.message} (given: {error.given!r})"


def _exit(prog: str, message: str) -> NoReturn:
    print(f"{prog}: invalid settings:\n{message}", file=sys.stderr)
    raise SystemExit(2)
