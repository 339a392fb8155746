"""Free room per node during one planning pass, with the indexes placement needs.

Resources are numbered once per pass (``ResourceIndex``); a node's free room is a list of ints
(allocatable minus everything booked). A pod's request is a sparse vector of (index, amount).

The index placement reads:

- ``buckets[g]``: the visible nodes with exactly ``g`` free GPUs (an insertion-ordered dict used as
  an ordered set, so iteration never depends on hashing), for best fit in O(levels);
- per topology domain (the nodes sharing one value of a label key: rack and zone always, any other
  key once a gang requires it), how many of its nodes sit at each GPU level and its free GPUs, so a
  gang can be matched to one domain without scanning its nodes;
- ``sums``: the cluster-wide free room (positive part) of visible nodes per resource, for quick
  rejection.

Every change is journaled, so a tentative placement (or a victim search) is rolled back exactly.
"Visible" nodes are the Ready, schedulable ones not excluded by a starvation reservation.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence

PODS = 0  # resource index of "pods" (always 1 per pod)
GPU = 1  # resource index of the configured GPU resource

Vector = tuple[tuple[int, int], ...]  # sparse (resource index, amount > 0), sorted by index
Mark = tuple[int, int]  # (journal length, state id) to roll back to


class ResourceIndex:
    """Resource name <-> index for one pass: pods, the GPU resource, then the rest sorted by name."""

    def __init__(self, gpu_resource: str, names: Iterable[str]) -> None:
        rest = sorted(set(names) - {"pods", gpu_resource})
        self.names: list[str] = ["pods", gpu_resource, *rest]
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        # tuple(requests.items()) -> what vector() returned for them (read it, never write it)
        self.known: dict[tuple[tuple[str, int], ...], tuple[Vector, tuple[str, ...]]] = {}

    def __len__(self) -> int:
        return len(self.names)

    def vector(self, requests: Mapping[str, int]) -> tuple[Vector, tuple[str, ...]]:
        """The sparse request (pods counted as exactly 1) and the requested resources no node has."""
        key = tuple(requests.items())
        found = self.known.get(key)
        if found is not None:
            return found
        index = self.index
        entries: list[tuple[int, int]] = [(PODS, 1)]
        missing: list[str] = []
        for name, amount in requests.items():
            if name == "pods" or amount <= 0:
                continue
            i = index.get(name)
            if i is None:
                missing.append(name)
            else:
                entries.append((i, amount))
        entries.sort()
        result = (tuple(entries), tuple(sorted(missing)))
        self.known[key] = result
        return result

    def dense(self, requests: Mapping[str, int]) -> list[int]:
        vec = [0] * len(self.names)
        for i, amount in self.vector(requests)[0]:
            vec[i] = amount
        return vec


def fits_count(free: list[int], vec: Vector) -> int:
    """How many pods of request `vec` fit into `free`."""
    best = 1 << 62
    for r, a in vec:
        n = free[r] // a
        if n < best:  # noqa: PLR1730 - hot path: a comparison is cheaper than a call to min()
            best = n
    return best


class Topology:
    """Topology domains of a node set, one level per node label key: per level, each node's domain
    id (-1: the node lacks the label), the domains' names (sorted) and members. A level is built the
    first time a key is asked for; ``preferred`` (rack, then zone) are built at once. Fixed for the
    nodes, shared by every pass that sees them."""

    def __init__(self, labels: Sequence[Mapping[str, str]] = (), preferred: Sequence[str] = ()) -> None:
        """`labels`: each node's labels, in node order; `preferred`: the label keys a gang is kept
        inside when it fits there (first the tightest), in that order."""
        self._labels = labels
        self._levels: dict[str, int | None] = {}
        self.keys: list[str] = []
        self.dom_of: list[list[int]] = []
        self.dom_names: list[list[str]] = []
        self.dom_members: list[list[list[int]]] = []
        self.preferred: list[int] = [t for key in preferred if (t := self.level(key)) is not None]

    def level(self, key: str) -> int | None:
        """The level of label `key`, or None when no node carries it."""
        if key in self._levels:
            return self._levels[key]
        per_node = [labels.get(key) for labels in self._labels]
        names_sorted = sorted({d for d in per_node if d is not None})
        if not names_sorted:
            self._levels[key] = None
            return None
        ids = {d: k for k, d in enumerate(names_sorted)}
        members: list[list[int]] = [[] for _ in names_sorted]
        for i, d in enumerate(per_node):
            if d is not None:
                members[ids[d]].append(i)
        self.dom_of.append([ids[d] if d is not None else -1 for d in per_node])
        self.dom_names.append(names_sorted)
        self.dom_members.append(members)
        self.keys.append(key)
        t = len(self.keys) - 1
        self._levels[key] = t
        return t


class Capacity:
    """Mutable free room for a pass. Node indexes follow the pass's node order (sorted by name)."""

    def __init__(
        self,
        names: Sequence[str],
        free: list[list[int]],
        visible: Sequence[bool],
        max_gpus: int,
        topology: Topology | None = None,
    ) -> None:
        """`free`: per node, per resource (taken over, not copied). `max_gpus`: the largest GPU
        allocatable of any node."""
        self.names = names
        self.free = free
        width = len(free[0]) if free else 2
        self.visible = bytearray(visible)  # bools are 0 and 1
        self.n_visible = sum(self.visible)
        self.max_level = max(max_gpus, 0)
        self.buckets: list[dict[int, None]] = [{} for _ in range(self.max_level + 1)]
        self.sums = [0] * width
        self.topology = topology if topology is not None else Topology()
        # per level t of this pass (the topology's levels it asked for, the preferred ones first):
        # node -> domain id, domain -> names / members (fixed), and per domain its nodes at each GPU
        # level and its free GPUs (this pass's)
        self.dom_of: list[list[int]] = []
        self.dom_names: list[list[str]] = []
        self.dom_members: list[list[list[int]]] = []
        self.dom_counts: list[list[list[int]]] = []
        self.dom_gpus: list[list[int]] = []
        self._levels: dict[int, int] = {}  # the topology's level -> this pass's
        for t in self.topology.preferred:
            if t not in self._levels:
                self._add_level(t)
        self.preferred = list(range(len(self.dom_of)))  # levels a gang is kept inside when it fits
        self.level = [0] * len(free)
        self._index_all()
        self.journal: list[tuple[int, Vector, int]] = []
        # An id of the current state: a new one after every change, the old one back after a
        # rollback. Equal ids mean equal free room (memo keys for messages).
        self.version = 0
        self._versions = 0
        # placement's domain orders by (version, level, GPU counts): valid while the version is
        self.domain_orders: dict[tuple[int, int, tuple[tuple[int, int], ...]], tuple[int, ...]] = {}

    # ---- indexes ---------------------------------------------------------------------------

    def _add_level(self, t: int) -> int:
        topology = self.topology
        self.dom_of.append(topology.dom_of[t])
        self.dom_names.append(topology.dom_names[t])
        self.dom_members.append(topology.dom_members[t])
        self.dom_counts.append([[0] * (self.max_level + 1) for _ in topology.dom_names[t]])
        self.dom_gpus.append([0] * len(topology.dom_names[t]))
        self._levels[t] = len(self.dom_of) - 1
        return len(self.dom_of) - 1

    def level_of(self, key: str) -> int | None:
        """This pass's level of node label `key` (indexed from the current free room on first use,
        then kept up to date like the others), or None when no node carries the label."""
        t = self.topology.level(key)
        if t is None:
            return None
        found = self._levels.get(t)
        if found is not None:
            return found
        level = self._add_level(t)
        dom_of, counts, dom_gpus = self.dom_of[level], self.dom_counts[level], self.dom_gpus[level]
        for i, row in enumerate(self.free):
            d = dom_of[i]
            if d >= 0 and self.visible[i]:
                counts[d][self.level[i]] += 1
                dom_gpus[d] += row[GPU] if row[GPU] > 0 else 0
        return level

    def domain_of(self, key: str, value: str) -> tuple[int, int] | None:
        """(level, domain) of the nodes labelled `key`=`value`, or None when there are none."""
        level = self.level_of(key)
        if level is None:
            return None
        names = self.dom_names[level]
        k = bisect_left(names, value)
        return (level, k) if k < len(names) and names[k] == value else None

    def _level_of(self, gpus: int) -> int:
        if gpus <= 0:
            return 0
        return gpus if gpus <= self.max_level else self.max_level

    def _index_all(self) -> None:
        """``_level_of`` and ``_show`` for every node at once (every pass does it for every node)."""
        top = self.max_level
        level = self.level
        buckets = self.buckets
        sums = self.sums
        visible = self.visible
        domains = [(dom_of, self.dom_counts[t], self.dom_gpus[t]) for t, dom_of in enumerate(self.dom_of)]
        for i, row in enumerate(self.free):
            gpus = row[GPU]
            lvl = 0 if gpus <= 0 else (gpus if gpus <= top else top)
            level[i] = lvl
            if not visible[i]:
                continue
            for r, v in enumerate(row):
                if v > 0:
                    sums[r] += v
            buckets[lvl][i] = None
            free_gpus = gpus if gpus > 0 else 0
            for dom_of, counts, dom_gpus in domains:
                d = dom_of[i]
                if d >= 0:
                    counts[d][lvl] += 1
                    dom_gpus[d] += free_gpus

    def _show(self, i: int) -> None:
        f = self.free[i]
        sums = self.sums
        for r, v in enumerate(f):
            if v > 0:
                sums[r] += v
        lvl = self.level[i]
        self.buckets[lvl][i] = None
        g = f[GPU] if f[GPU] > 0 else 0
        for t, dom_of in enumerate(self.dom_of):
            d = dom_of[i]
            if d >= 0:
                self.dom_counts[t][d][lvl] += 1
                self.dom_gpus[t][d] += g

    def _hide(self, i: int) -> None:
        f = self.free[i]
        sums = self.sums
        for r, v in enumerate(f):
            if v > 0:
                sums[r] -= v
        lvl = self.level[i]
        del self.buckets[lvl][i]
        g = f[GPU] if f[GPU] > 0 else 0
        for t, dom_of in enumerate(self.dom_of):
            d = dom_of[i]
            if d >= 0:
                self.dom_counts[t][d][lvl] -= 1
                self.dom_gpus[t][d] -= g

    def exclude(self, nodes: Iterable[int]) -> None:
        """Hide nodes from placement (a starvation reservation)."""
        for i in nodes:
            if self.visible[i]:
                self._hide(i)
                self.visible[i] = 0
                self.n_visible -= 1
        self._new_version()

    def include(self, nodes: Iterable[int]) -> None:
        for i in nodes:
            if not self.visible[i]:
                self.visible[i] = 1
                self.n_visible += 1
                self._show(i)
        self._new_version()

    def _new_version(self) -> None:
        self._versions += 1
        self.version = self._versions

    # ---- booking ---------------------------------------------------------------------------

    def book(self, i: int, vec: Vector, count: int = 1) -> None:
        """Take `count` pods of `vec` on node `i` (negative count gives room back). Journaled."""
        self._apply(i, vec, count)
        self.journal.append((i, vec, count))
        self._versions += 1
        self.version = self._versions

    def unbook(self, i: int, vec: Vector, count: int = 1) -> None:
        self.book(i, vec, -count)

    def _apply(self, i: int, vec: Vector, count: int) -> None:
        f = self.free[i]
        visible = self.visible[i]
        old_gpu = f[GPU]
        sums = self.sums
        for r, a in vec:
            old = f[r]
            new = old - a * count
            f[r] = new
            if visible:
                sums[r] += (new if new > 0 else 0) - (old if old > 0 else 0)
        new_gpu = f[GPU]
        if new_gpu != old_gpu:
            old_lvl = self.level[i]
            new_lvl = self._level_of(new_gpu)
            if visible:
                if new_lvl != old_lvl:
                    del self.buckets[old_lvl][i]
                    self.buckets[new_lvl][i] = None
                delta = (new_gpu if new_gpu > 0 else 0) - (old_gpu if old_gpu > 0 else 0)
                for t, dom_of in enumerate(self.dom_of):
                    d = dom_of[i]
                    if d >= 0:
                        counts = self.dom_counts[t][d]
                        counts[old_lvl] -= 1
                        counts[new_lvl] += 1
                        self.dom_gpus[t][d] += delta
            self.level[i] = new_lvl

    def mark(self) -> Mark:
        return (len(self.journal), self.version)

    def rollback(self, mark: Mark) -> None:
        """Undo every booking since `mark` (not include/exclude: undo those yourself first)."""
        length, version = mark
        journal = self.journal
        while len(journal) > length:
            i, vec, count = journal.pop()
            self._apply(i, vec, -count)
        self.version = version

    # ---- queries ---------------------------------------------------------------------------

    def fits(self, i: int, vec: Vector) -> int:
        return fits_count(self.free[i], vec)

    def gpu_upper_bound(self, per_pod: int) -> int:
        """At most this many pods needing `per_pod` GPUs fit on visible nodes (GPU levels only)."""
        total = 0
        for lvl in range(per_pod, self.max_level + 1):
            total += len(self.buckets[lvl]) * (lvl // per_pod)
        return total
