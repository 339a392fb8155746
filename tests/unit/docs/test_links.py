"""Links in README.md and docs/*.md resolve: every relative link names a file of this repository
and every ``#anchor`` a heading of its page (GitHub's slugs); no page cites a path outside the
repository; README links every page of docs/. Standard library only, so it cannot rot either."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$", re.MULTILINE)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:, ...
PARENT_PATH = re.compile(r"(?<![\w.])((?:\.\./)+[\w.-][\w./-]*)")


def pages(root: Path = REPO) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (no Markdown) lower-cased, punctuation other than
    '-' and '_' dropped, spaces turned into '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*|_)(\S(?:.*?\S)?)\1", r"\2", text)
    kept = "".join(ch for ch in text.lower() if ch in " -_" or unicodedata.category(ch)[0] in "LMN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set(HTML_ID.findall(text))
    for _, title in HEADING.findall(FENCE.sub("", text)):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(text: str) -> list[str]:
    plain = FENCE.sub("", text)
    plain = INLINE_CODE.sub("", plain)
    return LINK.findall(plain) + REFERENCE_DEF.findall(plain)


def problems(page: Path, root: Path = REPO) -> list[str]:
    """What is wrong with the links of one page, in words; empty when all resolve."""
    text = page.read_text()
    found = []
    for target in links(text):
        if EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.is_relative_to(root.resolve()):
            found.append(f"{target}: outside the repository")
            continue
        if not dest.exists():
            found.append(f"{target}: no such file")
            continue
        if anchor:
            if dest.suffix != ".md" or dest.is_dir():
                found.append(f"{target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest.read_text()):
                found.append(f"{target}: no heading #{anchor} in {dest.relative_to(root.resolve())}")
    return found


def outside_paths(page: Path, root: Path = REPO) -> list[str]:
    """Paths written on the page (in code or prose) that climb out of the repository."""
    return [
        p
        for p in PARENT_PATH.findall(page.read_text())
        if not (page.parent / p).resolve().is_relative_to(root.resolve())
    ]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert not problems(page), f"{page.relative_to(REPO)}: {problems(page)}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_cites_a_path_outside_the_repository(page: Path) -> None:
    assert not outside_paths(page), f"{page.relative_to(REPO)}: {outside_paths(page)}"


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {
        (REPO / t.partition("#")[0]).resolve()
        for t in links((REPO / "README.md").read_text())
        if not EXTERNAL.match(t)
    }
    missing = [p.name for p in pages()[1:] if p.resolve() not in linked]
    assert not missing, f"README's Documentation list lacks: {missing}"


def test_github_slugs() -> None:
    assert slug("Why does my gang wait?") == "why-does-my-gang-wait"
    assert slug("Side by side with `make bench-peers`") == "side-by-side-with-make-bench-peers"
    assert slug("Queues for teams: quotas, KAI's Queue") == "queues-for-teams-quotas-kais-queue"
    assert slug("Deadlock race: 4 gangs, 3/4 of 4×8 GPUs") == "deadlock-race-4-gangs-34-of-48-gpus"
    assert slug("**Bold** and [a link](x.md)") == "bold-and-a-link"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_a_broken_link_or_anchor_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Real heading\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Home\n\n"
        "[ok](docs/guide.md#real-heading) [ok too](#home) [web](https://example.com/x#y)\n"
        "`[not a link](nowhere.md)`\n\n"
        "```\n[not a link either](nowhere.md)\n```\n\n"
        "[gone](docs/missing.md) [bad anchor](docs/guide.md#no-such-heading) [self](#nope)\n"
        "[escape](../elsewhere/README.md)\n\n"
        "[ref]: docs/also-missing.md\n"
        "Trace at ../shared/data/trace.csv\n"
    )
    assert problems(page, tmp_path) == [
        "docs/missing.md: no such file",
        "docs/guide.md#no-such-heading: no heading #no-such-heading in docs/guide.md",
        "#nope: no heading #nope in README.md",
        "../elsewhere/README.md: outside the repository",
        "docs/also-missing.md: no such file",
    ]
    assert outside_paths(page, tmp_path) == ["../elsewhere/README.md", "../shared/data/trace.csv"]
