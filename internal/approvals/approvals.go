// Package approvals keeps the calls a human must approve before mcp-mux
// forwards them: each request for approval is a record binding the
// caller, server, tool, arguments digest and rule, with an expiry,
// decided once (approved or denied) and, once approved, taken once — by
// the call that waited for it or by its identical retry. Records live in
// Redis (shared by replicas, with store.redis_url) or in a bbolt file;
// pending requests are bounded per caller and in total. No proxy wiring.
package approvals

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
)

// The states of a record.
const (
	Pending  = "pending"  // waiting for a decision
	Approved = "approved" // approved, not yet taken by its call
	Denied   = "denied"   // refused
	Used     = "used"     // approved and taken: its call ran
)

// Decisions an approver posts.
const (
	Approve = "approve"
	Deny    = "deny"
)

// Bounds.
const (
	// DefaultMaxPerCaller bounds one caller's pending requests.
	DefaultMaxPerCaller = 16
	// DefaultMaxPending bounds the pending requests of the whole fleet.
	DefaultMaxPending = 1000
	// MaxPreview bounds a record's redacted arguments preview.
	MaxPreview = 1024
	// MaxReason bounds a decision's reason.
	MaxReason = 256
	// MaxDecider bounds the name of who decided.
	MaxDecider = 64
	// keepAfter is how long a record outlives its expiry, so a late
	// retry learns it expired (or was used) rather than nothing.
	keepAfter = 10 * time.Minute
	// idBytes is the random part of an id (128 bits).
	idBytes = 16
)

// Errors of Decide and Ask.
var (
	ErrNotFound    = errors.New("no such approval request")
	ErrDecided     = errors.New("the approval request was decided already")
	ErrExpired     = errors.New("the approval request expired")
	ErrTooMany     = errors.New("too many pending approval requests")
	ErrTooManyUser = errors.New("too many pending approval requests for this caller")
)

// Record is one request for approval.
type Record struct {
	ID      string    `json:"id"`
	User    string    `json:"user,omitempty"` // the caller, as the inbound auth named them
	Profile string    `json:"profile,omitempty"`
	Server  string    `json:"server"`
	Tool    string    `json:"tool"` // the visible name (a prompt's name, a resource's URI)
	Method  string    `json:"method"`
	Rule    string    `json:"rule"`
	Digest  string    `json:"arguments_digest"`  // sha256 of the canonical arguments
	Preview string    `json:"arguments_preview"` // redacted and clipped by the caller of Ask
	Binding string    `json:"binding"`           // what an identical call shares (Request.Binding)
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Decided time.Time `json:"decided,omitzero"`
	By      string    `json:"decided_by,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// Live reports whether r has not expired at now.
func (r *Record) Live(now time.Time) bool { return now.Before(r.Expires) }

// Request is what a call asks approval for.
type Request struct {
	User, Profile, Server, Tool, Method, Rule string
	Args                                      json.RawMessage // the caller's arguments (any JSON)
	Preview                                   string          // redacted; clipped to MaxPreview
	Expires                                   time.Duration
	// Once makes the request its own: never found again by an identical
	// call (a caller's question is asked anew each time).
	Once bool
}

// Digest is the hex sha256 of args in a canonical form (decoded and
// encoded again: object keys sorted, insignificant space dropped);
// arguments that do not decode are hashed as they are. Absent and empty
// arguments are the same.
func Digest(args json.RawMessage) string {
	canon := []byte("{}")
	if len(args) > 0 && string(args) != "null" {
		canon = args
		var v any
		d := json.NewDecoder(bytes.NewReader(args))
		d.UseNumber()
		if d.Decode(&v) == nil {
			if b, err := json.Marshal(v); err == nil {
				canon = b
			}
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// Binding is what identical calls share: the same caller, server, tool
// (method and name), rule and arguments digest.
func (q *Request) Binding(digest string) string {
	h := sha256.New()
	for _, s := range []string{q.User, q.Server, q.Method, q.Tool, q.Rule, digest} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	if q.Once {
		h.Write([]byte(newID()))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// newID returns a fresh unguessable id.
func newID() string {
	b := make([]byte, idBytes)
	_, _ = rand.Read(b)
	return "appr-" + hex.EncodeToString(b)
}

// ValidID reports whether id has the shape of an id newID makes (a
// forged or mangled one is refused before any store sees it).
func ValidID(id string) bool {
	rest, ok := strings.CutPrefix(id, "appr-")
	if !ok || len(rest) != 2*idBytes {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// Options configure New.
type Options struct {
	// Store keeps the records; when nil, Open makes it at first use (and
	// again after a failure).
	Store Store
	Open  func() (Store, error)
	// MaxPerCaller and MaxPending bound pending requests (defaults
	// DefaultMaxPerCaller, DefaultMaxPending).
	MaxPerCaller, MaxPending int
	// Poll is how often Wait looks at a record (default 250 ms).
	Poll time.Duration
	Now  func() time.Time
}

// Manager asks for, waits for, decides and takes approvals.
type Manager struct {
	o      Options
	events *prometheus.CounterVec // by rule and event

	mu    sync.Mutex
	store Store // o.Store, or what o.Open made
}

// New returns a Manager over o.Store.
func New(o Options) *Manager {
	if o.MaxPerCaller <= 0 {
		o.MaxPerCaller = DefaultMaxPerCaller
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Manager{o: o, store: o.Store, events: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_mux_approvals_total",
		Help: "Approval events by rule: requested, approve, deny (decisions), ran (an approved call ran), unaskable (a caller's client cannot be asked).",
	}, []string{"rule", "event"})}
}

// Register adds mcp_mux_approvals_total to reg.
func (m *Manager) Register(reg prometheus.Registerer) error {
	if err := reg.Register(m.events); err != nil {
		return fmt.Errorf("approvals: metrics: %w", err)
	}
	return nil
}

// st returns the store, opening it first when it is not yet open.
func (m *Manager) st() (Store, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.store != nil {
		return m.store, nil
	}
	if m.o.Open == nil {
		return nil, errors.New("no approvals store")
	}
	st, err := m.o.Open()
	if err != nil {
		return nil, fmt.Errorf("opening the approvals store: %w", err)
	}
	m.store = st
	return st, nil
}

// Ready opens the store if it is not open yet.
func (m *Manager) Ready() error {
	_, err := m.st()
	return err
}

// Count counts event of rule (a configured name: the label stays bounded).
func (m *Manager) Count(rule, event string) { m.events.WithLabelValues(rule, event).Inc() }

// Ask returns the live record of q's binding — pending, approved or
// denied — or, when there is none (none yet, used, expired), a new
// pending one (fresh), within the bounds.
func (m *Manager) Ask(ctx context.Context, q Request) (rec *Record, fresh bool, err error) {
	now := m.o.Now()
	digest := Digest(q.Args)
	rec = &Record{ID: newID(), User: q.User, Profile: q.Profile, Server: q.Server, Tool: q.Tool,
		Method: q.Method, Rule: q.Rule, Digest: digest, Preview: bounds.Clip(q.Preview, MaxPreview),
		Binding: q.Binding(digest), State: Pending, Created: now.UTC(), Expires: now.Add(q.Expires).UTC()}
	st, err := m.st()
	if err != nil {
		return nil, false, err
	}
	got, err := st.create(ctx, rec, m.o.MaxPerCaller, m.o.MaxPending, now)
	switch {
	case errors.Is(err, ErrTooMany), errors.Is(err, ErrTooManyUser):
		return nil, false, err
	case err != nil:
		return nil, false, fmt.Errorf("recording the approval request: %w", err)
	}
	if got.ID == rec.ID {
		m.Count(q.Rule, "requested")
	}
	return got, got.ID == rec.ID, nil
}

// Get returns the record of id (ErrNotFound when there is none).
func (m *Manager) Get(ctx context.Context, id string) (*Record, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	st, err := m.st()
	if err != nil {
		return nil, err
	}
	rec, err := st.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading approval request: %w", err)
	}
	if rec == nil {
		return nil, ErrNotFound
	}
	return rec, nil
}

// Wait returns id's record once it is no longer pending, or its pending
// record when ctx ends first (with no error: the caller's wait is over,
// the request is not).
func (m *Manager) Wait(ctx context.Context, id string) (*Record, error) {
	t := time.NewTicker(m.o.Poll)
	defer t.Stop()
	for {
		rec, err := m.Get(context.WithoutCancel(ctx), id)
		if err != nil || rec.State != Pending || !rec.Live(m.o.Now()) {
			return rec, err
		}
		select {
		case <-ctx.Done():
			return rec, nil
		case <-t.C:
		}
	}
}

// Decide approves or denies the pending request id, as by, for reason.
func (m *Manager) Decide(ctx context.Context, id, decision, by, reason string) (*Record, error) {
	state := map[string]string{Approve: Approved, Deny: Denied}[decision]
	if state == "" {
		return nil, fmt.Errorf("decision %q is not %q or %q", bounds.Clip(decision, 16), Approve, Deny)
	}
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	st, err := m.st()
	if err != nil {
		return nil, err
	}
	rec, err := st.decide(ctx, id, state, bounds.Clip(by, MaxDecider), bounds.Clip(reason, MaxReason), m.o.Now())
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrDecided) && !errors.Is(err, ErrExpired) {
		return nil, fmt.Errorf("deciding approval request: %w", err)
	}
	return rec, err
}

// Take turns the approved request id into used, once: ok is false when
// it is not approved (any more) or expired — another call took it.
func (m *Manager) Take(ctx context.Context, id string) (ok bool, err error) {
	st, err := m.st()
	if err != nil {
		return false, err
	}
	ok, err = st.take(ctx, id, m.o.Now())
	if err != nil {
		return false, fmt.Errorf("taking approval %s: %w", id, err)
	}
	return ok, nil
}

// Pending returns up to n pending, live requests, oldest first, and how
// many there are.
func (m *Manager) Pending(ctx context.Context, n int) ([]*Record, int, error) {
	st, err := m.st()
	if err != nil {
		return nil, 0, err
	}
	recs, total, err := st.pending(ctx, m.o.Now(), n)
	if err != nil {
		return nil, 0, fmt.Errorf("listing approval requests: %w", err)
	}
	return recs, total, nil
}

// Close closes the store, if open.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.store == nil {
		return nil
	}
	return m.store.Close()
}
