"""The native gang API (``scheduling.k8s.io`` Workload and PodGroup), read the same at every version.

The registry (shared/kinds.py) lists the versions Phalanx reads; this module says where each of
them keeps what Phalanx reads: a Workload's gang sizes, a PodGroup's policy, its Workload template,
its topology and disruption mode. An object is read by trying each version's spelling in turn (list
responses carry no apiVersion per item), so adding a version is its registry entry plus its rule
here. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared import constants
from shared.jsonread import annotations_of, get_in, items, metadata_of, obj, positive_number, text
from shared.podgroup import DISRUPTION_ALL, DISRUPTION_SINGLE

Path = tuple[str, ...]


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- Workloads -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadRule:
    """Where one version of Workload lists its pod groups, and where each keeps its policy."""

    groups: str  # spec.<groups>[]
    policy: str  # <group>.<policy>.gang.minCount


WORKLOAD_RULES: dict[str, WorkloadRule] = {
    "v1beta1": WorkloadRule("podGroupTemplates", "schedulingPolicy"),
    "v1alpha2": WorkloadRule("podGroupTemplates", "schedulingPolicy"),
    "v1alpha1": WorkloadRule("podGroups", "policy"),
}


def workload_min_counts(raw: Mapping[str, Any]) -> dict[str, int]:
    """Each gang pod group (or template) of a Workload: name -> minCount (basic ones are left out)."""
    out: dict[str, int] = {}
    spec = obj(raw.get("spec"))
    for rule in WORKLOAD_RULES.values():
        for group in items(spec.get(rule.groups)):
            min_count = _count(get_in(group, rule.policy, "gang", "minCount"))
            if min_count is not None:
                out.setdefault(text(get_in(group, "name")), min_count)
    return out


# ---- PodGroups -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroupRule:
    """Where one version of PodGroup keeps what Phalanx reads beyond its policy."""

    workload_name: Path  # under spec: the Workload it was made from
    template_name: Path  # under spec: the template of that Workload
    disruption_mode: Callable[[object], str | None]  # spec.disruptionMode as DISRUPTION_*
    # The status condition saying whether the group has been scheduled (upstream's type name).
    scheduled_condition: str = "PodGroupInitiallyScheduled"


def _disruption_struct(value: object) -> str | None:
    """``{all: {}}`` or ``{single: {}}``."""
    mode = obj(value)
    if "all" in mode:
        return DISRUPTION_ALL
    if "single" in mode:
        return DISRUPTION_SINGLE
    return None


def _disruption_string(value: object) -> str | None:
    """``PodGroup`` (all at once) or ``Pod`` (one by one)."""
    return {"PodGroup": DISRUPTION_ALL, "Pod": DISRUPTION_SINGLE}.get(text(value))


PODGROUP_RULES: dict[str, PodGroupRule] = {
    "v1beta1": PodGroupRule(
        ("workloadRef", "workloadName"), ("workloadRef", "templateName"), _disruption_struct
    ),
    "v1alpha2": PodGroupRule(
        ("podGroupTemplateRef", "workload", "workloadName"),
        ("podGroupTemplateRef", "workload", "podGroupTemplateName"),
        _disruption_string,
        scheduled_condition="PodGroupScheduled",
    ),
}
# Upstream's reasons for that condition: a group that cannot be placed (the scheduler writes it when
# it tries; Phalanx while it holds the group at its gate), and one placed (first success: terminal).
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULED = "Scheduled"


def scheduled_condition_type(api_version: str) -> str:
    """The condition type a PodGroup of ``api_version`` (``scheduling.k8s.io/<v>``) reports scheduling in."""
    rule = PODGROUP_RULES.get(api_version.rpartition("/")[2])
    return rule.scheduled_condition if rule is not None else PODGROUP_RULES["v1beta1"].scheduled_condition


@dataclass(frozen=True, slots=True)
class NativePodGroup:
    """A native PodGroup: one gang, named by its pods' ``spec.schedulingGroup.podGroupName``."""

    namespace: str
    name: str
    uid: str
    min_count: int | None  # None: the basic policy (no gang: pods start one by one)
    workload: str | None  # the Workload (and template) it was made from, if any
    template: str | None
    topology_key: str | None  # schedulingConstraints.topology[0].key
    disruption_mode: str | None  # as Phalanx's PodGroup spells it: DISRUPTION_ALL or DISRUPTION_SINGLE
    priority_class_name: str | None
    parent: str | None  # parentCompositePodGroupName
    timeout_seconds: int | None  # Phalanx's schedule-timeout annotation on the PodGroup
    # Its scheduling condition as it stands (of either version's type): (status, reason, message).
    scheduled: tuple[str, str, str] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


def _first(spec: Mapping[str, Any], paths: list[Path]) -> str | None:
    for path in paths:
        value = text(get_in(spec, *path))
        if value:
            return value
    return None


def timeout_annotation(raw: Mapping[str, Any]) -> int | None:
    """Phalanx's gang timeout written on a native object (the API has no such field)."""
    return positive_number(annotations_of(raw).get(constants.SCHEDULE_TIMEOUT_ANNOTATION))


def native_podgroup(raw: Mapping[str, Any]) -> NativePodGroup:
    meta = metadata_of(raw)
    spec = obj(raw.get("spec"))
    rules = list(PODGROUP_RULES.values())
    topology = next(
        (text(t.get("key")) for t in items(get_in(spec, "schedulingConstraints", "topology"))), ""
    )
    mode = next((m for rule in rules if (m := rule.disruption_mode(spec.get("disruptionMode")))), None)
    return NativePodGroup(
        namespace=text(meta.get("namespace")),
        name=text(meta.get("name")),
        uid=text(meta.get("uid")),
        min_count=_count(get_in(spec, "schedulingPolicy", "gang", "minCount")),
        workload=_first(spec, [rule.workload_name for rule in rules]),
        template=_first(spec, [rule.template_name for rule in rules]),
        topology_key=topology or None,
        disruption_mode=mode,
        priority_class_name=text(spec.get("priorityClassName")) or None,
        parent=text(spec.get("parentCompositePodGroupName")) or None,
        timeout_seconds=timeout_annotation(raw),
        scheduled=_scheduled(raw),
    )


def _scheduled(raw: Mapping[str, Any]) -> tuple[str, str, str] | None:
    types = {rule.scheduled_condition for rule in PODGROUP_RULES.values()}
    for condition in items(get_in(raw, "status", "conditions")):
        if text(condition.get("type")) in types:
            status, reason = text(condition.get("status")), text(condition.get("reason"))
            return status, reason, text(condition.get("message"))
    return None
