# syntax=docker/dockerfile:1
# The Trellis server image: Debian with git, Python and Node (for the agent CLIs), tini as
# PID 1 (it reaps detached run controllers and whatever they leave), and `trellis` — built
# from this checkout (the default) or taken from a release archive:
#
#   docker build -t trellis .
#   docker build -t trellis --build-arg TRELLIS_SOURCE=release \
#     --build-arg TRELLIS_ARCHIVE=dist/trellis-0.1.0-x86_64-linux.tar.gz .
#   docker build -t trellis \
#     --build-arg AGENT_CLIS="@anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0" .
#
# It runs `trellis serve` on 0.0.0.0:8420 with HTTPS (mount a certificate and key at
# /etc/trellis/tls/) and the bearer token in $TRELLIS_TEAM_TOKEN; state, ledger and run
# workspaces live in the volume /var/lib/trellis. README, "The server image".
# Needs BuildKit (the default builder), which builds only the stage TRELLIS_SOURCE names.

ARG RUST_VERSION=1.95
ARG NODE_VERSION=22
# `build`: compile this checkout; `release`: unpack TRELLIS_ARCHIVE (made by scripts/release).
ARG TRELLIS_SOURCE=build

FROM rust:${RUST_VERSION}-bookworm AS trellis-build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --locked --release -p trellis-cli \
    && install -m 0755 target/release/trellis /trellis

FROM debian:bookworm-slim AS trellis-release
# A path inside the build context, e.g. one of scripts/release's archives.
ARG TRELLIS_ARCHIVE
COPY ${TRELLIS_ARCHIVE} /tmp/trellis.tar.gz
RUN mkdir /tmp/unpacked \
    && tar -xzf /tmp/trellis.tar.gz -C /tmp/unpacked \
    && install -m 0755 /tmp/unpacked/*/trellis /trellis

FROM trellis-${TRELLIS_SOURCE} AS trellis-binary

FROM node:${NODE_VERSION}-bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       ca-certificates git openssh-client python3 python3-venv tini \
    && rm -rf /var/lib/apt/lists/*
# Agent CLIs to preinstall (npm package specs, space-separated); none by default.
ARG AGENT_CLIS=""
RUN if [ -n "$AGENT_CLIS" ]; then npm install --global $AGENT_CLIS && npm cache clean --force; fi
COPY --from=trellis-binary /trellis /usr/local/bin/trellis
RUN useradd --create-home --uid 10001 --shell /bin/sh trellis \
    && install -d -o trellis -g trellis -m 0700 /var/lib/trellis
USER trellis
ENV TRELLIS_HOME=/var/lib/trellis \
    COPILOT_AUTO_UPDATE=false
VOLUME ["/var/lib/trellis"]
WORKDIR /home/trellis
EXPOSE 8420
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s CMD ["python3", "-c", "import ssl, sys, urllib.request\nfor url in ('https://127.0.0.1:8420/healthz', 'http://127.0.0.1:8420/healthz'):\n    try:\n        urllib.request.urlopen(url, timeout=4, context=ssl._create_unverified_context())\n        sys.exit(0)\n    except Exception:\n        pass\nsys.exit(1)"]
ENTRYPOINT ["tini", "--", "trellis"]
CMD ["serve", "--listen", "0.0.0.0:8420", "--token-env", "TRELLIS_TEAM_TOKEN", \
     "--tls-cert", "/etc/trellis/tls/cert.pem", "--tls-key", "/etc/trellis/tls/key.pem"]
