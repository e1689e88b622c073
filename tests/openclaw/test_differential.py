"""gatewayd against OpenClaw itself: discovery, eligibility and loading, case by case.

For every case of :mod:`tests.openclaw.cases` OpenClaw's own functions (from the installed
``openclaw`` package's ``dist/``, through ``oracle.mjs``) and gatewayd's loader (as ``hooks
check`` runs it: the JS/TS imports tried) judge the same files, config and environment; the
test fails on any disagreement the case does not declare as one of the deliberate differences
docs/design.md lists, and on a declared difference that no longer shows. Without the package
(and no way to install it) the tests skip, saying why.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gatewayd.paths
from gatewayd.config import load_config
from gatewayd.hooks.eligibility import OPENCLAW_SECTIONS
from gatewayd.hooks.loader import HookLoader, LoadResult
from gatewayd.hooks.node.loading import check_node_hooks
from tests.openclaw import reference
from tests.openclaw.cases import CASES, Case
from tests.openclaw.compare import disagreements, gatewayd_verdicts, openclaw_verdicts

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"

pytestmark = pytest.mark.timeout(600)


def deliberate_ids() -> set[str]:
    """The ids of docs/design.md's table of deliberate differences from OpenClaw."""
    text = DESIGN.read_text(encoding="utf-8")
    start = text.find("### Deliberate differences from OpenClaw")
    assert start != -1, "docs/design.md has no 'Deliberate differences from OpenClaw' section"
    section = text[start:].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.MULTILINE))


def case_root(base: Path, case: Case) -> Path:
    return base / case.id


@pytest.fixture(scope="module")
def corpus() -> Iterator[tuple[Path, dict[str, dict[str, Any]]]]:
    """Every case written under one directory, and OpenClaw's answer for each."""
    reference.required()
    base = Path(tempfile.mkdtemp(prefix="oc", dir="/tmp"))
    try:
        requests = []
        for case in CASES:
            root = case_root(base, case)
            case.write(root)
            requests.append(
                {
                    "id": case.id,
                    "workspaceDir": str(root / "workspace"),
                    "managedHooksDir": str(root / "state" / "hooks"),
                    "bundledHooksDir": str(root / "bundled"),
                    "config": case.openclaw_config(root),
                    "env": {
                        **case.env,
                        "OPENCLAW_STATE_DIR": str(root / "state"),
                        "HOME": str(root),
                    },
                }
            )
        answers = reference.ask(requests, base)
        yield base, {answer["id"]: answer for answer in answers}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def gatewayd_build(
    root: Path, case: Case, monkeypatch: pytest.MonkeyPatch, *, inline: bool = False
) -> LoadResult:
    """gatewayd's load of the case, as ``hooks check`` does it: OpenClaw's config read through
    ``agent.configFile``, or (``inline``) its sections written in gatewayd.yaml itself."""
    config = case.openclaw_config(root)
    ours: dict[str, Any] = {"workspace": {"dir": str(root / "workspace")}}
    if inline:
        ours.update({k: v for k, v in config.items() if k in OPENCLAW_SECTIONS})
    else:
        (root / "openclaw.json").write_text(json.dumps(config), encoding="utf-8")
        ours["agent"] = {"configFile": str(root / "openclaw.json")}
    if "hooks" in config:
        ours["hooks"] = config["hooks"]
    (root / "gatewayd.yaml").write_text(json.dumps(ours), encoding="utf-8")
    monkeypatch.setenv("ELIZA_STATE_DIR", str(root / "state"))
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(gatewayd.paths, "bundled_hooks_dir", lambda: root / "bundled")
    spec = load_config(root / "gatewayd.yaml").load_spec()
    loader = HookLoader()
    try:
        result = loader.build(spec)
        check_node_hooks(result)
    finally:
        loader.close()
    return result


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_gatewayd_decides_as_openclaw(
    case: Case,
    corpus: tuple[Path, dict[str, dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, answers = corpus
    root = case_root(base, case)
    answer = answers[case.id]
    assert answer["error"] is None, f"OpenClaw's loader raised on {case.id}: {answer['error']}"
    result = gatewayd_build(root, case, monkeypatch)
    ours, _ = gatewayd_verdicts(result.records)
    differences = disagreements(openclaw_verdicts(answer), ours, str(root))
    listed = deliberate_ids()
    unknown = [d for d in case.deliberate if d not in listed]
    assert not unknown, f"{case.id} declares differences docs/design.md does not list: {unknown}"
    if case.deliberate:
        assert differences, (
            f"{case.id} declares {case.deliberate} but gatewayd now decides as OpenClaw does: "
            "drop the declaration (and the row in docs/design.md if no case shows it)"
        )
        return
    assert not differences, "\n".join(
        [f"gatewayd disagrees with OpenClaw on {case.id}:", *differences]
    )


INLINE = [case for case in CASES if set(case.config) & OPENCLAW_SECTIONS]
"""The cases whose config has OpenClaw sections besides ``hooks`` (``tools``, ``browser``)."""


@pytest.mark.parametrize("case", INLINE, ids=[case.id for case in INLINE])
def test_openclaw_keys_written_in_gatewayd_yaml_decide_as_in_openclaws_config(
    case: Case,
    corpus: tuple[Path, dict[str, dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An OpenClaw user writes ``browser: {enabled: false}`` or ``tools: ...`` in gatewayd.yaml
    (no agent.configFile): accepted, and hooks' requirements judged on it as OpenClaw does."""
    base, answers = corpus
    root = case_root(base, case)
    result = gatewayd_build(root, case, monkeypatch, inline=True)
    ours, _ = gatewayd_verdicts(result.records)
    differences = disagreements(openclaw_verdicts(answers[case.id]), ours, str(root))
    if not case.deliberate:
        assert not differences, "\n".join([f"{case.id} with the keys inline:", *differences])


def test_every_deliberate_difference_is_shown_by_a_case() -> None:
    """Each row of docs/design.md's table is shown by at least one case."""
    shown = {d for case in CASES for d in case.deliberate}
    assert deliberate_ids() <= shown | NOT_A_DISCOVERY_CASE, deliberate_ids() - shown


NOT_A_DISCOVERY_CASE: set[str] = {"message-direction"}
"""Deliberate differences outside discovery and eligibility (events, handlers' languages), shown
by the tests of those parts instead."""
