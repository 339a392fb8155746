"""Type-safe reads from untrusted JSON: API objects as the webhook and the controller receive them.

An AdmissionReview's object is whatever the client sent (custom resources are validated only after
mutating admission), and a watch event's object is read before anything checks it, so every read
tolerates a wrong type by treating it as absent. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, TypeAlias

# A parsed JSON object (an API object, a watch event, a patch body): the one name for it.
JsonObject: TypeAlias = dict[str, Any]


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def get_in(value: Any, *keys: str) -> Any:
    """The value at ``keys`` below ``value``, or None where any step is missing or not an object.

    A digit key also indexes a list (``"replicatedJobs", "0"``), as a JSON pointer does."""
    for key in keys:
        # dict, not Mapping: parsed JSON is made of dicts, and the ABC check costs several times
        # more on the admission hot path.
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and key.isascii() and key.isdigit():
            index = int(key)
            value = value[index] if index < len(value) else None
        else:
            return None
    return value


def strings(value: Any) -> dict[str, str]:
    """A label or annotation map with its non-string entries dropped: ``value`` itself when all its
    values are strings (nearly always; checking costs a third of copying), so read it, never change it.
    """
    if not isinstance(value, dict):
        return {}
    for item in value.values():
        if type(item) is not str:
            return {k: v for k, v in value.items() if type(v) is str}  # JSON keys are always strings
    return value


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


MAX_DIGITS = 18  # fits an int64, as every integer field of the Kubernetes API


def whole_number(value: Any) -> int | None:
    """An integer written in an object or as a label or annotation value: an int, a whole float
    (YAML "3.0") or a string of digits counts, a bool does not; anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        digits = value.strip().removeprefix("-")
        # ASCII only ("²".isdigit() is True, int("²") raises) and bounded (int() of thousands of
        # digits raises too): a value a tenant writes must never stop a pass.
        if digits.isascii() and digits.isdigit() and len(digits) <= MAX_DIGITS:
            return int(value)
    return None


def positive_number(value: Any) -> int | None:
    """``whole_number`` when above zero (a count, a timeout), else None."""
    number = whole_number(value)
    return number if number is not None and number > 0 else None


def integer(value: Any, default: int) -> int:
    """An integer field (bool is not one), else ``default``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# ---- metadata --------------------------------------------------------------------------------------


def metadata_of(raw: Any) -> dict[str, Any]:
    """An object's ``metadata``, or an empty one."""
    return obj(get_in(raw, "metadata"))


def name_of(raw: Any) -> str:
    return text(get_in(raw, "metadata", "name"))


def namespace_of(raw: Any) -> str:
    return text(get_in(raw, "metadata", "namespace"))


def uid_of(raw: Any) -> str:
    return text(get_in(raw, "metadata", "uid"))


def labels_of(raw: Any) -> dict[str, str]:
    return strings(get_in(raw, "metadata", "labels"))


def annotations_of(raw: Any) -> dict[str, str]:
    return strings(get_in(raw, "metadata", "annotations"))
