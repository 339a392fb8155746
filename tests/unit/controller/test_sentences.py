"""Every sentence the controller writes for a person comes from controller/core/messages.py.

An AST scan of the controller process (core, api, pipeline, runtime): any string literal or
f-string outside messages.py whose text holds a word followed by a space (``"only "``,
``f"label {key}"``) is a sentence, or a piece of one, and fails the test. That catches a message
built where it is sent (``emit(..., f"evicting {x}")``), one built in a helper and passed along,
and one raised in an exception that ends up in an Event. What people read elsewhere has its own
place and is left out on purpose:

- docstrings, and the arguments of logging calls (logs are for operators, with structured fields);
- exceptions of the types in ``LOG_ONLY_ERRORS``, whose text only reaches logs or a start-up error;
- ``description=``/``help=``/``name=`` arguments (settings' documentation, task names) and metric
  constructors' documentation (these are generated into docs/reference.md);
- the few literals in ``NOT_SENTENCES``, each a protocol token.

kubectl-phalanx (controller/cli) is the plugin's own output, not what the controller writes, and is
not scanned.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCANNED = ("controller/core", "controller/api", "controller/pipeline", "controller/runtime")
MESSAGES = "controller/core/messages.py"
WORD_THEN_SPACE = re.compile(r"[A-Za-z]+ ")
LOGGERS = frozenset({"log", "logger", "logging"})
LOG_ONLY_ERRORS = frozenset({"RuntimeError", "ConfigError", "LeadershipLost"})
DOCUMENTING_KEYWORDS = frozenset({"description", "help", "name", "documentation"})
METRIC_TYPES = frozenset({"Counter", "Gauge", "Histogram", "Summary", "Info"})
# (file, the literal text of a string or of an f-string's fixed parts)
NOT_SENTENCES = {
    ("controller/api/transport.py", "Bearer "),  # the HTTP Authorization scheme
}


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _exempt_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes whose strings are not sentences for a person (see the module doc)."""
    exempt: set[int] = set()

    def subtree(node: ast.AST) -> None:
        exempt.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                exempt.add(id(first.value))  # a docstring
        if isinstance(node, ast.Call):
            func = node.func
            logged = (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in LOGGERS
            )
            if logged or _callee(node) in METRIC_TYPES:
                subtree(node)
            for keyword in node.keywords:
                if keyword.arg in DOCUMENTING_KEYWORDS:
                    subtree(keyword.value)
        if (
            isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call)
            and _callee(node.exc) in LOG_ONLY_ERRORS
        ):
            subtree(node)
        if isinstance(node, ast.JoinedStr):
            exempt.update(id(part) for part in node.values)  # judged as one with their f-string
    return exempt


def _text(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [
            part.value
            for part in node.values
            if isinstance(part, ast.Constant) and isinstance(part.value, str)
        ]
    return None


def sentences(source: str, path: str) -> list[str]:
    """``path:line: text`` of every sentence (or piece of one) built in ``source``."""
    tree = ast.parse(source)
    exempt = _exempt_nodes(tree)
    found = []
    for node in ast.walk(tree):
        parts = _text(node)
        if id(node) in exempt or parts is None or not any(WORD_THEN_SPACE.search(p) for p in parts):
            continue
        if (path, "".join(parts)) in NOT_SENTENCES:
            continue
        found.append(f"{path}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
    return sorted(found)


def test_no_sentence_is_built_outside_messages() -> None:
    found = []
    for folder in SCANNED:
        for path in sorted((REPO / folder).rglob("*.py")):
            relative = str(path.relative_to(REPO))
            if relative != MESSAGES:
                found += sentences(path.read_text(), relative)
    assert found == [], "write these in controller/core/messages.py and call it:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        'await events.emit(pg, EventReason.PREEMPTING, f"evicting {summary}: {text}")',
        'status = {"message": "every member runs"}',
        'def why(n):\n    return f"only {n} members bound"',
        'message = reason + "; re-queued whole"',
        'return Sizing(None, f"label {key}")',
        'raise InvalidPod(f"pod {name}: {err}")',
        'raise InvalidRequests("resources must be a map")',
    ],
)
def test_the_scan_catches_a_sentence_built_in_the_shell(source: str) -> None:
    assert sentences(source, "controller/pipeline/x.py") != []


@pytest.mark.parametrize(
    "source",
    [
        'def f():\n    """Say why it waits."""',
        'log.warning("status not written", extra={"gang": key, "error": "not found here"})',
        'raise RuntimeError(f"gates not lifted for {n} members")',
        'group.create_task(run(), name=f"informer {rt}")',
        'self.admissions = Counter("phalanx_admissions", "Gangs admitted")',
        'key = f"{namespace}/{name}"',
        'path = f"/api/v1/namespaces/{ns}/pods"',
        'parts = "; ".join(items)',
    ],
)
def test_the_scan_leaves_logs_docs_and_identifiers_alone(source: str) -> None:
    assert sentences(source, "controller/pipeline/x.py") == []
