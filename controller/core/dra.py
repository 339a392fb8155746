"""The Dynamic Resource Allocation objects a planning pass reads (resource.k8s.io/v1), as slim
frozen records: devices (from ResourceSlices), DeviceClasses, ResourceClaims and the claim specs of
ResourceClaimTemplates. controller/core/devices.py turns them into room and demand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # model imports this module
    from controller.core.model import NodeSelectorTerm

# A device attribute's value: bool, int, string, or a version (a semver string, kept tagged).
AttributeValue = bool | int | str | tuple[str, str]
DeviceId = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True, slots=True)
class NodeReach:
    """The nodes a device not local to one node is reachable from (a ResourceSlice's ``allNodes``
    or ``nodeSelector``): every node, or those one of the terms matches."""

    all_nodes: bool = False
    terms: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    node: str | None  # the node of a node-local slice; None: see ``reach``
    # Fully qualified attribute names ("gpu.example.com/model") -> value.
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    # Fully qualified capacity names -> the quantity in milli-units.
    capacity: Mapping[str, int] = field(default_factory=dict)
    # Why the scheduler may refuse it in ways not modelled (taints, shared counters), or None.
    unmodelled: str | None = None
    generation: int = 0  # its pool's generation: only the newest counts
    # The nodes a network-attached device is reachable from (``node`` is then None); a device with
    # neither is reachable from no node the planner knows of and never counts.
    reach: NodeReach | None = None

    @property
    def id(self) -> DeviceId:
        return self.driver, self.pool, self.name


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all must hold
    extended_resource: str | None = None  # spec.extendedResourceName


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    count: int = 1
    all_devices: bool = False  # allocationMode: All
    # firstAvailable: the alternatives in order (this request's own fields are then unused).
    alternatives: tuple[DeviceRequest, ...] = ()
    # What the request asks that is not modelled (adminAccess, capacity requests, tolerations), or None.
    unmodelled: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    # constraints[].matchAttribute, with the requests each names (empty: all of the claim's).
    match_attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    unmodelled: str | None = None  # e.g. a constraint of a kind not known
    # constraints[].distinctAttribute, likewise.
    distinct_attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Claim:
    namespace: str
    name: str
    spec: ClaimSpec
    allocated: tuple[DeviceId, ...] = ()
    allocated_node: str | None = None  # the node its allocation is limited to, if one
    reserved_for: tuple[str, ...] = ()  # pod uids
    # Annotated as made by the scheduler for a pod's extended-resource request; trusted only
    # together with its owner and the pod's status (devices._extended_for).
    extended: bool = False
    # Allocated to devices several nodes reach: the nodes its users may run on (all_nodes: any).
    allocated_reach: NodeReach | None = None
    # Native PodGroups it is reserved for (a PodGroup-level claim): their pods hold it.
    reserved_for_groups: tuple[str, ...] = ()
    owner: str | None = None  # the uid of its controlling owner (ownerReferences)

    @property
    def is_allocated(self) -> bool:
        return bool(self.allocated)


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's spec.resourceClaims."""

    name: str
    template: str | None = None  # resourceClaimTemplateName
    claim: str | None = None  # resourceClaimName: a claim shared by every pod that names it
    generated: str | None = None  # the claim made from the template (status.resourceClaimStatuses)


@dataclass(frozen=True, slots=True)
class GroupClaim:
    """One entry of a native PodGroup's spec.resourceClaims (DRAWorkloadResourceClaims): one claim
    for the whole group, which a member uses by naming it alike in its own spec.resourceClaims."""

    name: str
    template: str | None = None
    claim: str | None = None
    generated: str | None = None  # the claim made from the template (the PodGroup's status)


@dataclass(frozen=True, slots=True)
class DraWorld:
    devices: tuple[Device, ...] = ()
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    claims: Mapping[tuple[str, str], Claim] = field(default_factory=dict)
    templates: Mapping[tuple[str, str], ClaimSpec] = field(default_factory=dict)
    # (namespace, native PodGroup) -> its spec.resourceClaims, for the groups that have any.
    group_claims: Mapping[tuple[str, str], tuple[GroupClaim, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.classes and not self.claims
