"""A panic of the CEL library (Rust, through pyo3) is one selector's error, not the controller's
end: pyo3 raises it as PanicException, which derives from BaseException, not Exception."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core import device_cel
from controller.core.device_cel import SelectorError, Selectors
from controller.core.dra import Device

DEVICE = Device("gpu.example.com", "pool", "gpu-0", "a")


class PanicException(BaseException):
    """As pyo3_runtime.PanicException: a BaseException."""


class PanickingProgram:
    def execute(self, context: Any) -> bool:
        raise PanicException("called `Option::unwrap()` on a `None` value")


class PanickingCompiler:
    def compile(self, expression: str) -> Any:
        raise PanicException("internal error: entered unreachable code")


def test_a_panic_while_evaluating_is_a_selector_error() -> None:
    selectors = Selectors()
    selectors._programs["true"] = PanickingProgram()
    with pytest.raises(SelectorError, match="PanicException"):
        selectors.matches("true", DEVICE)


def test_a_panic_while_compiling_is_a_selector_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_cel, "_cel", PanickingCompiler)
    with pytest.raises(SelectorError, match="unreachable"):
        Selectors().matches("true", DEVICE)


def test_an_interrupt_is_not_swallowed() -> None:
    class Interrupting:
        def execute(self, context: Any) -> bool:
            raise KeyboardInterrupt

    selectors = Selectors()
    selectors._programs["true"] = Interrupting()
    with pytest.raises(KeyboardInterrupt):
        selectors.matches("true", DEVICE)
