"""NodeSelector terms (pod node affinity, ResourceSlice node selection) as core Requirements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.core import Requirement
from shared.jsonread import items


def requirements(term: Mapping[str, Any]) -> tuple[Requirement, ...]:
    reqs = []
    for expr in items(term.get("matchExpressions")):
        if isinstance(expr, Mapping):
            values = tuple(str(v) for v in items(expr.get("values")))
            reqs.append(Requirement(str(expr.get("key", "")), str(expr.get("operator", "")), values))
    # matchFields: node fields, of which the API allows only metadata.name (the node's name,
    # which need not equal its kubernetes.io/hostname label).
    for expr in items(term.get("matchFields")):
        if isinstance(expr, Mapping):
            values = tuple(str(v) for v in items(expr.get("values")))
            key, operator = str(expr.get("key", "")), str(expr.get("operator", ""))
            reqs.append(Requirement(key, operator, values, field=True))
    return tuple(reqs)


def selector_terms(selector: Mapping[str, Any]) -> tuple[tuple[Requirement, ...], ...]:
    """A NodeSelector's terms (ORed; the requirements of a term are ANDed)."""
    return tuple(requirements(t) for t in items(selector.get("nodeSelectorTerms")) if isinstance(t, Mapping))
