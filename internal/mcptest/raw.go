package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// Scripted servers: hand-written MCP servers that can send what no SDK
// server would (replies nested two million levels deep, endless list pages),
// for the tests of mcp-mux's bounds.

// Script answers one request of a scripted server with its raw result, or an
// error that becomes a JSON-RPC error. ctx ends when the request's HTTP
// client goes away. initialize is answered before the script sees anything.
type Script func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

const initResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}`

type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func rpcAnswer(id json.RawMessage, result json.RawMessage, err error) []byte {
	if err != nil {
		msg, _ := json.Marshal(err.Error())
		return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32603,"message":` + string(msg) + `}}`)
	}
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + string(result) + `}`)
}

// RawHTTP serves script over Streamable HTTP (JSON responses, no event
// streams); the endpoint is URL + "/mcp".
func RawHTTP(t testing.TB, script Script) *httptest.Server {
	t.Helper()
	return rawHTTP(t, script, false)
}

// RawHTTPStream is RawHTTP answering each request with one event on an
// event stream, as servers that stream their responses do.
func RawHTTPStream(t testing.TB, script Script) *httptest.Server {
	t.Helper()
	return rawHTTP(t, script, true)
}

func rawHTTP(t testing.TB, script Script, stream bool) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			return
		case http.MethodPost:
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m rpcMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var out []byte
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "scripted")
			out = rpcAnswer(m.ID, json.RawMessage(initResult), nil)
		} else {
			res, err := script(r.Context(), m.Method, m.Params)
			if r.Context().Err() != nil {
				return
			}
			out = rpcAnswer(m.ID, res, err)
		}
		if stream && m.Method != "initialize" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: message\ndata: "))
			_, _ = w.Write(out)
			_, _ = w.Write([]byte("\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// Deep returns n nested arrays.
func Deep(n int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", n) + strings.Repeat("]", n))
}

// ToolList returns a tools/list result with the named tools (no schema
// properties) and, when cursor is not "", a nextCursor.
func ToolList(cursor string, names ...string) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":%q,"inputSchema":{"type":"object"}}`, n)
	}
	b.WriteString(`]`)
	if cursor != "" {
		fmt.Fprintf(&b, `,"nextCursor":%q`, cursor)
	}
	b.WriteString(`}`)
	return json.RawMessage(b.String())
}

// TextResult returns a CallToolResult with one text block.
func TextResult(s string) json.RawMessage {
	q, _ := json.Marshal(s)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(q) + `}]}`)
}

// Stdio scripts, chosen by name in the re-executed test binary.
const (
	// DeepCall lists echo and deep; deep answers with a result nested two
	// million levels, echo echoes its "text" argument.
	DeepCall = "deep-call"
	// DeepList answers tools/list with a result nested two million levels.
	DeepList = "deep-list"
	// AskClient lists ask(method, params): a call sends the client one
	// request with that method and params (a JSON text, written exactly as
	// given) and answers with a text result: the JSON text of the client's
	// result, or of its error.
	AskClient = "ask-client"
)

const envScript = "MCPTEST_SCRIPT"

// ScriptedStdio returns the command, args and env that run the test binary
// as the stdio server script (DeepCall, DeepList). The calling package's
// TestMain must call MaybeServeStdio first.
func ScriptedStdio(script string) (string, []string, map[string]string) {
	cmd, args, env := StdioServer("scripted", StdioOptions{})
	env[envScript] = script
	return cmd, args, env
}

// serveScript runs a stdio script on stdin and stdout until stdin ends.
func serveScript(name string, in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	w := bufio.NewWriter(out)
	for sc.Scan() {
		var m rpcMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		var res json.RawMessage
		switch {
		case m.Method == "initialize":
			res = json.RawMessage(initResult)
		case m.Method == "tools/list" && name == DeepList:
			res = Deep(2_000_000)
		case m.Method == "tools/list" && name == AskClient:
			res = ToolList("", "ask")
		case m.Method == "tools/list":
			res = ToolList("", "echo", "deep")
		case m.Method == "tools/call":
			var p struct {
				Name      string `json:"name"`
				Arguments struct {
					Text   string `json:"text"`
					Method string `json:"method"`
					Params string `json:"params"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if name == AskClient {
				res = TextResult(string(askClient(sc, w, p.Arguments.Method, p.Arguments.Params)))
			} else if p.Name == "deep" {
				res = Deep(2_000_000)
			} else {
				res = TextResult(p.Arguments.Text)
			}
		default:
			res = json.RawMessage(`{}`)
		}
		_, _ = w.Write(rpcAnswer(m.ID, res, nil))
		_ = w.WriteByte('\n')
		_ = w.Flush()
	}
	os.Exit(0)
}

// askClient sends the client one request and reads until its response,
// answering nothing else meanwhile; it returns the response's result or
// error as JSON text.
func askClient(sc *bufio.Scanner, w *bufio.Writer, method, params string) json.RawMessage {
	const id = `"ask-1"`
	_, _ = w.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"method":` + quote(method) + `,"params":` + params + "}\n")
	_ = w.Flush()
	for sc.Scan() {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || string(r.ID) != id {
			continue
		}
		if r.Error != nil {
			return r.Error
		}
		return r.Result
	}
	return json.RawMessage(`"stdin closed"`)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
