"""Output: aligned tables for people, JSON or YAML for scripts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

FORMATS = ("table", "json", "yaml")


def duration(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d4h`` (kubectl's AGE style); ``-`` for None."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    if whole < 120:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    if whole < 48 * 3600:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600}h"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """``columns``: (key, HEADER). Missing or None values print as ``-``."""
    cells = [[header for _, header in columns]]
    for row in rows:
        cells.append(["-" if row.get(key) is None else str(row[key]) for key, _ in columns])
    widths = [max(len(line[column]) for line in cells) for column in range(len(columns))]
    return "\n".join(
        "   ".join(cell.ljust(widths[column]) for column, cell in enumerate(line)).rstrip() for line in cells
    )


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip()
