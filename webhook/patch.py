"""JSON-pointer escaping and an RFC 6902 patch builder that never mutates its input.

A second change under a parent the patch itself creates (``/spec/template/metadata``, then
``.../metadata/annotations``) must see that parent, so the builder remembers the values it put
in place and reads through them. It never copies the input: admission sits on the API server's
hot path, and most of an object is never looked at.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

JsonPatchOp = dict[str, Any]
Path = tuple[str, ...]

APPEND: Final = "-"  # JSON-pointer token for "after the last element" of an array
_ABSENT: Final = object()


class ShapeError(ValueError):
    """A path crosses a value that is not an object (or an array where one is appended to)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{pointer(path)} is not an object")
        self.path = path


def escape(token: str) -> str:
    """Escape one reference token (RFC 6901): '~' first, then '/'."""
    return token.replace("~", "~0").replace("/", "~1")


# The webhook's paths come from a small fixed set (template locations x Phalanx's keys), so
# caching whole pointers saves escaping them again on every request.
@lru_cache(maxsize=4096)
def pointer(path: Path) -> str:
    return "".join(["/" + escape(token) for token in path])


def _clone(value: Any) -> Any:
    """A private copy of the containers in ``value``, which the builder may extend later."""
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


class PatchBuilder:
    """Collects add/replace operations against ``doc``, which is never modified.

    Values the patch places are kept as private copies: under an input object, in ``_made``
    by path; under a private object, in that object itself (it is the builder's to change).
    """

    def __init__(
        self, doc: dict[str, Any], *, prefix: Path = (), ops: list[JsonPatchOp] | None = None
    ) -> None:
        self._doc = doc
        self._prefix = prefix
        self._made: dict[Path, Any] = {}
        self.ops: list[JsonPatchOp] = [] if ops is None else ops

    def scope(self, path: Path) -> PatchBuilder:
        """A builder for the existing object at ``path`` that adds to the same operations.

        Paths get short (cheaper to walk), and dropping the scope's operations (``del
        ops[n:]``) undoes it entirely. Its changes are not visible to this builder, so the two
        must write to separate parts of the document.
        """
        parent, depth, private = self._parent(path)
        node = self._member(parent, path, private)[0] if depth == len(path) - 1 else None
        if not isinstance(node, dict):
            raise ShapeError(self._prefix + path)
        return PatchBuilder(node, prefix=self._prefix + path, ops=self.ops)

    def set(self, path: Path, value: Any) -> None:
        """Make the object member at ``path`` equal ``value``, creating missing parent objects."""
        parent, depth, private = self._parent(path)
        if depth < len(path) - 1:
            # Missing (or null) ancestor: one 'add' of the nested remainder.
            nested = value
            for inner in reversed(path[depth + 1 :]):
                nested = {inner: nested}
            self._emit("add", path[: depth + 1], nested, parent, private)
            return
        current, _ = self._member(parent, path, private)
        if current is None:
            self._emit("add", path, value, parent, private)
        elif current != value:
            self._emit("replace", path, value, parent, private)

    def merge(self, path: Path, entries: dict[str, Any]) -> None:
        """Make the object at ``path`` hold ``entries``: one 'add' of them all when it is missing."""
        parent, depth, private = self._parent(path)
        if depth == len(path) - 1:
            current, current_private = self._member(parent, path, private)
            if isinstance(current, dict):
                for key, value in entries.items():
                    member = (*path, key)
                    old, _ = self._member(current, member, current_private)
                    if old is None:
                        self._emit("add", member, value, current, current_private)
                    elif old != value:
                        self._emit("replace", member, value, current, current_private)
                return
            if current is not None:
                raise ShapeError(self._prefix + path)
        self.set(path, entries)

    def append(self, path: Path, item: Any) -> None:
        """Append ``item`` to the array at ``path``, creating the array if it is missing."""
        parent, depth, private = self._parent(path)
        current, current_private = None, False
        if depth == len(path) - 1:
            current, current_private = self._member(parent, path, private)
        if current is None:
            self.set(path, [item])
            return
        if not isinstance(current, list):
            raise ShapeError(self._prefix + path)
        if not current_private:
            current = self._made[path] = list(current)  # extend a copy, never the input's array
        current.append(_clone(item))
        self.ops.append({"op": "add", "path": pointer((*self._prefix, *path, APPEND)), "value": item})

    def _parent(self, path: Path) -> tuple[Any, int, bool]:
        """The object holding ``path``'s last member as the patch leaves it, its depth, and
        whether it is private; when an ancestor is missing, the deepest existing one instead."""
        node: Any = self._doc
        private = False
        for depth in range(len(path) - 1):
            child: Any = _ABSENT
            if not private and self._made:
                child = self._made.get(path[: depth + 1], _ABSENT)
                private = child is not _ABSENT
            if child is _ABSENT:
                child = node.get(path[depth])
            if child is None:
                return node, depth, private
            if not isinstance(child, dict):
                raise ShapeError(self._prefix + path[: depth + 1])
            node = child
        return node, len(path) - 1, private

    def _member(self, parent: dict[str, Any], path: Path, private: bool) -> tuple[Any, bool]:
        """The value at ``path`` (in ``parent``) and whether it is the builder's own copy."""
        if not private and self._made:
            made = self._made.get(path, _ABSENT)
            if made is not _ABSENT:
                return made, True
        return parent.get(path[-1]), private

    def _emit(self, op: str, at: Path, value: Any, parent: dict[str, Any], private: bool) -> None:
        self.ops.append({"op": op, "path": pointer(self._prefix + at), "value": value})
        if private:
            parent[at[-1]] = _clone(value)
        else:
            self._made[at] = _clone(value)
