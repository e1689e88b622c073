"""``gatewayd hooks install`` and ``uninstall`` (copies): directories, packs, archives, the
record, ``--force``, and everything that must be refused with nothing written.

Real directories and archives built under ``tmp_path``, the real CLI in a subprocess, and the
installed hooks loaded by ``gatewayd hooks list --json`` (the daemon's own loader).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.support.archives import make_tar, make_zip, tree, write_tree
from tests.support.cli import RunCli, ok, refused
from tests.support.hooks import hook_files, hook_md

REPO = Path(__file__).resolve().parents[2]


def records(state: Path) -> dict[str, Any]:
    data = json.loads((state / "hooks" / ".installs.json").read_text())
    assert data["version"] == 1
    hooks: dict[str, Any] = data["hooks"]
    return hooks


def expected_hash(directory: Path) -> str:
    """The documented hash, computed independently: per file in sorted relative-path order,
    the path, NUL, the length as 8 bytes big-endian, the bytes."""
    digest = hashlib.sha256()
    files = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
    for rel in files:
        data = (directory / rel).read_bytes()
        digest.update(rel.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def loaded(run_cli: RunCli) -> dict[str, dict[str, Any]]:
    hooks = json.loads(ok(run_cli("hooks", "list", "--json")).stdout)["hooks"]
    return {h["name"]: h for h in hooks if h["source"] != "bundled"}


def visible(state: Path) -> list[str]:
    """What the managed root holds besides the install bookkeeping."""
    root = state / "hooks"
    if not root.exists():
        return []
    return sorted(n for n in os.listdir(root) if n not in (".installs.json", ".installs.lock"))


# -- copying a directory, a pack, an archive -------------------------------------------------


def test_install_a_hook_directory(run_cli: RunCli, state_dir: Path, tmp_path: Path) -> None:
    src = write_tree(
        tmp_path / "src" / "hello",
        {**hook_files("hello"), "lib/phrases.py": "HI = 'hi'\n", "__pycache__/x.pyc": "junk"},
    )
    out = ok(run_cli("hooks", "install", str(src)))
    target = state_dir / "hooks" / "hello"
    assert f"installed hello: {target}" in out.stdout
    assert visible(state_dir) == ["hello"]  # no staging directory left behind
    assert sorted(tree(target)) == ["HOOK.md", "handler.py", "lib", "lib/phrases.py"]
    assert (target / "handler.py").read_bytes() == (src / "handler.py").read_bytes()

    record = records(state_dir)["hello"]
    assert record["kind"] == "copy"
    assert record["source"] == str(src)
    assert record["member"] == "."
    assert record["path"] == str(target)
    assert record["sha256"] == expected_hash(target)
    assert record["sha256"][:12] in out.stdout
    assert record["installedAt"].endswith("Z")
    assert loaded(run_cli)["hello"]["status"] == "ready"


def test_install_a_pack_directory_with_hooks_yaml(run_cli: RunCli, state_dir: Path) -> None:
    """The guide's examples are a pack: docs/examples/hooks.yaml lists them all."""
    examples = REPO / "docs" / "examples"
    listed = (examples / "hooks.yaml").read_text()
    names = sorted(p.name for p in examples.iterdir() if (p / "HOOK.md").is_file())
    assert all(name in listed for name in names)
    ok(run_cli("hooks", "install", str(examples)))
    assert visible(state_dir) == names
    recs = records(state_dir)
    assert sorted(recs) == names
    assert {r["member"] for r in recs.values()} == set(names)
    for name in names:
        assert recs[name]["sha256"] == expected_hash(examples / name)
        mode = (state_dir / "hooks" / name).stat().st_mode
        assert stat.S_IMODE(mode) == 0o755
    statuses = {name: h["status"] for name, h in loaded(run_cli).items()}
    assert statuses["sh-ping"] == statuses["hello"] == "ready"


def test_install_a_pack_from_pyproject(run_cli: RunCli, state_dir: Path, tmp_path: Path) -> None:
    pack = write_tree(
        tmp_path / "pack",
        {
            "pyproject.toml": '[project]\nname = "p"\n\n[tool.eliza]\nhooks = ["hooks/a", "b"]\n',
            **{f"hooks/a/{k}": v for k, v in hook_files("alpha").items()},
            **{f"b/{k}": v for k, v in hook_files("beta").items()},
            **{f"hooks/unlisted/{k}": v for k, v in hook_files("unlisted").items()},
        },
    )
    out = ok(run_cli("hooks", "install", str(pack))).stdout
    assert "installed alpha" in out and "installed beta" in out
    assert visible(state_dir) == ["alpha", "beta"]  # installed under their names
    assert {n: r["member"] for n, r in records(state_dir).items()} == {
        "alpha": "hooks/a",
        "beta": "b",
    }


def test_install_tar_gz_with_a_top_level_directory(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    files = {
        "shouty-1.0/hooks.yaml": "hooks: [shout, py]\n",
        "shouty-1.0/shout/HOOK.md": hook_md("shout", ["command:shout"]),
        "shouty-1.0/shout/handler": "#!/bin/sh\necho SHOUT\n",
        **{f"shouty-1.0/py/{k}": v for k, v in hook_files("py").items()},
    }
    archive = make_tar(tmp_path / "shouty-1.0.tgz", files, executable=["shouty-1.0/shout/handler"])
    ok(run_cli("hooks", "install", str(archive)))
    handler = state_dir / "hooks" / "shout" / "handler"
    assert stat.S_IMODE(handler.stat().st_mode) == 0o755  # a command hook stays executable
    recs = records(state_dir)
    assert recs["shout"]["source"] == str(archive)
    assert recs["shout"]["member"] == "shouty-1.0/shout"
    hooks = loaded(run_cli)
    assert (hooks["shout"]["status"], hooks["py"]["status"]) == ("ready", "ready")


def test_install_zip_keeps_the_executable_bit(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    archive = make_zip(
        tmp_path / "tool.zip",
        {"HOOK.md": hook_md("tool", ["command:tool"]), "handler": "#!/bin/sh\necho tool\n"},
        executable=["handler"],
    )
    ok(run_cli("hooks", "install", str(archive)))
    hook_dir = state_dir / "hooks" / "tool"
    assert stat.S_IMODE((hook_dir / "handler").stat().st_mode) == 0o755
    assert stat.S_IMODE((hook_dir / "HOOK.md").stat().st_mode) == 0o644
    assert records(state_dir)["tool"]["sha256"] == expected_hash(hook_dir)
    assert loaded(run_cli)["tool"]["status"] == "ready"


# -- validation before anything is written ----------------------------------------------------


def test_every_problem_is_reported_and_nothing_is_written(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    pack = write_tree(
        tmp_path / "pack",
        {
            "hooks.yaml": "hooks: [good, bad-yaml, no-handler, Bad, syntax, dup1, dup2, ../x]\n",
            **{f"good/{k}": v for k, v in hook_files("good").items()},
            "bad-yaml/HOOK.md": "---\nname: [unclosed\n---\n",
            "bad-yaml/handler.py": "async def handler(event): pass\n",
            "no-handler/HOOK.md": hook_md("no-handler"),
            "Bad/HOOK.md": hook_md("Bad.Name"),
            "Bad/handler.py": "async def handler(event): pass\n",
            "syntax/HOOK.md": hook_md("syntax"),
            "syntax/handler.py": "async def handler(event)\n    pass\n",
            **{f"dup1/{k}": v for k, v in hook_files("twin").items()},
            **{f"dup2/{k}": v for k, v in hook_files("twin").items()},
        },
    )
    before = tree(state_dir)
    err = refused(
        run_cli("hooks", "install", str(pack)),
        "problems (nothing was installed)",
        f"{pack}/bad-yaml/HOOK.md:",
        f"no handler in {pack}/no-handler",
        "invalid hook name 'Bad.Name'",
        f"{pack}/syntax/handler.py:1: SyntaxError",
        "hook name 'twin' is also used by",
        "'../x' must be a relative path inside the pack",
    )
    assert "good" not in err
    assert tree(state_dir) == before  # not even <state>/hooks was created


def test_symlinks_and_fifos_in_a_hook_directory_are_refused(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    src = write_tree(tmp_path / "linky", hook_files("linky"))
    (tmp_path / "secret.txt").write_text("s3cret")
    os.symlink(tmp_path / "secret.txt", src / "data.txt")
    os.mkfifo(src / "pipe")
    refused(
        run_cli("hooks", "install", str(src)),
        f"{src}/data.txt: is a symlink",
        f"{src}/pipe: is not a regular file",
    )
    assert not (state_dir / "hooks").exists()


def test_sources_that_are_neither_hooks_nor_packs(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(run_cli("hooks", "install", str(empty)), "neither a hook (no HOOK.md) nor a hook pack")
    refused(run_cli("hooks", "install", str(tmp_path / "missing")), "no such file or directory")
    (tmp_path / "notes.txt").write_text("x")
    refused(run_cli("hooks", "install", str(tmp_path / "notes.txt")), "not a hook directory")
    (tmp_path / "broken.tgz").write_bytes(b"not gzip at all")
    refused(run_cli("hooks", "install", str(tmp_path / "broken.tgz")), "not a readable")
    write_tree(
        tmp_path / "p",
        {"pyproject.toml": "[tool.eliza]\nhooks = [", "hooks.yaml": "hooks: a\n"},
    )
    refused(run_cli("hooks", "install", str(tmp_path / "p")), "not valid TOML", "must be a list")
    assert not (state_dir / "hooks").exists()


# -- conflicts, --force, records ---------------------------------------------------------------


def test_existing_name_needs_force_which_replaces_atomically(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    v1 = write_tree(tmp_path / "v1" / "hello", {**hook_files("hello"), "old.txt": "v1 only"})
    v2 = write_tree(tmp_path / "v2" / "hello", hook_files("hello", ["command:hi"]))
    ok(run_cli("hooks", "install", str(v1)))
    first = records(state_dir)["hello"]
    before = tree(state_dir / "hooks")

    refused(run_cli("hooks", "install", str(v2)), "already exists", "--force replaces it")
    assert tree(state_dir / "hooks") == before

    out = ok(run_cli("hooks", "install", str(v2), "--force")).stdout
    assert "replaced" in out and first["installedAt"] in out
    target = state_dir / "hooks" / "hello"
    assert sorted(os.listdir(target)) == ["HOOK.md", "handler.py"]  # old.txt is gone
    assert visible(state_dir) == ["hello"]  # the old copy and the staging dir are deleted
    second = records(state_dir)["hello"]
    assert second["source"] == str(v2)
    assert second["sha256"] == expected_hash(target) != first["sha256"]
    assert loaded(run_cli)["hello"]["events"] == ["command:hi"]


def test_force_also_replaces_a_hand_made_directory(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    write_tree(state_dir / "hooks" / "mine", hook_files("mine"))
    src = write_tree(tmp_path / "mine", hook_files("mine", ["session:start"]))
    refused(run_cli("hooks", "install", str(src)), "not installed by gatewayd hooks install")
    ok(run_cli("hooks", "install", str(src), "--force"))
    assert records(state_dir)["mine"]["source"] == str(src)


@pytest.mark.parametrize("damage", ["not json", "fifo"])
def test_a_damaged_record_file_stops_install(
    run_cli: RunCli, state_dir: Path, tmp_path: Path, damage: str
) -> None:
    (state_dir / "hooks").mkdir()
    path = state_dir / "hooks" / ".installs.json"
    if damage == "fifo":
        os.mkfifo(path)  # read as a file, it would block install (and uninstall) for ever
    else:
        path.write_text("{not json")
    src = write_tree(tmp_path / "x", hook_files("x"))
    message = refused(run_cli("hooks", "install", str(src)), "cannot read the install records")
    if damage == "fifo":
        assert "a FIFO, device or socket, not a regular file" in message
    assert visible(state_dir) == []


# -- uninstall ------------------------------------------------------------------------------------


def test_uninstall_removes_the_copy_and_its_record(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    for name in ("one", "two"):
        ok(run_cli("hooks", "install", str(write_tree(tmp_path / name, hook_files(name)))))
    out = ok(run_cli("hooks", "uninstall", "one")).stdout
    assert f"uninstalled one (copy): deleted {state_dir / 'hooks' / 'one'}" in out
    assert visible(state_dir) == ["two"]
    assert sorted(records(state_dir)) == ["two"]
    assert "one" not in loaded(run_cli)


def test_uninstall_refuses_what_install_did_not_create(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    write_tree(state_dir / "hooks" / "handmade", hook_files("handmade"))
    refused(
        run_cli("hooks", "uninstall", "handmade"), "was not installed by gatewayd hooks install"
    )
    refused(
        run_cli("hooks", "uninstall", "boot-md"), "is the bundled hook", "hooks disable boot-md"
    )
    refused(run_cli("hooks", "uninstall", "nothing-here"), "no installed hook of that name")
    assert visible(state_dir) == ["handmade"]


def test_uninstall_refuses_a_modified_copy_without_force(
    run_cli: RunCli, state_dir: Path, tmp_path: Path
) -> None:
    ok(run_cli("hooks", "install", str(write_tree(tmp_path / "edited", hook_files("edited")))))
    handler = state_dir / "hooks" / "edited" / "handler.py"
    handler.write_text(handler.read_text() + "# a local edit\n")
    refused(run_cli("hooks", "uninstall", "edited"), "changed since it was installed", "--force")
    assert handler.exists()
    ok(run_cli("hooks", "uninstall", "edited", "--force"))
    assert visible(state_dir) == [] and records(state_dir) == {}

    ok(run_cli("hooks", "install", str(tmp_path / "edited")))
    (state_dir / "hooks" / "edited" / "link").symlink_to("/etc/hostname")  # not install's doing
    refused(run_cli("hooks", "uninstall", "edited"), "changed since it was installed")


def test_reinstall_after_uninstall(run_cli: RunCli, state_dir: Path, tmp_path: Path) -> None:
    src = write_tree(tmp_path / "again", hook_files("again"))
    ok(run_cli("hooks", "install", str(src)))
    ok(run_cli("hooks", "uninstall", "again"))
    ok(run_cli("hooks", "install", str(src)))
    assert records(state_dir)["again"]["kind"] == "copy"
