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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// Redis layout (every key starts with the store's prefix, store.key_prefix).
// Sessions are spread over 16 groups by a hash of their id (g: one hex
// digit); every key of a group shares the hash tag {s<g>}, so each script
// touches one slot and the layout works on Redis Cluster:
//
//	{s<g>}:<id>:r    the record: a hash of its bounded fields (u user, pf
//	                 profile, v protocol, l level, h holder, n revision),
//	                 expiring TTL after its last use; at most MaxRecord
//	{s<g>}:<id>:i    its initialize params as sent, written once (MaxInit)
//	{s<g>}:<id>:t    the digests of its threads: a sorted set (score: first
//	                 use, ms) of the newest MaxThreads
//	{s<g>}:<id>:p    its tool_search promotions: a set of at most MaxList
//	{s<g>}:<id>:sub  its resource subscriptions: a set of at most MaxList
//	{s<g>}:<id>:log  its event log: a stream of at most about MaxLogSize
//	                 entries (field d: one JSON-RPC message)
//	{s<g>}:all       the group's live session ids (score: expiry, ms); its
//	                 TTL is raised with its members', never lowered
//	{su:<h>}         the same for one caller (h: a hash of the user id), in
//	                 a slot of its own
//	seal-key         the requestState key replicas share when the config
//	                 names none (SharedKey); every replica puts its own back
//	                 when Redis lost it, and adopts the one there
//
// Admission is exact: the cap inbound.max_sessions is split over the
// groups (their caps sum to it), a new session goes to a random group and,
// when that one is full, to the next with room under a new id; the
// caller's share is checked in the caller's set first (one script each,
// so Create is two round trips, more only near the cap).
//
// Channels: the bus carries log events, change notices and ends to every
// replica: <prefix>s:bus on one node or Sentinel, and on Cluster one
// sharded channel per group, {s<g>}:bus, in its group's slot (so the
// scripts that write a session publish on it with SPUBLISH);
// <prefix>s:r:{<replica>} carries what one replica sends another (sharded
// on Cluster). A change publishes a notice of the record's fields and what
// a list gained (at most MaxNotice bytes of it), never the whole record.
// Every forwarded message is one round trip: the Append script adds the
// event and publishes it, Send is one PUBLISH.

var (
	//go:embed lua/admit.lua
	admitLua    string
	admitScript = redis.NewScript(admitLua)
	//go:embed lua/update.lua
	updateLua    string
	updateScript = redis.NewScript(updateLua)
	//go:embed lua/add.lua
	addLua    string
	addScript = redis.NewScript(addLua)
	//go:embed lua/append.lua
	appendLua    string
	appendScript = redis.NewScript(appendLua)
	//go:embed lua/share.lua
	shareLua    string
	shareScript = redis.NewScript(shareLua)
)

// groups is how many groups sessions are spread over (see the layout).
const groups = 16

// ErrNoReplica: the replica a message is for is not running.
var ErrNoReplica = errors.New("the mcp-mux replica holding this session's request is gone")

// settleDelay is how long after the last (re)subscription confirmation a
// store checks the shared key and calls OnReconnect.
const settleDelay = 100 * time.Millisecond

// keyEvery is how often a store checks that Redis still holds the shared
// requestState key (and at every reconnection).
const keyEvery = 30 * time.Second

// RedisOptions configure NewRedis.
type RedisOptions struct {
	Options
	// Client is the connection. A *storeclient.Client is shared: its
	// opener closes it. Any other client the store closes on Close.
	Client redis.UniversalClient
	// KeyPrefix starts every key (store.key_prefix).
	KeyPrefix string
	Logger    hclog.Logger
}

// Redis is the Store every replica shares.
type Redis struct {
	c       *storeclient.Client
	ch      channels
	ownsC   bool // close c on Close
	prefix  string
	replica string
	ttl     atomic.Int64 // ns
	log     hclog.Logger
	onMsg   func(Message)
	onChg   func(Change)
	onConn  func()
	onKey   func(string)
	follow  followers

	touchMu sync.Mutex
	touched map[string]string // id → user, since the last flush
	retime  chan struct{}     // SetTTL changed the flush period
	settle  chan struct{}     // a bus channel was (re)subscribed

	keyMu     sync.Mutex
	sharedKey string // the requestState key this replica seals with ("" for none)

	ps     *storeclient.Subscription
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
	c, shared := o.Client.(*storeclient.Client)
	if !shared {
		c = storeclient.Wrap(o.Client)
	}
	s := &Redis{c: c, ch: channels{prefix: o.KeyPrefix, sharded: c.Sharded()}, ownsC: !shared, prefix: o.KeyPrefix, replica: o.Replica, log: o.Logger, onMsg: o.OnMessage, onChg: o.OnChange,
		onConn: o.OnReconnect, onKey: o.OnSharedKey, sharedKey: o.SharedKey, touched: map[string]string{}, retime: make(chan struct{}, 1), settle: make(chan struct{}, 1)}
	s.SetTTL(o.TTL)
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	channels := append(s.ch.buses(), s.ch.replica(s.replica))
	s.ps = s.c.Listen(ctx, channels...)
	wait, done := context.WithTimeout(ctx, 2*time.Second)
	for range channels { // every confirmation
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

// groupOf returns the group of session id (FNV-1a of the id, low 4 bits).
func groupOf(id string) int {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return int(h % groups)
}

// groupTag is the hash tag of group g's keys under prefix.
func groupTag(prefix string, g int) string {
	return prefix + "{s" + strconv.FormatInt(int64(g), 16) + "}"
}

func (s *Redis) session(id string) string         { return SessionKey(s.prefix, id) }
func (s *Redis) recordKey(id string) string       { return s.session(id) + ":r" }
func (s *Redis) initKey(id string) string         { return s.session(id) + ":i" }
func (s *Redis) listKey(id string, l List) string { return s.session(id) + ":" + string(l) }
func (s *Redis) logKey(id string) string          { return s.session(id) + ":log" }
func (s *Redis) groupKey(g int) string            { return groupTag(s.prefix, g) + ":all" }
func (s *Redis) userKey(user string) string       { return s.prefix + "{su:" + hashOf(user) + "}" }

// SessionKey returns the stem every Redis key of session id starts with
// under prefix (tests and benches inspect Redis with it).
func SessionKey(prefix, id string) string {
	return groupTag(prefix, groupOf(id)) + ":" + id
}

// channels names the store's pub/sub channels (see the layout).
type channels struct {
	prefix  string
	sharded bool // Cluster: a sharded channel per group
}

// bus is the bus channel session id's changes go out on.
func (c channels) bus(id string) string {
	if c.sharded {
		return groupTag(c.prefix, groupOf(id)) + ":bus"
	}
	return c.prefix + "s:bus"
}

// buses are the bus channels every replica subscribes to.
func (c channels) buses() []string {
	if !c.sharded {
		return []string{c.prefix + "s:bus"}
	}
	out := make([]string, groups)
	for g := range groups {
		out[g] = groupTag(c.prefix, g) + ":bus"
	}
	return out
}

// replica is replica r's own channel.
func (c channels) replica(r string) string { return c.prefix + "s:r:{" + r + "}" }

// isBus reports whether channel is a bus channel.
func (c channels) isBus(channel string) bool { return !strings.HasPrefix(channel, c.prefix+"s:r:") }

// keys returns every key of session id.
func (s *Redis) keys(id string) []string {
	return []string{s.recordKey(id), s.initKey(id), s.listKey(id, ListThreads), s.listKey(id, ListPromoted),
		s.listKey(id, ListSubs), s.logKey(id)}
}

func hashOf(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:12])
}

// Replica names this process.
func (s *Redis) Replica() string { return s.replica }

// SetTTL changes how long an unused record lives (and so how often the
// TTLs are restarted: at once, so a shorter TTL lapses no record in use).
func (s *Redis) SetTTL(d time.Duration) {
	if d <= 0 {
		d = 30 * time.Minute
	}
	if old := s.ttl.Swap(int64(d)); old != int64(d) && s.retime != nil {
		select {
		case s.retime <- struct{}{}:
		default:
		}
	}
}

func (s *Redis) ttlMS() int64 { return time.Duration(s.ttl.Load()).Milliseconds() }

// fieldsOf returns the hash fields of r's record (an empty one omitted).
func fieldsOf(r *Record) []any {
	out := []any{"u", r.User, "v", r.Protocol, "n", strconv.FormatUint(r.Rev, 10)}
	for _, f := range [][2]string{{"pf", r.Profile}, {"l", r.Level}, {"h", r.Holder}} {
		if f[1] != "" {
			out = append(out, f[0], f[1])
		}
	}
	return out
}

// decodeFields returns the record id whose hash is m (nil for none).
func decodeFields(id string, m map[string]string) *Record {
	if len(m) == 0 {
		return nil
	}
	rev, _ := strconv.ParseUint(m["n"], 10, 64)
	return &Record{ID: id, User: m["u"], Profile: m["pf"], Protocol: m["v"], Level: m["l"], Holder: m["h"], Rev: rev}
}

// pairs reads a script's flat field, value list into a map.
func pairs(flat []any) map[string]string {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[k] = v
	}
	return m
}

// Create admits and stores r: the caller's share (one script), then the
// cap and the record in r's group (one script), or, when that one is full
// and the fleet is not, in the next group with room under a new id (r.ID
// changes).
func (s *Redis) Create(ctx context.Context, r *Record, b Bounds) error {
	if err := r.check(); err != nil {
		return err
	}
	now, ttl := time.Now().UnixMilli(), s.ttlMS()
	n, err := shareScript.Run(ctx, s.c, []string{s.userKey(r.User)}, now, ttl, b.Share, r.ID).Int()
	switch {
	case err != nil:
		return fmt.Errorf("sessions: admitting a session in Redis: %w", err)
	case n != 0:
		return &LimitError{Share: true}
	}
	first := groupOf(r.ID)
	for i := range groups {
		g := (first + i) % groups
		if i > 0 {
			if err := s.rename(ctx, r, idIn(g)); err != nil {
				return err
			}
		}
		args := append([]any{now, ttl, groupCap(b.Limit, g), r.ID, []byte(r.Init)}, fieldsOf(r)...)
		n, err := admitScript.Run(ctx, s.c, []string{s.groupKey(g), s.recordKey(r.ID), s.initKey(r.ID)}, args...).Int()
		if err != nil {
			s.unshare(r)
			return fmt.Errorf("sessions: storing a session in Redis: %w", err)
		}
		if n == 0 {
			return nil
		}
		if i == 0 && s.full(ctx, b.Limit) {
			break // no group has room: refused in four round trips, not 32
		}
	}
	s.unshare(r)
	return &LimitError{}
}

// full reports whether the live sessions in every group reach limit (one
// round trip; an error says no, and the groups are tried).
func (s *Redis) full(ctx context.Context, limit int) bool {
	n, err := s.Count(ctx)
	return err == nil && n >= limit
}

// groupCap is group g's part of the cap limit (-1: no cap); the parts sum
// to limit.
func groupCap(limit, g int) int {
	if limit <= 0 {
		return -1
	}
	c := limit / groups
	if g < limit%groups {
		c++
	}
	return c
}

// idIn returns a new session id in group g.
func idIn(g int) string {
	for {
		if id := NewID(); groupOf(id) == g {
			return id
		}
	}
}

// rename gives r the id id, in its caller's set too.
func (s *Redis) rename(ctx context.Context, r *Record, id string) error {
	exp := float64(time.Now().UnixMilli() + s.ttlMS())
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, s.userKey(r.User), r.ID)
		p.ZAdd(ctx, s.userKey(r.User), redis.Z{Score: exp, Member: id})
		return nil
	})
	if err != nil {
		s.unshare(r)
		return fmt.Errorf("sessions: admitting a session in Redis: %w", err)
	}
	r.ID = id
	return nil
}

// unshare gives back the caller's share r took (best effort: a member
// left behind expires with the session's TTL).
func (s *Redis) unshare(r *Record) {
	ctx, cancel := context.WithTimeout(context.Background(), storeclient.IOTimeout)
	defer cancel()
	_ = s.c.ZRem(ctx, s.userKey(r.User), r.ID).Err()
}

// Get returns the record of id with its initialize params and lists (one
// round trip).
func (s *Redis) Get(ctx context.Context, id string) (*Record, error) {
	var (
		rec           *redis.MapStringStringCmd
		init          *redis.StringCmd
		threads, p, u *redis.StringSliceCmd
	)
	_, err := s.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		rec = pl.HGetAll(ctx, s.recordKey(id))
		init = pl.Get(ctx, s.initKey(id))
		threads = pl.ZRange(ctx, s.listKey(id, ListThreads), 0, -1)
		p = pl.SMembers(ctx, s.listKey(id, ListPromoted))
		u = pl.SMembers(ctx, s.listKey(id, ListSubs))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("sessions: reading a session from Redis: %w", err)
	}
	r := decodeFields(id, rec.Val())
	if r == nil {
		return nil, ErrNotFound
	}
	if b, err := init.Bytes(); err == nil {
		r.Init = b
	}
	r.Threads, r.Promoted, r.Subs = threads.Val(), p.Val(), u.Val()
	return r, nil
}

// Update applies fn to the record's fields with a compare-and-set script:
// one round trip to read, one to write, and one more per concurrent change.
func (s *Redis) Update(ctx context.Context, id string, fn func(*Record) bool) (*Record, error) {
	m, err := s.c.HGetAll(ctx, s.recordKey(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("sessions: reading a session from Redis: %w", err)
	}
	for range 16 {
		r := decodeFields(id, m)
		if r == nil {
			return nil, ErrNotFound
		}
		if !fn(r) {
			return r, nil
		}
		if err := r.check(); err != nil {
			return nil, err
		}
		read := r.Rev
		r.Rev++
		notice := s.notice(id, r.Rev, &noticeData{Protocol: r.Protocol, Level: r.Level, Holder: r.Holder})
		res, err := updateScript.Run(ctx, s.c, []string{s.recordKey(id)}, strconv.FormatUint(read, 10), s.ch.bus(id), notice, s.c.PublishCommand(),
			"v", r.Protocol, "l", r.Level, "h", r.Holder).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return nil, ErrNotFound
		case err != nil:
			return nil, fmt.Errorf("sessions: updating a session in Redis: %w", err)
		}
		cur, conflict := res.([]any)
		if !conflict {
			return r, nil
		}
		m = pairs(cur)
	}
	return nil, ErrConflict
}

// Add adds values to the list l of id within its bound and tells the
// replicas what was added (one script, one round trip).
func (s *Redis) Add(ctx context.Context, id string, l List, values ...string) (*Record, int, error) {
	if err := l.check(values); err != nil {
		return nil, 0, err
	}
	count, _, _ := l.bound()
	kind, member := "s", string(l)
	switch l {
	case ListThreads:
		kind = "z"
	case ListSubs:
		member = "" // only the holder reads them, from the store
	}
	args := []any{kind, count, time.Now().UnixMilli(), member, MaxNotice, s.ch.bus(id), id, s.replica, s.c.PublishCommand()}
	for _, v := range values {
		args = append(args, v)
	}
	res, err := addScript.Run(ctx, s.c, []string{s.recordKey(id), s.listKey(id, l)}, args...).Slice()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, 0, ErrNotFound
	case err != nil:
		return nil, 0, fmt.Errorf("sessions: adding to a session's record in Redis: %w", err)
	case len(res) == 0:
		return nil, 0, errors.New("sessions: unexpected answer from Redis")
	}
	added, _ := res[0].(int64)
	r := decodeFields(id, pairs(res[1:]))
	if r == nil {
		return nil, 0, ErrNotFound
	}
	return r, int(added), nil
}

// Remove removes value from the list l of id (one round trip).
func (s *Redis) Remove(ctx context.Context, id string, l List, value string) (*Record, error) {
	if err := l.check([]string{value}); err != nil {
		return nil, err
	}
	var rec *redis.MapStringStringCmd
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		if l == ListThreads {
			p.ZRem(ctx, s.listKey(id, l), value)
		} else {
			p.SRem(ctx, s.listKey(id, l), value)
		}
		rec = p.HGetAll(ctx, s.recordKey(id))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sessions: removing from a session's record in Redis: %w", err)
	}
	r := decodeFields(id, rec.Val())
	if r == nil {
		return nil, ErrNotFound
	}
	return r, nil
}

// revisionBatch bounds the records one Revisions pipeline reads.
const revisionBatch = 512

// Revisions returns the revision of every record of ids that exists (one
// round trip per revisionBatch ids).
func (s *Redis) Revisions(ctx context.Context, ids []string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(ids))
	for batch := range slices.Chunk(ids, revisionBatch) {
		cmds := make([]*redis.StringCmd, len(batch))
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range batch {
				cmds[i] = p.HGet(ctx, s.recordKey(id), "n")
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("sessions: reading session revisions from Redis: %w", err)
		}
		for i, c := range cmds {
			if v, err := c.Uint64(); err == nil {
				out[batch[i]] = v
			}
		}
	}
	return out, nil
}

// Delete removes every key of id and tells every replica.
func (s *Redis) Delete(ctx context.Context, id string) error {
	user, err := s.c.HGet(ctx, s.recordKey(id), "u").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("sessions: reading a session from Redis: %w", err)
	}
	end, _ := json.Marshal(busMessage{Kind: "end", Session: id, From: s.replica})
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.keys(id)...)
		p.ZRem(ctx, s.groupKey(groupOf(id)), id)
		if user != "" {
			p.ZRem(ctx, s.userKey(user), id)
		}
		s.c.PublishIn(ctx, p, s.ch.bus(id), end)
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
	k := time.NewTicker(keyEvery)
	defer k.Stop()
	conn := time.NewTimer(time.Hour)
	conn.Stop()
	defer conn.Stop()
	for {
		select {
		case <-s.settle:
			conn.Reset(settleDelay)
		case <-conn.C:
			s.settled(ctx)
		case <-ctx.Done():
			s.flush(context.Background())
			return
		case <-t.C:
			s.flush(ctx)
			t.Reset(s.flushEvery())
		case <-s.retime:
			t.Reset(s.flushEvery())
		case <-k.C:
			s.keepKey(ctx)
		}
	}
}

// flush restarts the TTL of every session touched since the last flush,
// and raises the admission sets' TTL with their members', in one pipeline.
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
		users, grps := make(map[string]bool), make(map[int]bool)
		for id, user := range batch {
			for _, k := range s.keys(id) {
				p.PExpire(ctx, k, ttl)
			}
			g := groupOf(id)
			p.ZAddXX(ctx, s.groupKey(g), redis.Z{Score: exp, Member: id})
			p.ZAddXX(ctx, s.userKey(user), redis.Z{Score: exp, Member: id})
			users[user], grps[g] = true, true
		}
		// A set lives as long as its newest member: its TTL only rises.
		for g := range grps {
			p.Do(ctx, "pexpire", s.groupKey(g), ttl.Milliseconds(), "gt")
		}
		for user := range users {
			p.Do(ctx, "pexpire", s.userKey(user), ttl.Milliseconds(), "gt")
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

// Count returns the number of live sessions (one pipeline over the
// groups).
func (s *Redis) Count(ctx context.Context) (int, error) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	cmds := make([]*redis.IntCmd, groups)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g := range groups {
			cmds[g] = p.ZCount(ctx, s.groupKey(g), now, "+inf")
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sessions: counting sessions in Redis: %w", err)
	}
	n := 0
	for _, c := range cmds {
		n += int(c.Val())
	}
	return n, nil
}

// Append adds msg to id's log and publishes it (one script, one round trip).
func (s *Redis) Append(ctx context.Context, id string, msg json.RawMessage) error {
	if len(msg) > MaxEvent {
		return ErrTooLarge
	}
	err := appendScript.Run(ctx, s.c, []string{s.recordKey(id), s.logKey(id)},
		[]byte(msg), s.ttlMS(), MaxLogSize, s.ch.bus(id), id, s.c.PublishCommand()).Err()
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
	if start.ms > maxPositionMS { // no event follows it (LastEventID refuses it)
		return nil, start, nil
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
	n, err := s.c.Publish(ctx, s.ch.replica(replica), data).Result()
	if err != nil {
		return fmt.Errorf("sessions: sending to another replica through Redis: %w", err)
	}
	if n == 0 {
		return ErrNoReplica
	}
	return nil
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

// keepKey has Redis hold the shared requestState key again when it lost
// it (this replica's goes back), and adopts the one there when another
// replica put a different one first (Options.OnSharedKey): after Redis
// restarts empty, replicas started since and those that kept running
// agree again.
func (s *Redis) keepKey(ctx context.Context) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if s.sharedKey == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key := s.prefix + "seal-key"
	var get *redis.StringCmd
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, key, s.sharedKey, 0)
		get = p.Get(ctx, key)
		return nil
	})
	v := get.Val()
	if err != nil || v == "" {
		s.log.Debug("sessions: checking the shared requestState key in Redis", "err", err)
		return
	}
	if v != s.sharedKey {
		s.sharedKey = v
		s.log.Info("sessions: adopting the shared requestState key another replica put in Redis (Redis had lost it)")
		if s.onKey != nil {
			s.onKey(v)
		}
	}
}

// noticeData is what a change notice carries: the record's fields as
// changed, and what one of its lists gained (t: thread digests, p:
// promotions), or x when that was past MaxNotice.
type noticeData struct {
	Protocol string   `json:"v,omitempty"`
	Level    string   `json:"l,omitempty"`
	Holder   string   `json:"h,omitempty"`
	Threads  []string `json:"t,omitempty"`
	Promoted []string `json:"p,omitempty"`
	Reload   bool     `json:"x,omitempty"`
}

// notice returns the change notice of id at rev.
func (s *Redis) notice(id string, rev uint64, d *noticeData) []byte {
	data, _ := json.Marshal(d) // strings: cannot fail
	b, _ := json.Marshal(busMessage{Kind: "ch", Session: id, Rev: rev, From: s.replica, Data: data})
	return b
}

// busMessage is what the bus carries: a log event (ev, Data the message),
// a change notice (ch, Data its noticeData) or an ended session (end).
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
	for {
		msg, err := s.ps.Receive(ctx) // backs off after an error
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Debug("sessions: Redis subscription", "err", err)
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if ch, ok := storeclient.Confirmed(m); ok && s.ch.isBus(ch) {
				s.reconnected(ctx, ch)
			}
		case *redis.Message:
			s.dispatch(m)
		}
	}
}

func (s *Redis) dispatch(m *redis.Message) {
	if !s.ch.isBus(m.Channel) {
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
			s.onChg(changeOf(&b))
		}
	case "end":
		s.follow.end(b.Session)
		if s.onChg != nil {
			s.onChg(Change{ID: b.Session, Ended: true, From: b.From})
		}
	}
}

// changeOf returns the Change a notice tells of.
func changeOf(b *busMessage) Change {
	c := Change{ID: b.Session, Rev: b.Rev, From: b.From}
	var d noticeData
	if json.Unmarshal(b.Data, &d) == nil && !d.Reload {
		c.Record = &Record{ID: b.Session, Protocol: d.Protocol, Level: d.Level, Holder: d.Holder, Rev: b.Rev,
			Threads: d.Threads, Promoted: d.Promoted}
	}
	return c
}

// reconnected catches up with what was published on channel while its
// subscription was down: its followers from their logs and, once the
// confirmations of a reconnection settle (on Cluster one per group), the
// shared key and the owner's sessions (Options.OnReconnect).
func (s *Redis) reconnected(ctx context.Context, channel string) {
	s.resync(ctx, channel)
	select {
	case s.settle <- struct{}{}:
	default:
	}
}

// settled runs when the subscription's confirmations settle.
func (s *Redis) settled(ctx context.Context) {
	s.keepKey(ctx)
	if s.onConn != nil {
		s.onConn()
	}
}

// resync has every follower of a session on bus channel catch up from its
// session's log.
func (s *Redis) resync(ctx context.Context, channel string) {
	for f, id := range s.follow.all() {
		if s.ch.bus(id) != channel {
			continue
		}
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
	if !s.ownsC {
		return nil
	}
	return s.c.Close()
}
