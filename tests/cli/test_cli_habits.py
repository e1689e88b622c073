"""Habits a command line is expected to have: ``-V``, "did you mean", ``--json`` wherever data
is printed, exit 78 for a bad config on every command, env-var errors that name the variable,
and shell completion run in real bash and zsh. The habits that need a running daemon are in
``tests/daemon/test_daemon_cli_habits.py``.

The commands run in the test's own thread (:func:`tests.support.inline.gatewayd_inline`), where
coverage measures them: the exit status and output are the command entry's, as a process
ends with them. ``gatewayd run`` (refused before it serves, here) is a process of its own.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gatewayd import __version__
from gatewayd.cli.app import HANDLERS
from gatewayd.cli.parser import build_parser, command_parsers, is_group
from tests.support.cli import RunCli, gatewayd
from tests.support.inline import gatewayd_inline

WriteHook = Any

NO_DATA = {"run", "completion"}
"""Commands that print no data: the daemon's log, and a shell script."""
NO_CONFIG = {"install-service", "completion"}
"""Commands that never read the gatewayd config."""


@pytest.fixture
def run_cli(state_dir: Path) -> RunCli:
    """``gatewayd ARGS`` in the test's thread; ``gatewayd run`` as a process."""

    def run(*args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        runner = gatewayd if "run" in args else gatewayd_inline
        return runner(state_dir, *args, **options)

    return run


def test_version_short_and_long(run_cli: RunCli) -> None:
    for flag in ("-V", "--version"):
        done = run_cli(flag)
        assert done.returncode == 0
        assert done.stdout == f"gatewayd {__version__}\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("stauts",), "unknown command 'stauts'; did you mean 'status'?"),
        (("hooks", "lst"), "unknown command 'lst'; did you mean 'list'?"),
        (("config", "chek"), "unknown command 'chek'; did you mean 'check'?"),
        (("run", "--log-level", "dbug"), "unknown choice 'dbug'; did you mean 'debug'?"),
        (("completion", "zhs"), "unknown choice 'zhs'; did you mean 'zsh'?"),
    ],
)
def test_did_you_mean_for_commands_and_choices(
    run_cli: RunCli, args: tuple[str, ...], expected: str
) -> None:
    done = run_cli(*args)
    assert done.returncode == 2
    assert expected in done.stderr


def test_no_guess_when_nothing_is_close(run_cli: RunCli) -> None:
    done = run_cli("xyzzy")
    assert done.returncode == 2
    assert "unknown command 'xyzzy' (choose from run, send," in done.stderr
    assert "did you mean" not in done.stderr


def test_did_you_mean_for_hook_names(run_cli: RunCli, state_dir: Path) -> None:
    for args in (("hooks", "info", "comand-logger"), ("hooks", "disable", "comand-logger")):
        done = run_cli(*args)
        assert done.returncode == 1, args
        assert done.stderr == (
            "error: hook \"comand-logger\" not found; did you mean 'command-logger'? "
            "(gatewayd hooks list shows them all)\n"
        )


def test_did_you_mean_for_installed_hook_names(
    run_cli: RunCli, state_dir: Path, write_hook: WriteHook, tmp_path: Path
) -> None:
    source = write_hook(tmp_path / "src", "greeter")
    assert run_cli("hooks", "install", str(source)).returncode == 0
    done = run_cli("hooks", "uninstall", "greeterr")
    assert done.returncode == 1
    assert "greeterr: no installed hook of that name; did you mean 'greeter'?" in done.stderr


def test_every_command_that_prints_data_has_json() -> None:
    commands = {k: p for k, p in command_parsers(build_parser()).items() if not is_group(p)}
    without = sorted(
        key
        for key, parser in commands.items()
        if key not in NO_DATA and not any("--json" in a.option_strings for a in parser._actions)
    )
    assert not without, (
        f"commands without --json: {without}; add it (_json_flag in gatewayd/cli/parser.py), "
        "or add the command to NO_DATA here if it prints no data"
    )


def test_json_of_the_config_commands(run_cli: RunCli, state_dir: Path) -> None:
    shown = run_cli("config", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["source"] == "built-in defaults"
    assert document["config"]["gateway"]["queue"]["capacity"] == 1024
    checked = run_cli("config", "check", "--json")
    assert json.loads(checked.stdout) == {
        "ok": True,
        "source": "built-in defaults",
        "errors": [],
        "ignored": [],
        "requirementsOnly": [],
    }
    (state_dir / "gatewayd.yaml").write_text("gateway: {queue: {capacity: 0}}\n")
    bad = run_cli("config", "check", "--json")
    assert bad.returncode == 78
    report = json.loads(bad.stdout)
    assert report["ok"] is False and report["source"] == str(state_dir / "gatewayd.yaml")
    assert report["errors"][0].startswith("gateway.queue.capacity: ")


def test_json_of_the_hook_editing_commands(
    run_cli: RunCli, state_dir: Path, write_hook: WriteHook, tmp_path: Path
) -> None:
    made = run_cli("hooks", "new", "fresh", "--events", "command:fresh", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout) == {
        "name": "fresh",
        "path": str(state_dir / "hooks" / "fresh"),
        "files": ["HOOK.md", "handler.py"],
        "events": ["command:fresh"],
        "command": False,
        "lang": "py",
    }
    disabled = run_cli("hooks", "disable", "fresh", "--json")
    assert json.loads(disabled.stdout) == {
        "hook": "fresh",
        "hookKey": "fresh",
        "enabled": False,
        "changed": True,
        "file": str(state_dir / "gatewayd.yaml"),
        "warnings": [],
    }
    again = json.loads(run_cli("hooks", "disable", "fresh", "--json").stdout)
    assert again["changed"] is False

    source = write_hook(tmp_path / "src", "greeter")
    installed = run_cli("hooks", "install", str(source), "--json")
    assert installed.returncode == 0, installed.stderr
    record = json.loads(installed.stdout)["installed"][0]
    assert record["name"] == "greeter" and record["kind"] == "copy"
    assert record["path"] == str(state_dir / "hooks" / "greeter") and len(record["sha256"]) == 64
    removed = run_cli("hooks", "uninstall", "greeter", "--json")
    assert json.loads(removed.stdout)["uninstalled"][0]["name"] == "greeter"
    assert not (state_dir / "hooks" / "greeter").exists()


def test_json_of_install_service(run_cli: RunCli, tmp_path: Path) -> None:
    units = tmp_path / "units"
    done = run_cli("install-service", "--user", "--unit-dir", str(units), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["unit"] == {"path": str(units / "gatewayd.service"), "changed": True}
    assert report["started"] is False and report["next"][0] == "systemctl --user daemon-reload"
    assert (units / "gatewayd.service").read_text().startswith("#")
    printed = json.loads(run_cli("install-service", "--stdout", "--json").stdout)
    assert "ExecStart=" in printed["unitText"] and printed["unit"] is None


# -- a bad config is exit 78 everywhere ------------------------------------------------------

ARGS = {
    "run": ["run"],
    "send": ["send", "hi", "--session", "s"],
    "trigger": ["trigger", "command:x", "--session", "s"],
    "status": ["status"],
    "reload": ["reload"],
    "bootstrap": ["bootstrap", "--session", "s"],
    "hooks list": ["hooks", "list"],
    "hooks info": ["hooks", "info", "x"],
    "hooks order": ["hooks", "order", "command:new"],
    "hooks check": ["hooks", "check"],
    "hooks test": ["hooks", "test", "x"],
    "hooks enable": ["hooks", "enable", "x"],
    "hooks disable": ["hooks", "disable", "x"],
    "hooks new": ["hooks", "new", "x"],
    "hooks install": ["hooks", "install", "/nonexistent"],
    "hooks uninstall": ["hooks", "uninstall", "x"],
    "config show": ["config", "show"],
    "config check": ["config", "check"],
    "events list": ["events", "list"],
    "events show": ["events", "show", "x-1"],
    "events retry": ["events", "retry", "--all"],
    "events purge": ["events", "purge", "--all"],
}
"""Arguments that run each command that reads the config."""


def test_a_bad_config_file_is_exit_78_for_every_command(run_cli: RunCli, state_dir: Path) -> None:
    missing = sorted(set(HANDLERS) - set(ARGS) - NO_CONFIG)
    assert not missing, f"add arguments for {missing} to ARGS here (or to NO_CONFIG)"
    # Unparseable, and about the socket: the client commands read the file for that key.
    (state_dir / "gatewayd.yaml").write_text("gateway:\n  control: {socket: [unclosed\n")
    for key, args in ARGS.items():
        done = run_cli(*args)
        assert done.returncode == 78, (key, done.returncode, done.stderr)
        assert "invalid YAML" in done.stderr, (key, done.stderr)


def test_a_named_config_file_that_is_missing_is_exit_78(run_cli: RunCli, state_dir: Path) -> None:
    for args in (["status"], ["hooks", "list"], ["config", "check"]):
        done = run_cli("--config", str(state_dir / "nope.yaml"), *args)
        assert done.returncode == 78, (args, done.stderr)


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "GATEWAYD_GATEWAY__QUEUE__CAPACITY",
            "lots",
            "GATEWAYD_GATEWAY__QUEUE__CAPACITY='lots': gateway.queue.capacity: ",
        ),
        ("GATEWAYD_GATEWAY__QUEUE__CAPACITY", "lots", "an integer, e.g. "),
        (
            "GATEWAYD_HOOKS__LOAD__EXTRA_DIRS",
            "/srv/hooks",
            "GATEWAYD_HOOKS__LOAD__EXTRA_DIRS='/srv/hooks': hooks.load.extraDirs takes a JSON "
            'list, e.g. GATEWAYD_HOOKS__LOAD__EXTRA_DIRS=\'["one", "two"]\'',
        ),
        ("GATEWAYD_LOGGING__LEVEL", "loud", "one of debug, info, warning, error"),
        ("GATEWAYD_HOOKS__ENABLED", "yes", "true or false, e.g. GATEWAYD_HOOKS__ENABLED=false"),
        ("GATEWAYD_GATEWAY__COLOUR", "red", "GATEWAYD_GATEWAY__COLOUR='red': gateway.colour: "),
        (
            "GATEWAYD_HOOK__TIMEOUT_MS",
            "5",
            "GATEWAYD_HOOK__TIMEOUT_MS: 'HOOK' is no config section (the sections: agent, agents, "
            "gateway, hooks, logging, sessions, workspace); did you mean GATEWAYD_HOOKS__...?",
        ),
    ],
)
def test_env_errors_name_the_variable_and_the_form(
    run_cli: RunCli, state_dir: Path, variable: str, value: str, expected: str
) -> None:
    for args in (["config", "check"], ["run"]):
        done = run_cli(*args, env={variable: value})
        assert done.returncode == 78, (args, done.stderr)
        assert expected in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


# -- completion ------------------------------------------------------------------------------

BASH_COMPLETE = """
eval "$(gatewayd completion bash)"
complete -p gatewayd
for line in "${CASES[@]}"; do
    read -r -a COMP_WORDS <<< "$line"
    [[ "$line" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    _shtab_gatewayd
    echo "${COMPREPLY[*]}"
done
"""

HOOKS_COMMANDS = [k.split()[1] for k in command_parsers(build_parser()) if k.startswith("hooks ")]
"""The parser's own list: the script must offer whatever subcommands it has."""

CASES = {
    "gatewayd sta": "status",
    "gatewayd hooks ": " ".join(HOOKS_COMMANDS),
    "gatewayd --config x.yaml hooks in": " ".join(c for c in HOOKS_COMMANDS if c.startswith("in")),
    "gatewayd run --log-level ": "debug info warning error",
    "gatewayd status --j": "--json",
    "gatewayd completion ": "bash zsh",
    "gatewayd hooks new x --lang ": "py ts js",
    "gatewayd send --session ": "",
    "gatewayd hooks install pa": "pack.tgz",  # a path: file names
    "gatewayd --config pa": "pack.tgz",
}


def _script(run_cli: RunCli, shell: str) -> str:
    done = run_cli("completion", shell)
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


def test_bash_completion(run_cli: RunCli, tmp_path: Path) -> None:
    script = tmp_path / "gatewayd.bash"
    script.write_text(_script(run_cli, "bash"))
    (tmp_path / "pack.tgz").write_bytes(b"")
    cases = " ".join(f"'{case}'" for case in CASES)
    run = BASH_COMPLETE.replace(
        'eval "$(gatewayd completion bash)"', f"source {script}\nCASES=({cases})"
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", run],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("complete ") and lines[0].endswith(" -F _shtab_gatewayd gatewayd")
    got = {case: sorted(line.split()) for case, line in zip(CASES, lines[1:], strict=True)}
    assert got == {case: sorted(words.split()) for case, words in CASES.items()}


# A real interactive zsh in a pseudo-terminal (zsh's own zpty module): the script is eval'ed
# after compinit as ~/.zshrc would, each case is typed and completed with Tab, and what zsh
# lists (or completes in place, when one candidate is left) is read back. zsh skips redrawing
# the line while more keys are waiting, so the keys that clear the line go only once its output
# after the Tab has settled (0.3 s without a byte, at most 20 s); each case then ends with a
# command that prints END, so reading waits for zsh itself.
ZSH_COMPLETE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='> '; autoload -U compinit && compinit -u -D; eval \"\$(<SCRIPT)\";"\
" zstyle ':completion:*' verbose no; LISTMAX=10000; unsetopt beep; print RE''ADY"
zpty -r z line '*READY*'
for case in CASES; do
  zpty -w -n z "$case"$'\t'
  out= quiet=0 waited=0
  while (( quiet < 6 && waited < 400 )); do
    if zpty -r -t z chunk; then out+=$chunk; quiet=0
    else sleep 0.05; (( waited++ )); [[ $out == *${case[-2,-1]}* ]] && (( quiet++ )); fi
  done
  zpty -w z $'\C-u'"print E''ND"
  zpty -r z rest '*END*'
  print -r -- "<CASE>$out$rest"
done
zpty -d z
"""


def _zsh_completions(chunk: str) -> list[str]:
    """What zsh offered in one case's terminal output: the listed candidates, or the word it
    completed in place when one was left."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|.\x08", "", chunk).replace("\r", "")
    lines = [line for line in text.split("\n") if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("> "))
    typed = lines[start][2:].split("  ")[0].rstrip()
    listed = []
    for line in lines[start + 1 :]:
        if line.startswith("gatewayd") or "print E''ND" in line or line == "END":
            break
        listed.extend(line.split())
    return listed or [typed.rpartition(" ")[2]]


@pytest.mark.skipif(
    shutil.which("zsh") is None, reason="zsh is not installed (.ci/run installs it)"
)
def test_zsh_completion(run_cli: RunCli, tmp_path: Path) -> None:
    script = tmp_path / "_gatewayd"
    script.write_text(_script(run_cli, "zsh"))
    assert script.read_text().startswith("#compdef gatewayd\n")  # also loadable from $fpath
    (tmp_path / "pack.tgz").write_bytes(b"")
    cases = [case for case, words in CASES.items() if words]  # free text: nothing to list
    run = ZSH_COMPLETE.replace("SCRIPT", str(script)).replace(
        "CASES", " ".join(f"'{case}'" for case in cases)
    )
    done = subprocess.run(
        ["zsh", "-f", "-c", run], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    chunks = done.stdout.split("<CASE>")[1:]
    got = {case: sorted(_zsh_completions(chunk)) for case, chunk in zip(cases, chunks, strict=True)}
    assert got == {case: sorted(CASES[case].split()) for case in cases}, done.stdout


def test_env_errors_never_echo_what_may_be_a_secret(run_cli: RunCli, state_dir: Path) -> None:
    for variable, value in (
        ("GATEWAYD_HOOKS__ENTRIES__DEPLOY__ENV", "hunter2-not-json"),
        ("GATEWAYD_HOOKS__ENTRIES__DEPLOY__TIMEOUT_MS", "hunter2"),  # not secret: shown
    ):
        done = run_cli("config", "check", env={variable: value})
        assert done.returncode == 78, done.stderr
        assert f"{variable}=" in done.stderr
        secret = variable.endswith("__ENV")
        assert (value in done.stderr) is not secret, done.stderr
