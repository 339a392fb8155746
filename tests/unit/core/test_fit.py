"""Per-pod node constraints: nodeSelector, required node affinity, taints, readiness."""

from __future__ import annotations

import pytest

from controller.core.fit import (
    Constraints,
    Eligibility,
    parse_int64,
    pod_allows_node,
    requirement_matches,
    tolerates,
    untolerated_taint,
)
from controller.core.model import Requirement, Taint, Toleration

from .builders import node, pod, req

LABELS = {"gpu": "a100", "zone": "z1", "cores": "64", "empty": ""}


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (req("gpu", "In", "a100", "h100"), True),
        (req("gpu", "In", "h100"), False),
        (req("missing", "In", "x"), False),
        (req("gpu", "In"), False),
        (req("gpu", "NotIn", "h100"), True),
        (req("gpu", "NotIn", "a100"), False),
        (req("missing", "NotIn", "x"), True),  # NotIn matches an absent label
        (req("gpu", "Exists"), True),
        (req("empty", "Exists"), True),
        (req("missing", "Exists"), False),
        (req("missing", "DoesNotExist"), True),
        (req("gpu", "DoesNotExist"), False),
        (req("cores", "Gt", "32"), True),
        (req("cores", "Gt", "64"), False),
        (req("cores", "Lt", "128"), True),
        (req("cores", "Lt", "64"), False),
        (req("cores", "Gt", "+32"), True),  # Go's ParseInt accepts a sign
        (req("cores", "Gt", "032"), True),  # ... and leading zeros
        (req("cores", "Gt", "3.5"), False),  # not an integer: no match
        (req("cores", "Gt", "1", "2"), False),  # exactly one value
        (req("cores", "Gt"), False),
        (req("gpu", "Gt", "1"), False),  # label not an integer
        (req("missing", "Lt", "1"), False),
        (req("cores", "Gt", "99999999999999999999"), False),  # beyond int64
        (req("gpu", "Bogus", "a100"), False),
    ],
)
def test_requirement_operators(requirement: Requirement, expected: bool) -> None:
    assert requirement_matches(requirement, LABELS) is expected


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("-5", -5), ("+7", 7), ("007", 7), (" 1", None), ("1_000", None), ("", None), ("0x10", None)],
)
def test_parse_int64_like_go(text: str, value: int | None) -> None:
    assert parse_int64(text) == value


def test_terms_are_ored_and_requirements_anded() -> None:
    n = node("a").label("gpu", "a100").label("zone", "z1").build()
    both = pod("p").affinity([req("gpu", "In", "a100"), req("zone", "In", "z1")]).build()
    one_fails = pod("p").affinity([req("gpu", "In", "a100"), req("zone", "In", "z2")]).build()
    ored = pod("p").affinity([req("zone", "In", "z2")], [req("gpu", "Exists")]).build()
    empty_term = pod("p").affinity([]).build()
    assert pod_allows_node(both, n)
    assert not pod_allows_node(one_fails, n)
    assert pod_allows_node(ored, n)
    assert not pod_allows_node(empty_term, n)  # an empty term matches nothing


def test_node_selector_must_match_every_label() -> None:
    n = node("a").label("gpu", "a100").zone("z1").build()
    assert pod_allows_node(pod("p").selector(gpu="a100").build(), n)
    assert not pod_allows_node(pod("p").selector(gpu="h100").build(), n)
    assert not pod_allows_node(pod("p").select("gpu", "a100").select("x", "y").build(), n)


T_GPU = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("nvidia.com/gpu", "Exists"), T_GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "present"), T_GPU, True),
        (Toleration("nvidia.com/gpu", "", "present"), T_GPU, True),  # no operator means Equal
        (Toleration("nvidia.com/gpu", "Equal", "other"), T_GPU, False),
        (Toleration("other", "Exists"), T_GPU, False),
        (Toleration("", "Exists"), T_GPU, True),  # empty key + Exists tolerates everything
        (Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"), T_GPU, True),
        (Toleration("nvidia.com/gpu", "Exists", effect="NoExecute"), T_GPU, False),
        (Toleration("nvidia.com/gpu", "Exists", effect=""), Taint("nvidia.com/gpu", "", "NoExecute"), True),
        (Toleration("sla", "Gt", "900"), Taint("sla", "950"), True),
        (Toleration("sla", "Gt", "950"), Taint("sla", "950"), False),
        (Toleration("sla", "Lt", "800"), Taint("sla", "950"), False),
        (Toleration("sla", "Lt", "999"), Taint("sla", "950"), True),
        (Toleration("sla", "Lt", "0999"), Taint("sla", "950"), False),  # not canonical
        (Toleration("sla", "Weird", "1"), Taint("sla", "1"), False),
    ],
)
def test_toleration_semantics(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_prefer_no_schedule_is_ignored_and_no_execute_must_be_tolerated() -> None:
    taints = (Taint("soft", "", "PreferNoSchedule"), Taint("hard", "", "NoExecute"))
    assert untolerated_taint(taints, ()) == taints[1]
    assert untolerated_taint(taints, (Toleration("hard", "Exists"),)) is None


@pytest.mark.parametrize(
    ("n", "allowed"),
    [
        (node("a").build(), True),
        (node("a").cordoned().build(), False),
        (node("a").not_ready().build(), False),
        (node("a").taint("dedicated", "infra").build(), False),
        (node("a").taint("dedicated", "infra", "PreferNoSchedule").build(), True),
    ],
)
def test_readiness_cordon_and_taints(n: object, allowed: bool) -> None:
    assert pod_allows_node(pod("p").build(), n) is allowed  # type: ignore[arg-type]


def test_eligibility_masks_and_explanations() -> None:
    nodes = [
        node("a").label("gpu", "a100").taint("nvidia.com/gpu", "present").build(),
        node("b").label("gpu", "h100").taint("nvidia.com/gpu", "present").build(),
        node("c").label("gpu", "h100").cordoned().build(),
        node("d").label("gpu", "a100").not_ready().build(),
    ]
    elig = Eligibility(nodes)
    tolerant = (Toleration("nvidia.com/gpu", "Exists"),)
    assert elig.mask(Constraints((("gpu", "h100"),), (), tolerant)).indices == [1]
    assert elig.mask(Constraints((), (), tolerant)).indices == [0, 1]
    assert elig.mask(Constraints()).count == 0
    assert (
        elig.explain(Constraints())
        == "every node has an untolerated taint (e.g. nvidia.com/gpu=present:NoSchedule)"
    )
    selector = Constraints((("gpu", "v100"),), (), tolerant)
    assert elig.explain(selector) == "no Ready node matches nodeSelector gpu=v100"
    affinity = Constraints((), ((Requirement("gpu", "In", ("t4",)),),), tolerant)
    assert elig.explain(affinity) == "no Ready node matches the required node affinity"
    assert Eligibility([nodes[2], nodes[3]]).explain(Constraints()) == "no node is Ready and schedulable"
    assert Eligibility([]).explain(Constraints()) == "the cluster has no nodes"


def test_eligibility_per_node_label_keys_are_exact() -> None:
    # Constraints on the hostname label make every node its own class.
    nodes = [node(f"n{i}").build() for i in range(5)]
    elig = Eligibility(nodes)
    cons = Constraints((("kubernetes.io/hostname", "n3"),))
    assert elig.mask(cons).indices == [3]


def test_match_fields_pin_the_node_name_not_the_hostname_label() -> None:
    # On most clouds kubernetes.io/hostname differs from the node's name; matchFields name the node.
    nodes = [node(f"n{i}").label("kubernetes.io/hostname", f"ip-10-0-0-{i}").build() for i in range(4)]
    pinned = Constraints((), ((Requirement("metadata.name", "In", ("n2",), field=True),),))
    elig = Eligibility(nodes)
    assert elig.mask(pinned).indices == [2]
    assert not pinned.allows(node("ip-10-0-0-2").label("kubernetes.io/hostname", "n2").build())
    # A field requirement never reads a label of the same name.
    labelled = node("x").label("metadata.name", "n2").build()
    assert not requirement_matches(
        Requirement("metadata.name", "In", ("n2",), field=True), labelled.labels, "x"
    )
    anywhere_but = Constraints((), ((Requirement("metadata.name", "NotIn", ("n0", "n1"), field=True),),))
    assert elig.mask(anywhere_but).indices == [2, 3]
