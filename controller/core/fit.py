"""Which nodes a pod may run on, ignoring room: nodeSelector, required node affinity, taints.

The predicates follow upstream exactly (k8s.io/component-helpers/scheduling/corev1 and
k8s.io/apimachinery labels):

- nodeSelector: every key=value must be a node label.
- Required node affinity: terms are ORed, the requirements of a term ANDed; an empty term matches
  nothing. ``matchFields`` requirements match the node's name (``metadata.name``, the only field).
  In / NotIn (NotIn also matches when the label is missing) / Exists / DoesNotExist / Gt / Lt
  (label and the single value parsed as base-10 int64 like Go's strconv.ParseInt; a value that
  does not parse makes the requirement, hence its term, not match).
- Taints: every NoSchedule and NoExecute taint must be tolerated (PreferNoSchedule is ignored).
  A toleration with an empty effect matches every effect, an empty key (with Exists) every key;
  Equal (or no operator) compares values, Exists ignores them, Gt/Lt compare canonical integers.
- Cordoned (unschedulable) and not-Ready nodes are never candidates.

``Eligibility`` evaluates these once per (constraints, node class) instead of once per node: nodes
that agree on the labels the constraints mention and on their taints give the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.core import messages as msg
from controller.core.model import (
    NODE_NAME_FIELD,
    Node,
    NodeSelectorTerm,
    Pod,
    Requirement,
    Taint,
    Toleration,
)

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})

_GO_INT = re.compile(r"[+-]?[0-9]+")
_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]*")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``, or None when it would fail."""
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _parse_canonical_int64(text: str) -> int | None:
    """An integer in canonical decimal form (no sign but '-', no leading zeros), as tolerations need."""
    if not _CANONICAL_INT.fullmatch(text):
        return None
    return parse_int64(text)


def requirement_matches(req: Requirement, labels: Mapping[str, str], node_name: str = "") -> bool:
    """One requirement against a node's labels (or, for ``matchFields``, its name)."""
    op = req.operator
    if req.field:
        value: str | None = node_name if req.key == NODE_NAME_FIELD else None
    else:
        value = labels.get(req.key)
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        bound = parse_int64(req.values[0])
        actual = parse_int64(value)
        if bound is None or actual is None:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False  # an unknown operator makes the term invalid: it matches nothing


def term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str = "") -> bool:
    return bool(term) and all(requirement_matches(req, labels, node_name) for req in term)


def affinity_matches(
    terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], node_name: str = ""
) -> bool:
    return not terms or any(term_matches(term, labels, node_name) for term in terms)


def selector_matches(
    selector: Mapping[str, str] | Sequence[tuple[str, str]], labels: Mapping[str, str]
) -> bool:
    items = selector.items() if isinstance(selector, Mapping) else selector
    return all(labels.get(key) == value for key, value in items)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    op = toleration.operator
    if op in ("", "Equal"):
        return toleration.value == taint.value
    if op == "Exists":
        return True
    if op in ("Gt", "Lt"):
        wanted = _parse_canonical_int64(toleration.value)
        actual = _parse_canonical_int64(taint.value)
        if wanted is None or actual is None:
            return False
        return actual > wanted if op == "Gt" else actual < wanted
    return False


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates, or None."""
    for taint in taints:
        if taint.effect in SCHEDULING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def is_candidate(node: Node) -> bool:
    """Cordoned and not-Ready nodes never get new pods from Phalanx."""
    return node.ready and not node.unschedulable


@dataclass(frozen=True, slots=True)
class Constraints:
    """What a pod demands of a node besides room. Hashable: pods with equal constraints share results."""

    selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @staticmethod
    def of(pod: Pod) -> Constraints:
        selector = tuple(sorted(pod.node_selector.items())) if pod.node_selector else ()
        return Constraints(selector, tuple(pod.required_affinity), tuple(pod.tolerations))

    def label_keys(self) -> tuple[str, ...]:
        keys = {key for key, _ in self.selector}
        keys.update(req.key for term in self.affinity for req in term if not req.field)
        return tuple(sorted(keys))

    @property
    def names_nodes(self) -> bool:
        """Does it match on node names (``matchFields``), so that every node answers for itself?"""
        return any(req.field for term in self.affinity for req in term)

    def allows(self, node: Node) -> bool:
        """Selector, affinity and taints (not readiness, not room)."""
        return (
            selector_matches(self.selector, node.labels)
            and affinity_matches(self.affinity, node.labels, node.name)
            and untolerated_taint(node.taints, self.tolerations) is None
        )


def pod_allows_node(pod: Pod, node: Node) -> bool:
    """Could `pod` run on `node` if there were room (readiness included)?"""
    return is_candidate(node) and Constraints.of(pod).allows(node)


class Mask:
    """The candidate nodes (by index) that a set of constraints allows."""

    __slots__ = ("count", "flags", "indices")

    def __init__(self, flags: bytearray, indices: list[int]) -> None:
        self.flags = flags
        self.indices = indices
        self.count = len(indices)


class Eligibility:
    """Masks of allowed nodes per Constraints, for one planning pass over sorted nodes."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.candidate = [is_candidate(node) for node in nodes]
        taint_ids: dict[tuple[Taint, ...], int] = {}
        self.taint_id: list[int] = []
        for node in nodes:
            relevant = tuple(t for t in node.taints if t.effect in SCHEDULING_EFFECTS)
            self.taint_id.append(taint_ids.setdefault(relevant, len(taint_ids)))
        self._masks: dict[Constraints, Mask] = {}

    def mask(self, cons: Constraints) -> Mask:
        found = self._masks.get(cons)
        if found is not None:
            return found
        keys = cons.label_keys()
        by_name = cons.names_nodes
        verdicts: dict[tuple[int, tuple[str | None, ...]], bool] = {}
        flags = bytearray(len(self.nodes))
        indices: list[int] = []
        taint_id = self.taint_id
        for i, node in enumerate(self.nodes):
            if not self.candidate[i]:
                continue
            labels = node.labels
            values = [labels.get(k) for k in keys]
            if by_name:
                values.append(node.name)
            key = (taint_id[i], tuple(values))
            verdict = verdicts.get(key)
            if verdict is None:
                verdict = verdicts[key] = cons.allows(node)
            if verdict:
                flags[i] = 1
                indices.append(i)
        mask = Mask(flags, indices)
        self._masks[cons] = mask
        return mask

    def explain(self, cons: Constraints) -> str:
        """Why no candidate node is allowed, for a person (call only when the mask is empty)."""
        ready = [n for i, n in enumerate(self.nodes) if self.candidate[i]]
        if not ready:
            return msg.no_ready_node() if self.nodes else msg.no_nodes()
        if cons.selector:
            ready = [n for n in ready if selector_matches(cons.selector, n.labels)]
            if not ready:
                return msg.selector_unmatched(cons.selector)
        if cons.affinity:
            ready = [n for n in ready if affinity_matches(cons.affinity, n.labels, n.name)]
            if not ready:
                return msg.affinity_unmatched()
        taints = sorted(
            {
                msg.taint_text(t.key, t.value, t.effect)
                for n in ready
                if (t := untolerated_taint(n.taints, cons.tolerations)) is not None
            }
        )
        narrowed = len(ready) < sum(self.candidate)
        return msg.taints_untolerated(len(ready), narrowed, taints[0] if taints else None)
