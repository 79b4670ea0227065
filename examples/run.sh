#!/usr/bin/env bash
# Runs the example: examples/demo-http-server in the background and mcp-mux in
# the foreground on http://127.0.0.1:8931/mcp with examples/extensions_config.json.
# Other ports come from the environment: MCP_MUX_LISTEN (mcp-mux, default
# 127.0.0.1:8931) and DEMO_HTTP_LISTEN (the demo server, default
# 127.0.0.1:8932); the config reads the demo's URL from DEMO_URL, set here
# from DEMO_HTTP_LISTEN unless it is set.
# Needs Go; the "everything" server also needs Node.js (npx). Without npx, or
# while npm is still downloading, mcp-mux skips that server and retries it in
# the background. Extra arguments go to `mcp-mux serve` (e.g. --log-level debug).
# Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
case ":$PATH:" in *:/usr/local/go/bin:*) ;; *) PATH="$PATH:/usr/local/go/bin" ;; esac

bin=bin
mkdir -p "$bin"
echo "building mcp-mux and the demo server…" >&2
go build -o "$bin/mcp-mux" ./cmd/mcp-mux
go build -o "$bin/demo-http-server" ./examples/demo-http-server
command -v npx >/dev/null || echo "note: npx not found; the \"everything\" server will be skipped" >&2

export DEMO_TOKEN="${DEMO_TOKEN:-demo-token}"
export DEMO_HTTP_LISTEN="${DEMO_HTTP_LISTEN:-127.0.0.1:8932}"
export DEMO_URL="${DEMO_URL:-http://$DEMO_HTTP_LISTEN/mcp}"
demo_pid="" mux_pid=""
stop() {
  [[ -n $mux_pid ]] && kill -TERM "$mux_pid" 2>/dev/null || true
  [[ -n $demo_pid ]] && kill -TERM "$demo_pid" 2>/dev/null || true
}
trap stop INT TERM
trap 'stop; wait' EXIT

"$bin/demo-http-server" &
demo_pid=$!
"$bin/mcp-mux" serve --config examples/extensions_config.json --log-format text "$@" &
mux_pid=$!
# wait returns early when a signal arrives; keep waiting for mcp-mux to finish.
status=0
while kill -0 "$mux_pid" 2>/dev/null; do
  if wait "$mux_pid"; then status=0; else status=$?; fi
done
exit "$status"
