"""kubectl phalanx explain names a gang's ProvisioningRequest (its PodGroup's CapacityRequested condition)."""

from __future__ import annotations

from controller.cli import report

SAID = "the cluster-autoscaler provisioned the whole gang's nodes (ProvisioningRequest train-ab-0)"


def test_the_capacity_requested_condition_becomes_an_autoscaler_line() -> None:
    status = {
        "phase": "Pending",
        "conditions": [
            {"type": "Admitted", "status": "False", "reason": "InsufficientCapacity", "message": "x"},
            {
                "type": "CapacityRequested",
                "status": "True",
                "reason": "Provisioned",
                "message": SAID,
            },
        ],
    }
    said = report.autoscaler_data(status)
    assert said == {
        "requested": True,
        "reason": "Provisioned",
        "message": SAID,
    }
    lines = report._autoscaler_lines({"autoscaler": said})
    assert lines == [f"Autoscaler: Provisioned: {said['message']}"]
    assert report.autoscaler_data({"phase": "Pending"}) is None
    assert report._autoscaler_lines({"autoscaler": None}) == []
