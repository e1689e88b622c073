"""docs/design.md agrees with the code wherever a program can tell.

* Section 3 (Wire protocol): the op table has one row per op a running daemon accepts (asked
  of a real ``gatewayd run``: the ``unknown_op`` error lists them), and no other rows.
* Section 4 (Command line): one row per command the argparse tree knows (``gatewayd KEY ...``),
  listing every flag of that command; no row for a command that does not exist.
* Section 5 (Config keys): one row per key of the config models (``gatewayd.config``), with its
  default where the default is a plain value; no row for a key that does not exist.
* Section 6 (Author API): one row per name ``gatewayd.hooks`` exports, and no other.
* Section 1 (the layers of section 1.4): every module of the package is on one layer line, no
  import goes up a layer, and no module imports itself through others (no import circle); no
  class is over :data:`MAX_CLASS_LINES` lines.

Each failure says what to add (or remove) where, so whoever adds an op, a command, a flag or a
key learns here to document it.
"""

from __future__ import annotations

import ast
import json
import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import gatewayd.hooks
from gatewayd.cli.parser import build_parser, command_parsers, is_group
from gatewayd.config import Settings
from tests.support.daemon import Daemon
from tests.support.fixtures import StartDaemon

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "gatewayd"
DOC = REPO / "docs" / "design.md"
GLOBAL_FLAGS = {"-h", "--help", "--config"}
"""Flags every command has; section 4's introduction documents them once."""


def section(title: str) -> str:
    """The text of the ``## N. <title>`` section of design.md."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## \d+\. {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/design.md has no section '## N. {title}'"
    return match.group(1)


def first_cells(text: str) -> dict[str, str]:
    """Table rows whose first cell is code: that code -> the whole row."""
    rows = {}
    for line in text.splitlines():
        if match := re.match(r"\|\s*`([^`]+)`", line):
            rows[match.group(1)] = line
    return rows


# -- section 3: control ops ------------------------------------------------------------------


def daemon_ops(daemon: Daemon) -> set[str]:
    """The ops a real ``gatewayd run`` accepts, from its ``unknown_op`` error message."""
    with daemon.control() as control:
        reply = control.request("no-such-op")
    assert reply["error"]["code"] == "unknown_op", reply
    known = reply["error"]["message"].rpartition("known: ")[2]
    return {op.strip() for op in known.split(",")}


def test_every_control_op_is_documented(start_daemon: StartDaemon) -> None:
    daemon = start_daemon({"hooks": {"enabled": False}})
    ops = daemon_ops(daemon)
    assert daemon.stop() == 0
    rows = first_cells(section("Wire protocol (the control socket)"))
    documented = {cell for cell, row in rows.items() if re.fullmatch(r"[a-z_]+", cell)}
    documented -= {"bad_json", "bad_request", "line_too_long", "unknown_op", "unknown_event"}
    documented -= {"reload_refused", "shutting_down", "forbidden", "internal"}
    documented -= {"busy", "idle_timeout", "unsupported_protocol", "hook_loop"}
    documented -= {
        "journal_full",
        "journal_error",
        "queue_full",
        "queue_unavailable",
        "unknown_hook",
    }
    missing = sorted(ops - documented)
    assert not missing, (
        "docs/design.md section 3 (Wire protocol): add a row "
        "'| `OP` | request fields | reply fields |' to the op table for each of "
        f"{missing}, and any new error code to the error-code table"
    )
    extra = sorted(documented - ops)
    assert not extra, (
        f"docs/design.md section 3 documents ops the daemon does not accept: {extra}; "
        "remove their rows (or list the code in this test if it is an error code)"
    )


def test_the_error_code_table_lists_the_codes_the_protocol_docstring_names() -> None:
    rows = first_cells(section("Wire protocol (the control socket)"))
    codes = ("bad_json", "bad_request", "line_too_long", "unknown_op", "unknown_event")
    for code in (*codes, "busy", "idle_timeout"):
        assert code in rows, f"docs/design.md section 3: add a row for the error code `{code}`"


# -- section 4: commands and flags -----------------------------------------------------------


def command_rows() -> dict[str, str]:
    """``"hooks list"`` -> its row in the command table (first cell ``gatewayd hooks list``)."""
    rows = {}
    for cell, row in first_cells(section("Command line")).items():
        if cell.startswith("gatewayd "):
            words = [w for w in cell.split()[1:] if re.fullmatch(r"[a-z][a-z-]*", w)]
            rows[" ".join(words)] = row
    return rows


def test_every_command_and_flag_is_documented() -> None:
    commands = {k: p for k, p in command_parsers(build_parser()).items() if not is_group(p)}
    rows = command_rows()
    missing = [key for key in commands if key not in rows]
    assert not missing, (
        "docs/design.md section 4 (Command line): add a row "
        "'| `gatewayd COMMAND ARGS` | `--flag` ... | what it does |' to the command table for "
        f"each of {missing}"
    )
    extra = sorted(set(rows) - set(commands))
    assert not extra, f"docs/design.md section 4 documents commands that do not exist: {extra}"
    problems = []
    for key, parser in commands.items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag in GLOBAL_FLAGS:
                    continue
                if not re.search(rf"`{re.escape(flag)}[` ]", rows[key]):
                    problems.append(f"`{flag}` of `gatewayd {key}`")
    assert not problems, (
        "docs/design.md section 4 (Command line): add these flags to the flags cell of their "
        f"command's row (as `--flag` or `--flag VALUE`): {', '.join(problems)}"
    )


# -- section 5: config keys ------------------------------------------------------------------


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a field holds, and the key suffix it puts before the model's own keys."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict and len(args) == 2:
        model, _ = _model_of(args[1])
        return model, ".<KEY>" if model else ""
    if origin is list and len(args) == 1:
        model, _ = _model_of(args[0])
        return model, "[]" if model else ""
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            model, suffix = _model_of(arg)
            if model:
                return model, suffix
    return None, ""


def config_keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every key of ``model`` as written in the config file -> its field (leaf keys only)."""
    keys: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        inner, suffix = _model_of(field.annotation)
        # A map's keys are named for what they are: agents.<id>, hooks.entries.<hookKey>.
        suffix = suffix.replace("<KEY>", "<id>" if key == "agents" else "<hookKey>")
        if inner is not None:
            if suffix:
                keys.update(config_keys(inner, f"{key}{suffix}."))
            else:
                keys.update(config_keys(inner, f"{key}."))
        else:
            keys[key] = field
    return keys


def _default_text(field: Any) -> str | None:
    """How the default must appear in the row, when it is a plain value."""
    if field.is_required():
        return "(required)"
    value = field.default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (int, str)):
        return f"`{value}`"
    if value in ([], {}):
        return f"`{json.dumps(value)}`"
    return None  # None: the row says what it derives from (e.g. `<state>/workspace`)


def test_every_config_key_is_documented_with_its_default() -> None:
    keys = config_keys(Settings)
    rows = first_cells(section("Config keys"))
    missing = sorted(set(keys) - set(rows))
    assert not missing, (
        "docs/design.md section 5 (Config keys): add a row '| `KEY` | `DEFAULT` | meaning |' "
        f"to the key table for each of {missing} (and the key to config/gatewayd.yaml)"
    )
    extra = sorted(k for k in set(rows) - set(keys) if "." in k)
    assert not extra, f"docs/design.md section 5 documents keys the config does not have: {extra}"
    wrong = []
    for key, field in keys.items():
        expected = _default_text(field)
        default_cell = rows[key].split("|")[2]
        if expected is not None and expected not in default_cell:
            wrong.append(f"{key}: the default cell should hold {expected}")
    assert not wrong, "docs/design.md section 5 (Config keys): " + "; ".join(wrong)


def test_the_env_override_form_is_the_one_the_config_reads(state_dir: Path, run_cli: Any) -> None:
    """The one example of section 5 is checked for real: the variable it names works."""
    text = section("Config keys")
    assert "`gateway.queue.capacity` is `GATEWAYD_GATEWAY__QUEUE__CAPACITY`" in text
    shown = run_cli("config", "show", env={"GATEWAYD_GATEWAY__QUEUE__CAPACITY": "77"})
    assert shown.returncode == 0, shown.stderr
    assert "capacity: 77" in shown.stdout


# -- section 6: the author API ---------------------------------------------------------------


def test_every_name_of_the_author_api_is_documented() -> None:
    rows = first_cells(section("Author API"))
    exported = set(gatewayd.hooks.__all__)
    missing = sorted(exported - set(rows))
    assert not missing, (
        "docs/design.md section 6 (Author API): add a row '| `NAME` | what it is |' for each "
        f"of {missing} (gatewayd.hooks exports them)"
    )
    extra = sorted(set(rows) - exported)
    assert not extra, (
        f"docs/design.md section 6 documents names gatewayd.hooks does not export: {extra}"
    )


# -- section 1.4: the layers -----------------------------------------------------------------


def layers() -> dict[str, int]:
    """``module -> layer`` from the ``layer N  names...`` lines of section 1."""
    found = {}
    for number, names in re.findall(r"^layer (\d+) +(.+)$", section("Architecture"), re.M):
        for name in names.split():
            found[name] = int(number)
    assert found, "docs/design.md section 1.4 has no 'layer N  module ...' lines"
    return found


def _top(module: str) -> str:
    """The layer name of ``gatewayd.x.y`` (``x``), or ``__init__`` for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> set[str]:
    """The gatewayd modules ``path`` imports at run time (``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "gatewayd"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gatewayd":
                for alias in node.names:
                    sub = PACKAGE / alias.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                    found.add(f"gatewayd.{alias.name}" if is_module else "gatewayd")
            elif node.module.split(".")[0] == "gatewayd":
                found.add(node.module)
    return found


def test_every_import_goes_down_the_layers() -> None:
    layer = layers()
    unplaced, upward = set(), []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        me = rel.parts[0].removesuffix(".py")
        if me not in layer:
            unplaced.add(me)
            continue
        for target in imports_of(path):
            other = _top(target)
            if other not in layer:
                unplaced.add(other)
            elif layer[other] > layer[me]:
                upward.append(
                    f"gatewayd/{rel} (layer {layer[me]}) imports {target} (layer {layer[other]})"
                )
    assert not unplaced, (
        f"docs/design.md section 1.4: put {sorted(unplaced)} on one of the 'layer N' lines "
        "(and in the package layout above them)"
    )
    assert not upward, "imports that go up a layer (docs/design.md section 1.4): " + "; ".join(
        upward
    )


def module_name(path: Path) -> str:
    """``gatewayd.x.y`` of a file of the package (``gatewayd.x`` for ``x/__init__.py``)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _as_module(name: str, modules: set[str]) -> str | None:
    """``name`` if it is a module of the package, else the module it names a member of."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports: at module level, inside a function, or for
    annotations only (``if TYPE_CHECKING:``) alike, since each is a module that knows the
    other. ``from gatewayd.x import y`` names the module ``gatewayd.x.y`` when there is one,
    else ``gatewayd.x``. A package imported only because one of its submodules is (Python runs
    ``x/__init__.py`` first) is no edge."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for me, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "gatewayd"}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] != "gatewayd":
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
        graph[me] = {m for name in found if (m := _as_module(name, modules)) and m != me}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


KNOWN_CIRCLES: tuple[str, ...] = ()
"""Circles docs/design.md section 1.4 names, each with its reason: a circle all of whose modules
start with one of these is known; no other is allowed."""


def _known(circle: list[str]) -> str | None:
    return next((p for p in KNOWN_CIRCLES if all(m.startswith(p) for m in circle)), None)


def test_no_module_imports_itself_through_others() -> None:
    circles = import_circles(import_graph())
    gone = [p for p in KNOWN_CIRCLES if not any(_known(c) == p for c in circles)]
    assert not gone, f"no circle left among {gone}: take it out of KNOWN_CIRCLES and design.md"
    circles = [c for c in circles if _known(c) is None]
    assert not circles, (
        "import circles in gatewayd/ (docs/design.md section 1.4): "
        + "; ".join(" <-> ".join(c) for c in circles)
        + ". Move what both sides need into a module below them (an annotation under "
        "`if TYPE_CHECKING:` counts: the two modules still know each other)."
    )


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


MAX_CLASS_LINES = 350
"""docs/design.md section 1.4: a class owns one thing, in at most this many lines."""


def test_no_class_is_over_the_size_a_reader_can_hold() -> None:
    over = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    over.append(f"{path.relative_to(REPO)}: {node.name} ({lines} lines)")
    assert not over, (
        f"classes over {MAX_CLASS_LINES} lines (docs/design.md section 1.4): "
        + "; ".join(over)
        + ". Split each by what it owns: a part with state of its own becomes a class of its "
        "own, a computation on its arguments a function."
    )
