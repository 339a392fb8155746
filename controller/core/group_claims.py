"""PodGroup-level ResourceClaims (native PodGroup ``spec.resourceClaims``, DRAWorkloadResourceClaims).

A member uses its PodGroup's claim by an entry in its own ``spec.resourceClaims`` with the same
name and the same ``resourceClaimName`` or ``resourceClaimTemplateName``; any other entry is its own
claim. The group's claim is one ResourceClaim for the whole group -- from a template, the control
plane makes it once for the PodGroup (named in the PodGroup's status), not once per pod -- allocated
once and reserved for the PodGroup. So it is planned as a claim shared by name: its devices are
counted once, and every member that uses it lands where they are reachable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.core.dra import DraWorld, GroupClaim, PodClaim
from controller.core.model import Pod


def group_claim_of(world: DraWorld, pod: Pod, pod_claim: PodClaim) -> GroupClaim | None:
    """The PodGroup claim a member's entry uses, or None: the entry is the pod's own."""
    if pod.scheduling_group is None:
        return None
    for entry in world.group_claims.get((pod.namespace, pod.scheduling_group), ()):
        if (entry.name, entry.claim, entry.template) == (pod_claim.name, pod_claim.claim, pod_claim.template):
            return entry
    return None


def as_shared(world: DraWorld, pod: Pod, pod_claim: PodClaim) -> PodClaim | None:
    """A member's entry as the planner counts it: a PodGroup claim becomes the one ResourceClaim the
    group shares, by name; the pod's own entries are unchanged. None: the group's claim is made from
    a template and the control plane has not made it yet."""
    entry = group_claim_of(world, pod, pod_claim)
    if entry is None or entry.claim is not None:
        return pod_claim
    name = entry.generated or pod_claim.generated
    return PodClaim(pod_claim.name, claim=name) if name else None


def group_holders(pods: Iterable[Pod]) -> Mapping[tuple[str, str], list[str]]:
    """(namespace, native PodGroup) -> the uids of its members that hold room: who holds a claim
    reserved for the group."""
    out: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        if pod.scheduling_group is not None and pod.holds_capacity:
            out.setdefault((pod.namespace, pod.scheduling_group), []).append(pod.uid)
    return out
