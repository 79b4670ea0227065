// Package retryfwd forwards a 2026-07-28 retry of a call parked on another
// replica to that replica, and serves the retries forwarded to this one.
//
// A bridged call waits between a modern client's rounds on the replica
// that started it (package modern: its requestState names that replica).
// A retry that reaches another replica is authenticated there, then sent
// to the replica holding the call (a Kind message, through the session
// store) with its body and its MCP headers (never credentials: the call
// runs on its own), served there as if it had arrived there, and its whole
// answer sent back: two messages, one round trip each.
package retryfwd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// Kind is the sessionstore.Message Kind of a forwarded retry.
const Kind = "retry"

// Timeout bounds one forwarded round: as long as a round may wait.
const Timeout = 10 * time.Minute

// request is a forwarded retry.
type request struct {
	User    string      `json:"u"`
	Profile string      `json:"p,omitempty"`
	Header  http.Header `json:"h"`
	Body    []byte      `json:"b"`
}

// answer is what serving it answered.
type answer struct {
	Status      int    `json:"s"`
	ContentType string `json:"t,omitempty"`
	Body        []byte `json:"b,omitempty"`
}

// header reports whether a request header travels with a forwarded retry:
// MCP's own and the content negotiation, never credentials.
func header(name string) bool {
	switch name {
	case "Content-Type", "Accept", "X-Request-Id":
		return true
	}
	return strings.HasPrefix(name, "Mcp-") && !strings.HasPrefix(name, "Mcp-Mux-Internal-")
}

// Forwarder forwards retries to the replica of their parked call, and
// serves those forwarded here.
type Forwarder struct {
	// Store is the session store the replicas share (read when used).
	Store func() sessionstore.Store
	// Exchange pairs this replica's requests with their replies.
	Exchange *sessionstore.Exchange
	// Serve is /mcp past authentication.
	Serve http.Handler
	// Go runs a forwarded retry off the store's reader, on its owner's
	// background group.
	Go  func(func())
	Log hclog.Logger
}

// Elsewhere serves a retry of a call parked on replica there, and writes
// its answer.
func (f *Forwarder) Elsewhere(w http.ResponseWriter, r *http.Request, body []byte, replica string) {
	c := callpath.CallerFrom(r.Context())
	req := request{User: c.User, Profile: c.Profile, Header: http.Header{}, Body: body}
	for name, v := range r.Header {
		if header(name) {
			req.Header[name] = v
		}
	}
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(r.Context(), Timeout)
	defer cancel()
	reply, err := f.Exchange.Call(ctx, f.Store(), replica, sessionstore.Message{Kind: Kind, Body: b})
	var a answer
	if err == nil {
		err = json.Unmarshal(reply.Body, &a)
	}
	if err != nil {
		msg := "the call this requestState continues waits on another mcp-mux replica, which did not answer; call again without requestState"
		if errors.Is(err, sessionstore.ErrNoReplica) {
			msg = "the call this requestState continues was on an mcp-mux replica that stopped; call again without requestState"
		}
		mcpwire.WriteError(w, http.StatusOK, wire.TopLevelID(body), -32602, msg, nil)
		return
	}
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// Take serves m if it is a retry another replica forwarded here (in the
// background, replying when done) and reports whether it was.
func (f *Forwarder) Take(m sessionstore.Message) bool {
	if m.Kind != Kind {
		return false
	}
	f.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		var req request
		a := answer{Status: http.StatusBadRequest}
		if err := json.Unmarshal(m.Body, &req); err == nil {
			a = f.serve(ctx, &req)
		}
		body, _ := json.Marshal(a)
		if err := sessionstore.Reply(ctx, f.Store(), m, body); err != nil {
			f.Log.Debug("replying to a forwarded retry", "err", err)
		}
	})
	return true
}

// serve serves a forwarded retry as an authenticated request of req.User
// and returns its whole answer.
func (f *Forwarder) serve(ctx context.Context, req *request) answer {
	ctx = callpath.WithCaller(ctx, callpath.NewCaller(req.User, req.Profile))
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(req.Body))
	if err != nil {
		return answer{Status: http.StatusInternalServerError}
	}
	for name, v := range req.Header {
		if header(name) {
			r.Header[name] = v
		}
	}
	rec := &recorder{h: http.Header{}, limit: 2 * callpath.MaxBody}
	f.Serve.ServeHTTP(rec, r)
	if rec.over {
		return answer{Status: http.StatusBadGateway, ContentType: "text/plain", Body: []byte(fmt.Sprintf("the answer exceeded %d bytes", rec.limit))}
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	return answer{Status: status, ContentType: rec.h.Get("Content-Type"), Body: rec.buf.Bytes()}
}

// recorder is the response writer of a forwarded retry: it keeps the
// answer, up to limit bytes.
type recorder struct {
	h      http.Header
	status int
	buf    bytes.Buffer
	limit  int
	over   bool
}

func (r *recorder) Header() http.Header { return r.h }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.buf.Len()+len(p) > r.limit {
		r.over = true
		return 0, errors.New("answer too large")
	}
	return r.buf.Write(p)
}

// Flush is a no-op: the answer goes back whole.
func (r *recorder) Flush() {}
