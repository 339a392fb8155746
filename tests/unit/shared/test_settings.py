"""shared.settings: a settings class reads text as its fields' types say and checks every value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import pytest

from shared.cli import settings_from_cli
from shared.settings import Invalid, InvalidSettings, Settings, from_text, setting


def _upper(value: str) -> str:
    if not value.isalpha():
        raise ValueError(f"not a word: {value!r}")
    return value.upper()


def _low_below_high(settings: Ranged) -> None:
    if settings.low > settings.high:
        raise ValueError("low above high")


@dataclass(frozen=True)
class Ranged(Settings):
    """A toy with every kind of setting."""

    env_prefix: ClassVar[str] = "RANGED_"
    checks = (_low_below_high,)

    low: int = setting(1, ge=0, description="the lower end")
    high: int = setting(10, le=100, description="the upper end")
    ratio: float = setting(0.5, gt=0, description="a share")
    grace: int | None = setting(None, description="unset: none")
    mode: Literal["fast", "safe"] = setting("safe", description="how")
    word: str = setting("x", check=_upper, description="normalised to upper case")
    names: frozenset[str] = setting(frozenset(), description="a comma list")
    where: Path = setting(Path("/tmp"), description="a directory")
    on: bool = setting(True, description="a switch")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"low": " 7 "}, {"low": 7}),
        ({"low": "1_0", "high": "20.0"}, {"low": 10, "high": 20}),
        ({"ratio": "1e-3", "on": "No"}, {"ratio": 0.001, "on": False}),
        ({"on": "t", "ratio": "inf"}, {"on": True, "ratio": float("inf")}),
        ({"names": "a, ,b ", "where": "rel"}, {"names": frozenset({"a", "b"}), "where": Path("rel")}),
        ({"word": "abc", "mode": "fast", "grace": "3"}, {"word": "ABC", "mode": "fast", "grace": 3}),
    ],
)
def test_text_is_read_as_the_field_s_type_says(given: dict[str, str], expected: dict[str, object]) -> None:
    settings = from_text(Ranged, given)
    assert {name: getattr(settings, name) for name in expected} == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"low": "1.5"},
            Invalid("low", "Input should be a valid integer, unable to parse string as an integer", "1.5"),
        ),
        (
            {"low": "١٢"},
            Invalid("low", "Input should be a valid integer, unable to parse string as an integer", "١٢"),
        ),
        (
            {"ratio": "١"},
            Invalid("ratio", "Input should be a valid number, unable to parse string as a number", "١"),
        ),
        (
            {"on": " true "},
            Invalid("on", "Input should be a valid boolean, unable to interpret input", " true "),
        ),
        ({"mode": "Fast"}, Invalid("mode", "Input should be 'fast' or 'safe'", "Fast")),
        ({"ratio": "nan"}, Invalid("ratio", "Input should be greater than 0", "nan")),
        ({"word": "a b"}, Invalid("word", "Value error, not a word: 'a b'", "a b")),
        (
            {"grace": "None"},
            Invalid("grace", "Input should be a valid integer, unable to parse string as an integer", "None"),
        ),
    ],
)
def test_invalid_text_says_what_is_wrong_and_what_was_given(given: dict[str, str], expected: Invalid) -> None:
    with pytest.raises(InvalidSettings) as raised:
        from_text(Ranged, given)
    assert raised.value.errors == (expected,)


def test_every_invalid_value_is_reported_in_field_order_and_the_whole_only_once_they_are_valid() -> None:
    with pytest.raises(InvalidSettings) as raised:
        from_text(Ranged, {"high": "101", "low": "x"})
    assert [error.field for error in raised.value.errors] == ["low", "high"]
    with pytest.raises(InvalidSettings) as raised:
        from_text(Ranged, {"high": "5", "low": "6"})
    assert raised.value.errors == (Invalid(None, "Value error, low above high", {"low": "6", "high": "5"}),)


def test_a_class_constructed_in_code_is_checked_as_well() -> None:
    assert Ranged(word="ok").word == "OK"
    with pytest.raises(InvalidSettings) as raised:
        Ranged(low=-1, mode="slow")  # type: ignore[arg-type]
    assert [(error.field, error.given) for error in raised.value.errors] == [("low", -1), ("mode", "slow")]


def test_a_flag_unsets_an_optional_setting_with_none_the_environment_cannot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert settings_from_cli(Ranged, ["--grace", "4"], prog="ranged").grace == 4
    monkeypatch.setenv("ranged_grace", "4")  # variable names in any case
    assert settings_from_cli(Ranged, [], prog="ranged").grace == 4
    assert settings_from_cli(Ranged, ["--grace", "None"], prog="ranged").grace is None
    monkeypatch.setenv("RANGED_GRACE", "None")
    monkeypatch.delenv("ranged_grace")
    with pytest.raises(SystemExit):
        settings_from_cli(Ranged, [], prog="ranged")
    assert "--grace / RANGED_GRACE: Input should be a valid integer" in capsys.readouterr().err
