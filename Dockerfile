# syntax=docker/dockerfile:1
#
# mcp-mux container image.
#
#   docker build -t mcp-mux --build-arg VERSION=$(git describe --tags --always) .
#   docker build -t mcp-mux:node --target node .      # with Node.js, for npx stdio servers
#
# The default target is a static binary on distroless/static: uid 65532, no
# shell, nothing else in the image. The node target adds the mux to Debian's
# Node.js image (uid 1000) for stdio servers started with npx; npm's cache
# is /tmp/.npm, so a read-only root filesystem with an emptyDir on /tmp works.
#
# The entrypoint is the binary and the command is `serve`, so
# `docker run IMAGE validate /etc/mcp-mux/extensions_config.json` works too.
# The config is read from /etc/mcp-mux/extensions_config.json (mount its
# directory, e.g. from a ConfigMap; a missing file is an error). The embedded
# task store lives in /var/lib/mcp-mux (MCP_MUX_DATA_DIR), a VOLUME: mount a
# named volume there to keep tasks across containers.
#
# The listen address is the binary's default, 127.0.0.1:8931: right for a
# sidecar, whose agent shares the pod's loopback. To serve other pods (or
# `docker run -p`), set MCP_MUX_LISTEN=0.0.0.0:8931 — and then either an
# inbound.auth mode other than "none" or, knowingly, inbound.auth.allow_remote:
# with "none", serve refuses a non-loopback listen address.
#
# cmd/mcp-mux/dockerfile_test.go runs the build stage's `go build` line as it
# is written here and checks that the binary is static and stamped: keep the
# two in step.

ARG GO_VERSION=1.26.8
ARG NODE_VERSION=20

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/mcp-mux ./cmd/mcp-mux
RUN mkdir -p /out/data

# Variant with Node.js for npx-launched stdio servers: --target node.
FROM node:${NODE_VERSION}-bookworm-slim AS node
COPY --from=build /out/mcp-mux /usr/local/bin/mcp-mux
COPY --from=build --chown=1000:1000 /out/data /var/lib/mcp-mux
ENV HOME=/home/node \
    NPM_CONFIG_CACHE=/tmp/.npm \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    MCP_MUX_CONFIG=/etc/mcp-mux/extensions_config.json \
    MCP_MUX_DATA_DIR=/var/lib/mcp-mux
VOLUME ["/var/lib/mcp-mux"]
USER 1000:1000
WORKDIR /home/node
EXPOSE 8931
ENTRYPOINT ["/usr/local/bin/mcp-mux"]
CMD ["serve"]

# Default: static binary on distroless, non-root.
FROM gcr.io/distroless/static-debian12:nonroot AS static
COPY --from=build /out/mcp-mux /usr/local/bin/mcp-mux
COPY --from=build --chown=65532:65532 /out/data /var/lib/mcp-mux
ENV MCP_MUX_CONFIG=/etc/mcp-mux/extensions_config.json \
    MCP_MUX_DATA_DIR=/var/lib/mcp-mux
VOLUME ["/var/lib/mcp-mux"]
USER 65532:65532
EXPOSE 8931
ENTRYPOINT ["/usr/local/bin/mcp-mux"]
CMD ["serve"]
