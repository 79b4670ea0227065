// Package sessionstore keeps mcp-mux's 2025-11-25 downstream sessions as
// small records that any replica can load, and carries what one replica
// must tell another about them.
//
// A session is a Record (its caller, protocol version, log level, the
// replica holding its GET stream; beside them, written once, its
// initialize params; and its lists: tool_search promotions, resource
// subscriptions, thread digests) plus a bounded event log: every message
// mcp-mux sends a session outside a request's own stream (list_changed,
// resource updates, task events, out-of-band logs and requests) is
// appended to the log, and a replica serving the session's GET stream
// follows the log (Follow), so Last-Event-ID resumes on any replica.
// Replicas also send each other addressed messages (Send: a client's
// answer to a request another replica made, a forwarded 2026-07-28 retry)
// and learn of records changed or ended elsewhere (Options.OnChange: a
// small notice of what changed, never the whole record).
//
// Local keeps all of it in process (one replica, no Redis); Redis shares
// it between replicas with at most one round trip per forwarded message.
package sessionstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
)

// Record is one downstream session as every replica sees it: a few
// bounded fields (at most MaxRecord bytes whatever a caller sends), and
// the initialize params and lists kept beside them (Get reads them all).
type Record struct {
	ID string
	// User is the caller the session belongs to: any other caller is refused.
	User string
	// Profile is the caller's profile the session serves ("" = every
	// tool): fixed at initialize, on every replica.
	Profile string
	// Protocol is the negotiated protocol version.
	Protocol string
	// Level is the logging level the client set ("" for none).
	Level string
	// Holder is the replica serving the session's GET stream, if any: it
	// holds the session's upstream resource subscriptions.
	Holder string
	// Rev counts the record's changes (its lists' additions included).
	Rev uint64

	// Init is the client's initialize params as it sent them (at most
	// MaxInit bytes), written once.
	Init json.RawMessage
	// Promoted are the tools tool_search promoted for the session (ListPromoted).
	Promoted []string
	// Subs are the resource URIs the session subscribed to (ListSubs).
	Subs []string
	// Threads are the digests of the threads (other than its own id) the
	// session called upstreams as, the newest MaxThreads (ListThreads):
	// task events of those threads reach it.
	Threads []string
}

// Bounds on what one session may make the store hold: a client controls
// all of it.
const (
	// MaxRecord is the most Redis memory a record's fields take: each is
	// bounded (maxField, bounds.User, bounds.Profile; Create and Update
	// refuse past them), so that a record stays within it whatever a
	// caller sends.
	MaxRecord  = 2 << 10
	MaxInit    = 16 << 10  // bytes of initialize params
	MaxList    = 256       // promotions, subscriptions
	MaxLogSize = 256       // events kept per session for Last-Event-ID
	MaxEvent   = 256 << 10 // bytes of one event (ErrTooLarge past it)
	// MaxThreads is how many thread digests a session keeps: the newest
	// (by first use); an older one is dropped.
	MaxThreads = bounds.SessionThreads
	// MaxNotice bounds the values a change notice carries: what one change
	// added past it is not carried, and replicas read the record again.
	MaxNotice = 1 << 10
	// maxField bounds a record's protocol version, logging level and
	// holder, and each thread digest.
	maxField = 64
)

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.Init = append(json.RawMessage(nil), r.Init...)
	c.Promoted = append([]string(nil), r.Promoted...)
	c.Subs = append([]string(nil), r.Subs...)
	c.Threads = append([]string(nil), r.Threads...)
	return &c
}

// check reports a field of r past its bound (a *bounds.Error naming it).
func (r *Record) check() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"session user", r.User, bounds.User}, {"session profile", r.Profile, bounds.Profile},
		{"protocol version", r.Protocol, maxField}, {"logging level", r.Level, maxField}, {"session holder", r.Holder, maxField}} {
		if len(f.v) > f.max {
			return &bounds.Error{Field: f.name, Len: len(f.v), Max: f.max}
		}
	}
	if len(r.Init) > MaxInit {
		return &bounds.Error{Field: "initialize params", Len: len(r.Init), Max: MaxInit}
	}
	return nil
}

// List names one of the lists a record keeps beside its fields.
type List string

// The lists of a record.
const (
	// ListThreads keeps the newest MaxThreads thread digests.
	ListThreads List = "t"
	// ListPromoted takes up to MaxList tool names.
	ListPromoted List = "p"
	// ListSubs takes up to MaxList resource URIs.
	ListSubs List = "sub"
)

// bound returns how many values l keeps, how long each may be, and what
// a value is.
func (l List) bound() (count, size int, what string) {
	switch l {
	case ListThreads:
		return MaxThreads, maxField, "a session's thread digest"
	case ListPromoted:
		return MaxList, bounds.Name, "a promoted tool name"
	case ListSubs:
		return MaxList, bounds.URI, "a subscribed resource URI"
	}
	return 0, 0, ""
}

// list returns r's list l.
func (r *Record) list(l List) *[]string {
	switch l {
	case ListThreads:
		return &r.Threads
	case ListPromoted:
		return &r.Promoted
	}
	return &r.Subs
}

// check reports a value past l's bound on its length.
func (l List) check(values []string) error {
	_, size, what := l.bound()
	if what == "" {
		return fmt.Errorf("sessions: no list %q", string(l))
	}
	for _, v := range values {
		if len(v) > size || v == "" {
			return &bounds.Error{Field: what, Len: len(v), Max: size}
		}
	}
	return nil
}

// add is the in-process Add: values into list within l's bound, in
// order; it returns those that were new.
func (l List) add(list *[]string, values []string) []string {
	count, _, _ := l.bound()
	var added []string
	for _, v := range values {
		if slices.Contains(*list, v) || l != ListThreads && len(*list) >= count {
			continue
		}
		*list = append(*list, v)
		added = append(added, v)
	}
	if n := len(*list); n > count { // threads: the newest stay
		*list = append((*list)[:0], (*list)[n-count:]...)
	}
	return added
}

// Event is one message of a session's event log.
type Event struct {
	ID   string          // position in the log: "<ms>-<seq>", increasing
	Data json.RawMessage // one JSON-RPC message
}

// Message is what one replica sends another (Send).
type Message struct {
	Kind    string          `json:"k"`
	Session string          `json:"s,omitempty"`
	From    string          `json:"f,omitempty"` // the sending replica, for an answer
	Corr    string          `json:"c,omitempty"` // correlates an answer with its request
	Body    json.RawMessage `json:"b,omitempty"`
}

// Change tells a replica that a record changed or ended elsewhere.
type Change struct {
	ID    string
	Rev   uint64
	Ended bool
	From  string
	// Record is the record's fields as of Rev (Protocol, Level, Holder)
	// with, in its lists (Threads, Promoted), only what the change added;
	// nil when the session ended, or when what it added was too large for
	// a notice (MaxNotice): read the record again.
	Record *Record
}

// Options configure a store.
type Options struct {
	// Replica names this process among the replicas; random when empty.
	Replica string
	// TTL is how long a record and its log live after their last use
	// (inbound.session_idle_timeout_seconds); SetTTL changes it.
	TTL time.Duration
	// OnMessage receives the messages other replicas Send this one.
	OnMessage func(Message)
	// OnChange learns of records another replica updated or deleted.
	OnChange func(Change)
	// OnReconnect learns that the store's link to the other replicas came
	// back after a break: changes they made meanwhile were not told.
	OnReconnect func()
	// SharedKey is the requestState key this replica seals with when the
	// replicas share one through the store (SharedKey; "" for none): the
	// store keeps it there, and OnSharedKey learns of the one every
	// replica must adopt when the store lost it and another was made.
	SharedKey   string
	OnSharedKey func(key string)
}

// Errors of a store.
var (
	// ErrNotFound: no session has the id (never had, ended or expired).
	ErrNotFound = errors.New("session not found")
	// ErrConflict: the record changed since it was read (Update retries).
	ErrConflict = errors.New("session record changed concurrently")
	// ErrTooLarge: an event past MaxEvent is not logged.
	ErrTooLarge = errors.New("message too large for a session's event log")
)

// ValidReplica reports whether r could be a replica's name (NewReplica's
// alphabet, bounded): names become channel names.
func ValidReplica(r string) bool {
	if r == "" || len(r) > 32 {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// LimitError refuses a new session past a bound.
type LimitError struct {
	Share bool // the caller's share refused it, not the cap
}

func (e *LimitError) Error() string {
	if e.Share {
		return "the caller's share of sessions is full"
	}
	return "the session cap is full"
}

// Bounds are the caps Create keeps: all sessions, and one caller's.
type Bounds struct{ Limit, Share int }

// Store keeps session records and their event logs.
type Store interface {
	// Replica is this process's name among the replicas.
	Replica() string
	// Create stores a new record, unless it would pass b (*LimitError).
	Create(ctx context.Context, r *Record, b Bounds) error
	// Get returns the record of id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Record, error)
	// Update applies fn to the fields of the record of id (its lists
	// aside) and stores them when fn reports a change; it returns the
	// record as stored, its lists aside (fn may run more than once when
	// another replica updates it meanwhile).
	Update(ctx context.Context, id string, fn func(*Record) bool) (*Record, error)
	// Add adds values to the list l of id within its bound and returns
	// the record's fields as stored (its lists aside) and how many values
	// were new; other replicas hear what was added (but of ListSubs,
	// which only the holder reads).
	Add(ctx context.Context, id string, l List, values ...string) (*Record, int, error)
	// Remove removes value from the list l of id and returns the record's
	// fields as stored.
	Remove(ctx context.Context, id string, l List, value string) (*Record, error)
	// Revisions returns the revision of every record of ids that exists.
	Revisions(ctx context.Context, ids []string) (map[string]uint64, error)
	// Delete removes a record and its log, and tells every replica.
	Delete(ctx context.Context, id string) error
	// Touch records use of id: its TTL restarts (in batches, off the
	// request path).
	Touch(id, user string)
	// Count returns the number of sessions.
	Count(ctx context.Context) (int, error)
	// Append adds a message to id's log, where its followers get it.
	Append(ctx context.Context, id string, msg json.RawMessage) error
	// Follow returns a follower of id's log: events after after (none
	// when ""), then each new one.
	Follow(ctx context.Context, id, after string) (*Follower, error)
	// Send delivers m to replica's Options.OnMessage.
	Send(ctx context.Context, replica string, m Message) error
	// SetTTL changes Options.TTL.
	SetTTL(d time.Duration)
	// Close stops the store.
	Close() error
}

// NewID returns a new unguessable session id (128 bits and more).
func NewID() string { return rand.Text() }

// NewReplica returns a new replica name.
func NewReplica() string { return strings.ToLower(rand.Text()[:12]) }

// ValidID reports whether id could be a session id: bounded, and of the
// alphabet NewID uses (ids become keys and channel names).
func ValidID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// position is an event id split into its two numbers.
type position struct{ ms, seq uint64 }

// parsePosition reads "<ms>-<seq>"; ok is false for anything else.
func parsePosition(id string) (position, bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return position{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return position{ms, seq}, err1 == nil && err2 == nil
}

func (p position) after(q position) bool {
	return p.ms > q.ms || p.ms == q.ms && p.seq > q.seq
}

func (p position) String() string {
	return strconv.FormatUint(p.ms, 10) + "-" + strconv.FormatUint(p.seq, 10)
}

// maxPositionMS is the last millisecond a log position may name (the end
// of year 9999): no log hands out a later one, and one at the very end of
// the range has no position after it to resume from.
const maxPositionMS = 253402300799999

// LastEventID reads the log position out of a Last-Event-ID a GET stream
// handed out (Follower.Prime or an event's id): "" and false when it is
// not one, is longer than bounds.LastEventID or names a position no log
// hands out.
func LastEventID(h string) (string, bool) {
	if len(h) > bounds.LastEventID {
		return "", false
	}
	id, _, _ := strings.Cut(h, "_") // a priming event's id carries a suffix
	p, ok := parsePosition(id)
	if !ok || p.ms > maxPositionMS {
		return "", false
	}
	return p.String(), true
}

// SetLevel records the logging level.
func SetLevel(level string) func(*Record) bool {
	return func(r *Record) bool {
		if r.Level == level {
			return false
		}
		r.Level = level
		return true
	}
}

// SetProtocol records the negotiated protocol version.
func SetProtocol(v string) func(*Record) bool {
	return func(r *Record) bool {
		if r.Protocol == v {
			return false
		}
		r.Protocol = v
		return true
	}
}

// SetHolder makes replica the holder of the session's GET stream (on), or
// stops it being the holder if it still is (off).
func SetHolder(replica string, on bool) func(*Record) bool {
	return func(r *Record) bool {
		switch {
		case on && r.Holder != replica:
			r.Holder = replica
			return true
		case !on && r.Holder == replica:
			r.Holder = ""
			return true
		}
		return false
	}
}
