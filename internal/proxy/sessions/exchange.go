package sessions

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// The messages replicas send each other for a session: a client's answer
// to a request another replica sent it, the holder's subscribes
// (holder.go), a retry of a call parked elsewhere (package retryfwd), and
// the replies to each.

// msgAnswer is the Kind of a client's answer sent on to the replica that
// waits for it.
const msgAnswer = "answer"

// message takes what another replica sent this one: a reply to its own
// request, a forwarded retry (Options.Retry), a request to run here
// (holder.go), or a client's answer to a request this replica sent (its
// id names it).
func (t *Table) message(m sessionstore.Message) {
	if t.retry != nil && t.retry.Take(m) {
		return
	}
	if t.x.Take(m) {
		return
	}
	switch m.Kind {
	case msgSubscribe:
		t.holder.subscribeHere(m)
		return
	case msgAnswer:
	default:
		return
	}
	e := t.cache.get(m.Session)
	if e == nil {
		return
	}
	var msg wire.Message
	if wire.Decode(m.Body, &msg) == nil && msg.IsResponse() {
		e.st.Resolve(&msg)
	}
}

// Answer routes a client's response m (body) to a request mcp-mux sent it
// (its id names the replica that waits) and reports whether it was one;
// it was answered 202 then.
func (t *Table) Answer(w http.ResponseWriter, st *callpath.Session, m *wire.Message, body []byte) bool {
	replica, ok := requestReplica(m.ID)
	if !ok {
		return false
	}
	if replica == t.replica {
		st.Resolve(m)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := t.store.Send(ctx, replica, sessionstore.Message{Kind: msgAnswer, Session: st.ID, Body: body})
		cancel()
		if err != nil {
			t.log.Debug("an answer to another replica's request was not delivered", "session", st.ID, "err", err)
		}
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// requestReplica returns the replica named by the id (raw JSON) of a
// request mcp-mux sent a client.
func requestReplica(id []byte) (string, bool) {
	const prefix = `"` + callpath.RequestPrefix
	if !bytes.HasPrefix(id, []byte(prefix)) {
		return "", false
	}
	rest := string(id[len(prefix):])
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 || !sessionstore.ValidReplica(rest[:i]) {
		return "", false
	}
	return rest[:i], true
}
