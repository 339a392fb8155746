"""DRA's CEL device selectors, evaluated with a real CEL implementation (the Rust ``cel`` crate
through the ``common-expression-language`` package).

A selector sees what the scheduler gives it: ``device.driver``, ``device.attributes[domain].name``
and ``device.capacity[domain].name`` (attribute and capacity names grouped by their domain, an
unqualified name in the driver's), with Kubernetes' quantity and semver helpers:
``quantity("80Gi")``, ``semver("1.2.3")`` and their ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``asInteger``, ``asApproximateFloat``, ``major``/``minor``/``patch``. A quantity
is a map ``{"__quantity__": milli-units}`` and a version ``{"__semver__": "1.2.3"}`` inside the
evaluation, so ``==`` compares them by value. An expression that fails to compile or to evaluate
(a missing attribute, an unknown function) is an error the caller reports; it never matches or
fails a device on a guess.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from controller.core import messages as msg
from controller.core.dra import AttributeValue, Device
from shared.quantities import parse_fraction

QUANTITY = "__quantity__"
SEMVER = "__semver__"


class SelectorError(Exception):
    """The expression cannot be compiled or evaluated for a device."""


def _quantity(text: str) -> dict[str, int]:
    try:
        return {QUANTITY: int(parse_fraction(text) * 1000)}
    except (ValueError, ZeroDivisionError) as err:
        raise ValueError(msg.cel_invalid_quantity(text)) from err


def _version_tuple(text: str) -> tuple[int, int, int]:
    core = text.split("-", 1)[0].split("+", 1)[0]
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(msg.cel_invalid_semver(text))
    return int(parts[0]), int(parts[1]), int(parts[2])


def _semver(text: str) -> dict[str, str]:
    _version_tuple(text)
    return {SEMVER: text}


def _key(value: Mapping[str, Any]) -> Any:
    if QUANTITY in value:
        return value[QUANTITY]
    if SEMVER in value:
        return _version_tuple(str(value[SEMVER]))
    raise ValueError(msg.CEL_NOT_COMPARABLE)


def _compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    ka, kb = _key(a), _key(b)
    return int(ka > kb) - int(ka < kb)


def _cel() -> Any:
    """The CEL package, imported on first use: its __init__ also loads its command line (typer,
    rich, asyncio), which a process planning without DRA (the simulation) need not carry."""
    return importlib.import_module("cel")


def _context() -> Any:
    ctx = _cel().Context()
    ctx.add_function("quantity", _quantity)
    ctx.add_function("semver", _semver)
    ctx.add_function("isQuantity", lambda t: _safe(_quantity, t))
    ctx.add_function("isSemver", lambda t: _safe(_semver, t))
    ctx.add_function("compareTo", _compare)
    ctx.add_function("isGreaterThan", lambda a, b: _compare(a, b) > 0)
    ctx.add_function("isLessThan", lambda a, b: _compare(a, b) < 0)
    ctx.add_function("asInteger", lambda a: _key(a) // 1000)
    ctx.add_function("asApproximateFloat", lambda a: _key(a) / 1000)
    ctx.add_function("major", lambda a: _version_tuple(str(a[SEMVER]))[0])
    ctx.add_function("minor", lambda a: _version_tuple(str(a[SEMVER]))[1])
    ctx.add_function("patch", lambda a: _version_tuple(str(a[SEMVER]))[2])
    return ctx


def _safe(parse: Any, text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


def _grouped(device: Device, values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for qualified, value in values.items():
        domain, _, name = qualified.rpartition("/")
        out.setdefault(domain or device.driver, {})[name] = value
    return out


def _attribute(value: AttributeValue) -> Any:
    return {SEMVER: value[1]} if isinstance(value, tuple) else value


def device_variables(device: Device) -> dict[str, Any]:
    return {
        "driver": device.driver,
        "attributes": _grouped(device, {k: _attribute(v) for k, v in device.attributes.items()}),
        "capacity": _grouped(device, {k: {QUANTITY: v} for k, v in device.capacity.items()}),
    }


class Selectors:
    """Compiled expressions and their results, by what a device shows a selector (devices alike
    but for their name share one evaluation). Built again when the devices change, it takes from
    the ``previous`` one what is still asked, so a node joining does not evaluate every device
    again, and keeps only that."""

    def __init__(self, previous: Selectors | None = None) -> None:
        self._programs: dict[str, Any] = {}
        self._context: Any = None
        self._results: dict[tuple[str, Any], bool | str] = {}
        self._shapes: dict[int, tuple[Device, Any]] = {}  # by id(device), kept with the device
        self._previous = previous

    def forget_previous(self) -> None:
        """Once everything is asked that will be: the previous one's results may go."""
        self._previous = None

    def _shape(self, device: Device) -> Any:
        """What a selector can see of a device (not its name), as a key."""
        found = self._shapes.get(id(device))
        if found is None or found[0] is not device:
            if self._previous is not None:
                found = self._previous._shapes.get(id(device))
            if found is None or found[0] is not device:
                found = (
                    device,
                    (
                        device.driver,
                        tuple(sorted(device.attributes.items())),
                        tuple(sorted(device.capacity.items())),
                    ),
                )
            self._shapes[id(device)] = found
        return found[1]

    def _program(self, expression: str) -> Any:
        program = self._programs.get(expression)
        if program is None and self._previous is not None:
            program = self._previous._programs.get(expression)
            if program is not None:
                self._programs[expression] = program
        if program is None:
            try:
                program = _cel().compile(expression)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as err:  # ValueError and others on syntax errors; a panic (see below)
                raise SelectorError(str(err)) from err
            self._programs[expression] = program
        return program

    def matches(self, expression: str, device: Device) -> bool:
        """Does the device satisfy the expression? Raises SelectorError when that cannot be told."""
        key = (expression, self._shape(device))
        found = self._results.get(key)
        if found is None:
            if self._previous is not None:
                found = self._previous._results.get(key)
            if found is None:
                found = self._evaluate(expression, device)
            self._results[key] = found
        if isinstance(found, str):
            raise SelectorError(found)
        return found

    def _evaluate(self, expression: str, device: Device) -> bool | str:
        try:
            program = self._program(expression)
        except SelectorError as err:
            return str(err)
        if self._context is None:
            self._context = _context()
        self._context.add_variable("device", device_variables(device))
        try:
            result = program.execute(self._context)
        except (KeyboardInterrupt, SystemExit):
            raise
        # A missing key, a type error, an unknown function; or a panic of the Rust library, which
        # pyo3 raises as a BaseException (PanicException): one selector, not the controller.
        except BaseException as err:
            return f"{type(err).__name__}: {err}"
        if not isinstance(result, bool):
            return msg.cel_not_bool(type(result).__name__)
        return result
