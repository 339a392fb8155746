"""The metrics the docs promise exist in the code's registries, and the monitoring component
(Grafana dashboard, PrometheusRule) uses only metrics and labels that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from controller.runtime.app import Controller
from controller.runtime.config import ControllerSettings
from tests.component.controller.fake_kube import FakeKube
from webhook.metrics import WebhookMetrics

from .manifests import DEPLOY, REPO, kustomize, named, write_overlay

MONITORING = DEPLOY / "components" / "monitoring"
# Not a file name such as the plugin's wheel, phalanx_kubectl-<version>-py3-none-any.whl.
METRIC = re.compile(r"\bphalanx_[a-z_]+\b(?!-)")
SELECTOR = re.compile(r"\b(phalanx_[a-z_]+)\{([^}]*)\}")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported() -> dict[str, tuple[str, set[str]]]:
    """Series name -> (family name, label names), for every metric either process registers (the
    controller's registry as its wiring fills it: some parts register their own metrics)."""
    out: dict[str, tuple[str, set[str]]] = {}
    controller = Controller(ControllerSettings(), FakeKube())
    for registry in (controller.metrics.registry, WebhookMetrics().registry):
        for family in registry.collect():
            if not family.name.startswith("phalanx_"):
                continue  # prometheus_client's process_* and python_* collectors
            # (prometheus_client keeps no public map from a family to its label names)
            labels = set(registry._names_to_collectors[family.name]._labelnames)
            for suffix in SUFFIXES[family.type]:
                out[family.name + suffix] = (family.name, labels | ({"le"} if suffix == "_bucket" else set()))
    return out


# The hand-written pages that name metrics (docs/reference.md is generated from the registries, so
# it would prove nothing here).
DOCUMENTED = ("README.md", "docs/operations.md", "docs/user-guide.md")


def readme_metrics() -> set[str]:
    """Every metric name the README and the guides mention (the operations guide's Metrics section,
    and beside the features)."""
    return set(METRIC.findall("\n".join((REPO / page).read_text() for page in DOCUMENTED)))


def test_every_metric_the_readme_lists_is_exported() -> None:
    series = exported()
    families = {family for family, _ in series.values()}
    listed = readme_metrics()
    assert len(listed) >= 24
    unknown = {m for m in listed if m not in series and m not in families}
    assert not unknown, f"the docs list metrics no registry exports: {sorted(unknown)}"


def test_every_exported_metric_is_in_the_readme() -> None:
    listed = readme_metrics()
    undocumented = {
        family for series, (family, _) in exported().items() if family not in listed and series not in listed
    }
    assert not undocumented, f"exported but not in docs/operations.md's Metrics: {sorted(undocumented)}"


def _check_expressions(expressions: list[str], where: str) -> None:
    series = exported()
    assert expressions, f"no expressions in {where}"
    for expr in expressions:
        for name in METRIC.findall(expr):
            assert name in series, f"{where}: {name} is not an exported series (in {expr!r})"
        for name, matchers in SELECTOR.findall(expr):
            used = {m.split("=")[0].rstrip("!~").strip() for m in matchers.split(",") if m.strip()}
            missing = used - series[name][1]
            assert not missing, f"{where}: {name} has no label {sorted(missing)} (in {expr!r})"


def dashboard() -> dict[str, object]:
    data: dict[str, object] = json.loads((MONITORING / "phalanx-dashboard.json").read_text())
    return data


def test_dashboard_queries_use_only_exported_metrics_and_labels() -> None:
    panels = [p for p in dashboard()["panels"] if p["type"] != "row"]  # type: ignore[attr-defined]
    expressions = [t["expr"] for p in panels for t in p["targets"]]
    _check_expressions(expressions, "phalanx-dashboard.json")
    # Every family of both processes is on the dashboard somewhere.
    shown = {series_family for e in expressions for series_family in METRIC.findall(e)}
    families = {family for family, _ in exported().values()}
    assert families <= {exported()[s][0] for s in shown}


def test_dashboard_panels_do_not_overlap() -> None:
    cells: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:  # type: ignore[attr-defined]
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"panel {panel['title']!r} overlaps another"
        cells |= area


def rules() -> list[dict[str, object]]:
    [doc] = [d for d in yaml.safe_load_all((MONITORING / "prometheusrule.yaml").read_text()) if d]
    assert doc["kind"] == "PrometheusRule"
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def test_alert_rules_use_only_exported_metrics_and_labels() -> None:
    found = rules()
    _check_expressions([str(r["expr"]) for r in found], "prometheusrule.yaml")
    for rule in found:
        assert rule["alert"] and rule["labels"]["severity"] in ("critical", "warning", "info")  # type: ignore[index]
        assert rule["annotations"]["summary"]  # type: ignore[index]


def test_the_check_catches_a_misspelt_metric_and_label() -> None:
    with pytest.raises(AssertionError, match="not an exported series"):
        _check_expressions(["rate(phalanx_admission_total[5m])"], "test")
    with pytest.raises(AssertionError, match="no label"):
        _check_expressions(['phalanx_gang_pending{resource="a"}'], "test")


def test_component_builds_with_the_dashboard_configmap(tmp_path: Path) -> None:
    objects = kustomize(write_overlay(tmp_path, ["base"], ["components/monitoring"]))
    configmap = named(objects, "ConfigMap", "phalanx-grafana-dashboard")
    assert configmap["metadata"]["namespace"] == "phalanx-system"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["phalanx-dashboard.json"]) == dashboard()
    named(objects, "PrometheusRule", "phalanx")
