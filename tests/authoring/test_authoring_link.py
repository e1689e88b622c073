"""``gatewayd hooks install --link``: a directory under the state dir listed in
``hooks.load.extraDirs`` instead of copied, what is refused, and ``uninstall`` of a link.

The config file is edited for real (comments kept) and the result is loaded by
``gatewayd hooks list --json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.support.archives import make_tar, tree, write_tree
from tests.support.cli import RunCli, ok, refused
from tests.support.hooks import hook_files

CONFIG = """\
# my gateway
hooks:
  entries:
    command-logger: {maxBytes: 1000}   # small logs
"""


def extra_dirs(state: Path) -> list[str]:
    data = yaml.safe_load((state / "gatewayd.yaml").read_text()) or {}
    dirs: list[str] = data.get("hooks", {}).get("load", {}).get("extraDirs", [])
    return dirs


def records(state: Path) -> dict[str, Any]:
    hooks: dict[str, Any] = json.loads((state / "hooks" / ".installs.json").read_text())["hooks"]
    return hooks


def loaded(run_cli: RunCli) -> dict[str, dict[str, Any]]:
    hooks = json.loads(ok(run_cli("hooks", "list", "--json")).stdout)["hooks"]
    return {h["name"]: h for h in hooks if h["source"] != "bundled"}


def test_link_lists_the_parent_in_extra_dirs_and_uninstall_unlists_it(
    run_cli: RunCli, state_dir: Path
) -> None:
    (state_dir / "gatewayd.yaml").write_text(CONFIG)
    src = write_tree(state_dir / "dev" / "live", hook_files("live"))
    out = ok(run_cli("hooks", "install", str(src), "--link")).stdout
    assert f"linked live: {src}" in out
    assert extra_dirs(state_dir) == [str(state_dir / "dev")]
    text = (state_dir / "gatewayd.yaml").read_text()
    assert text.startswith("# my gateway\n") and "# small logs" in text
    assert not (state_dir / "hooks" / "live").exists()  # nothing copied

    record = records(state_dir)["live"]
    assert (record["kind"], record["path"], record["extraDir"]) == (
        "link",
        str(src),
        str(state_dir / "dev"),
    )
    hook = loaded(run_cli)["live"]
    assert (hook["source"], hook["status"], hook["path"]) == ("extra", "ready", str(src))

    refused(run_cli("hooks", "install", str(src), "--link"), "already linked", "--force")
    ok(run_cli("hooks", "install", str(src), "--link", "--force"))
    assert extra_dirs(state_dir) == [str(state_dir / "dev")]

    out = ok(run_cli("hooks", "uninstall", "live")).stdout
    assert f"removed {state_dir / 'dev'} from hooks.load.extraDirs" in out
    assert extra_dirs(state_dir) == []
    assert "# small logs" in (state_dir / "gatewayd.yaml").read_text()
    assert (src / "HOOK.md").is_file()  # the linked directory itself is the user's: kept
    assert records(state_dir) == {}
    assert "live" not in loaded(run_cli)


def test_link_refuses_what_it_cannot_link_and_writes_nothing(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    (state_dir / "gatewayd.yaml").write_text(CONFIG)
    outside = write_tree(tmp_path / "outside" / "far", hook_files("far"))
    crowded = write_tree(state_dir / "dev" / "one", hook_files("one"))
    write_tree(state_dir / "dev" / "two", hook_files("two"))
    managed = write_tree(state_dir / "hooks" / "here", hook_files("here"))
    archive = make_tar(tmp_path / "a.tgz", hook_files("arch"))
    escape = state_dir / "escape"
    escape.symlink_to(tmp_path / "outside")
    top = write_tree(state_dir / "top", hook_files("top"))  # its parent is the state dir
    before = tree(state_dir)

    refused(run_cli("hooks", "install", str(outside), "--link"), "outside the state dir")
    refused(run_cli("hooks", "install", str(escape / "far"), "--link"), "outside the state dir")
    refused(
        run_cli("hooks", "install", str(crowded), "--link"),
        f"adds its parent {state_dir / 'dev'} to hooks.load.extraDirs, which would also load two",
    )
    refused(run_cli("hooks", "install", str(managed), "--link"), "already in the hook root")
    refused(run_cli("hooks", "install", str(top), "--link"), "a directory of its own")
    refused(run_cli("hooks", "install", str(archive), "--link"), "--link needs a directory")
    assert tree(state_dir) == before


def test_link_and_copy_do_not_replace_each_other(run_cli: RunCli, state_dir: Path) -> None:
    src = write_tree(state_dir / "dev" / "both", hook_files("both"))
    ok(run_cli("hooks", "install", str(src)))  # a copy
    refused(run_cli("hooks", "install", str(src), "--link", "--force"), "installed as a copy")
    ok(run_cli("hooks", "uninstall", "both"))
    ok(run_cli("hooks", "install", str(src), "--link"))
    refused(run_cli("hooks", "install", str(src), "--force"), "installed as a link")


def test_linked_pack_shares_one_entry_and_is_uninstalled_together(
    run_cli: RunCli, state_dir: Path
) -> None:
    pack = write_tree(
        state_dir / "packs" / "duo",
        {
            "hooks.yaml": "hooks: [hooks/a, hooks/b]\n",
            **{f"hooks/a/{k}": v for k, v in hook_files("alpha").items()},
            **{f"hooks/b/{k}": v for k, v in hook_files("beta").items()},
        },
    )
    ok(run_cli("hooks", "install", str(pack), "--link"))
    assert extra_dirs(state_dir) == [str(pack / "hooks")]
    assert {loaded(run_cli)[n]["status"] for n in ("alpha", "beta")} == {"ready"}
    refused(
        run_cli("hooks", "uninstall", "alpha"),
        "together with beta",
        "gatewayd hooks uninstall alpha beta",
    )
    assert extra_dirs(state_dir) == [str(pack / "hooks")]
    out = ok(run_cli("hooks", "uninstall", "alpha", "beta")).stdout
    assert "removed" in out and "was removed from hooks.load.extraDirs with it" in out
    assert extra_dirs(state_dir) == []


def test_an_entry_that_was_already_listed_stays(run_cli: RunCli, state_dir: Path) -> None:
    (state_dir / "gatewayd.yaml").write_text("hooks:\n  load:\n    extraDirs: [dev]\n")
    src = write_tree(state_dir / "dev" / "mine", hook_files("mine"))
    write_tree(state_dir / "dev" / "other", hook_files("other"))  # already loaded anyway
    ok(run_cli("hooks", "install", str(src), "--link"))
    assert records(state_dir)["mine"]["extraDir"] is None
    out = ok(run_cli("hooks", "uninstall", "mine")).stdout
    assert "listed in hooks.load.extraDirs before; left there" in out
    assert extra_dirs(state_dir) == ["dev"]
