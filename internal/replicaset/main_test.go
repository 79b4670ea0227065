package replicaset_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/replicaset"
)

// muxBin is the mcp-mux binary TestMain builds.
var muxBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcp-mux-replicaset-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if muxBin, err = replicaset.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := mcptest.LeakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// envSticky runs the fixtures behind a balancer with sticky sessions: a
// diagnostic, to see what the product does when each session stays on
// the replica that created it.
const envSticky = "MCP_MUX_REPLICAS_STICKY"

// fixture is a replica set in front of three real upstreams: inter (the
// interactive tools, roots, a subscribable resource), jobs (durable
// tasks, each held until the test releases it) and extra (added and
// removed by reloads).
type fixture struct {
	set                         *replicaset.Set
	jobs                        *mcptest.TaskServer
	interURL, jobsURL, extraURL string
	sleeping                    atomic.Int64 // inter's sleep calls running now
}

// config options: the extra server, tool_search, a limits rule (shared
// in Redis).
type cfgOpts struct{ extra, toolSearch, limits bool }

func newFixture(t *testing.T, replicas int) *fixture {
	t.Helper()
	return startFixture(t, replicas, replicaset.HAProxy, "", cfgOpts{})
}

// newFixtureBehind is newFixture behind the balancer lb.
func newFixtureBehind(t *testing.T, replicas int, lb replicaset.Balancer) *fixture {
	t.Helper()
	return startFixture(t, replicas, lb, "", cfgOpts{})
}

// newFixtureOn is newFixture on the Redis deployment store (see
// replicaset.Options.Store) with the config options o.
func newFixtureOn(t *testing.T, replicas int, store string, o cfgOpts) *fixture {
	t.Helper()
	return startFixture(t, replicas, replicaset.HAProxy, store, o)
}

func startFixture(t *testing.T, replicas int, lb replicaset.Balancer, store string, o cfgOpts) *fixture {
	t.Helper()
	fx := &fixture{jobs: &mcptest.TaskServer{Held: true}}
	inter := mcptest.NewFlowServer("inter")
	stop, stopHandlers := context.WithCancel(context.Background())
	inter.AddReceivingMiddleware(upstreamMiddleware(stop, &fx.sleeping))
	fx.interURL = mcptest.ServeHTTP(t, inter).URL + "/mcp"
	// A tool waiting on a client whose replica was killed waits for ever
	// (its session does not end with the replica's connection): cancel it
	// before the server's Close waits for it.
	t.Cleanup(stopHandlers)
	fx.jobsURL = mcptest.ServeHTTP(t, fx.jobs.MCP()).URL + "/mcp"
	fx.extraURL = mcptest.ServeHTTP(t, mcptest.NewServer("extra", "ping")).URL + "/mcp"
	fx.set = replicaset.Start(t, replicaset.Options{Binary: muxBin, Replicas: replicas, Config: fx.config(o), Store: store,
		Balancer: lb, StickySessions: os.Getenv(envSticky) == "1"})
	return fx
}

// upstreamMiddleware cancels every request the server handles when stop
// is done, and counts the sleep calls running in sleeping.
func upstreamMiddleware(stop context.Context, sleeping *atomic.Int64) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(stop, cancel)()
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" && p.Name == "sleep" {
				sleeping.Add(1)
				defer sleeping.Add(-1)
			}
			return next(ctx, method, req)
		}
	}
}

// config is the shared config: inter and jobs, durable tasks polled every
// second, plus what o asks for.
func (fx *fixture) config(o cfgOpts) string {
	servers := []string{
		`"inter": {"type": "http", "url": "` + fx.interURL + `"}`,
		`"jobs": ` + mcptest.TaskServerJSON(fx.jobsURL, ""),
	}
	if o.extra {
		servers = append(servers, `"extra": {"type": "http", "url": "`+fx.extraURL+`"}`)
	}
	limits := ""
	if o.limits {
		limits = `
  "limits": {"rules": [{"name": "per-caller", "scope": "caller", "calls": 100000, "per_seconds": 60, "in_flight": 64}]},`
	}
	return `{
  "mcpServers": {` + strings.Join(servers, ",\n    ") + `},
  "mcp_tasks": {"enabled": true, "poll_interval_seconds": 1, "lease_seconds": 5},` + limits + `
  "tool_search": {"enabled": ` + fmt.Sprint(o.toolSearch) + `}
}`
}
