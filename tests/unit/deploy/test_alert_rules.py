"""The alert rules evaluated by promtool on synthetic series (tests/unit/deploy/promtool/): the
webhook down or unreachable for the API server, the controller down or not leading, a gang never
admitted and an expiring certificate fire; healthy series fire nothing. promtool comes from
tests/localcluster/build-promtool.sh (`make test` and `make unit` build it) or PHALANX_PROMTOOL."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .manifests import DEPLOY, REPO

RULES = DEPLOY / "components" / "monitoring" / "prometheusrule.yaml"
TESTS = Path(__file__).parent / "promtool" / "alerts_test.yaml"
BUILD = REPO / "tests" / "localcluster" / "build-promtool.sh"
OPERATIONS = REPO / "docs" / "operations.md"


def promtool() -> str | None:
    """promtool from PHALANX_PROMTOOL, else the newest one build-promtool.sh put in the cache,
    else PATH."""
    if os.environ.get("PHALANX_PROMTOOL"):
        return os.environ["PHALANX_PROMTOOL"]
    cache = Path(os.environ.get("PHALANX_CACHE") or Path.home() / ".cache" / "phalanx")
    cached = sorted(cache.glob("bin/promtool-*/promtool"))
    return str(cached[-1]) if cached else shutil.which("promtool")


def rule_groups() -> dict[str, object]:
    """The PrometheusRule's spec: what a Prometheus rule file holds."""
    [doc] = [d for d in yaml.safe_load_all(RULES.read_text()) if d]
    spec: dict[str, object] = doc["spec"]
    return spec


@pytest.fixture
def rule_dir(tmp_path: Path) -> Path:
    tool = promtool()
    if tool is None:
        pytest.skip(f"promtool not built: run {BUILD.relative_to(REPO)} (make unit and make test do)")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(), sort_keys=False))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    return tmp_path


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = promtool()
    assert tool is not None
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_the_rules_are_valid_promql(rule_dir: Path) -> None:
    result = run_promtool("check", "rules", "rules.yaml", cwd=rule_dir)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_alerts_fire_on_failures_and_not_on_healthy_series(rule_dir: Path) -> None:
    result = run_promtool("test", "rules", TESTS.name, cwd=rule_dir)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_promtool_tests_cover_the_outages() -> None:
    """Each outage the rules exist for has a case where it fires and one where it must not."""
    cases = yaml.safe_load(TESTS.read_text())["tests"]
    firing = {c["alertname"] for t in cases for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in cases for c in t["alert_rule_test"] if not c["exp_alerts"]}
    must = {
        "PhalanxWebhookDown",
        "PhalanxWebhookCallsFailing",
        "PhalanxControllerDown",
        "PhalanxControllerNotLeading",
        "PhalanxGangNotAdmitted",
        "PhalanxWebhookCertificateExpiringSoon",
    }
    assert must <= firing
    assert must <= quiet


def test_every_alert_has_a_runbook_section() -> None:
    from tests.unit.docs.test_links import anchors

    sections = anchors(OPERATIONS.read_text())
    names = []
    for group in rule_groups()["groups"]:  # type: ignore[attr-defined]
        for rule in group["rules"]:
            names.append(rule["alert"])
            url = rule["annotations"]["runbook_url"]
            page, _, anchor = url.partition("#")
            assert page == "docs/operations.md", url
            assert anchor == rule["alert"].lower(), url
            assert anchor in sections, f"{rule['alert']}: no runbook section #{anchor} in docs/operations.md"
    assert len(names) == len(set(names)), f"an alert is defined twice: {sorted(names)}"


def test_the_webhook_timeout_the_rules_name_is_the_configured_one() -> None:
    """The rules' comments and the latency threshold are written for timeoutSeconds: 5."""
    hooks = yaml.safe_load((DEPLOY / "base" / "webhook-config.yaml").read_text())["webhooks"]
    assert {h["timeoutSeconds"] for h in hooks} == {5}
    text = RULES.read_text()
    assert "timeoutSeconds: 5" in text and "10 s" not in text
    [near] = [
        r
        for g in rule_groups()["groups"]
        for r in g["rules"]
        if r["alert"] == "PhalanxWebhookNearTimeout"  # type: ignore[attr-defined]
    ]
    assert near["expr"].strip().endswith("> 2.5")  # half the timeout, a bucket of the API server's histogram
    reference = (REPO / "docs" / "reference.md").read_text()
    assert "timeout is 10 s" not in reference and "timeoutSeconds, 5 s" in reference
