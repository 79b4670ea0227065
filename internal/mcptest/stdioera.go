package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// First-message behaviours of a re-executed stdio server (StdioOptions.First).
const (
	// FirstExit exits at once when the first message is not initialize, as
	// servers built on rmcp do.
	FirstExit = "exit"
	// FirstRefuse answers a first server/discover with -32601 and then
	// serves 2025-11-25 only.
	FirstRefuse = "refuse"
	// FirstSilent ignores a first server/discover (no answer) and then
	// serves 2025-11-25.
	FirstSilent = "silent"
)

const (
	envFirst      = "MCPTEST_FIRST"       // a First* behaviour
	envStartsDir  = "MCPTEST_STARTS_DIR"  // note each process start there
	envSubsDir    = "MCPTEST_SUBS_DIR"    // serve a subscribable resource, noting subscriptions there
	envMethodsDir = "MCPTEST_METHODS_DIR" // note the methods each process receives there
	envStartDelay = "MCPTEST_START_DELAY" // wait this long (a time.Duration) before reading stdin
)

// SubsResource is the URI of the resource a server started with
// StdioOptions.SubsDir offers.
const SubsResource = "res://ticker"

// subsServer is a server with one subscribable resource, SubsResource,
// which it announces as updated every 20 ms. It creates dir/subscribed and
// dir/unsubscribed when a subscription starts and ends.
func subsServer(name, dir string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, &mcp.ServerOptions{
		SubscribeHandler: func(context.Context, *mcp.SubscribeRequest) error {
			return os.WriteFile(filepath.Join(dir, "subscribed"), nil, 0o600)
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error {
			return os.WriteFile(filepath.Join(dir, "unsubscribed"), nil, 0o600)
		},
	})
	s.AddResource(&mcp.Resource{URI: SubsResource, Name: "ticker"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: SubsResource, Text: "tick"}}}, nil
	})
	go func() {
		for range time.Tick(20 * time.Millisecond) {
			_ = s.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: SubsResource})
		}
	}()
	return s
}

// noteStart creates a file named for this process in dir.
func noteStart(dir string) {
	_ = os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o600)
}

// noteMethods creates dir/<pid>/<method> (slashes as "_") for every method
// the process receives.
func noteMethods(dir string) mcp.Middleware {
	own := filepath.Join(dir, strconv.Itoa(os.Getpid()))
	_ = os.MkdirAll(own, 0o700)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			_ = os.WriteFile(filepath.Join(own, strings.ReplaceAll(method, "/", "_")), nil, 0o600)
			return next(ctx, method, req)
		}
	}
}

// Received reports whether the process pid of a server started with
// StdioOptions.MethodsDir = dir received method.
func Received(dir string, pid int, method string) bool {
	_, err := os.Stat(filepath.Join(dir, strconv.Itoa(pid), strings.ReplaceAll(method, "/", "_")))
	return err == nil
}

// Starts counts the processes started with StdioOptions.StartsDir = dir.
func Starts(dir string) int {
	ents, _ := os.ReadDir(dir)
	return len(ents)
}

// firstTransport returns the transport of a server with a First behaviour:
// it reads the first message itself and acts on it.
func firstTransport(first string) mcp.Transport {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	line, err := in.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		os.Exit(0)
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(line, &m)
	switch {
	case first == FirstExit && m.Method != "initialize":
		os.Exit(3)
	case first == FirstRefuse && m.Method == "server/discover":
		_, _ = os.Stdout.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"Method not found"}}` + "\n"))
		line = nil
	case first == FirstSilent && m.Method == "server/discover":
		line = nil
	}
	r := io.MultiReader(bytes.NewReader(line), in)
	return &mcp.IOTransport{Reader: io.NopCloser(r), Writer: os.Stdout}
}
