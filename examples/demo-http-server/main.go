// Command demo-http-server is a small Streamable-HTTP MCP server for trying
// mcp-mux: it serves the test tool set of internal/mcptest (echo, add, pid,
// headers, sleep, fail, count) at http://ADDR/mcp.
//
//	go run ./examples/demo-http-server [--listen 127.0.0.1:8932]
//
// The address comes from --listen, else $DEMO_HTTP_LISTEN, else
// 127.0.0.1:8932. Once listening it prints "demo-http-server: serving
// http://ADDR/mcp" on stdout; SIGINT or SIGTERM stops it.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// defaultListen is the address served when neither --listen nor
// $DEMO_HTTP_LISTEN gives one.
const defaultListen = "127.0.0.1:8932"

// main serves until SIGINT or SIGTERM.
func main() {
	listen := flag.String("listen", "", "listen address (env DEMO_HTTP_LISTEN; default "+defaultListen+")")
	flag.Parse()
	addr := cmp.Or(*listen, os.Getenv("DEMO_HTTP_LISTEN"), defaultListen)
	if err := serve(addr); err != nil {
		fmt.Fprintln(os.Stderr, "demo-http-server:", err)
		os.Exit(1)
	}
}

// serve serves the test tool set at addr until a signal stops it.
func serve(addr string) error {
	srv := mcptest.NewServer("demo")
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Printf("demo-http-server: serving http://%s/mcp\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := awaitStop(ctx, errc); err != nil {
		return err
	}
	return shutdown(hs)
}

// awaitStop waits for ctx (the signals) to end, or for the server to
// fail.
func awaitStop(ctx context.Context, errc <-chan error) error {
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
}

// shutdown stops hs, giving calls in flight five seconds.
func shutdown(hs *http.Server) error {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
