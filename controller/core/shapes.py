"""Pod shapes: members with equal requests and equal constraints are interchangeable for placement.

A gang of 256 identical workers is one shape × 256, so placement counts how many fit per node
arithmetically instead of trying pods one by one. Shapes are interned per pass; their ids follow the
order in which the pass first meets them, which is deterministic.
"""

from __future__ import annotations

from controller.core.capacity import GPU, ResourceIndex, Vector
from controller.core.fit import Constraints, Eligibility, Mask
from controller.core.model import Pod


def member_kind(pod: Pod) -> tuple[object, ...]:
    """What makes members place alike, before any pass interns them: their requests and where they
    may go (a gang's slices must be of one kind; the autoscaler gets one pod set per kind)."""
    return (
        tuple(sorted(pod.requests.items())),
        tuple(sorted(pod.node_selector.items())),
        pod.required_affinity,
        pod.tolerations,
    )


class Shape:
    __slots__ = ("cons", "gpu", "id", "mask", "missing", "requests", "size", "vec")

    def __init__(
        self,
        shape_id: int,
        vec: Vector,
        missing: tuple[str, ...],
        cons: Constraints,
        mask: Mask,
        requests: tuple[tuple[str, int], ...],
    ) -> None:
        self.id = shape_id
        self.vec = vec
        self.missing = missing  # requested resources no node has: this shape fits nowhere
        self.cons = cons
        self.mask = mask
        self.requests = requests  # sorted (name, amount), for messages
        self.gpu = next((a for r, a in vec if r == GPU), 0)
        amounts = dict(requests)
        # Biggest first: GPUs, then cpu, then memory, then everything else by name.
        self.size: tuple[int, ...] = (
            -self.gpu,
            -amounts.get("cpu", 0),
            -amounts.get("memory", 0),
            *(-a for _, a in requests),
            shape_id,
        )

    def __repr__(self) -> str:
        return f"Shape({self.id}, {dict(self.requests)})"


class ShapeBook:
    def __init__(self, resources: ResourceIndex, eligibility: Eligibility) -> None:
        self.resources = resources
        self.eligibility = eligibility
        self._by_key: dict[tuple[tuple[tuple[str, int], ...], Constraints], Shape] = {}
        # The pod's fields as they come (unsorted, unfiltered) -> its shape: most pods of a pass
        # repeat a few of these, and a hit skips building and hashing their Constraints.
        self._by_fields: dict[tuple[object, ...], Shape] = {}
        self._by_uid: dict[str, Shape] = {}

    def of(self, pod: Pod) -> Shape:
        found = self._by_uid.get(pod.uid)
        if found is not None:
            return found
        selector = pod.node_selector
        fields = (
            tuple(pod.requests.items()),
            tuple(selector.items()) if selector else (),
            pod.required_affinity,
            pod.tolerations,
        )
        shape = self._by_fields.get(fields)
        if shape is None:
            shape = self._intern(pod)
            self._by_fields[fields] = shape
        self._by_uid[pod.uid] = shape
        return shape

    def _intern(self, pod: Pod) -> Shape:
        """The shape of these requests and constraints; a new one (the next id) if first met."""
        requests = tuple(sorted((k, v) for k, v in pod.requests.items() if k != "pods" and v > 0))
        cons = Constraints.of(pod)
        key = (requests, cons)
        shape = self._by_key.get(key)
        if shape is None:
            vec, missing = self.resources.vector(dict(requests))
            shape = Shape(len(self._by_key), vec, missing, cons, self.eligibility.mask(cons), requests)
            self._by_key[key] = shape
        return shape
