"""The gatewayd config: one YAML file plus ``GATEWAYD_`` env overrides (docs/design.md section 5).

``load_config()`` is the only way in. It reads the file (``--config``, ``$GATEWAYD_CONFIG``,
``<state>/gatewayd.yaml``, else built-in defaults), folds ``hooks.internal.*`` into ``hooks.*``
(OpenClaw/Milady configs), lets environment variables beat the file, and validates everything into
frozen pydantic models. Unknown keys are refused at every level except inside
``hooks.entries.<hookKey>``, which is the hook's own open settings map. Any problem raises
:class:`ConfigError` carrying every error with its key path, as the user wrote it
(``hooks.internal.entries.x.enabled``, not the folded ``hooks.entries.x.enabled``).

An OpenClaw or Milady ``hooks`` section loads unchanged: the keys of OpenClaw's other hook
features (its webhooks: ``hooks.token``, ``hooks.path``, ``hooks.mappings``, ``hooks.gmail``,
...; and ``hooks.internal.installs``, its install records) are accepted and reported in
:attr:`Config.ignored`. In that layout ``hooks.enabled`` is OpenClaw's *webhook* switch, so
beside a ``hooks.internal`` section it is ignored too and ``hooks.internal.enabled`` is the hooks
switch; without one, ``hooks.enabled`` is gatewayd's own switch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gatewayd.agentconfig import read_agent_config
from gatewayd.atomic import read_regular
from gatewayd.config_env import (
    expected_form,
    field_at,
    json_problems,
    may_be_secret,
    unknown_sections,
    variable_for,
)
from gatewayd.hooks.agents import DEFAULT_AGENT, AgentsSpec, entry_for
from gatewayd.hooks.eligibility import OPENCLAW_SECTIONS
from gatewayd.hooks.spec import (
    AgentConfigSpec,
    EntrySpec,
    LegacyHandlerSpec,
    LoadSpec,
    NodeSettings,
    WatchSettings,
)
from gatewayd.paths import (
    Paths,
    config_file_choice,
    default_config_path,
    default_control_socket,
    default_workspace,
    state_dir,
)
from gatewayd.redact import hide_url_password, redact
from gatewayd.yamlio import YamlError, load_yaml

ENV_PREFIX = "GATEWAYD_"


def _strict_bool(value: Any) -> Any:
    """``true``/``false`` only (and ``1``/``0``, ``"true"``/``"false"`` from the environment).

    pydantic alone would take ``yes``, ``on`` and ``y`` as true, which are exactly the YAML 1.1
    booleans the YAML 1.2 reader keeps out; a typo such as ``enabled: flase`` must not pass.
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ValueError("expected true or false (yes/no/on/off are not booleans here)")


Bool = Annotated[bool, BeforeValidator(_strict_bool)]


def _path_text(value: Any) -> Any:
    """A path as written: not empty (``""`` would be the current directory) and without a NUL
    byte, which no file name holds (``os`` raises ``embedded null byte`` wherever it is used)."""
    if isinstance(value, str):
        if "\0" in value:
            raise ValueError("a path cannot hold a NUL byte (\\0); remove it")
        if not value.strip():
            raise ValueError("an empty path names no file: give one, or leave the key out")
    return value


ConfigPath = Annotated[Path, BeforeValidator(_path_text)]
PathText = Annotated[str, BeforeValidator(_path_text)]

# Upper bounds, each far past any sensible setting, on values that size a loop or a timer:
# past them the daemon once crashed at start (hooks.timeoutMs: 1e30 overflows the thread
# timer), froze (concurrency: 1e30 workers; backups: 1e30 renames a rotation) or died on a
# retry (2 ** retries past a float).
MAX_MS = 365 * 24 * 3600 * 1000
"""Bound on every ``...Ms`` setting: a year."""
MAX_CONCURRENCY = 10_000
"""Bound on ``gateway.queue.concurrency`` (one task each, all started at once)."""
MAX_BACKUPS = 1000
"""Bound on rotated files kept (``gateway.log.backups``, ``sessions.transcriptBackups``)."""
MAX_RETRIES = 100
"""Bound on ``hooks.entries.<hookKey>.retries`` (the backoff doubles before each)."""


class ConfigError(Exception):
    """An unusable config. ``errors`` lists every problem as ``key.path: message``."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"invalid config {source}: " + "; ".join(errors))


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class ControlConfig(_Model):
    socket: ConfigPath | None = None
    """Control socket path; default ``<state>/run/gatewayd.sock``."""
    max_connections: int = Field(256, ge=1)
    """Open connections at once; one more gets the error ``busy`` and is closed."""
    idle_timeout_ms: int = Field(300_000, ge=0, le=MAX_MS)
    """A connection that takes this long to send a whole request line, or to read a reply, is
    closed (``idle_timeout``); time spent on hooks does not count. 0: never."""


DEFAULT_REDIS_URL: Final = "redis://localhost:6379/0"


def redis_url_problem(url: str) -> str | None:
    """Why redis-py cannot connect to ``url`` (what its ``parse_url`` says, or no host or
    socket path), or None. redis-py is imported only here, when a URL is set: 0.3 s."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError as exc:
        return str(exc)
    if scheme not in ("redis", "rediss", "unix"):
        return f"its scheme is {scheme or 'missing'}, not redis, rediss or unix"
    from redis.connection import parse_url

    try:
        parts = parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        return str(exc)
    if scheme == "unix" and not parts.get("path"):
        return "no socket path after unix://"
    if scheme != "unix" and not parts.get("host"):
        return f"no host after {scheme}://"
    return None


class RedisQueueConfig(_Model):
    url: str = DEFAULT_REDIS_URL
    """Where the shared queue lives: ``redis://[user:password@]host:port/db``, ``rediss://``
    (TLS) or ``unix:///path/to/redis.sock``; ``GATEWAYD_REDIS_PASSWORD`` sets the password.
    Checked by redis-py's own parser when set (the message never repeats the URL: it may hold
    a password)."""
    namespace: str = Field("gatewayd", min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    """Prefix of every key: instances with the same URL and namespace share one queue."""
    partitions: int = Field(16, ge=1, le=1024)
    """Streams the sessions are spread over (by a hash of the session key); the unit of
    ownership. Every instance of a namespace must use the same count."""
    lease_ms: int = Field(5000, ge=200, le=MAX_MS)
    """How long a partition stays owned without its owner renewing it (a dead instance's
    partitions are taken over once this ran out)."""
    wait_ms: int = Field(10_000, ge=0, le=MAX_MS)
    """How long producers wait for an unreachable Redis before getting ``queue_unavailable``."""

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if value != DEFAULT_REDIS_URL and (problem := redis_url_problem(value)):
            raise ValueError(
                f"not a Redis URL ({problem}): use redis://[user:password@]host:port/db, "
                "rediss://... (TLS) or unix:///path/to/redis.sock"
            )
        return value


class QueueConfig(_Model):
    capacity: int = Field(1024, ge=1)
    per_session_max: int = Field(256, ge=1)
    """Events one session may hold in the queue; its producers wait beyond that (at or above
    ``capacity``: no bound of its own)."""
    per_session_wait_ms: int = Field(5000, ge=0, le=MAX_MS)
    """How long a producer waits for room in its full session before ``queue_full``."""
    concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY)
    backend: Literal["local", "redis"] = "local"
    """``local``: this process's journal (``journal``); ``redis``: one queue shared by every
    instance on the same Redis (``gateway.queue.redis``)."""
    redis: RedisQueueConfig = RedisQueueConfig()
    journal: Literal["sqlite", "memory"] = "sqlite"
    """Where accepted events are recorded until dispatched: ``<state>/journal/events.db``."""
    sync: Literal["full", "normal"] = "full"
    """SQLite's ``synchronous``: full survives a power cut, normal only a process crash."""
    retain_done: int = Field(0, ge=0)
    """Done events kept in the journal for ``gatewayd events list`` (0: deleted when done)."""
    full_wait_ms: int = Field(5000, ge=0, le=MAX_MS)
    """How long producers wait on a full disk before getting ``journal_full``."""


class LogFileConfig(_Model):
    file: ConfigPath | None = None
    """Also write every log line, as JSON, to this file (relative: to the state dir)."""
    max_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    """Rotate the file when it would pass this size."""
    backups: int = Field(5, ge=0, le=MAX_BACKUPS)
    """Rotated files kept (``<file>.1`` ... ``<file>.N``)."""


class MetricsConfig(_Model):
    listen: str | None = None
    """``PORT`` or ``HOST:PORT`` for the Prometheus endpoint; unset: no listener. A bare port
    listens on 127.0.0.1; it may be written as a YAML integer (``listen: 9464``)."""

    @field_validator("listen", mode="before")
    @classmethod
    def _address(cls, value: object) -> object:
        if type(value) is int:  # listen: 9464 (a YAML integer), as the README writes it
            value = str(value)
        if not isinstance(value, str):
            return value  # None, or what the str field then refuses
        port = value.rpartition(":")[2]
        if not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"{value!r} is not PORT or HOST:PORT (e.g. 9464 or 127.0.0.1:9464)")
        return value


class GatewayConfig(_Model):
    startup_hook_delay_ms: int = Field(250, ge=0, le=MAX_MS)
    shutdown_timeout_ms: int = Field(5000, ge=0, le=MAX_MS)
    """Bound on the wait for ``gateway:shutdown`` handlers."""
    drain_timeout_ms: int = Field(10000, ge=0, le=MAX_MS)
    """Bound on draining the trigger queue at shutdown."""
    control: ControlConfig = ControlConfig()
    queue: QueueConfig = QueueConfig()
    log: LogFileConfig = LogFileConfig()
    metrics: MetricsConfig = MetricsConfig()
    loop_lag_warn_ms: int = Field(500, ge=0, le=MAX_MS)
    """Log ``loop.stalled`` (naming the hook) when the event loop is blocked this long; 0: off."""


class WorkspaceConfig(_Model):
    dir: ConfigPath | None = None
    """Workspace dir; default ``<state>/workspace``."""


QUEUE_ENTRY_KEYS = {"retries", "retry_backoff_ms"}
"""Entry keys read by the trigger queue (retries), kept out of the hook's ``ctx.config``."""


class HookEntry(BaseModel):
    """``hooks.entries.<hookKey>``: three typed keys, and the hook's own settings beside them."""

    model_config = ConfigDict(
        extra="allow", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    enabled: Bool = True
    env: dict[str, str] = {}
    timeout_ms: int | None = Field(None, ge=1, le=MAX_MS)
    priority: int | None = None
    """Overrides the hook's own ``priority`` (lower runs earlier; default 100)."""
    agents: list[str] | None = None
    """Overrides the hook's own ``agents``: the agents whose events it serves."""
    retries: int = Field(0, ge=0, le=MAX_RETRIES)
    """Extra attempts for a failed handler of this hook, then a dead letter (0: none)."""
    retry_backoff_ms: int = Field(1000, ge=0, le=MAX_MS)
    """Wait before the first retry; doubled before each next one."""

    @field_validator("env", mode="before")
    @classmethod
    def _env_scalars_as_text(cls, value: Any) -> Any:
        # `PORT: 8080` in YAML is an int; an environment variable is always text.
        if isinstance(value, Mapping):
            return {
                k: str(v).lower() if isinstance(v, bool) else v if v is None else str(v)
                for k, v in value.items()
            }
        return value

    def setting(self, key: str) -> Any:
        """The hook's own setting ``key`` (e.g. ``apiKey``, ``messages``), or ``None``."""
        if key in (
            "enabled",
            "env",
            "timeoutMs",
            "priority",
            "agents",
            "retries",
            "retryBackoffMs",
        ):
            return self.model_dump(by_alias=True)[key]
        return (self.model_extra or {}).get(key)


def _entry_settings(entry: HookEntry) -> dict[str, Any]:
    """The entry as the hook sees it (``ctx.config``): ``priority`` only when set."""
    # retries/retryBackoffMs are the queue's settings, not the hook's own.
    data: dict[str, Any] = entry.model_dump(by_alias=True, exclude=QUEUE_ENTRY_KEYS)
    for optional in ("priority", "agents"):
        if data.get(optional) is None:
            data.pop(optional, None)
    return data


class HooksLoadConfig(_Model):
    extra_dirs: list[ConfigPath] = []
    debounce_ms: int = Field(5, ge=0, le=MAX_MS)
    """Quiet time after a change before reloading; a burst of writes is one reload."""
    poll: Bool = False
    """Poll instead of inotify (Docker bind mounts, network filesystems)."""
    poll_interval_ms: int = Field(300, ge=10, le=MAX_MS)
    watch: Bool = True
    """Watch the hook roots and the config file and reload on change."""


class LegacyHandler(_Model):
    """``hooks.handlers[]``: an explicitly listed handler module (older configs)."""

    event: str
    module: PathText
    export: str = "default"


class HooksNodeConfig(_Model):
    path: PathText | None = None
    wheel: Bool = True


class HooksConfig(_Model):
    enabled: Bool = True
    timeout_ms: int = Field(30000, ge=1, le=MAX_MS)
    decision_timeout_ms: int = Field(5000, ge=1, le=MAX_MS)
    """Bound on a decision event's round trip (``trigger`` of ``agent:before_tool_call``, ...):
    past it the caller gets the result so far and ``timedOut: true``."""
    max_depth: int = Field(8, ge=1)
    """How deep a chain of events that handlers cause (deliver/send/trigger) may go."""
    record_blocked: Bool = False
    """Write inbound messages a ``message:received`` handler blocked to the transcript."""
    max_abandoned_threads: int = Field(16, ge=1)
    """Threads of timed-out sync handlers that may still run before no new sync handler is
    started (Python cannot stop a thread)."""
    entries: dict[str, HookEntry] = {}
    load: HooksLoadConfig = HooksLoadConfig()
    handlers: list[LegacyHandler] = []
    node: HooksNodeConfig = HooksNodeConfig()


class SessionsConfig(_Model):
    transcript_max_bytes: int = Field(10 * 1024 * 1024, ge=0)
    """A transcript about to grow past this is rotated to ``<sessionId>.jsonl.1``; 0: never."""
    transcript_backups: int = Field(3, ge=0, le=MAX_BACKUPS)
    """Rotated transcripts kept per session (``.1`` newest); 0 keeps none."""


class AgentConfigSection(_Model):
    """``agent``: the agent gatewayd serves."""

    config_file: ConfigPath | None = None
    """The agent's own config (``~/.eliza/eliza.json``, ``~/.openclaw/openclaw.json``; JSON5):
    where hooks' ``requires.config`` keys that are not gatewayd's are looked up."""


AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
"""An agent id: what ``agent:<id>:...`` session keys and ``name@<id>`` hook names can carry."""


class AgentEntry(_Model):
    """``agents.<id>``: one agent and where its workspace (and so its hooks) is."""

    workspace: ConfigPath | None = None
    """Its workspace; its hooks are ``<workspace>/hooks`` and its subagents' are
    ``<workspace>/subagents/<subId>/hooks``. Default: ``<state>/workspace-<id>`` (the default
    agent's: ``workspace.dir``); a relative path is under the state dir."""
    default: Bool = False
    """The agent of session keys that name none (at most one; else ``main``)."""


def _agents_problems(agents: Mapping[str, AgentEntry], workspace_dir: Path | None) -> list[str]:
    problems = [
        f"agents.{agent_id}: an agent id is letters, digits, '_' and '-' (it appears in "
        f"session keys agent:<id>:... and hook names name@<id>); rename it"
        for agent_id in agents
        if not re.match(AGENT_ID_PATTERN, agent_id)
    ]
    defaults = [agent_id for agent_id, entry in agents.items() if entry.default]
    if len(defaults) > 1:
        problems.append(
            f"agents: {', '.join(defaults)} all say default: true; keep it on one agent"
        )
    default = defaults[0] if defaults else DEFAULT_AGENT
    entry = agents.get(default)
    if entry is not None and entry.workspace is not None and workspace_dir is not None:
        problems.append(
            f"agents.{default}.workspace: the default agent's workspace is also set as "
            f"workspace.dir ({workspace_dir}); set only one of them"
        )
    return problems


class LoggingConfig(_Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"


class Settings(BaseSettings):
    """The whole config. Build it with :func:`load_config`, not directly."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        case_sensitive=False,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        env_parse_none_str="null",
    )

    gateway: GatewayConfig = GatewayConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    hooks: HooksConfig = HooksConfig()
    sessions: SessionsConfig = SessionsConfig()
    logging: LoggingConfig = LoggingConfig()
    agent: AgentConfigSection = AgentConfigSection()
    agents: dict[str, AgentEntry] = {}
    """The agents whose hooks are kept apart (``gatewayd/hooks/agents.py``); none: one agent,
    ``main``, whose workspace is ``workspace.dir``."""

    @model_validator(mode="after")
    def _agents(self) -> Settings:
        if problems := _agents_problems(self.agents, self.workspace.dir):
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file arrives as init kwargs; the environment beats it.
        return (env_settings, init_settings)


class Config:
    """A validated config plus where it came from and the paths it implies."""

    def __init__(
        self,
        settings: Settings,
        source: Path | None,
        state: Path,
        ignored: tuple[str, ...] = (),
        enabled_key: str = "hooks.enabled",
        requirements: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        self.ignored = ignored
        """Keys of the file that belong to other OpenClaw features, accepted and ignored."""
        self.requirements: Mapping[str, Any] = MappingProxyType(dict(requirements or {}))
        """OpenClaw's own sections as the file wrote them (:data:`OPENCLAW_SECTIONS`), read only
        for hooks' ``requires.config``."""
        self.enabled_key = enabled_key
        """Where the file wrote the hooks switch (``hooks.internal.enabled`` or
        ``hooks.enabled``)."""
        self._load_spec: LoadSpec | None = None
        self.agents = _agents_spec(settings, state)
        default_entry = settings.agents.get(self.agents.default)
        workspace = settings.workspace.dir or default_workspace(state)
        if default_entry is not None and default_entry.workspace is not None:
            workspace = _agent_workspace(state, default_entry.workspace)
        socket = settings.gateway.control.socket or default_control_socket(state)
        self.paths = Paths(
            state=state,
            workspace=Path(os.path.expanduser(workspace)),
            control_socket=Path(os.path.expanduser(socket)),
            config_file=source or Path(default_config_path(state)),
        )

    @property
    def source_label(self) -> str:
        return str(self.source) if self.source else "built-in defaults"

    def effective(self) -> dict[str, Any]:
        """The effective config as plain data with Eliza key names and defaults filled in."""
        data: dict[str, Any] = self.settings.model_dump(by_alias=True, mode="json")
        data["workspace"]["dir"] = str(self.paths.workspace)
        data["gateway"]["control"]["socket"] = str(self.paths.control_socket)
        for agent_id, workspace in self.agents.workspaces.items():
            data["agents"][agent_id]["workspace"] = str(workspace)
        if self.agents.default in data["agents"]:
            data["agents"][self.agents.default]["workspace"] = str(self.paths.workspace)
        return data

    def shown(self) -> dict[str, Any]:
        """:meth:`effective` for showing (``config show``): secret-looking values and every
        ``env`` value replaced by ``<redacted>`` (``gatewayd/redact.py``)."""
        return redact(self.effective())

    def entry(self, hook_key: str) -> HookEntry:
        """``hooks.entries.<hook_key>``, or an all-defaults entry; a scoped hook's key
        (``audit@ops``) falls back to its plain one (``audit``), as ``LoadSpec.entry`` does."""
        return entry_for(self.settings.hooks.entries, hook_key) or HookEntry()

    def load_spec(self) -> LoadSpec:
        """What the hook library reads from this config (built once per config)."""
        if self._load_spec is None:
            hooks, paths = self.settings.hooks, self.paths
            load = hooks.load
            self._load_spec = LoadSpec(
                state_dir=paths.state,
                workspace_dir=paths.workspace,
                bundled_hooks=paths.bundled_hooks,
                managed_hooks=paths.managed_hooks,
                workspace_hooks=paths.workspace_hooks,
                extra_dirs=tuple(str(p) for p in load.extra_dirs),
                enabled=hooks.enabled,
                enabled_key=self.enabled_key,
                timeout_ms=hooks.timeout_ms,
                entries={
                    key: EntrySpec(
                        enabled=entry.enabled,
                        explicit="enabled" in entry.model_fields_set,
                        env=MappingProxyType(dict(entry.env)),
                        timeout_ms=entry.timeout_ms,
                        priority=entry.priority,
                        agents=frozenset(entry.agents) if entry.agents is not None else None,
                        settings=MappingProxyType(_entry_settings(entry)),
                    )
                    for key, entry in hooks.entries.items()
                },
                handlers=tuple(
                    LegacyHandlerSpec(h.event, h.module, h.export) for h in hooks.handlers
                ),
                effective_config=self.effective(),
                config_file=self.source,
                watch=WatchSettings(
                    watch=load.watch,
                    debounce_ms=load.debounce_ms,
                    poll=load.poll,
                    poll_interval_ms=load.poll_interval_ms,
                ),
                node=NodeSettings(path=hooks.node.path, wheel=hooks.node.wheel),
                agent=self._agent_config(),
                agents=self.agents,
            )
        return self._load_spec

    def _agent_config(self) -> AgentConfigSpec:
        base = self.source.parent if self.source else self.paths.state
        agent = read_agent_config(self.settings.agent.config_file, base)
        return AgentConfigSpec(
            data=agent.data,
            source=str(agent.path) if agent.path else None,
            error=agent.error,
            written=self.requirements,
            written_in=self.source_label,
        )


def _agents_spec(settings: Settings, state: Path) -> AgentsSpec:
    """The ``agents`` section as the hook library reads it: the default agent's id and every
    other agent's workspace (``<state>/workspace-<id>`` unless set; relative: under state)."""
    agents = settings.agents
    default = next((a for a, entry in agents.items() if entry.default), DEFAULT_AGENT)
    workspaces: dict[str, Path] = {}
    for agent_id, entry in agents.items():
        if agent_id == default:
            continue
        workspaces[agent_id] = _agent_workspace(state, entry.workspace or f"workspace-{agent_id}")
    return AgentsSpec(default=default, workspaces=MappingProxyType(workspaces))


def _agent_workspace(state: Path, written: str | Path) -> Path:
    """``agents.<id>.workspace`` as written: ``~`` expanded, a relative path under the state dir."""
    return state / os.path.expanduser(written)  # an absolute path replaces ``state``


OPENCLAW_HOOK_KEYS = frozenset(
    {
        "path",
        "token",
        "defaultSessionKey",
        "allowRequestSessionKey",
        "allowedSessionKeyPrefixes",
        "allowedAgentIds",
        "maxBodyBytes",
        "sessionRetention",
        "presets",
        "transformsDir",
        "mappings",
        "gmail",
    }
)
"""Keys under ``hooks`` that belong to OpenClaw's webhooks, not to its internal hooks."""

IGNORED_NOTE = (
    "accepted for OpenClaw/Milady configs and not used: gatewayd runs internal hooks only "
    "(no webhooks, no install records)"
)

REQUIREMENTS_NOTE = (
    "OpenClaw's; read only for hooks' requires.config (gatewayd itself does not use it)"
)


@dataclass(frozen=True, slots=True)
class Folded:
    """A config file's data with ``hooks.internal`` folded in, and what folding did."""

    raw: dict[str, Any]
    from_internal: frozenset[str] = frozenset()
    """Keys now under ``hooks`` that the file wrote under ``hooks.internal``."""
    ignored: tuple[str, ...] = ()
    """Keys of other OpenClaw features, dropped (``hooks.token``, ``hooks.internal.installs``)."""


def fold_internal(raw: dict[str, Any]) -> Folded:
    """Read ``hooks.internal.*`` as ``hooks.*`` and drop the keys of other OpenClaw features
    (see the module docstring); other keys written directly under ``hooks`` win."""
    hooks = raw.get("hooks")
    if not isinstance(hooks, dict):
        return Folded(raw)
    ignored = [f"hooks.{key}" for key in hooks if key in OPENCLAW_HOOK_KEYS]
    top = {k: v for k, v in hooks.items() if k not in OPENCLAW_HOOK_KEYS}
    internal = top.get("internal")
    if "internal" not in top or not isinstance(internal, dict):
        # validation reports a bad type under hooks.internal
        return Folded({**raw, "hooks": top}, ignored=tuple(ignored))
    if "installs" in internal:
        ignored.append("hooks.internal.installs")
    internal = {k: v for k, v in internal.items() if k != "installs"}
    top = {k: v for k, v in top.items() if k != "internal"}
    if "enabled" in top:  # OpenClaw's webhook switch; hooks.internal.enabled is the hooks one
        ignored.append("hooks.enabled")
        del top["enabled"]
    merged = {**internal, **top}
    moved = frozenset(k for k in internal if k not in top)
    return Folded({**raw, "hooks": merged}, moved, tuple(ignored))


OPENCLAW_AGENT_KEYS = ("workspace", "default")
"""What gatewayd reads of an OpenClaw agent (``agents.entries.<id>``, ``agents.list[]``)."""


def fold_agents(raw: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """An OpenClaw ``agents`` section read as gatewayd's: ``agents.defaults.workspace`` is
    ``workspace.dir`` (unless that is set), each ``agents.entries.<id>`` (or legacy
    ``agents.list[]`` item with an ``id``) is ``agents.<id>`` with its ``workspace`` and
    ``default``; ``agents.defaults`` is never an agent named ``defaults``. Returns the data and
    the keys of it dropped (models, skills, ... of OpenClaw's agents)."""
    agents = raw.get("agents")
    if not isinstance(agents, dict) or not {"defaults", "entries", "list"} & set(agents):
        return raw, ()
    ignored: list[str] = []
    mine = {k: v for k, v in agents.items() if k not in ("defaults", "entries", "list")}
    workspace = raw.get("workspace")
    defaults = agents.get("defaults")
    if isinstance(defaults, dict):
        written = defaults.get("workspace")
        has_dir = isinstance(workspace, dict) and workspace.get("dir") is not None
        if isinstance(written, str) and not has_dir:
            workspace = {**(workspace if isinstance(workspace, dict) else {}), "dir": written}
        ignored += [f"agents.defaults.{k}" for k in defaults if k != "workspace" or has_dir]
    elif "defaults" in agents:
        ignored.append("agents.defaults")
    items: list[tuple[str, Any]] = []
    entries = agents.get("entries")
    if isinstance(entries, dict):
        items += [(f"agents.entries.{k}", (k, v)) for k, v in entries.items()]
    listed = agents.get("list")
    if isinstance(listed, list):
        for i, item in enumerate(listed):
            ident = item.get("id") if isinstance(item, dict) else None
            items.append((f"agents.list[{i}]", (ident, item)))
    for where, (ident, entry) in items:
        if not isinstance(ident, str) or not isinstance(entry, dict):
            ignored.append(where)
            continue
        mine.setdefault(ident, {k: entry[k] for k in OPENCLAW_AGENT_KEYS if k in entry})
        ignored += [f"{where}.{k}" for k in entry if k not in (*OPENCLAW_AGENT_KEYS, "id")]
    folded = {**raw, "agents": mine}
    if workspace is not None:
        folded["workspace"] = workspace
    return folded, tuple(ignored)


def _written(loc: tuple[int | str, ...], from_internal: frozenset[str]) -> str:
    """The key path as the user wrote it: ``hooks.internal.x`` when ``x`` came from there."""
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] == "hooks" and parts[1] in from_internal:
        parts.insert(1, "internal")
    return ".".join(parts)


def format_errors(exc: ValidationError, from_internal: frozenset[str] = frozenset()) -> list[str]:
    """One line per error: ``key.path: message (got ...)``; an error in a value that came from
    a ``GATEWAYD_*`` variable names the variable and the form it expects instead."""
    errors = []
    for err in exc.errors():
        loc = err["loc"]
        path = _written(loc, from_internal)
        unknown = err["type"] == "extra_forbidden"
        message = err["msg"].removeprefix("Value error, ")
        if (env := variable_for(loc)) is not None:
            errors.append(_env_error(env[0], loc, message, unknown))
        elif unknown:
            errors.append(f"{path}: unknown key (check the spelling; see config/gatewayd.yaml)")
        elif not loc:
            # A check across sections (agents): its message names the keys, and its input is
            # the whole config, secrets included.
            errors.append(message)
        elif may_be_secret(loc):
            errors.append(f"{path}: {message}")  # never echo what may be a secret
        else:
            got = err.get("input")
            if isinstance(got, str):
                got = hide_url_password(got)
            errors.append(f"{path}: {message} (got {got!r})")
    return errors


def _env_error(var: str, loc: tuple[Any, ...], message: str, unknown: bool) -> str:
    shown = hide_url_password(os.environ.get(var, ""))
    value = "(value not shown)" if may_be_secret(loc) else repr(shown)
    found = field_at(Settings, loc)
    if unknown or found is None:
        key = ".".join(str(p) for p in loc)
        return f"{var}={value}: {key}: unknown key (check the spelling; see config/gatewayd.yaml)"
    annotation, spelled = found
    leaf_var = var + "".join(f"__{p}".upper() for p in loc[len(var.split("__")) :])
    return (
        f"{var}={value}: {'.'.join(spelled)}: {message} "
        f"(set it as {expected_form(annotation, leaf_var)})"
    )


MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A config file larger than this is refused (it is read whole, and a FIFO or device never)."""


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's top-level mapping; an empty file is ``{}``. Raises :class:`ConfigError`."""
    try:
        text = read_regular(path, MAX_CONFIG_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), [f"config file not found: {path}"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [f"cannot read {path}: {exc}"]) from None
    try:
        raw = load_yaml(text, str(path))
    except YamlError as exc:
        raise ConfigError(str(path), [str(exc)]) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise ConfigError(
            str(path), [f"{path}: the top level must be a mapping of keys, got a {kind}"]
        )
    if odd := [key for key in raw if not isinstance(key, str)]:
        raise ConfigError(
            str(path),
            [
                f"{path}: top-level key {key!r} is not a name: the keys are sections such as "
                "gateway and hooks (quote a key that YAML reads as a number, null or a boolean)"
                for key in odd
            ],
        )
    return raw


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Load and validate the config; raise :class:`ConfigError` listing every problem."""
    chosen, required = config_file_choice(explicit)
    path = Path(chosen) if required or os.path.exists(chosen) else None
    raw: dict[str, Any] = {}
    if path is not None:
        raw = read_config_file(path)
    source = str(path) if path else "built-in defaults"
    if problems := unknown_sections(Settings) + json_problems(Settings):
        raise ConfigError(source, problems)  # pydantic-settings would name only the section
    requirements = {key: raw[key] for key in OPENCLAW_SECTIONS if key in raw}
    raw = {key: value for key, value in raw.items() if key not in requirements}
    folded = fold_internal(raw)
    agents_raw, agents_ignored = fold_agents(folded.raw)
    try:
        settings = Settings(**agents_raw)
    except ValidationError as exc:
        raise ConfigError(source, format_errors(exc, folded.from_internal)) from None
    except ValueError as exc:  # a GATEWAYD_* variable pydantic-settings cannot parse
        raise ConfigError(source, [f"environment override: {exc}"]) from None
    except RecursionError:  # JSON in a GATEWAYD_* variable json_problems could still decode
        raise ConfigError(
            source,
            [
                "environment override: a GATEWAYD_* JSON value is nested too deeply to read; "
                "write it flatter (a few levels deep)"
            ],
        ) from None
    if problems := _nested_too_deeply(settings.hooks.entries):
        raise ConfigError(source, problems)
    enabled_key = "hooks.internal.enabled" if "enabled" in folded.from_internal else "hooks.enabled"
    config = Config(
        settings,
        path,
        state_dir(),
        folded.ignored + agents_ignored,
        enabled_key,
        requirements,
    )
    if problems := _shared_hook_dirs(config):
        raise ConfigError(source, problems)
    return config


MAX_SETTING_DEPTH = 64
"""How deep a hook's own setting may nest (``hooks.entries.<hookKey>.<key>``, the one open part
of the config). pydantic dumps the config (for each hook's ``cfg``) only ~250 levels deep: a
setting nested 300 passed validation, then crashed the start and failed every reload."""


def _nested_too_deeply(entries: Mapping[str, HookEntry]) -> list[str]:
    problems = []
    for hook_key, entry in entries.items():
        for name, value in (entry.model_extra or {}).items():
            if _depth(value) > MAX_SETTING_DEPTH:
                problems.append(
                    f"hooks.entries.{hook_key}.{name}: nested more than {MAX_SETTING_DEPTH} "
                    "levels deep; write it flatter"
                )
    return problems


def _depth(value: Any) -> int:
    """How deep lists and maps nest in ``value`` (a scalar: 0), counted without recursion and
    stopping past :data:`MAX_SETTING_DEPTH`."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            if level > MAX_SETTING_DEPTH:
                return level
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in _children(item))
    return deepest


def _children(item: dict[Any, Any] | list[Any]) -> list[Any]:
    return list(item.values()) if isinstance(item, dict) else item


def _shared_hook_dirs(config: Config) -> list[str]:
    """An agent whose hooks dir is another agent's, or the managed hooks dir: its hooks would
    load twice (once as each). Each must have a directory of its own."""
    owners: dict[str, str] = {
        os.path.realpath(config.paths.managed_hooks): "the managed hooks dir (<state>/hooks)",
        os.path.realpath(config.paths.workspace_hooks): (
            f"the default agent {config.agents.default!r} (workspace.dir)"
        ),
    }
    problems = []
    for agent_id, workspace in config.agents.workspaces.items():
        hooks = os.path.realpath(workspace / "hooks")
        if hooks in owners:
            problems.append(
                f"agents.{agent_id}.workspace: {workspace}/hooks is already the hooks dir of "
                f"{owners[hooks]}; give each agent a workspace of its own"
            )
        owners.setdefault(hooks, f"agent {agent_id!r}")
    return problems
