"""docs/reference.md is generated from the code (flags, metrics, reasons, public names) and kept
current: a setting, metric or reason added without regenerating it fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_what_refgen_generates() -> None:
    spec = importlib.util.spec_from_file_location("phalanx_refgen", REPO / "docs" / "refgen.py")
    assert spec is not None and spec.loader is not None
    refgen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refgen)
    assert refgen.main(["--check"]) == 0, "run: python docs/refgen.py"
    text = (REPO / "docs" / "reference.md").read_text()
    for expected in (
        "--degraded-gang-timeout-seconds",
        "phalanx_admissions_total",
        "`QueueLimit`",
        "phalanx.io/gang",
    ):
        assert expected in text
