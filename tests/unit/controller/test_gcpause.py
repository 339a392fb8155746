"""The planning pass pauses the cyclic collector and always gives it back."""

from __future__ import annotations

import gc

import pytest

from controller.pipeline.gcpause import cyclic_gc_paused


def test_the_collector_is_paused_inside_and_resumed_after_even_on_error() -> None:
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("the pass failed")
    assert gc.isenabled()


def test_a_caller_that_paused_it_keeps_it_paused() -> None:
    gc.disable()
    try:
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
