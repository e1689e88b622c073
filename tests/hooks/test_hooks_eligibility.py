"""Eligibility: each check, its exact reason string, ``always`` versus ``os``, and ``missing``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks.eligibility import (
    UNDEFINED,
    EligibilityChecker,
    current_platform,
    resolve_config_path,
)
from gatewayd.hooks.metadata import parse_manifest
from gatewayd.hooks.spec import EntrySpec
from tests.hooks.hooks_support import Build, Roots
from tests.support.hooks import WriteHook


def manifest(**eliza: Any) -> Any:
    meta = json.dumps({"eliza": {"events": ["command"], **eliza}})
    text = f"---\nname: my-hook\nmetadata: {meta}\n---\n"
    return parse_manifest(text, Path("/h/my-hook/HOOK.md"))


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH dir with an executable ``tool-a`` and a non-executable ``tool-x``."""
    d = tmp_path / "bin"
    d.mkdir()
    (d / "tool-a").write_text("#!/bin/sh\n")
    (d / "tool-a").chmod(0o755)
    (d / "tool-x").write_text("#!/bin/sh\n")
    (d / "tool-x").chmod(0o644)
    return d


def checker(
    bin_dir: Path, effective: dict[str, Any] | None = None, platform: str = "linux", **env: str
) -> EligibilityChecker:
    return EligibilityChecker(
        effective or {}, environ={"PATH": str(bin_dir), **env}, platform=platform
    )


def test_platform_names() -> None:
    assert current_platform("linux") == "linux"
    assert current_platform("darwin") == "darwin"
    assert current_platform("win32") == "win32"
    assert current_platform("cygwin") == "win32"


def test_no_requirements_is_eligible(bin_dir: Path) -> None:
    result = checker(bin_dir).check(manifest(), EntrySpec())
    assert (result.eligible, result.reasons) == (True, [])
    assert result.missing == {"bins": (), "anyBins": (), "env": (), "config": (), "os": ()}


def test_os(bin_dir: Path) -> None:
    result = checker(bin_dir, platform="linux").check(manifest(os=["darwin"]), EntrySpec())
    assert result.reasons == ["OS: requires darwin, current: linux"]
    assert result.missing["os"] == ["darwin"]
    assert checker(bin_dir, platform="darwin").check(manifest(os=["darwin"]), EntrySpec()).eligible


def test_bins_must_be_on_path_and_executable(bin_dir: Path) -> None:
    result = checker(bin_dir).check(
        manifest(requires={"bins": ["tool-a", "tool-x", "git-nowhere"]}), EntrySpec()
    )
    assert result.reasons == ["Binary missing: tool-x", "Binary missing: git-nowhere"]
    assert result.missing["bins"] == ["tool-x", "git-nowhere"]


def test_any_bins_needs_one(bin_dir: Path) -> None:
    none = checker(bin_dir).check(manifest(requires={"anyBins": ["bun", "npm"]}), EntrySpec())
    assert none.reasons == ["None of: bun, npm"]
    assert none.missing["anyBins"] == ["bun", "npm"]
    one = checker(bin_dir).check(manifest(requires={"anyBins": ["bun", "tool-a"]}), EntrySpec())
    assert one.eligible


def test_env_from_process_or_entry(bin_dir: Path) -> None:
    m = manifest(requires={"env": ["GITHUB_TOKEN", "OTHER"]})
    result = checker(bin_dir, GITHUB_TOKEN="", OTHER="x").check(m, EntrySpec())
    assert result.reasons == ["Env missing: GITHUB_TOKEN"]  # empty counts as missing
    assert result.missing["env"] == ["GITHUB_TOKEN"]
    entry = EntrySpec(env={"GITHUB_TOKEN": "t0k"})
    assert checker(bin_dir, OTHER="x").check(m, entry).eligible


@pytest.mark.parametrize("value", [0, "", "   ", False, None])
def test_config_falsy_values_fail(bin_dir: Path, value: Any) -> None:
    effective = {"hooks": {"entries": {"my-hook": {"apiKey": value}}}}
    result = checker(bin_dir, effective).check(
        manifest(requires={"config": ["hooks.entries.my-hook.apiKey"]}), EntrySpec()
    )
    assert result.reasons == ["Config missing: hooks.entries.my-hook.apiKey"]
    assert result.missing["config"] == ["hooks.entries.my-hook.apiKey"]


@pytest.mark.parametrize("value", [1, "k", "0", "false", True, ["x"], [], {}])
def test_config_truthy_values_pass(bin_dir: Path, value: Any) -> None:
    effective = {"hooks": {"entries": {"my-hook": {"apiKey": value}}}}
    assert (
        checker(bin_dir, effective)
        .check(manifest(requires={"config": ["hooks.entries.my-hook.apiKey"]}), EntrySpec())
        .eligible
    )


def test_config_missing_key(bin_dir: Path) -> None:
    result = checker(bin_dir, {"hooks": {}}).check(
        manifest(requires={"config": ["hooks.entries.my-hook.apiKey", "workspace"]}), EntrySpec()
    )
    assert result.reasons == [
        "Config missing: hooks.entries.my-hook.apiKey",
        "Config missing: workspace",
    ]


def test_config_paths_split_on_every_dot_as_openclaw_splits_them() -> None:
    data = {"hooks": {"entries": {"a.b": {"k": 1}, "a": {"b": {"k": 2}}}}, "l": ["x"]}
    assert resolve_config_path(data, ["hooks", "entries", "a", "b", "k"]) == 2
    assert resolve_config_path(data, ["hooks", "nope"]) is UNDEFINED
    assert resolve_config_path({"a": 3}, ["a", "b"]) is UNDEFINED
    assert resolve_config_path(data, ["l", "0"]) == "x"
    assert resolve_config_path(data, ["l", "length"]) == 1
    assert resolve_config_path(data, ["hooks", "constructor"]) is UNDEFINED


def test_always_skips_requires_but_not_os(bin_dir: Path) -> None:
    m = manifest(always=True, os=["win32"], requires={"bins": ["nope"], "env": ["NOPE"]})
    result = checker(bin_dir, platform="linux").check(m, EntrySpec())
    assert result.reasons == ["OS: requires win32, current: linux"]
    m2 = manifest(always=True, requires={"bins": ["nope"], "env": ["NOPE"], "config": ["x"]})
    assert checker(bin_dir).check(m2, EntrySpec()).eligible


def test_every_failure_is_listed_in_order(bin_dir: Path) -> None:
    m = manifest(
        os=["darwin"],
        requires={"bins": ["git-x"], "anyBins": ["a-x", "b-x"], "env": ["E_X"], "config": ["c.x"]},
    )
    result = checker(bin_dir).check(m, EntrySpec())
    assert result.reasons == [
        "OS: requires darwin, current: linux",
        "Binary missing: git-x",
        "None of: a-x, b-x",
        "Env missing: E_X",
        "Config missing: c.x (not a gatewayd key; set agent.configFile to the agent's config "
        "file, e.g. ~/.openclaw/openclaw.json, to read it from there)",
    ]
    assert result.missing == {
        "bins": ["git-x"],
        "anyBins": ["a-x", "b-x"],
        "env": ["E_X"],
        "config": ["c.x"],
        "os": ["darwin"],
    }


def test_loader_uses_the_effective_config_and_entry_env(
    roots: Roots, build: Build, write_hook: WriteHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_HOOK_TOKEN", raising=False)
    write_hook(
        roots.managed,
        "my-hook",
        meta={"requires": {"config": ["hooks.entries.my-hook.apiKey"], "env": ["MY_HOOK_TOKEN"]}},
    )
    (record,) = build().records
    assert record.status == "ineligible"
    assert record.eligible is False
    assert record.reasons == [
        "Env missing: MY_HOOK_TOKEN",
        "Config missing: hooks.entries.my-hook.apiKey",
    ]
    result = build(
        {"hooks": {"entries": {"my-hook": {"apiKey": "k", "env": {"MY_HOOK_TOKEN": "t"}}}}}
    )
    assert [r.status for r in result.records] == ["ready"]
    assert (result.eligible, result.registered) == (1, 1)


def test_loader_checks_os_for_this_machine(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    other = "win32" if current_platform() != "win32" else "linux"
    write_hook(roots.managed, "elsewhere", meta={"os": [other], "always": True})
    (record,) = build().records
    assert record.status == "ineligible"
    assert record.reasons == [f"OS: requires {other}, current: {current_platform()}"]
    assert record.path == str(roots.managed / "elsewhere")
