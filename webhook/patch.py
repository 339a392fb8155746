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
    # Strings (nearly every leaf here) are returned without a call.
    if isinstance(value, dict):
        return {k: v if type(v) is str else _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) is str else _clone(v) for v in value]
    return value


class PatchBuilder:
    """Collects add/replace operations against ``doc``, which is never modified.

    Values the patch places are kept as private copies: under an input object, in ``_made``
    by path; under a private object, in that object itself (it is the builder's to change).
    Each operation walks its path once (the webhook runs a few per object, on the API server's
    hot path).
    """

    __slots__ = ("_doc", "_made", "_prefix", "ops")

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
            self._add_nested(path, depth, value, parent, private)
            return
        current = self._member(parent, path, private)[0]
        if current is None:
            self._emit("add", path, value, parent, private)
        elif current != value:
            self._emit("replace", path, value, parent, private)

    def merge(self, path: Path, entries: dict[str, Any]) -> None:
        """Make the object at ``path`` hold ``entries``: one 'add' of them all when it is missing."""
        parent, depth, private = self._parent(path)
        if depth < len(path) - 1:
            self._add_nested(path, depth, entries, parent, private)
            return
        current, current_private = self._member(parent, path, private)
        if current is None:
            self._emit("add", path, entries, parent, private)
            return
        if not isinstance(current, dict):
            raise ShapeError(self._prefix + path)
        for key, value in entries.items():
            member = (*path, key)
            old = self._member(current, member, current_private)[0]
            if old is None:
                self._emit("add", member, value, current, current_private)
            elif old != value:
                self._emit("replace", member, value, current, current_private)

    def append(self, path: Path, item: Any) -> None:
        """Append ``item`` to the array at ``path``, creating the array if it is missing."""
        parent, depth, private = self._parent(path)
        if depth < len(path) - 1:
            self._add_nested(path, depth, [item], parent, private)
            return
        current, current_private = self._member(parent, path, private)
        if current is None:
            self._emit("add", path, [item], parent, private)
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
        made = self._made
        private = False
        for depth in range(len(path) - 1):
            child: Any = _ABSENT
            if not private and made:  # nothing placed yet (most operations): the input only
                child = made.get(path[: depth + 1], _ABSENT)
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

    def _add_nested(self, path: Path, depth: int, value: Any, parent: dict[str, Any], private: bool) -> None:
        """A missing (or null) ancestor at ``depth + 1``: one 'add' of the nested remainder."""
        for inner in reversed(path[depth + 1 :]):
            value = {inner: value}
        self._emit("add", path[: depth + 1], value, parent, private)

    def _emit(self, op: str, at: Path, value: Any, parent: dict[str, Any], private: bool) -> None:
        self.ops.append({"op": op, "path": pointer(self._prefix + at), "value": value})
        copy = value if type(value) is str else _clone(value)
        if private:
            parent[at[-1]] = copy
        else:
            self._made[at] = copy
