"""Settings precedence (defaults < environment < flags), and the JSON log format."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
import yaml

import webhook.__main__ as webhook_main
from shared.logging import JsonFormatter, configure_logging
from shared.settings import InvalidSettings
from tests.settings_help import help_text
from webhook.__main__ import loop_factory, main, parse_settings
from webhook.config import WebhookSettings
from webhook.mutate import DEFAULT_EXCLUDED_NAMESPACES

REPO = Path(__file__).resolve().parents[3]


def test_defaults() -> None:
    settings = WebhookSettings()
    assert (settings.bind_address, settings.port, settings.health_port) == ("0.0.0.0", 9443, 8080)
    assert settings.max_body_bytes == 6 * 1024 * 1024
    assert settings.max_buffered_body_bytes == 4 * settings.max_body_bytes
    assert settings.foreign_schedulers == {"scheduler-plugins-scheduler", "kai-scheduler", "volcano"}
    assert settings.target_scheduler == "default-scheduler"
    assert settings.excluded_namespaces == DEFAULT_EXCLUDED_NAMESPACES
    assert settings.cert_file.name == "tls.crt"
    assert settings.key_file.name == "tls.key"


def test_environment_then_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHALANX_WEBHOOK_PORT", "10443")
    monkeypatch.setenv("PHALANX_WEBHOOK_FOREIGN_SCHEDULERS", "a, b")
    monkeypatch.setenv("PHALANX_WEBHOOK_EXCLUDED_NAMESPACES", "ops")
    settings = parse_settings([])
    assert settings.port == 10443
    assert settings.foreign_schedulers == {"a", "b"}
    assert settings.excluded_namespaces == {"ops"}
    settings = parse_settings(
        [
            "--port",
            "9000",
            "--bind-address",
            "127.0.0.1",
            "--health-port",
            "0",
            "--cert-dir",
            "/tmp/certs",
            "--cert-reload-seconds",
            "0.5",
            "--max-body-bytes",
            "65536",
            "--foreign-schedulers",
            "volcano",
            "--target-scheduler",
            "mine",
            "--excluded-namespaces",
            "kube-system,infra",
            "--log-level",
            "debug",
            "--no-log-json",
        ]
    )
    assert settings.port == 9000
    assert settings.bind_address == "127.0.0.1"
    assert settings.cert_file == Path("/tmp/certs/tls.crt")
    assert settings.cert_reload_seconds == 0.5
    assert settings.foreign_schedulers == {"volcano"}
    assert settings.excluded_namespaces == {"kube-system", "infra"}
    assert settings.log_level == "DEBUG"
    assert settings.log_json is False
    config = settings.mutation_config()
    assert (config.target_scheduler, config.foreign_schedulers) == ("mine", frozenset({"volcano"}))


def test_a_flag_beats_the_environment_which_beats_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_settings([]).target_scheduler == "default-scheduler"
    monkeypatch.setenv("PHALANX_WEBHOOK_TARGET_SCHEDULER", "from-env")
    monkeypatch.setenv("PHALANX_WEBHOOK_LOG_JSON", "false")
    assert parse_settings([]).target_scheduler == "from-env"
    assert parse_settings(["--target-scheduler", "from-flag"]).target_scheduler == "from-flag"
    assert parse_settings([]).log_json is False
    assert parse_settings(["--log-json"]).log_json is True


def test_invalid_settings_exit_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InvalidSettings):
        WebhookSettings(port=70000)
    with pytest.raises(SystemExit) as exited:
        main(["--log-level", "loud", "--port", "70000"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("phalanx-webhook: invalid settings:\n")
    assert "--log-level / PHALANX_WEBHOOK_LOG_LEVEL: Value error, unknown log level 'loud'" in err
    assert "--port / PHALANX_WEBHOOK_PORT: Input should be less than or equal to 65535" in err


@pytest.fixture
def root_logging() -> Iterator[None]:
    """main() configures the root logger: put it back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("root_logging")
@pytest.mark.parametrize(("flags", "loop_module"), [([], "uvloop"), (["--event-loop", "asyncio"], "asyncio")])
def test_the_webhook_serves_on_uvloop_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], loop_module: str
) -> None:
    served_on: list[str] = []

    async def fake_run(settings: WebhookSettings) -> None:
        served_on.append(type(asyncio.get_running_loop()).__module__.split(".")[0])

    monkeypatch.setattr(webhook_main, "run", fake_run)
    assert main(flags) == 0
    assert served_on == [loop_module]


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert loop_factory("asyncio") is None
    assert loop_factory("auto") is not None  # uvloop is a dependency where it builds
    monkeypatch.setattr(webhook_main, "uvloop", None)
    assert loop_factory("auto") is None
    with pytest.raises(SystemExit, match="uvloop is not installed"):
        loop_factory("uvloop")


def test_the_flags_the_deployment_passes_parse() -> None:
    manifest = yaml.safe_load((REPO / "deploy/components/workloads/webhook-deployment.yaml").read_text())
    args = manifest["spec"]["template"]["spec"]["containers"][0]["args"]
    settings = parse_settings(args)
    assert (settings.bind_address, settings.port, settings.health_port) == ("0.0.0.0", 9443, 8080)
    assert (settings.cert_dir, settings.log_level) == (Path("/certs"), "INFO")


def test_help_lists_every_setting_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    out = help_text(parse_settings, WebhookSettings, "PHALANX_WEBHOOK_", capsys)
    assert "--no-log-json" in out
    assert "(default: kai-scheduler,scheduler-plugins-scheduler,volcano)" in out


def test_json_log_lines_carry_extra_fields() -> None:
    record = logging.LogRecord("phalanx.webhook", logging.INFO, __file__, 1, "admission %s", ("x",), None)
    record.kind = "Job"
    record.warnings = ["phalanx: a"]
    record.path = Path("/x")  # not JSON-serialisable as is
    line = orjson.loads(JsonFormatter().format(record))
    assert line["level"] == "INFO"
    assert line["logger"] == "phalanx.webhook"
    assert line["msg"] == "admission x"
    assert line["kind"] == "Job"
    assert line["warnings"] == ["phalanx: a"]
    assert line["path"] == "/x"
    assert line["ts"].endswith("+00:00")


def test_json_log_timestamps_match_isoformat_across_seconds() -> None:
    formatter = JsonFormatter()
    for created in (1_700_000_000.0, 1_700_000_000.9996, 1_700_000_001.0004, 1_700_000_000.5):
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
        record.created = created
        expected = datetime.fromtimestamp(created, tz=UTC).isoformat(timespec="milliseconds")
        assert orjson.loads(formatter.format(record))["ts"] == expected


def test_configure_logging_json_and_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    flags = ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")
    saved_flags = {name: getattr(logging, name) for name in flags}
    try:
        configure_logging("debug")
        try:
            raise ValueError("bad")
        except ValueError:
            logging.getLogger("t").exception("failed", extra={"uid": "u"})
        line = orjson.loads(stream.getvalue().splitlines()[-1])
        assert line["uid"] == "u"
        assert "ValueError: bad" in line["exc"]
        configure_logging("info", json=False)
        logging.getLogger("t").info("plain")
        assert stream.getvalue().rstrip().endswith("t: plain")
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, value in saved_flags.items():  # configure_logging changes process-wide flags
            setattr(logging, name, value)
