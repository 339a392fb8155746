"""Body checks that need no server: the media type, and when freed memory is handed back."""

from __future__ import annotations

import asyncio

import pytest

from webhook.body import BodyError, check_content_type
from webhook.memory import HeapTrimmer


@pytest.mark.parametrize(
    "header", ["application/json", "Application/JSON", "application/json; charset=utf-8"]
)
def test_json_media_types_pass(header: str) -> None:
    check_content_type(header)


@pytest.mark.parametrize("header", [None, "", "text/plain", "application/jsonp", "application/x-json"])
def test_anything_else_is_415(header: str | None) -> None:
    with pytest.raises(BodyError) as caught:
        check_content_type(header)
    assert caught.value.status == 415


async def test_the_heap_is_trimmed_after_a_large_burst_and_once_more_later_never_for_small_ones() -> None:
    trimmer = HeapTrimmer(threshold_bytes=1000, interval=0.05, settle=0.3)
    trimmer.after(999)
    await asyncio.sleep(0.1)
    assert trimmer.trims == 0
    for _ in range(50):
        trimmer.after(5000)
    await asyncio.sleep(0.2)
    assert trimmer.trims == 1
    # ... and once more when the burst has settled (buffers of dropped connections freed late).
    await asyncio.sleep(0.4)
    assert trimmer.trims == 2
    await asyncio.sleep(0.4)
    assert trimmer.trims == 2
