# syntax=docker/dockerfile:1
#
# mcp-mux container image.
#
#   docker build -t mcp-mux --build-arg VERSION=$(git describe --tags --always) .
#   docker run -p 8931:8931 -v $PWD/extensions_config.json:/etc/mcp-mux/extensions_config.json:ro mcp-mux
#
# The default image is a static binary on distroless/static (non-root, no
# shell, no Node.js): right for HTTP/SSE upstreams and stdio servers you copy
# in as static binaries. For stdio servers started with npx, build the
# Node.js variant instead:
#
#   docker build --target node -t mcp-mux:node .
#
# The config is read from /etc/mcp-mux/extensions_config.json (mount it, e.g.
# from a ConfigMap); a missing file is an error.

ARG GO_VERSION=1.26
ARG NODE_VERSION=20

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mcp-mux ./cmd/mcp-mux

# Variant with Node.js for npx-launched stdio servers: --target node.
FROM node:${NODE_VERSION}-bookworm-slim AS node
COPY --from=build /out/mcp-mux /usr/local/bin/mcp-mux
ENV HOME=/home/node NPM_CONFIG_CACHE=/home/node/.npm
USER node
WORKDIR /home/node
EXPOSE 8931
ENTRYPOINT ["/usr/local/bin/mcp-mux", "serve", "--listen", "0.0.0.0:8931", "--config", "/etc/mcp-mux/extensions_config.json"]

# Default: static binary, distroless, non-root (uid 65532).
FROM gcr.io/distroless/static-debian12:nonroot AS static
COPY --from=build /out/mcp-mux /usr/local/bin/mcp-mux
EXPOSE 8931
ENTRYPOINT ["/usr/local/bin/mcp-mux", "serve", "--listen", "0.0.0.0:8931", "--config", "/etc/mcp-mux/extensions_config.json"]
