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

const defaultListen = "127.0.0.1:8932"

func main() {
	listen := flag.String("listen", "", "listen address (env DEMO_HTTP_LISTEN; default "+defaultListen+")")
	flag.Parse()
	if *listen == "" {
		*listen = os.Getenv("DEMO_HTTP_LISTEN")
	}
	if *listen == "" {
		*listen = defaultListen
	}
	if err := serve(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "demo-http-server:", err)
		os.Exit(1)
	}
}

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
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
