"""Values Phalanx refuses at admission, because they would otherwise be ignored or break the object.

Each check returns a message for ``allowed: false``, or None when the value is fine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from shared import constants as c
from shared import topology
from shared.grouplink import LABEL_VALUE_MAX
from shared.jsonread import whole_number

# Kubernetes label values: at most 63 characters, alphanumeric at both ends.
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def _is_int(value: str, minimum: int) -> bool:
    number = whole_number(value) if len(value.strip()) <= 9 else None
    return number is not None and number >= minimum


def _positive(value: str) -> bool:
    return _is_int(value, 1)


def _non_negative(value: str) -> bool:
    return _is_int(value, 0)


def _placement(value: str) -> bool:
    return value in (c.PLACEMENT_PINNED, c.PLACEMENT_FREE)


# A label key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
_LABEL_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?")


def _label_key(value: str) -> bool:
    prefix, _, name = value.rpartition("/")
    if "/" in value and _DNS_SUBDOMAIN.fullmatch(prefix) is None:
        return False
    return _LABEL_NAME.fullmatch(name) is not None


_CHECKS: tuple[tuple[str, Callable[[str], bool], str], ...] = (
    (c.MIN_MEMBER_ANNOTATION, _positive, "a positive integer"),
    (c.SCHEDULE_TIMEOUT_ANNOTATION, _non_negative, "a non-negative integer (seconds)"),
    (c.PLACEMENT_ANNOTATION, _placement, f"{c.PLACEMENT_PINNED} or {c.PLACEMENT_FREE}"),
    (c.TOPOLOGY_REQUIRED_ANNOTATION, _label_key, "a node label key, e.g. topology.kubernetes.io/rack"),
    (c.TOPOLOGY_PREFERRED_ANNOTATION, _label_key, "a node label key, e.g. topology.kubernetes.io/rack"),
    (c.TOPOLOGY_SLICE_REQUIRED_ANNOTATION, _label_key, "a node label key, e.g. nvidia.com/gpu.clique"),
    (c.TOPOLOGY_SLICE_SIZE_ANNOTATION, _positive, "a positive integer"),
    (c.TOPOLOGY_ANNOTATION, lambda v: _LABEL_VALUE.fullmatch(v) is not None, "a topology name"),
)


_CHECKED = frozenset(key for key, _, _ in _CHECKS)


def check_annotations(annotations: Mapping[str, str], where: str) -> str | None:
    """Phalanx's own annotations must be readable, or the user's intent would be silently lost."""
    if annotations.keys().isdisjoint(_CHECKED):
        return None  # most objects set none of them
    for key, valid, expected in _CHECKS:
        value = annotations.get(key)
        if value is not None and not valid(value):
            return f"phalanx: annotation {key} on {where} must be {expected}, got {value[:64]!r}"
    return None


_LEVEL_FIELDS = frozenset({"required", "preferred", "slice_key"})


def topology_ask(annotations: Mapping[str, str]) -> topology.TopologyAsk:
    """What one template asks, Phalanx's and Kueue's words together (``check_topology`` has
    refused them if they disagree)."""
    ask, _ = topology.merge(
        (
            ("Phalanx", topology.from_annotations(annotations, topology.PHALANX_ANNOTATIONS)),
            ("Kueue", topology.from_annotations(annotations, topology.KUEUE_ANNOTATIONS)),
        )
    )
    return ask


def check_templates_agree(asks: Sequence[tuple[str, topology.TopologyAsk]]) -> str | None:
    """Templates of one gang (``where`` each) that ask for different topology: the controller
    would have to pick one, so the workload is refused. A template that sets nothing agrees."""
    _, conflict = topology.merge(asks)
    if conflict is None:
        return None
    return (
        f"phalanx: {conflict.first_from} asks for {topology.FIELD_WORDS[conflict.field]} "
        f"{conflict.first!r} and {conflict.second_from} for {conflict.second!r}; the templates of one "
        "gang must ask for the same topology"
    )


def check_topology(annotations: Mapping[str, str], size: int | None, where: str) -> str | None:
    """A topology request the controller could never meet, told at apply: Phalanx's and Kueue's
    annotations that disagree, a level that is no label key or a slice size that is no positive
    number, a slice without its level or size, a slice size that does not divide the gang
    (``size``: its members; a min-member annotation among ``annotations`` overrides it)."""
    phalanx = topology.from_annotations(annotations, topology.PHALANX_ANNOTATIONS)
    kueue = topology.from_annotations(annotations, topology.KUEUE_ANNOTATIONS)
    if not phalanx.set_fields() and not kueue.set_fields():
        return None
    ask, conflict = topology.merge((("Phalanx", phalanx), ("Kueue", kueue)))
    if conflict is not None:
        return (
            f"phalanx: {where} asks for {topology.FIELD_WORDS[conflict.field]} {conflict.first!r} "
            f"({conflict.first_from}) and {conflict.second!r} ({conflict.second_from}); set one of them"
        )
    # Kueue's words are checked as Phalanx's are (check_annotations): a level is a label key, a
    # slice size a positive number, or the controller could only refuse the gang later.
    for field, value in ask.set_fields().items():
        if field in _LEVEL_FIELDS and not _label_key(value):
            return (
                f"phalanx: {where} asks for {topology.FIELD_WORDS[field]} {value[:64]!r}, which is not "
                "a node label key (e.g. topology.kubernetes.io/rack)"
            )
        if field == "slice_size" and not _positive(value):
            return f"phalanx: {where} asks for slice size {value[:64]!r}, which is not a positive integer"
    if bool(ask.slice_key) != bool(ask.slice_size):
        return f"phalanx: {where} sets a slice level or a slice size without the other; set both"
    slice_size = int(ask.slice_size) if ask.slice_size and _positive(ask.slice_size) else None
    # Slices divide the gang the controller waits for: a min-member override, else the size.
    override = whole_number(annotations.get(c.MIN_MEMBER_ANNOTATION))
    size = override if override is not None and override > 0 else size
    if size and slice_size and size % slice_size:
        return f"phalanx: {where}: slice size {slice_size} does not divide the gang's {size} members"
    return None


# Every member of a gang is checked for the same name. Only what could be a label value is kept:
# a name comes from the object, and a client may send megabytes of it.
@lru_cache(maxsize=4096)
def _label_value(value: str) -> bool:
    return _LABEL_VALUE.fullmatch(value) is not None


def check_group_name(group: str, source: str) -> str | None:
    """The group becomes the value of the label ``phalanx.io/pod-group``, so it must be a valid one."""
    if len(group) <= LABEL_VALUE_MAX and _label_value(group):
        return None
    return (
        f"phalanx: group name {group[:80]!r} (from {source}) is not a valid label value "
        f"(at most 63 characters: letters, digits, '-', '_', '.'); shorten it or set {c.SKIP}: \"true\""
    )
