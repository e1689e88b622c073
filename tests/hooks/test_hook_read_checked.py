"""The importer's own paths: read_checked() says what check_file() says, and the modules it
builds carry what importlib's module_from_spec() would give them."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from gatewayd.hooks.importer import UnsafePathError, check_file, read_checked


def _error(fn: object) -> str:
    with pytest.raises(UnsafePathError) as info:
        fn()  # type: ignore[operator]
    return str(info.value)


@pytest.fixture
def hook(tmp_path: Path) -> Path:
    directory = tmp_path / "root" / "hook"
    directory.mkdir(parents=True)
    os.chmod(tmp_path / "root", 0o755)
    os.chmod(directory, 0o755)
    return directory


def test_reads_a_plain_file_and_a_symlink_inside(hook: Path) -> None:
    (hook / "handler.py").write_bytes(b"x = 1\n")
    (hook / "lib").mkdir()
    (hook / "lib" / "util.py").write_bytes(b"y = 2\n")
    (hook / "alias.py").symlink_to(hook / "handler.py")
    for name, data in (
        ("handler.py", b"x = 1\n"),
        ("lib/util.py", b"y = 2\n"),
        ("alias.py", b"x = 1\n"),
    ):
        path = str(hook / name)
        assert read_checked(path, str(hook), allow_links=False) == data
        check_file(path, str(hook), allow_links=False)


def _fifo(hook: Path) -> None:
    os.mkfifo(hook / "handler.py")


def _directory(hook: Path) -> None:
    (hook / "handler.py").mkdir()


def _hard_link(hook: Path) -> None:
    (hook.parent / "elsewhere.py").write_bytes(b"x = 1\n")
    os.link(hook.parent / "elsewhere.py", hook / "handler.py")


def _writable(hook: Path) -> None:
    (hook / "handler.py").write_bytes(b"x = 1\n")
    os.chmod(hook / "handler.py", 0o666)


def _escaping_link(hook: Path) -> None:
    (hook.parent / "evil.py").write_bytes(b"x = 1\n")
    (hook / "handler.py").symlink_to(hook.parent / "evil.py")


def _missing(hook: Path) -> None:
    pass


def _loose_directory(hook: Path) -> None:
    (hook / "handler.py").write_bytes(b"x = 1\n")
    os.chmod(hook, 0o777)


@pytest.mark.parametrize(
    "make",
    [_fifo, _directory, _hard_link, _writable, _escaping_link, _missing, _loose_directory],
)
def test_refuses_what_check_file_refuses_with_its_words(hook: Path, make: object) -> None:
    make(hook)  # type: ignore[operator]
    path = str(hook / "handler.py")
    expected = _error(lambda: check_file(path, str(hook), allow_links=False))
    assert _error(lambda: read_checked(path, str(hook), allow_links=False)) == expected
    assert _error(lambda: read_checked(path, str(hook), allow_links=False, safe_dirs=set())) == (
        expected
    )


def test_hook_modules_carry_what_module_from_spec_gives(hook: Path) -> None:
    from gatewayd.hooks.importer import HookImporter, package_name

    (hook / "handler.py").write_text("from .helper import X\n", encoding="utf-8")
    (hook / "helper.py").write_text("X = 1\n", encoding="utf-8")
    importer = HookImporter()
    importer.install()
    try:
        name = package_name(importer.root, "hook", str(hook))
        handler = importer.load(name, str(hook), "handler.py", allow_links=False)
        helper = sys.modules[f"{name}.helper"]
        for module in (handler, helper, sys.modules[name]):
            spec = module.__spec__
            assert spec is not None
            fresh = importlib.util.module_from_spec(spec)
            for attr in ("__name__", "__file__", "__cached__", "__package__", "__path__"):
                assert getattr(module, attr, None) == getattr(fresh, attr, None), attr
            assert module.__loader__ is importer
        for module in (handler, helper):  # set by the importer, not computed by the spec
            assert module.__cached__ == importlib.util.cache_from_source(module.__file__ or "")
    finally:
        importer.close()
