"""Settings precedence (defaults < environment < flags), and the JSON log format."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from shared.logging import JsonFormatter, configure_logging
from webhook.__main__ import main, parse_args
from webhook.config import WebhookSettings
from webhook.mutate import DEFAULT_EXCLUDED_NAMESPACES


def test_defaults() -> None:
    settings = WebhookSettings()
    assert (settings.bind_address, settings.port, settings.health_port) == ("0.0.0.0", 9443, 8080)
    assert settings.max_body_bytes == 3 * 1024 * 1024
    assert settings.foreign_schedulers == {"scheduler-plugins-scheduler", "kai-scheduler", "volcano"}
    assert settings.target_scheduler == "default-scheduler"
    assert settings.excluded_namespaces == DEFAULT_EXCLUDED_NAMESPACES
    assert settings.cert_file.name == "tls.crt"
    assert settings.key_file.name == "tls.key"


def test_environment_then_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHALANX_WEBHOOK_PORT", "10443")
    monkeypatch.setenv("PHALANX_WEBHOOK_FOREIGN_SCHEDULERS", "a, b")
    monkeypatch.setenv("PHALANX_WEBHOOK_EXCLUDED_NAMESPACES", "ops")
    settings = WebhookSettings()
    assert settings.port == 10443
    assert settings.foreign_schedulers == {"a", "b"}
    assert settings.excluded_namespaces == {"ops"}
    flags = parse_args(
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
        ]
    )
    settings = WebhookSettings(**flags)
    assert settings.port == 9000
    assert settings.bind_address == "127.0.0.1"
    assert settings.cert_file == Path("/tmp/certs/tls.crt")
    assert settings.cert_reload_seconds == 0.5
    assert settings.foreign_schedulers == {"volcano"}
    assert settings.excluded_namespaces == {"kube-system", "infra"}
    assert settings.log_level == "DEBUG"
    config = settings.mutation_config()
    assert (config.target_scheduler, config.foreign_schedulers) == ("mine", frozenset({"volcano"}))


def test_invalid_settings_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValidationError):
        WebhookSettings(port=70000)
    assert main(["--log-level", "loud"]) == 2
    assert "invalid settings" in capsys.readouterr().err


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
