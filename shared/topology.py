"""What a gang asks of the cluster's topology, read from every place users write it.

Phalanx's own words (PodGroup spec fields, then ``phalanx.io/topology*`` annotations on the
PodGroup, then on its members' pod templates) and the compat ones it reads unchanged:

- Kueue TAS pod-template annotations ``kueue.x-k8s.io/podset-required-topology``,
  ``podset-preferred-topology``, ``podset-slice-required-topology`` + ``podset-slice-size``;
- KAI's PodGroup ``spec.topologyConstraint`` (``topology``, ``requiredTopologyLevel``,
  ``preferredTopologyLevel``);
- Volcano's PodGroup ``spec.networkTopology`` (``mode`` hard or soft, ``highestTierAllowed``; as
  volcano.sh/apis v1.12 has them): a tier, not a label key. The core maps tier N to the N-th level
  of the gang's topology, narrowest first (core/topology.py ``resolve_tiers``);
- KAI's leaf subgroups' own ``topologyConstraint.requiredTopologyLevel`` (``subgroup_levels``):
  each subgroup's members inside one domain of its level, as slices are.

Each system is one source, and so is each place of Phalanx's own; two sources that set one field
to different values conflict (the gang is refused, never placed by one of them silently). Pure: no
I/O, shared by webhook and controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from shared import constants as c
from shared.jsonread import obj, text

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"

# Per source, the annotation of each field (name, required, preferred, slice_key, slice_size).
PHALANX_ANNOTATIONS = {
    "name": c.TOPOLOGY_ANNOTATION,
    "required": c.TOPOLOGY_REQUIRED_ANNOTATION,
    "preferred": c.TOPOLOGY_PREFERRED_ANNOTATION,
    "slice_key": c.TOPOLOGY_SLICE_REQUIRED_ANNOTATION,
    "slice_size": c.TOPOLOGY_SLICE_SIZE_ANNOTATION,
}
KUEUE_ANNOTATIONS = {
    "required": KUEUE_REQUIRED,
    "preferred": KUEUE_PREFERRED,
    "slice_key": KUEUE_SLICE_REQUIRED,
    "slice_size": KUEUE_SLICE_SIZE,
}
KAI_FIELDS = {"name": "topology", "required": "requiredTopologyLevel", "preferred": "preferredTopologyLevel"}


@dataclass(frozen=True, slots=True)
class TopologyAsk:
    """One source's request; every field optional. ``slice_size`` stays text until merged."""

    name: str | None = None
    required: str | None = None
    preferred: str | None = None
    slice_key: str | None = None
    slice_size: str | None = None
    # Volcano's highestTierAllowed (as text), under mode hard (required) or soft (preferred).
    required_tier: str | None = None
    preferred_tier: str | None = None

    def set_fields(self) -> dict[str, str]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name))}


@dataclass(frozen=True, slots=True)
class Conflict:
    """Field ``field`` is ``first`` per ``first_from`` and ``second`` per ``second_from``."""

    field: str
    first: str
    first_from: str
    second: str
    second_from: str


FIELD_WORDS = {
    "name": "topology",
    "required": "required level",
    "preferred": "preferred level",
    "slice_key": "slice level",
    "slice_size": "slice size",
    "required_tier": "required tier",
    "preferred_tier": "preferred tier",
}


def from_annotations(annotations: Mapping[str, str], names: Mapping[str, str]) -> TopologyAsk:
    return TopologyAsk(**{f: annotations[key] for f, key in names.items() if annotations.get(key)})


def from_kai(spec: Any) -> TopologyAsk:
    """KAI's ``spec.topologyConstraint``."""
    constraint = obj(obj(spec).get("topologyConstraint"))
    return TopologyAsk(**{f: v for f, key in KAI_FIELDS.items() if (v := text(constraint.get(key)))})


VOLCANO_HARD, VOLCANO_SOFT = "hard", "soft"


def from_volcano(spec: Any) -> TopologyAsk:
    """Volcano's ``spec.networkTopology``: mode hard (the default) or soft, highestTierAllowed
    (default 1), as Volcano's own CRD defaults them."""
    raw = obj(spec).get("networkTopology")
    if not isinstance(raw, Mapping):
        return TopologyAsk()
    tier = raw.get("highestTierAllowed", 1)
    text_tier = str(tier) if isinstance(tier, int) and not isinstance(tier, bool) else text(tier) or "1"
    if text(raw.get("mode")) == VOLCANO_SOFT:
        return TopologyAsk(preferred_tier=text_tier)
    return TopologyAsk(required_tier=text_tier)


def subgroup_levels(spec: Any) -> dict[str, str]:
    """KAI's leaf ``spec.subGroups[].topologyConstraint.requiredTopologyLevel``: {leaf: level}.
    A parent subgroup's constraint (its leaves together in one domain) is not read."""
    groups = [g for g in obj(spec).get("subGroups") or () if isinstance(g, Mapping)]
    parents = {text(g.get("parent")) for g in groups}
    out: dict[str, str] = {}
    for group in groups:
        name = text(group.get("name"))
        level = text(obj(group.get("topologyConstraint")).get("requiredTopologyLevel"))
        if name and level and name not in parents:
            out[name] = level
    return out


def merge(sources: Iterable[tuple[str, TopologyAsk]]) -> tuple[TopologyAsk, Conflict | None]:
    """One ask from several systems' (named) asks, and the first conflict between them, if any."""
    merged: dict[str, tuple[str, str]] = {}
    for source, ask in sources:
        for name, value in ask.set_fields().items():
            seen = merged.get(name)
            if seen is None:
                merged[name] = (value, source)
            elif seen[0] != value:
                return TopologyAsk(), Conflict(name, seen[0], seen[1], value, source)
    return TopologyAsk(**{name: value for name, (value, _) in merged.items()}), None
