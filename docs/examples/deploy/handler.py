"""deploy: reply to ``/deploy VERSION`` (a stand-in for starting a real deployment)."""

from __future__ import annotations

from gatewayd.hooks import HookContext, HookEvent


async def handler(event: HookEvent, ctx: HookContext) -> None:
    """``command:deploy``: the hook is only loaded once its requirements are met."""
    version = event.context.get("args") or "latest"
    target = ctx.config["target"]  # hooks.entries.deploy.target (required in HOOK.md)
    token = ctx.env["DEPLOY_TOKEN"]  # the process env merged with hooks.entries.deploy.env
    ctx.log.info("deploy.requested", version=version, target=target, token_set=bool(token))
    event.messages.append(f"deploying {version} to {target}")
