"""JSON pointers and the copy-on-write patch builder."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.patch import PatchBuilder, ShapeError, escape, pointer

from .builders import apply_patch


@pytest.mark.parametrize(
    ("token", "escaped"),
    [("a", "a"), ("a/b", "a~1b"), ("a~b", "a~0b"), ("~/", "~0~1"), ("~1", "~01"), ("", "")],
)
def test_escape(token: str, escaped: str) -> None:
    assert escape(token) == escaped


def test_pointer() -> None:
    assert pointer(("metadata", "labels", "phalanx.io/pod-group")) == "/metadata/labels/phalanx.io~1pod-group"
    assert pointer(()) == ""


def test_set_creates_the_missing_parents_once() -> None:
    doc: dict[str, object] = {"spec": {}}
    builder = PatchBuilder(doc)
    builder.set(("spec", "template", "metadata", "labels", "a/b"), "1")
    builder.set(("spec", "template", "metadata", "annotations", "x"), "2")
    builder.set(("spec", "template", "metadata", "labels", "c"), "3")
    assert builder.ops == [
        {"op": "add", "path": "/spec/template", "value": {"metadata": {"labels": {"a/b": "1"}}}},
        {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"x": "2"}},
        {"op": "add", "path": "/spec/template/metadata/labels/c", "value": "3"},
    ]
    assert apply_patch(doc, builder.ops) == {
        "spec": {"template": {"metadata": {"labels": {"a/b": "1", "c": "3"}, "annotations": {"x": "2"}}}}
    }
    assert doc == {"spec": {}}  # the input is never changed


def test_set_replaces_and_skips_equal_values() -> None:
    builder = PatchBuilder({"a": {"b": "old", "c": "same", "d": None}})
    builder.set(("a", "b"), "new")
    builder.set(("a", "c"), "same")
    builder.set(("a", "d"), "x")
    assert builder.ops == [
        {"op": "replace", "path": "/a/b", "value": "new"},
        {"op": "add", "path": "/a/d", "value": "x"},
    ]


def test_null_parent_is_replaced_by_an_object() -> None:
    doc = {"metadata": {"labels": None}}
    builder = PatchBuilder(doc)
    builder.set(("metadata", "labels", "k"), "v")
    assert builder.ops == [{"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}]
    assert apply_patch(doc, builder.ops) == {"metadata": {"labels": {"k": "v"}}}


def test_append_creates_or_extends_an_array() -> None:
    doc = {"spec": {"gates": [{"name": "a"}]}}
    builder = PatchBuilder(doc)
    builder.append(("spec", "gates"), {"name": "b"})
    builder.append(("spec", "other"), 1)
    builder.append(("spec", "other"), 2)
    assert builder.ops == [
        {"op": "add", "path": "/spec/gates/-", "value": {"name": "b"}},
        {"op": "add", "path": "/spec/other", "value": [1]},
        {"op": "add", "path": "/spec/other/-", "value": 2},
    ]
    assert apply_patch(doc, builder.ops) == {
        "spec": {"gates": [{"name": "a"}, {"name": "b"}], "other": [1, 2]}
    }
    assert doc == {"spec": {"gates": [{"name": "a"}]}}


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"spec": "text"}, ("spec", "x")),
        ({"spec": [1]}, ("spec", "x", "y")),
        ({"a": {"b": 3}}, ("a", "b", "c")),
    ],
)
def test_set_through_a_non_object_raises(doc: dict[str, object], path: tuple[str, ...]) -> None:
    with pytest.raises(ShapeError):
        PatchBuilder(doc).set(path, 1)


def test_append_to_a_non_array_raises() -> None:
    with pytest.raises(ShapeError):
        PatchBuilder({"spec": {"gates": {"name": "a"}}}).append(("spec", "gates"), 1)


def test_scope_writes_relative_paths_into_the_same_ops() -> None:
    doc: dict[str, Any] = {"spec": {"templates": {"a/b": {"metadata": {}}}}}
    builder = PatchBuilder(doc)
    builder.set(("spec", "x"), 1)
    scope = builder.scope(("spec", "templates", "a/b"))
    scope.set(("metadata", "labels", "k"), "v")
    scope.append(("spec", "gates"), "g")
    assert [op["path"] for op in builder.ops] == [
        "/spec/x",
        "/spec/templates/a~1b/metadata/labels",
        "/spec/templates/a~1b/spec",
    ]
    assert apply_patch(doc, builder.ops)["spec"]["templates"]["a/b"] == {
        "metadata": {"labels": {"k": "v"}},
        "spec": {"gates": ["g"]},
    }


def test_scope_errors_carry_absolute_paths() -> None:
    builder = PatchBuilder({"spec": {"template": {"metadata": "text"}}})
    with pytest.raises(ShapeError, match=r"^/spec/template/metadata is not an object$"):
        builder.scope(("spec", "template")).set(("metadata", "labels", "k"), "v")
    with pytest.raises(ShapeError, match=r"^/spec/missing is not an object$"):
        builder.scope(("spec", "missing"))


def test_reads_through_values_the_patch_made_and_replaced() -> None:
    doc: dict[str, Any] = {"a": {"k": "old", "list": [1]}}
    builder = PatchBuilder(doc)
    builder.set(("a", "k"), "new")
    builder.set(("a", "k"), "new")  # already what the patch made: nothing
    builder.append(("a", "list"), 2)
    builder.append(("a", "list"), 3)
    builder.set(("a", "m", "n"), {"deep": 1})
    builder.set(("a", "m", "n", "deep"), 1)  # inside a value the patch added: nothing
    builder.set(("a", "m", "n", "other"), 2)
    assert [op["path"] for op in builder.ops] == ["/a/k", "/a/list/-", "/a/list/-", "/a/m", "/a/m/n/other"]
    assert apply_patch(doc, builder.ops) == {
        "a": {"k": "new", "list": [1, 2, 3], "m": {"n": {"deep": 1, "other": 2}}}
    }
    assert doc == {"a": {"k": "old", "list": [1]}}
    assert builder.ops[3]["value"] == {"n": {"deep": 1}}  # ops are never changed afterwards
