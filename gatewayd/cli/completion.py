"""``gatewayd completion bash|zsh``: a shell completion script generated from the argparse tree.

The script is data plus a small walker. The data, read from :func:`~gatewayd.cli.parser.
build_parser` each time the script is printed, says for every command path ("" for the top,
``hooks``, ``hooks list``) its subcommands, its flags, and for each flag that takes a value
what the value is: a fixed choice (``--log-level``), a file (``--config``, ``--socket``) or
free text (``--session``). The walker, one per shell, follows the words typed so far through the
subcommands (skipping flags and their values) and offers what fits at the cursor: a flag's
values after that flag, flags after ``-``, else the subcommands, else files where the command
takes a path. So a new command or flag is completed as soon as the parser has it.

Load it with ``eval "$(gatewayd completion bash)"`` (``~/.bashrc``) or ``eval "$(gatewayd
completion zsh)"`` after ``compinit`` (``~/.zshrc``); the zsh script can also be saved as
``_gatewayd`` in a directory of ``$fpath``.
"""

from __future__ import annotations

import argparse
import shlex

from gatewayd import __version__
from gatewayd.cli.parser import build_parser, command_parsers

FILE_METAVARS = ("FILE", "PATH", "DIR", "ARCHIVE")
"""A flag or argument whose metavar holds one of these takes a path: complete file names."""

Spec = tuple[dict[str, list[str]], dict[str, list[str]], dict[tuple[str, str], str], dict[str, str]]


def _takes_path(action: argparse.Action) -> bool:
    metavar = str(action.metavar or "")
    return any(word in metavar for word in FILE_METAVARS)


def _kind(action: argparse.Action) -> str:
    """What a value of ``action`` is: its choices (space-separated), ``@file`` or ``@text``."""
    if action.choices is not None:
        return " ".join(str(c) for c in action.choices)
    return "@file" if _takes_path(action) else "@text"


def spec(parser: argparse.ArgumentParser) -> Spec:
    """``(subcommands, flags, values, arguments)`` by command path: ``values`` maps ``(path,
    flag)`` to the kind of the flag's value, ``arguments`` a command to the kind of its first
    positional argument (see :func:`_kind`)."""
    paths = {"": parser, **command_parsers(parser)}
    subs: dict[str, list[str]] = {}
    flags: dict[str, list[str]] = {}
    values: dict[tuple[str, str], str] = {}
    arguments: dict[str, str] = {}
    for path, sub in paths.items():
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                subs[path] = list(action.choices)
                continue
            if not action.option_strings:
                arguments.setdefault(path, _kind(action))
                continue
            flags.setdefault(path, []).extend(action.option_strings)
            if action.nargs != 0:
                for flag in action.option_strings:
                    values[(path, flag)] = _kind(action)
    return subs, flags, values, arguments


def _case_arms(entries: dict[str, str]) -> str:
    return "\n".join(
        f"        {shlex.quote(key)}) echo {shlex.quote(value)} ;;"
        for key, value in entries.items()
    )


def _data_functions(parser: argparse.ArgumentParser) -> str:
    """The shell functions holding the data; the same text works in bash and zsh."""
    subs, flags, values, arguments = spec(parser)
    listing = {f"sub|{path}": " ".join(names) for path, names in subs.items()}
    listing.update({f"flags|{path}": " ".join(names) for path, names in flags.items()})
    listing.update({f"argument|{path}": kind for path, kind in arguments.items()})
    value_arms = {f"{path}|{flag}": kind for (path, flag), kind in values.items()}
    return f"""_gatewayd_spec() {{  # sub|, flags|, argument|PATH: subcommands, flags, argument kind
    case "$1|$2" in
{_case_arms(listing)}
    esac
}}

_gatewayd_value() {{  # PATH FLAG: its choices, @file or @text; nothing when it takes no value
    case "$1|$2" in
{_case_arms(value_arms)}
    esac
}}
"""


BASH = """\
_gatewayd_candidates() {  # the words up to the cursor; prints choices, @file or @text
    local cmd="" word value subs i n=$(( $# - 1 ))
    local -a args=("$@")
    for (( i = 1; i < n; i++ )); do
        word="${args[i]}"
        if [[ "$word" == -* ]]; then
            value="$(_gatewayd_value "$cmd" "$word")"
            [[ -n "$value" ]] && (( i++ ))
            continue
        fi
        subs=" $(_gatewayd_spec sub "$cmd") "
        [[ "$subs" == *" $word "* ]] && cmd="${cmd:+$cmd }$word"
    done
    if (( n > 1 )); then
        value="$(_gatewayd_value "$cmd" "${args[n-1]}")"
        [[ -n "$value" ]] && { echo "$value"; return; }
    fi
    if [[ "${args[n]}" == -* ]]; then _gatewayd_spec flags "$cmd"; return; fi
    subs="$(_gatewayd_spec sub "$cmd")"
    if [[ -n "$subs" ]]; then echo "$subs"; return; fi
    value="$(_gatewayd_spec argument "$cmd")"
    echo "${value:-@text}"
}

_gatewayd() {
    local cur="${COMP_WORDS[COMP_CWORD]}" candidates
    candidates="$(_gatewayd_candidates "${COMP_WORDS[@]:0:COMP_CWORD+1}")"
    case "$candidates" in
        @file) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
        @text) COMPREPLY=() ;;
        *) mapfile -t COMPREPLY < <(compgen -W "$candidates" -- "$cur") ;;
    esac
}

complete -F _gatewayd gatewayd
"""

ZSH = """\
_gatewayd_candidates() {  # the words up to the cursor; prints choices, @file or @text
    local cmd="" word value subs i n=$#
    for (( i = 2; i < n; i++ )); do
        word="${@[i]}"
        if [[ "$word" == -* ]]; then
            value="$(_gatewayd_value "$cmd" "$word")"
            [[ -n "$value" ]] && (( i++ ))
            continue
        fi
        subs=" $(_gatewayd_spec sub "$cmd") "
        [[ "$subs" == *" $word "* ]] && cmd="${cmd:+$cmd }$word"
    done
    if (( n > 2 )); then
        value="$(_gatewayd_value "$cmd" "${@[n-1]}")"
        [[ -n "$value" ]] && { echo "$value"; return; }
    fi
    if [[ "${@[n]}" == -* ]]; then _gatewayd_spec flags "$cmd"; return; fi
    subs="$(_gatewayd_spec sub "$cmd")"
    if [[ -n "$subs" ]]; then echo "$subs"; return; fi
    value="$(_gatewayd_spec argument "$cmd")"
    echo "${value:-@text}"
}

_gatewayd() {
    local candidates
    candidates="$(_gatewayd_candidates "${(@)words[1,CURRENT]}")"
    case "$candidates" in
        @file) _files ;;
        @text) return 1 ;;
        *) compadd -- ${=candidates} ;;
    esac
}

if [[ "${funcstack[1]}" == _gatewayd ]]; then
    _gatewayd "$@"
elif (( $+functions[compdef] )); then
    compdef _gatewayd gatewayd
else
    print -u2 "gatewayd completion: run 'autoload -U compinit && compinit' first"
fi
"""


def script(shell: str) -> str:
    """The completion script for ``shell`` (``bash`` or ``zsh``)."""
    header = "#compdef gatewayd\n" if shell == "zsh" else ""
    header += (
        f"# {shell} completion for gatewayd {__version__}, generated by "
        f"`gatewayd completion {shell}`.\n"
        f'# Load it with: eval "$(gatewayd completion {shell})"\n\n'
    )
    return header + _data_functions(build_parser()) + "\n" + (BASH if shell == "bash" else ZSH)


def cli_completion(args: argparse.Namespace) -> int:
    """``gatewayd completion bash|zsh``: print the script."""
    print(script(args.shell), end="")
    return 0
