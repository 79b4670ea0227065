package sessionstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
)

// Redis layout (every key starts with the store's prefix, store.key_prefix):
//
//	{s:<id>}        the record (JSON), expiring TTL after its last use
//	{s:<id>}:log    its event log: a stream of at most about MaxLogSize
//	                entries (field d: one JSON-RPC message), same TTL
//	{sess}:all      sorted set of live session ids (score: expiry, ms)
//	{sess}:u:<h>    the same for one caller (h: a hash of the user id)
//	seal-key        the requestState key replicas share when the config
//	                names none (SharedKey)
//
// The record and its log share a hash slot, so Append is one script on
// Redis Cluster too. Channels: <prefix>s:bus carries log events, record
// changes and ends to every replica; <prefix>s:r:<replica> carries what one
// replica sends another. Every forwarded message is one round trip: the
// Append script adds the event and publishes it, Send is one PUBLISH.

var (
	//go:embed lua/admit.lua
	admitLua    string
	admitScript = redis.NewScript(admitLua)
	//go:embed lua/update.lua
	updateLua    string
	updateScript = redis.NewScript(updateLua)
	//go:embed lua/append.lua
	appendLua    string
	appendScript = redis.NewScript(appendLua)
)

// ErrNoReplica: the replica a message is for is not running.
var ErrNoReplica = errors.New("the mcp-mux replica holding this session's request is gone")

// RedisOptions configure NewRedis.
type RedisOptions struct {
	Options
	// Client is the connection; the store closes it on Close.
	Client redis.UniversalClient
	// KeyPrefix starts every key (store.key_prefix).
	KeyPrefix string
	Logger    hclog.Logger
}

// Redis is the Store every replica shares.
type Redis struct {
	c       redis.UniversalClient
	prefix  string
	replica string
	ttl     atomic.Int64 // ns
	log     hclog.Logger
	onMsg   func(Message)
	onChg   func(Change)
	follow  followers

	touchMu sync.Mutex
	touched map[string]string // id → user, since the last flush

	ps     *redis.PubSub
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

var _ Store = (*Redis)(nil)

// NewRedis returns a store on o.Client and starts its subscription to
// the bus and this replica's channel, waiting up to 2 s for it (with
// Redis down it keeps trying in the background).
func NewRedis(o RedisOptions) *Redis {
	if o.Replica == "" {
		o.Replica = NewReplica()
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = "mcp-mux:"
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	s := &Redis{c: o.Client, prefix: o.KeyPrefix, replica: o.Replica, log: o.Logger, onMsg: o.OnMessage, onChg: o.OnChange,
		touched: map[string]string{}}
	s.SetTTL(o.TTL)
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.ps = s.c.Subscribe(ctx, s.busChannel(), s.replicaChannel(s.replica))
	wait, done := context.WithTimeout(ctx, 2*time.Second)
	for range 2 { // both confirmations
		if _, err := s.ps.Receive(wait); err != nil {
			s.log.Warn("sessions: subscribing to Redis failed; retrying in the background", "err", err)
			break
		}
	}
	done()
	s.wg.Go(func() { s.read(ctx) })
	s.wg.Go(func() { s.flushLoop(ctx) })
	return s
}

func (s *Redis) recordKey(id string) string     { return s.prefix + "{s:" + id + "}" }
func (s *Redis) logKey(id string) string        { return s.prefix + "{s:" + id + "}:log" }
func (s *Redis) allKey() string                 { return s.prefix + "{sess}:all" }
func (s *Redis) userKey(user string) string     { return s.prefix + "{sess}:u:" + hashOf(user) }
func (s *Redis) busChannel() string             { return s.prefix + "s:bus" }
func (s *Redis) replicaChannel(r string) string { return s.prefix + "s:r:" + r }

func hashOf(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:12])
}

// Replica names this process.
func (s *Redis) Replica() string { return s.replica }

// SetTTL changes how long an unused record lives.
func (s *Redis) SetTTL(d time.Duration) {
	if d <= 0 {
		d = 30 * time.Minute
	}
	s.ttl.Store(int64(d))
}

func (s *Redis) ttlMS() int64 { return time.Duration(s.ttl.Load()).Milliseconds() }

// Create admits and stores r (two round trips: the admission script, then
// the record).
func (s *Redis) Create(ctx context.Context, r *Record, b Bounds) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	n, err := admitScript.Run(ctx, s.c, []string{s.allKey(), s.userKey(r.User)},
		now, s.ttlMS(), b.Limit, b.Share, r.ID).Int()
	if err != nil {
		return fmt.Errorf("sessions: admitting a session in Redis: %w", err)
	}
	switch n {
	case 1:
		return &LimitError{}
	case 2:
		return &LimitError{Share: true}
	}
	if err := s.c.Set(ctx, s.recordKey(r.ID), data, time.Duration(s.ttlMS())*time.Millisecond).Err(); err != nil {
		return fmt.Errorf("sessions: storing a session in Redis: %w", err)
	}
	return nil
}

// Get returns the record of id (one round trip).
func (s *Redis) Get(ctx context.Context, id string) (*Record, error) {
	data, err := s.c.Get(ctx, s.recordKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: reading a session from Redis: %w", err)
	}
	return decode(id, data)
}

// Update applies fn with a compare-and-set script: one round trip to read,
// one to write, and one more read and write per concurrent change.
func (s *Redis) Update(ctx context.Context, id string, fn func(*Record) bool) (*Record, error) {
	old, err := s.c.Get(ctx, s.recordKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: reading a session from Redis: %w", err)
	}
	for range 16 {
		r, err := decode(id, old)
		if err != nil {
			return nil, err
		}
		if !fn(r) {
			return r, nil
		}
		r.Rev++
		data, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		change, _ := json.Marshal(busMessage{Kind: "ch", Session: id, Rev: r.Rev, From: s.replica, Data: data})
		res, err := updateScript.Run(ctx, s.c, []string{s.recordKey(id)}, old, data, s.busChannel(), change).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return nil, ErrNotFound
		case err != nil:
			return nil, fmt.Errorf("sessions: updating a session in Redis: %w", err)
		}
		cur, conflict := res.(string)
		if !conflict {
			return r, nil
		}
		old = []byte(cur)
	}
	return nil, ErrConflict
}

// Delete removes the record and log of id and tells every replica.
func (s *Redis) Delete(ctx context.Context, id string) error {
	user := ""
	if r, err := s.Get(ctx, id); err == nil {
		user = r.User
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	end, _ := json.Marshal(busMessage{Kind: "end", Session: id, From: s.replica})
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.recordKey(id), s.logKey(id))
		p.ZRem(ctx, s.allKey(), id)
		if user != "" {
			p.ZRem(ctx, s.userKey(user), id)
		}
		p.Publish(ctx, s.busChannel(), end)
		return nil
	})
	if err != nil {
		return fmt.Errorf("sessions: deleting a session in Redis: %w", err)
	}
	return nil
}

// Touch queues id for the next batched TTL refresh.
func (s *Redis) Touch(id, user string) {
	s.touchMu.Lock()
	s.touched[id] = user
	s.touchMu.Unlock()
}

// flushEvery is how often touched sessions have their TTL restarted.
func (s *Redis) flushEvery() time.Duration {
	return min(max(time.Duration(s.ttl.Load())/8, 100*time.Millisecond), 5*time.Second)
}

func (s *Redis) flushLoop(ctx context.Context) {
	t := time.NewTimer(s.flushEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush(context.Background())
			return
		case <-t.C:
			s.flush(ctx)
			t.Reset(s.flushEvery())
		}
	}
}

// flush restarts the TTL of every session touched since the last flush,
// in one pipeline.
func (s *Redis) flush(ctx context.Context) {
	s.touchMu.Lock()
	batch := s.touched
	s.touched = map[string]string{}
	s.touchMu.Unlock()
	if len(batch) == 0 {
		return
	}
	ttl := time.Duration(s.ttlMS()) * time.Millisecond
	exp := float64(time.Now().Add(ttl).UnixMilli())
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, user := range batch {
			p.PExpire(ctx, s.recordKey(id), ttl)
			p.PExpire(ctx, s.logKey(id), ttl)
			p.ZAddXX(ctx, s.allKey(), redis.Z{Score: exp, Member: id})
			p.ZAddXX(ctx, s.userKey(user), redis.Z{Score: exp, Member: id})
		}
		return nil
	})
	if err != nil {
		s.log.Warn("sessions: restarting session TTLs in Redis failed", "sessions", len(batch), "err", err)
		s.touchMu.Lock()
		for id, user := range batch { // try again next time
			if _, ok := s.touched[id]; !ok {
				s.touched[id] = user
			}
		}
		s.touchMu.Unlock()
	}
}

// Count returns the number of live sessions.
func (s *Redis) Count(ctx context.Context) (int, error) {
	n, err := s.c.ZCount(ctx, s.allKey(), strconv.FormatInt(time.Now().UnixMilli(), 10), "+inf").Result()
	return int(n), err
}

// Append adds msg to id's log and publishes it (one script, one round trip).
func (s *Redis) Append(ctx context.Context, id string, msg json.RawMessage) error {
	if len(msg) > MaxEvent {
		return ErrTooLarge
	}
	err := appendScript.Run(ctx, s.c, []string{s.recordKey(id), s.logKey(id)},
		[]byte(msg), s.ttlMS(), MaxLogSize, s.busChannel(), id).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("sessions: appending to a session's log in Redis: %w", err)
	}
	return nil
}

// Follow registers a follower, then replays the log after after (or
// finds where it ends now).
func (s *Redis) Follow(ctx context.Context, id, after string) (*Follower, error) {
	var start position
	resume := false
	if p, ok := parsePosition(after); ok {
		start, resume = p, true
	}
	var f *Follower
	f = newFollower(func() { s.follow.remove(id, f) })
	s.follow.add(id, f)
	events, last, err := s.readLog(ctx, id, start, resume)
	if err != nil {
		f.Close()
		return nil, err
	}
	f.begin(last)
	f.replayed(events)
	return f, nil
}

// readLog returns id's events after start (resume), or none and the
// position of its newest event.
func (s *Redis) readLog(ctx context.Context, id string, start position, resume bool) ([]Event, position, error) {
	if !resume {
		msgs, err := s.c.XRevRangeN(ctx, s.logKey(id), "+", "-", 1).Result()
		if err != nil {
			return nil, position{}, fmt.Errorf("sessions: reading a session's log in Redis: %w", err)
		}
		if len(msgs) == 0 {
			return nil, position{}, nil
		}
		p, _ := parsePosition(msgs[0].ID)
		return nil, p, nil
	}
	msgs, err := s.c.XRangeN(ctx, s.logKey(id), "("+start.String(), "+", MaxLogSize*2).Result()
	if err != nil {
		return nil, position{}, fmt.Errorf("sessions: reading a session's log in Redis: %w", err)
	}
	events := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		if d, ok := m.Values["d"].(string); ok {
			events = append(events, Event{ID: m.ID, Data: json.RawMessage(d)})
		}
	}
	return events, start, nil
}

// Send publishes m on replica's channel (one round trip).
func (s *Redis) Send(ctx context.Context, replica string, m Message) error {
	if !ValidReplica(replica) {
		return ErrNoReplica
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	n, err := s.c.Publish(ctx, s.replicaChannel(replica), data).Result()
	if err != nil {
		return fmt.Errorf("sessions: sending to another replica through Redis: %w", err)
	}
	if n == 0 {
		return ErrNoReplica
	}
	return nil
}

// Dial parses a redis://, rediss:// or unix:// URL into a client sized for
// sessions: small records and events, so small buffers (go-redis's 32 KiB
// per connection, 128 KiB per pipeline connection, would cost more than
// the sessions), and pipelines on the main pool. Errors never repeat the
// URL, which usually carries a password.
func Dial(url string) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, errors.New("store.redis_url is not a valid Redis URL")
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	opts.ReadBufferSize, opts.WriteBufferSize = 8<<10, 8<<10
	opts.PipelinePoolSize = -1
	return redis.NewClient(opts), nil
}

// SharedKey returns the secret every replica on c shares for sealing
// requestStates when the config names none (<prefix>seal-key), creating it
// once.
func SharedKey(ctx context.Context, c redis.UniversalClient, prefix string) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	key := prefix + "seal-key"
	if err := c.SetNX(ctx, key, hex.EncodeToString(b[:]), 0).Err(); err != nil {
		return "", fmt.Errorf("sessions: creating the shared requestState key in Redis: %w", err)
	}
	v, err := c.Get(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("sessions: reading the shared requestState key from Redis: %w", err)
	}
	return v, nil
}

// busMessage is what the bus carries: a log event (ev, Data the message),
// a changed record (ch, Data the record as changed) or an ended one (end).
type busMessage struct {
	Kind    string          `json:"k"`
	Session string          `json:"s"`
	ID      string          `json:"i,omitempty"`
	Data    json.RawMessage `json:"d,omitempty"`
	Rev     uint64          `json:"n,omitempty"`
	From    string          `json:"f,omitempty"`
}

// read dispatches what the subscription receives until ctx ends. After a
// reconnection (a new subscription confirmation) each follower catches up
// from the log, since events published meanwhile were lost.
func (s *Redis) read(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for {
		msg, err := s.ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Debug("sessions: Redis subscription", "err", err)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == s.busChannel() {
				s.resync(ctx)
			}
		case *redis.Message:
			s.dispatch(m)
		}
	}
}

func (s *Redis) dispatch(m *redis.Message) {
	if m.Channel != s.busChannel() {
		var msg Message
		if json.Unmarshal([]byte(m.Payload), &msg) == nil && s.onMsg != nil {
			s.onMsg(msg)
		}
		return
	}
	var b busMessage
	if json.Unmarshal([]byte(m.Payload), &b) != nil || !ValidID(b.Session) {
		return
	}
	switch b.Kind {
	case "ev":
		s.follow.deliver(b.Session, Event{ID: b.ID, Data: b.Data})
	case "ch":
		if s.onChg != nil && b.From != s.replica {
			c := Change{ID: b.Session, Rev: b.Rev, From: b.From}
			c.Record, _ = decode(b.Session, b.Data)
			s.onChg(c)
		}
	case "end":
		s.follow.end(b.Session)
		if s.onChg != nil {
			s.onChg(Change{ID: b.Session, Ended: true, From: b.From})
		}
	}
}

// resync has every follower catch up from its session's log.
func (s *Redis) resync(ctx context.Context) {
	for f, id := range s.follow.all() {
		f.mu.Lock()
		f.replaying = true
		last := f.last
		f.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		events, _, err := s.readLog(rctx, id, last, true)
		cancel()
		if err != nil {
			s.log.Debug("sessions: catching up a stream from Redis", "err", err)
		}
		f.replayed(events)
	}
}

// Close stops the subscription and the TTL refresher (flushing once), and
// closes the client.
func (s *Redis) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stop()
	_ = s.ps.Close()
	s.wg.Wait()
	for f := range s.follow.all() {
		f.Close()
	}
	return s.c.Close()
}
