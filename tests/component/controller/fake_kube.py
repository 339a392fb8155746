"""An in-memory API server behind the ``Kube`` Protocol, for the controller shell's component tests.

Objects live per ResourceType keyed by (namespace, name). Every change gets the next value of one
global resourceVersion counter and is appended to a per-type history that watches replay from.
Every successful write is recorded in ``writes`` so tests can assert what was written, and in
which order. Test-side setup (``seed``, ``mutate``, ``remove``) changes objects as another actor
would (the scheduler, a workload controller): watchers see it, but it is not a controller write.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import jsonpointer  # type: ignore[import-untyped]

from controller.api.kube import ApiError, PatchType
from controller.api.resources import EVENTS, LEASES, PODS, PRIORITY_CLASSES, ResourceType
from shared.jsonread import JsonObject

Key = tuple[str, str]
NO_STATUS_SUBRESOURCE = (EVENTS, LEASES, PRIORITY_CLASSES)
EXPIRED = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}


@dataclass(frozen=True)
class Write:
    verb: str  # create | replace | patch | delete | evict
    rt: ResourceType
    namespace: str | None
    name: str
    body: Any = None
    patch_type: str | None = None
    subresource: str | None = None
    uid: str | None = None  # delete precondition


@dataclass
class Fault:  # fail the nth (1-based) matching call, and `times - 1` more after it
    method: str
    error: Exception
    rt: ResourceType | None
    name: str | None
    nth: int
    times: int
    seen: int = 0


# ---- patch semantics ------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _named(items: Any, key: str = "name") -> bool:
    return isinstance(items, list) and bool(items) and all(isinstance(i, dict) and key in i for i in items)


# The merge key of a list field where it is not ``name`` (Kubernetes' patchMergeKey).
_MERGE_KEYS = {"conditions": "type"}


def strategic_merge(target: Any, patch: Any) -> Any:
    """Strategic merge patch, as far as the controller needs: maps merge, ``null`` deletes, lists of
    objects with a ``name`` (schedulingGates, containers, env) merge by name and honour
    ``$patch: delete``, conditions by type; other lists are replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and _named(value, merge_key := _MERGE_KEYS.get(key, "name")):
            merged = [copy.deepcopy(i) for i in out.get(key) or []]
            for item in value:
                at = next((i for i, cur in enumerate(merged) if cur.get(merge_key) == item[merge_key]), None)
                if item.get("$patch") == "delete":
                    if at is not None:
                        merged.pop(at)
                elif at is None:
                    merged.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
                else:
                    merged[at] = strategic_merge(merged[at], item)
            out[key] = merged
        else:
            out[key] = strategic_merge(out.get(key), value)
    return out


def json_patch(doc: Any, ops: list[Mapping[str, Any]]) -> Any:
    """RFC 6902 JSON patch, applied by an independent implementation (the ``jsonpatch`` library),
    failing as the API server does (422) when an operation does not apply."""
    try:
        return jsonpatch.apply_patch(doc, [dict(op) for op in ops], in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as err:
        raise ApiError(422, "Invalid", f"json patch does not apply: {err}") from None


# ---- the fake --------------------------------------------------------------------------------------


class FakeKube:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.objects: dict[ResourceType, dict[Key, JsonObject]] = defaultdict(dict)
        self.history: dict[ResourceType, list[tuple[int, JsonObject]]] = defaultdict(list)
        self.writes: list[Write] = []
        self.watch_opens: list[tuple[ResourceType, str]] = []
        self.unserved: set[ResourceType] = set()
        self.pdb_protected: set[Key] = set()
        self._rv = 0
        self._uids = itertools.count(1)
        self._compacted: dict[ResourceType, int] = {}
        self._watchers: dict[ResourceType, list[asyncio.Queue[JsonObject | None]]] = defaultdict(list)
        self._faults: list[Fault] = []

    # ---- test controls ---------------------------------------------------------------------------
    def fail(
        self,
        method: str,
        error: Exception | None = None,
        *,
        rt: ResourceType | None = None,
        name: str | None = None,
        nth: int = 1,
        times: int = 1,
    ) -> None:
        """Make the ``nth`` matching call of ``method`` (and ``times - 1`` after it) raise ``error``."""
        error = error or ApiError(500, "InternalError", f"injected failure of {method}")
        self._faults.append(Fault(method, error, rt, name, nth, times))

    def seed(self, rt: ResourceType, *objs: Mapping[str, Any]) -> list[JsonObject]:
        return [self._create(rt, (o.get("metadata") or {}).get("namespace"), o) for o in objs]

    def mutate(
        self, rt: ResourceType, namespace: str | None, name: str, change: Callable[[JsonObject], None]
    ) -> JsonObject:
        """Change an object as another actor would (e.g. the scheduler binding a pod)."""
        obj = copy.deepcopy(self._existing(rt, namespace, name))
        change(obj)
        return self._store(rt, obj, "MODIFIED")

    def remove(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        self._delete(rt, namespace, name, None)

    def obj(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject | None:
        found = self.objects[rt].get(self._key(rt, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def items(self, rt: ResourceType) -> list[JsonObject]:
        return [copy.deepcopy(o) for _, o in sorted(self.objects[rt].items())]

    def writes_to(self, rt: ResourceType, verb: str | None = None) -> list[Write]:
        return [w for w in self.writes if w.rt == rt and (verb is None or w.verb == verb)]

    def events(self) -> list[JsonObject]:
        """Every Event recorded, in order: a create, or a repeat counted on an existing one (the
        Event as that patch left it)."""
        out = []
        for w in self.writes_to(EVENTS):
            if w.verb == "create":
                out.append(w.body)
            elif w.verb == "patch":
                out.append({**self._recorded_event(w), **w.body})
        return out

    def _recorded_event(self, write: Write) -> JsonObject:
        event = self.obj(EVENTS, write.namespace, write.name)
        assert event is not None, f"a patch of Event {write.name} that does not exist"
        return event

    def events_since(self, rt: ResourceType, resource_version: int) -> list[tuple[int, JsonObject]]:
        return [(rv, copy.deepcopy(ev)) for rv, ev in self.history[rt] if rv > resource_version]

    def last_rv(self, rt: ResourceType) -> int:
        return self.history[rt][-1][0] if self.history[rt] else 0

    def compact(self) -> None:
        """etcd compaction: watches from any older resourceVersion now get 410 Gone."""
        for rt in list(self.history):
            self._compacted[rt] = self._rv

    def end_watches(self, rt: ResourceType) -> None:
        """The server closes every open watch of ``rt`` (its timeoutSeconds ran out)."""
        self._broadcast(rt, None)

    def expire_watches(self, rt: ResourceType) -> None:
        self._broadcast(rt, {"type": "ERROR", "object": EXPIRED})

    def bookmark(self, rt: ResourceType) -> None:
        self._broadcast(rt, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self._rv)}}})

    # ---- internals -------------------------------------------------------------------------------
    def _check(self, method: str, rt: ResourceType | None, name: str | None) -> None:
        for fault in self._faults:
            if fault.method != method or fault.rt not in (None, rt) or fault.name not in (None, name):
                continue
            fault.seen += 1
            if fault.nth <= fault.seen < fault.nth + fault.times:
                raise fault.error

    @staticmethod
    def _key(rt: ResourceType, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if rt.namespaced else "", name)

    def _existing(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject:
        found = self.objects[rt].get(self._key(rt, namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f'{rt.plural} "{name}" not found')
        return found

    def _broadcast(self, rt: ResourceType, event: JsonObject | None) -> None:
        for queue in self._watchers[rt]:
            queue.put_nowait(event)

    def _store(self, rt: ResourceType, obj: JsonObject, kind: str) -> JsonObject:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        key = self._key(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if kind == "DELETED":
            self.objects[rt].pop(key, None)
        else:
            self.objects[rt][key] = obj
        event = {"type": kind, "object": copy.deepcopy(obj)}
        self.history[rt].append((self._rv, event))
        self._broadcast(rt, event)
        return copy.deepcopy(obj)

    def _create(self, rt: ResourceType, namespace: str | None, body: Mapping[str, Any]) -> JsonObject:
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            raise ApiError(422, "Invalid", "metadata.name is required")
        if self._key(rt, meta.get("namespace"), meta["name"]) in self.objects[rt]:
            raise ApiError(409, "AlreadyExists", f'{rt.plural} "{meta["name"]}" already exists')
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta["creationTimestamp"] = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["generation"] = 1
        return self._store(rt, obj, "ADDED")

    def _update(
        self, rt: ResourceType, old: JsonObject, new: JsonObject, subresource: str | None
    ) -> JsonObject:
        """Apply the API server's rules for what a write may change, then store it."""
        if subresource == "status":
            new = {**copy.deepcopy(old), "status": new.get("status")}
        elif rt not in NO_STATUS_SUBRESOURCE and "status" in old:
            new["status"] = copy.deepcopy(old["status"])  # the main resource ignores status
        elif rt not in NO_STATUS_SUBRESOURCE:
            new.pop("status", None)
        meta = new.setdefault("metadata", {})
        for field in ("uid", "name", "namespace", "creationTimestamp", "generation"):
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation") or 1) + 1
        if rt == PODS and new.get("spec") != old.get("spec"):
            self._validate_pod_update(old, new)
        return self._store(rt, new, "MODIFIED")

    @staticmethod
    def _validate_pod_update(old: JsonObject, new: JsonObject) -> None:
        old_gates, new_gates = (
            {g["name"] for g in o["spec"].get("schedulingGates") or []} for o in (old, new)
        )
        if not new_gates <= old_gates:
            raise ApiError(422, "Invalid", "spec.schedulingGates: only deletion is allowed")
        old_sel, new_sel = old["spec"].get("nodeSelector") or {}, new["spec"].get("nodeSelector") or {}
        only_added = all(new_sel.get(k) == v for k, v in old_sel.items())
        if old_sel != new_sel and not (old_gates and only_added):
            raise ApiError(422, "Invalid", "spec.nodeSelector: may only be added to while the pod is gated")

    def _delete(self, rt: ResourceType, namespace: str | None, name: str, uid: str | None) -> None:
        obj = copy.deepcopy(self._existing(rt, namespace, name))
        if uid is not None and obj["metadata"].get("uid") != uid:
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
        self._store(rt, obj, "DELETED")

    # ---- the Kube Protocol -----------------------------------------------------------------------
    async def list(
        self, rt: ResourceType, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[JsonObject], str]:
        self._check("list", rt, None)
        items = [o for o in self.items(rt) if namespace in (None, o["metadata"].get("namespace"))]
        if label_selector:  # equality and existence only: "k=v,k2"
            wanted = [part.split("=", 1) for part in label_selector.split(",")]

            def selected(labels: Mapping[str, str]) -> bool:
                return all(labels.get(w[0]) == w[1] if len(w) == 2 else w[0] in labels for w in wanted)

            items = [o for o in items if selected(o["metadata"].get("labels") or {})]
        return items, str(self._rv)

    async def watch(
        self, rt: ResourceType, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[JsonObject]:
        # An async generator, like KubeClient.watch: errors surface on the first iteration.
        self._check("watch", rt, None)
        self.watch_opens.append((rt, resource_version))
        since = int(resource_version or 0)
        if since < self._compacted.get(rt, 0):
            raise ApiError(410, "Expired", f"too old resource version: {since}")
        queue: asyncio.Queue[JsonObject | None] = asyncio.Queue()
        for _, event in self.events_since(rt, since):
            queue.put_nowait(event)
        self._watchers[rt].append(queue)
        try:
            while (event := await queue.get()) is not None:
                yield copy.deepcopy(event)
        finally:
            self._watchers[rt].remove(queue)

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject:
        self._check("get", rt, name)
        return copy.deepcopy(self._existing(rt, namespace, name))

    async def create(self, rt: ResourceType, namespace: str | None, body: Mapping[str, Any]) -> JsonObject:
        self._check("create", rt, (body.get("metadata") or {}).get("name"))
        created = self._create(rt, namespace, body)
        self.writes.append(
            Write("create", rt, namespace, created["metadata"]["name"], copy.deepcopy(dict(body)))
        )
        return created

    async def replace(
        self, rt: ResourceType, namespace: str | None, name: str, body: Mapping[str, Any]
    ) -> JsonObject:
        self._check("replace", rt, name)
        old = self._existing(rt, namespace, name)
        wanted = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        result = self._update(rt, old, copy.deepcopy(dict(body)), None)
        self.writes.append(Write("replace", rt, namespace, name, copy.deepcopy(dict(body))))
        return result

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> JsonObject:
        self._check("patch", rt, name)
        old = self._existing(rt, namespace, name)
        if patch_type == "json":
            new = json_patch(old, body)
        else:
            new = (strategic_merge if patch_type == "strategic" else merge_patch)(copy.deepcopy(old), body)
        result = self._update(rt, old, new, subresource)
        self.writes.append(Write("patch", rt, namespace, name, copy.deepcopy(body), patch_type, subresource))
        return result

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, uid: str | None = None
    ) -> None:
        self._check("delete", rt, name)
        self._delete(rt, namespace, name, uid)
        self.writes.append(Write("delete", rt, namespace, name, uid=uid))

    async def evict(
        self, namespace: str, name: str, grace_seconds: int | None = None, dry_run: bool = False
    ) -> None:
        self._check("evict", PODS, name)
        self._existing(PODS, namespace, name)
        if (namespace, name) in self.pdb_protected:
            raise ApiError(429, "TooManyRequests", "Cannot evict pod: it would violate a disruption budget")
        if dry_run:
            return
        self._delete(PODS, namespace, name, None)
        self.writes.append(Write("evict", PODS, namespace, name))

    async def served(self, rt: ResourceType) -> bool:
        self._check("served", rt, None)
        return rt not in self.unserved
