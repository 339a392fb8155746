"""Type-safe reads from untrusted JSON.

An AdmissionReview's object is whatever the client sent (custom resources are validated only after
mutating admission), so every read tolerates a wrong type by treating it as absent.
"""

from __future__ import annotations

from typing import Any


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def get_in(value: Any, *keys: str) -> Any:
    """The value at ``keys`` below ``value``, or None where any step is missing or not an object.

    A digit key also indexes a list (``"replicatedJobs", "0"``), as a JSON pointer does."""
    for key in keys:
        if isinstance(value, list) and key.isdigit():
            index = int(key)
            value = value[index] if index < len(value) else None
            continue
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def strings(value: Any) -> dict[str, str]:
    """A label or annotation map with its non-string entries dropped."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, str)}


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def integer(value: Any, default: int) -> int:
    """An integer field (bool is not one), else ``default``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default
