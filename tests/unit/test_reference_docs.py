"""docs/reference.md is generated from the code (flags, metrics, reasons, public names) and kept
current: a setting, metric or reason added without regenerating it fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from shared.settings import fields

REPO = Path(__file__).resolve().parents[2]


def _refgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("phalanx_refgen", REPO / "docs" / "refgen.py")
    assert spec is not None and spec.loader is not None
    refgen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refgen)
    return refgen


def test_the_committed_reference_is_what_refgen_generates() -> None:
    refgen = _refgen()
    assert refgen.main(["--check"]) == 0, "run: python docs/refgen.py"
    text = (REPO / "docs" / "reference.md").read_text()
    for expected in (
        "--degraded-gang-timeout-seconds",
        "phalanx_gang_admissions_total",
        "`QueueLimit`",
        "phalanx.io/gang",
        "`phalanx.io/requeued`",  # a public name defined outside shared/constants.py
    ):
        assert expected in text


def test_every_setting_is_a_flag_and_one_without_would_be_listed_as_environment_only() -> None:
    """Both command lines are generated from the settings classes (shared.cli), so every setting
    has a flag; the reference must still never offer a flag a process would refuse."""
    refgen = _refgen()
    webhook = refgen.cli_flags(refgen.webhook_parse_settings)
    controller = refgen.cli_flags(refgen.parse_settings)
    assert {"--leader-election", "--no-leader-election"} <= controller
    assert {"--log-json", "--no-log-json", "--shutdown-delay-seconds"} <= webhook
    for settings, accepted in ((refgen.WebhookSettings, webhook), (refgen.ControllerSettings, controller)):
        assert {"--" + field.name.replace("_", "-") for field in fields(settings)} <= accepted
    refused = webhook - {"--shutdown-delay-seconds"}
    rows = "\n".join(
        refgen.flags(refgen.WebhookSettings, "PHALANX_WEBHOOK_", REPO / "webhook/config.py", refused)
    )
    assert "| (environment only) | `PHALANX_WEBHOOK_SHUTDOWN_DELAY_SECONDS` |" in rows
    assert "`--shutdown-delay-seconds`" not in rows
