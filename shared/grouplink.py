"""Which PodGroup an object (pod or pod template) belongs to, from any accepted link form.

Both the webhook (to write the canonical label) and the controller (to group pods) use this, so
the precedence below is defined exactly once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import NamedTuple

from shared import constants


# A tuple: one is made for every pod the webhook admits, and cheaper than a frozen dataclass.
class GroupLink(NamedTuple):
    """A resolved link: the PodGroup's name and the key it was read from (for messages)."""

    name: str
    source: str
    # The lightweight Coscheduling form carries the gang size on the pod itself.
    min_available: int | None = None


LABEL_VALUE_MAX = 63
SCHEDULING_GROUP_SOURCE = "spec.schedulingGroup.podGroupName"


def workload_group_name(workload: str, pod_group: str, replica_key: str = "") -> str:
    """The PodGroup Phalanx keeps for one podGroup of a native Workload (1.35 ``spec.workloadRef``).

    Each ``podGroupReplicaKey`` is a gang of its own: the API applies the podGroup's policy to
    every replica separately.
    """
    name = f"{workload}-{pod_group}"
    if replica_key:
        name = f"{name}-{replica_key}"
    return name if len(name) <= LABEL_VALUE_MAX else _shortened(name)


def _shortened(name: str) -> str:
    """The name is also a label value (at most 63 characters): keep a readable prefix and make it
    unique with a digest of the whole."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: LABEL_VALUE_MAX - len(digest) - 1].rstrip('-._')}-{digest}"


def native_group_name(pod_group: str) -> str:
    """The PodGroup Phalanx keeps for a native PodGroup (1.36+ ``spec.schedulingGroup``): the same
    name, in Phalanx's own PodGroup group -- shortened with a digest like ``workload_group_name``
    where it is longer than a label value may be."""
    return pod_group if len(pod_group) <= LABEL_VALUE_MAX else _shortened(pod_group)


def scheduling_group(spec: Mapping[str, object] | None) -> str | None:
    """``spec.schedulingGroup.podGroupName``: the native PodGroup a pod belongs to, or None."""
    group = spec.get("schedulingGroup") if spec is not None else None
    if group is None or not isinstance(group, Mapping):  # None first: nearly always
        return None
    name = group.get("podGroupName")
    return name if isinstance(name, str) and name else None


def workload_ref(spec: Mapping[str, object] | None) -> tuple[str, str, str] | None:
    """``spec.workloadRef`` as (workload, podGroup, podGroupReplicaKey), or None."""
    ref = spec.get("workloadRef") if spec is not None else None
    if ref is None or not isinstance(ref, Mapping):  # None first: nearly always, and no ABC check
        return None
    workload, pod_group, replica = ref.get("name"), ref.get("podGroup"), ref.get("podGroupReplicaKey")
    if not (isinstance(workload, str) and workload and isinstance(pod_group, str) and pod_group):
        return None
    return workload, pod_group, replica if isinstance(replica, str) else ""


def positive_int(value: object) -> int | None:
    """An integer >= 1 written as a label or annotation value, or None."""
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number >= 1 else None


def declared_min_available(labels: Mapping[str, str] | None) -> int | None:
    """The gang size declared by the lightweight Coscheduling label, whichever link names the group.

    Once the webhook has added the canonical label, ``resolve`` reports that link instead, so
    readers of the size must not depend on which link won.
    """
    value = (labels or {}).get(constants.COSCHEDULING_MIN_AVAILABLE_LABEL)
    return None if value is None else positive_int(value)


# Each link's "from ..." for messages, spelled once rather than on every admission.
_LINK_LABELS = frozenset(constants.GROUP_LINK_LABELS)
_LINK_ANNOTATIONS = frozenset(constants.GROUP_LINK_ANNOTATIONS)
_SOURCES = {
    **{key: f"label {key}" for key in constants.GROUP_LINK_LABELS},
    **{key: f"annotation {key}" for key in constants.GROUP_LINK_ANNOTATIONS},
}


def resolve(
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    spec: Mapping[str, object] | None = None,
) -> GroupLink | None:
    """The group link of an object, or None. The canonical label wins, then the foreign forms."""
    labels = labels or {}
    annotations = annotations or {}
    # Most objects carry no link: one set test each instead of a lookup per link key (the webhook
    # resolves every object it admits).
    if not labels.keys().isdisjoint(_LINK_LABELS):
        for key in constants.GROUP_LINK_LABELS:
            value = labels.get(key)
            if isinstance(value, str) and value:
                min_available = None
                if key == constants.COSCHEDULING_LABEL:
                    min_available = positive_int(labels.get(constants.COSCHEDULING_MIN_AVAILABLE_LABEL))
                return GroupLink(value, _SOURCES[key], min_available)
    if not annotations.keys().isdisjoint(_LINK_ANNOTATIONS):
        for key in constants.GROUP_LINK_ANNOTATIONS:
            value = annotations.get(key)
            if isinstance(value, str) and value:
                return GroupLink(value, _SOURCES[key])
    ref = workload_ref(spec)
    if ref is not None:
        return GroupLink(workload_group_name(*ref), "spec.workloadRef")
    native = scheduling_group(spec)
    if native is not None:
        return GroupLink(native_group_name(native), SCHEDULING_GROUP_SOURCE)
    return None


def is_truthy(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() == "true"


def opted_in(labels: Mapping[str, str] | None) -> bool:
    """True when the object itself opted in with the label ``phalanx.io/gang-scheduling: enabled``
    (a label only: the webhook configuration selects objects by their labels)."""
    return labels is not None and labels.get(constants.OPT_IN_LABEL) == constants.OPT_IN_VALUE


def skipped(labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None) -> bool:
    """True when the object opted out with ``phalanx.io/skip: "true"`` (label or annotation)."""
    skip = constants.SKIP
    if (not labels or skip not in labels) and (not annotations or skip not in annotations):
        return False  # nearly always: no call to is_truthy
    return is_truthy((labels or {}).get(skip)) or is_truthy((annotations or {}).get(skip))
