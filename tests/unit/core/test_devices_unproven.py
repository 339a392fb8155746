"""DevicesUnproven holds wherever members are placed (controller/core/planner.py): for the
replacements and elastic members of an admitted gang, and for the children of a parent group,
not only for a gang's start. An unproven member carries no device requests: room for it would
be a guess."""

from __future__ import annotations

from dataclasses import replace

from controller.core import messages as msg
from controller.core.model import Admit, Reason, Short
from tests.unit.core.builders import gang, pod
from tests.unit.core.test_device_accounting import decisions, members, spec, world


def test_a_replacement_whose_devices_are_unproven_is_not_placed() -> None:
    running = [pod(f"r{i}").group("r").on("a").build() for i in range(2)]
    replacement = members("r", 1, template="gone")[0]
    replacement = replace(replacement, uid="r9", name="r9")
    g = gang("r").min(3).members(*running, replacement).admitted({p.uid: "a" for p in running}).build()
    decision = decisions(world(("a", 8)), g)["r"]
    assert isinstance(decision, Short) and decision.reason is Reason.DEVICES_UNPROVEN, decision
    assert msg.device_template_missing("gone") in decision.message


def test_sibling_groups_wait_while_a_childs_devices_are_unproven() -> None:
    one = gang("one").min(1).parent("p").members(*members("one", 1, template="t")).build()
    two = gang("two").min(1).parent("p").members(*members("two", 1, template="gone")).build()
    out = decisions(world(("a", 8), t=spec(1)), one, two)
    assert not any(isinstance(d, Admit) for d in out.values()), out
    assert msg.device_template_missing("gone") in out["one"].message  # type: ignore[union-attr]
