"""Settings classes: frozen dataclasses whose fields say what they mean, checked when constructed.

A settings class subclasses ``Settings``, is a ``@dataclass(frozen=True)``, names its environment
prefix (``env_prefix``) and makes each field with ``setting()``: its default (or a factory of it), the
description ``--help`` and docs/reference.md show, bounds (``ge``, ``gt``, ``le``) and ``check``, a
plain function that returns the value (normalised) or raises ValueError. ``checks`` are plain
functions of the whole, run once every field is valid. ``from_text`` reads values given as text
(the environment, a command line) as their fields' types say: str, int, float, bool, Path, a
Literal of strings, frozenset[str] (a comma list), and any of these ``| None``. An invalid value
raises ``InvalidSettings``: one ``Invalid`` per value, saying what is wrong and what was given.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, get_args, get_origin

S = TypeVar("S", bound="Settings")

TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
# An integer written as text: digits (underscores between them), and a zero fraction at most.
INTEGER = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0*)?", re.ASCII)
_TYPES: dict[type[Settings], dict[str, Any]] = {}  # field_types, resolved once per class


@dataclasses.dataclass(frozen=True)
class Invalid:
    """One invalid value: its field (None: the settings as a whole), what is wrong, what was given."""

    field: str | None
    message: str
    given: object


class InvalidSettings(ValueError):
    def __init__(self, errors: list[Invalid]) -> None:
        super().__init__("; ".join(f"{e.field or 'settings'}: {e.message}" for e in errors))
        self.errors = tuple(errors)


class _Worded(ValueError):
    """A ValueError whose text is the whole message (a check's own gets "Value error, " before it)."""


def setting(
    default: Any = dataclasses.MISSING,
    *,
    description: str,
    default_factory: Callable[[], Any] | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    check: Callable[[Any], Any] | None = None,
) -> Any:
    """A settings field: ``default`` (or ``default_factory()``), what it means, its bounds and its check."""
    metadata = {"description": description, "ge": ge, "gt": gt, "le": le, "check": check}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


class Settings:
    """The base of a settings class: every field is checked when an instance is made."""

    env_prefix: ClassVar[str] = ""
    checks: ClassVar[tuple[Callable[[Any], None], ...]] = ()

    def __post_init__(self) -> None:
        errors: list[Invalid] = []
        kinds = field_types(type(self))
        for field in fields(type(self)):
            value = getattr(self, field.name)
            try:  # a check may normalise the value: set it on the frozen instance, as dataclasses do
                object.__setattr__(self, field.name, _checked(field, kinds[field.name], value))
            except ValueError as err:
                errors.append(Invalid(field.name, str(err), value))
        for check in () if errors else type(self).checks:
            try:
                check(self)
            except ValueError as err:
                errors.append(Invalid(None, f"Value error, {err}", None))
        if errors:
            raise InvalidSettings(errors)


def field_types(settings_class: type[Settings]) -> dict[str, Any]:
    """Each field's name -> its type, in the order the class declares them."""
    if settings_class not in _TYPES:
        hints = typing.get_type_hints(settings_class)
        _TYPES[settings_class] = {field.name: hints[field.name] for field in fields(settings_class)}
    return _TYPES[settings_class]


def fields(settings_class: type[Settings]) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(settings_class)  # type: ignore[arg-type]


def description(field: dataclasses.Field[Any]) -> str:
    return str(field.metadata.get("description", ""))


def optional(kind: Any) -> bool:
    """Whether a field of this type may be unset (None)."""
    return type(None) in get_args(kind)


def from_text(settings_class: type[S], given: Mapping[str, object]) -> S:
    """``settings_class`` from ``given`` (text is read as its field's type says; other values, such
    as a flag's True, are taken as they are) and its defaults for the rest."""
    kinds = field_types(settings_class)
    values: dict[str, object] = {}
    errors: list[Invalid] = []
    for name, raw in given.items():
        try:
            values[name] = parse(kinds[name], raw) if isinstance(raw, str) else raw
        except ValueError as err:
            errors.append(Invalid(name, str(err), raw))
    make: Callable[..., S] = settings_class
    try:
        settings = make(**values)
    except InvalidSettings as err:
        order = {name: position for position, name in enumerate(kinds)}
        whole = {name: given[name] for name in kinds if name in given}
        errors += [
            dataclasses.replace(e, given=given.get(e.field, e.given) if e.field else whole)
            for e in err.errors
            if e.field or not errors  # the whole is checked only once every field is valid
        ]
        errors.sort(key=lambda e: order.get(e.field, len(order)) if e.field else len(order))
        raise InvalidSettings(errors) from None
    if errors:
        raise InvalidSettings(errors)
    return settings


def parse(kind: Any, text: str) -> object:
    """``text`` as a value of ``kind`` (raises ValueError saying why it is not one)."""
    if get_origin(kind) in (types.UnionType, typing.Union):
        kind = next(arg for arg in get_args(kind) if arg is not type(None))
    if kind is bool:
        if text.lower() in TRUE | FALSE:
            return text.lower() in TRUE
        raise _Worded("Input should be a valid boolean, unable to interpret input")
    if kind is int:
        if INTEGER.fullmatch(text.strip()):
            return int(text.strip().partition(".")[0])
        raise _Worded("Input should be a valid integer, unable to parse string as an integer")
    if kind is float:
        with contextlib.suppress(ValueError):
            if text.isascii():  # float() also reads other scripts' digits
                return float(text)
        raise _Worded("Input should be a valid number, unable to parse string as a number")
    if get_origin(kind) is frozenset:
        return frozenset(part.strip() for part in text.split(",") if part.strip())
    if kind is Path:
        return Path(text)
    if kind is str or get_origin(kind) is Literal:
        return text
    raise TypeError(f"a setting of type {kind} cannot be read from text")


def _checked(field: dataclasses.Field[Any], kind: Any, value: Any) -> Any:
    """``value`` if it is valid for ``field`` (as its check returns it), else ValueError."""
    if value is None and optional(kind):
        return value
    choices = next((get_args(arg) for arg in (kind, *get_args(kind)) if get_origin(arg) is Literal), ())
    if choices and value not in choices:
        *others, last = [repr(choice) for choice in choices]
        raise _Worded(
            f"Input should be {', '.join(others)} or {last}" if others else f"Input should be {last}"
        )
    bounds = field.metadata
    if bounds.get("ge") is not None and not value >= bounds["ge"]:
        raise _Worded(f"Input should be greater than or equal to {bounds['ge']}")
    if bounds.get("gt") is not None and not value > bounds["gt"]:
        raise _Worded(f"Input should be greater than {bounds['gt']}")
    if bounds.get("le") is not None and not value <= bounds["le"]:
        raise _Worded(f"Input should be less than or equal to {bounds['le']}")
    check = bounds.get("check")
    if check is None:
        return value
    try:
        return check(value)
    except _Worded:
        raise
    except ValueError as err:
        raise _Worded(f"Value error, {err}") from err
