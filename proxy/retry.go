package proxy

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

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/sessionstore"
)

// A 2026-07-28 retry of a call parked on another replica.
//
// A bridged call waits between a modern client's rounds on the replica
// that started it (package modern: its requestState names that replica).
// A retry that reaches another replica is authenticated there, then sent
// to the replica holding the call (msgRetry, through the session store)
// with its body and its MCP headers (never credentials: the call runs on
// its own), served there as if it had arrived there, and its whole
// answer sent back: two messages, one round trip each.

// msgRetry asks the replica holding a parked call to serve a retry.
const msgRetry = "retry"

// retryTimeout bounds one forwarded round: as long as a round may wait.
const retryTimeout = 10 * time.Minute

// retryRequest is a forwarded retry.
type retryRequest struct {
	User    string      `json:"u"`
	Profile string      `json:"p,omitempty"`
	Header  http.Header `json:"h"`
	Body    []byte      `json:"b"`
}

// retryAnswer is what serving it answered.
type retryAnswer struct {
	Status      int    `json:"s"`
	ContentType string `json:"t,omitempty"`
	Body        []byte `json:"b,omitempty"`
}

// retryHeader reports whether a request header travels with a forwarded
// retry: MCP's own and the content negotiation, never credentials.
func retryHeader(name string) bool {
	switch name {
	case "Content-Type", "Accept", "X-Request-Id":
		return true
	}
	return strings.HasPrefix(name, "Mcp-") && !strings.HasPrefix(name, "Mcp-Mux-Internal-")
}

// retrier forwards retries to the replica of their parked call, and
// serves those forwarded here.
type retrier struct {
	sessions *sessionTable
	serve    http.Handler // /mcp past authentication (mcpHandler)
	log      hclog.Logger
}

// elsewhere serves a retry of a call parked on replica there, and writes
// its answer.
func (s *retrier) elsewhere(w http.ResponseWriter, r *http.Request, body []byte, replica string) {
	req := retryRequest{User: callpath.User(r.Header), Profile: callpath.Profile(r.Header), Header: http.Header{}, Body: body}
	for name, v := range r.Header {
		if retryHeader(name) {
			req.Header[name] = v
		}
	}
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(r.Context(), retryTimeout)
	defer cancel()
	reply, err := s.sessions.x.Call(ctx, s.sessions.store, replica, sessionstore.Message{Kind: msgRetry, Body: b})
	var a retryAnswer
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

// message takes what another replica sent this one: a forwarded retry
// here, the rest in the session table.
func (s *retrier) message(m sessionstore.Message) {
	if m.Kind == msgRetry {
		s.here(m)
		return
	}
	s.sessions.message(m)
}

// here serves a retry another replica forwarded, and replies.
func (s *retrier) here(m sessionstore.Message) {
	s.sessions.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), retryTimeout)
		defer cancel()
		var req retryRequest
		a := retryAnswer{Status: http.StatusBadRequest}
		if err := json.Unmarshal(m.Body, &req); err == nil {
			a = s.serveRetry(ctx, &req)
		}
		body, _ := json.Marshal(a)
		if err := sessionstore.Reply(ctx, s.sessions.store, m, body); err != nil {
			s.log.Debug("replying to a forwarded retry", "err", err)
		}
	})
}

// serveRetry serves a forwarded retry as an authenticated request of
// req.User and returns its whole answer.
func (s *retrier) serveRetry(ctx context.Context, req *retryRequest) retryAnswer {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(req.Body))
	if err != nil {
		return retryAnswer{Status: http.StatusInternalServerError}
	}
	for name, v := range req.Header {
		if retryHeader(name) {
			r.Header[name] = v
		}
	}
	r.Header.Set(callpath.UserHeader, req.User)
	if req.Profile != "" {
		r.Header.Set(callpath.ProfileHeader, req.Profile)
	}
	rec := &recorder{h: http.Header{}, limit: 2 * callpath.MaxBody}
	s.serve.ServeHTTP(rec, r)
	if rec.over {
		return retryAnswer{Status: http.StatusBadGateway, ContentType: "text/plain", Body: []byte(fmt.Sprintf("the answer exceeded %d bytes", rec.limit))}
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	return retryAnswer{Status: status, ContentType: rec.h.Get("Content-Type"), Body: rec.buf.Bytes()}
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
