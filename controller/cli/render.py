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
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """``columns``: (key, HEADER). Missing or None values print as ``-``."""
    cells = [[header for _, header in columns]]
    for row in rows:
        cells.append(["-" if row.get(key) is None else str(row[key]) for key, _ in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "   ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in cells
    )


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip()
