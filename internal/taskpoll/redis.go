package taskpoll

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// Redis layout. Tasks are spread over 16 shards by the first hex digit of
// their id; every key of a shard (the task hashes, its due index, its
// per-user and per-thread indexes and its status counts) shares the hash tag
// {<prefix>t<digit>}, so each script touches one slot and the layout works
// on Redis Cluster too. A task is the hash
//
//	<prefix>{t7}:task:<id>   d (record JSON), st (status), ep (lease epoch),
//	                         own (lease owner), exp (lease expiry, ms)
//
// and the shard's sorted sets are <prefix>{t7}:due (score: next poll, or
// the lease expiry while leased), :thr:<h(user,thread)> and :usr:<h(user)>
// (score: creation time), and :exp (terminal records with a TTL; score: the
// end of their retention, when Sweep removes them). A remote handle (user,
// server, remote id) is the string <prefix>{r<digit>}:rid:<h> holding its
// task id. A user's active tasks are the sorted set
// <prefix>{u<digit>}:act:<h(user)> (score: creation time), in a slot of its
// own: Create reserves a member there (one script that checks the cap)
// before the task's own script runs, and a write that makes a task terminal
// removes it. A member left behind by a replica that died between the two
// only over-counts, never under-counts, and is healed when the user is at
// the cap. Events are published from inside the scripts that write them:
// on <prefix>events, or on Cluster on the shard's sharded channel
// <prefix>{t<digit>}:events (SPUBLISH, in the shard's slot), one
// subscription per shard.
//
// With RedisOptions.WaitReplicas, a creation is acknowledged only once
// that many replicas have it (WAIT on the connection that wrote it), so a
// failover cannot lose a task its caller was told about.
const redisShards = 16

// RedisOptions configure NewRedisStore.
type RedisOptions struct {
	// Client is the connection (a *redis.Client or *redis.ClusterClient).
	// A *storeclient.Client is shared: its opener closes it. Any other
	// client the store closes on Close.
	Client redis.UniversalClient
	// WaitReplicas is how many replicas a creation waits for (WAIT; 0:
	// none), at most WaitTimeout (default 1 s); fewer fail the creation.
	WaitReplicas int
	WaitTimeout  time.Duration
	// KeyPrefix starts every key (store.key_prefix, default "mcp-mux:").
	KeyPrefix string
	// MaxActivePerUser caps each user's active tasks
	// (mcp_tasks.max_active_tasks_per_user; 0: no cap).
	MaxActivePerUser int
	Logger           hclog.Logger
}

// RedisStore is the Store for any number of replicas.
type RedisStore struct {
	c         *storeclient.Client
	ownsC     bool // close c on Close
	wait      int
	waitFor   time.Duration
	prefix    string
	maxActive int
	log       hclog.Logger

	mu     sync.Mutex
	subs   map[int]func(Event)
	next   int
	pubsub *storeclient.Subscription
	done   chan struct{}
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a Store on o.Client. It does not connect until used.
func NewRedisStore(o RedisOptions) *RedisStore {
	if o.KeyPrefix == "" {
		o.KeyPrefix = "mcp-mux:"
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = time.Second
	}
	c, shared := o.Client.(*storeclient.Client)
	if !shared {
		c = storeclient.Wrap(o.Client)
	}
	return &RedisStore{c: c, ownsC: !shared, wait: o.WaitReplicas, waitFor: o.WaitTimeout, prefix: o.KeyPrefix,
		maxActive: o.MaxActivePerUser, log: o.Logger, subs: make(map[int]func(Event))}
}

func (s *RedisStore) tag(shard byte) string { return s.prefix + "{t" + string(shard) + "}" }

func shardOf(id string) byte { return id[len("mcp-task-")] }

func (s *RedisStore) taskKey(id string) string { return s.tag(shardOf(id)) + ":task:" + id }

func hexHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// keys returns a task's shard keys: task, due, thread index, user index,
// counts, retention index.
func (s *RedisStore) keys(t *Task) []string {
	tag := s.tag(shardOf(t.ID))
	return []string{tag + ":task:" + t.ID, tag + ":due", tag + ":thr:" + hexHash(t.User, t.Thread), tag + ":usr:" + hexHash(t.User), tag + ":counts", tag + ":exp"}
}

// activeKey is the user's set of active task ids.
func (s *RedisStore) activeKey(user string) string {
	h := hexHash(user)
	return s.prefix + "{u" + h[:1] + "}:act:" + h
}

// expArg is the retention-index score of t (-1: none).
func expArg(t *Task) int64 {
	if e := expiresAt(t); !e.IsZero() {
		return e.UnixMilli()
	}
	return -1
}

func (s *RedisStore) remoteKey(t *Task) string {
	h := hexHash(t.User, t.Server, t.RemoteID)
	return s.prefix + "{r" + h[:1] + "}:rid:" + h
}

// channel is the channel events of tasks in shard go out on.
func (s *RedisStore) channel(shard byte) string {
	if s.c.Sharded() {
		return s.tag(shard) + ":events"
	}
	return s.prefix + "events"
}

// channels are the channels a subscriber listens on.
func (s *RedisStore) channels() []string {
	if !s.c.Sharded() {
		return []string{s.prefix + "events"}
	}
	out := make([]string, 0, redisShards)
	for _, d := range "0123456789abcdef" {
		out = append(out, s.channel(byte(d)))
	}
	return out
}

// The scripts' Lua source, one file each in lua/; the Go doc of each
// script below says what its KEYS and ARGV are and what it returns.
// Statuses are compared in Lua, so lua/terminal.lua spells out the
// terminal set: completed, failed, cancelled.
var (
	//go:embed lua/terminal.lua
	luaTerminal string
	//go:embed lua/create.lua
	luaCreate string
	//go:embed lua/reserve.lua
	luaReserve string
	//go:embed lua/sweep.lua
	luaSweep string
	//go:embed lua/unbind.lua
	luaUnbind string
	//go:embed lua/update.lua
	luaUpdate string
	//go:embed lua/claim.lua
	luaClaim string
	//go:embed lua/apply.lua
	luaApply string
	//go:embed lua/release.lua
	luaRelease string
)

// The scripts, each the Lua file of its name (after lua/terminal.lua where
// it compares statuses). KEYS are named as keys() makes them: task (the
// record), due, thr and usr (indexes), counts, exp (retention); act is
// activeKey's, rid remoteKey's. Times are Unix milliseconds, a due or
// expiry below 0 is none, and an event, when not empty, is published on
// channel.
var (
	// createScript adds a task. KEYS task, due, thr, usr, counts, exp;
	// ARGV id, d (the record), st, due, created, event, channel, expiry.
	// Returns "exists" when the record is there already, else "ok".
	createScript = redis.NewScript(luaTerminal + luaCreate)
	// reserveScript is the per-user cap on active tasks. KEYS act; ARGV
	// id, created, limit. Returns 1 when it added id, 2 when id was there
	// already, 0 when the user is at the limit.
	reserveScript = redis.NewScript(luaReserve)
	// sweepScript removes one record past its retention. KEYS task, thr,
	// usr, counts, exp, due; ARGV id, now. Returns 1 when it deleted a
	// terminal record past its retention, else 0 (one past it but not
	// terminal only leaves the retention index).
	sweepScript = redis.NewScript(luaTerminal + luaSweep)
	// unbindScript drops a removed task's remote handle. KEYS rid; ARGV
	// id. Returns 1 when the handle still named id and is gone, else 0.
	unbindScript = redis.NewScript(luaUnbind)
	// updateScript is compare-and-set on the record, and supersedes any
	// lease (epoch bumped, owner cleared). KEYS task, due, counts, exp;
	// ARGV id, old d, new d, new st, due, event, channel, expiry. Returns
	// "ok", "missing", "terminal" or "conflict" (d is not old d).
	updateScript = redis.NewScript(luaTerminal + luaUpdate)
	// claimScript leases due tasks. KEYS due; ARGV now, lease expiry,
	// owner, limit, task key prefix. A gone or terminal task leaves the
	// due index, one under a live lease is due again at its expiry.
	// Returns, flat, id, epoch, d and takeover (1: a lapsed lease was
	// taken over) for each task claimed.
	claimScript = redis.NewScript(luaTerminal + luaClaim)
	// applyScript writes a poll's result under the caller's lease (fenced).
	// KEYS task, due, counts, exp; ARGV id, owner, epoch, now, d, st, due,
	// event, channel, expiry. Returns 1 when applied (lease released), 0
	// when the task is gone or terminal or the lease is not the caller's
	// or has expired.
	applyScript = redis.NewScript(luaTerminal + luaApply)
	// releaseScript gives a lease back. KEYS task, due; ARGV id, owner,
	// epoch, now. A task not terminal is due again at now. Returns 1 when
	// released, 0 when the lease is not the caller's.
	releaseScript = redis.NewScript(luaTerminal + luaRelease)
)

var allScripts = []*redis.Script{createScript, reserveScript, sweepScript, unbindScript, updateScript, claimScript, applyScript, releaseScript}

func (s *RedisStore) encode(t *Task) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encoding MCP task %s: %w", t.ID, err)
	}
	return string(b), nil
}

func (s *RedisStore) eventArg(t *Task, oldVersion int64) string {
	if t.Version <= oldVersion {
		return ""
	}
	b, _ := json.Marshal(eventOf(t))
	return string(b)
}

func decodeTask(d string) (*Task, error) {
	var t Task
	if err := json.Unmarshal([]byte(d), &t); err != nil {
		return nil, fmt.Errorf("decoding MCP task record: %w", err)
	}
	return &t, nil
}

// bindRemote claims t's remote handle for t.ID.
func (s *RedisStore) bindRemote(ctx context.Context, t *Task) error {
	if t.RemoteID == "" {
		return nil
	}
	k := s.remoteKey(t)
	ok, err := s.c.SetNX(ctx, k, t.ID, 0).Result()
	if err != nil {
		return fmt.Errorf("recording the remote MCP task handle: %w", err)
	}
	if ok {
		return nil
	}
	cur, err := s.c.Get(ctx, k).Result()
	if err != nil {
		return fmt.Errorf("reading the remote MCP task handle: %w", err)
	}
	if cur != t.ID {
		return &DuplicateRemoteError{RemoteID: t.RemoteID, Server: t.Server}
	}
	return nil
}

// unbindRemote drops a handle claimed for a write that then failed.
func (s *RedisStore) unbindRemote(t *Task) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = unbindScript.Run(ctx, s.c, []string{s.remoteKey(t)}, t.ID).Err()
}

// Create records a new task: a slot under the user's cap (for an active
// task), the handle (when known), then one script. A failure gives the
// slot back.
func (s *RedisStore) Create(ctx context.Context, t *Task) error {
	if err := checkTask(t); err != nil {
		return err
	}
	d, err := s.encode(t)
	if err != nil {
		return err
	}
	reserved, err := s.reserve(ctx, t)
	if err != nil {
		return err
	}
	err = s.bindRemote(ctx, t)
	if err == nil {
		var res string
		res, err = s.create(ctx, t, d)
		switch {
		case err != nil:
			err = fmt.Errorf("creating MCP task: %w", err)
		case res == "exists":
			err = ErrExists
		}
	}
	if err != nil && reserved {
		s.releaseActive(t)
	}
	return err
}

// create runs the create script for t (record d) and, with WaitReplicas,
// WAIT on the same connection: its result is "ok" or "exists".
func (s *RedisStore) create(ctx context.Context, t *Task, d string) (string, error) {
	keys := s.keys(t)
	args := []any{t.ID, d, string(t.Status), dueAt(t), t.CreatedAt.UnixMilli(), s.eventArg(t, 0), s.channel(shardOf(t.ID)), expArg(t), s.c.PublishCommand()}
	if s.wait <= 0 {
		return createScript.Run(ctx, s.c, keys, args...).Text()
	}
	node, err := s.c.Node(ctx, keys[0])
	if err != nil {
		return "", err
	}
	var res, acks *redis.Cmd
	_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		res = createScript.Eval(ctx, p, keys, args...)
		acks = p.Do(ctx, "wait", s.wait, s.waitFor.Milliseconds())
		return nil
	})
	if err != nil {
		return "", err
	}
	if n, _ := acks.Int64(); n < int64(s.wait) {
		return "", fmt.Errorf("the task's record reached %d of the %d Redis replicas store.wait_replicas asks for within %s", n, s.wait, s.waitFor)
	}
	return res.Text()
}

// Heal bounds: a member of an active set older than activeGrace whose task
// does not exist is a reservation whose Create never finished; a user at
// the cap is healed at most once per healEvery.
const (
	activeGrace = time.Minute
	healEvery   = 2 * time.Second
)

// reserve takes a slot of t's user's active set, and reports whether it
// added one (false also when there is no cap, or t is terminal).
func (s *RedisStore) reserve(ctx context.Context, t *Task) (bool, error) {
	if s.maxActive <= 0 || t.Status.Terminal() {
		return false, nil
	}
	k := s.activeKey(t.User)
	for attempt := 0; ; attempt++ {
		n, err := reserveScript.Run(ctx, s.c, []string{k}, t.ID, t.CreatedAt.UnixMilli(), s.maxActive).Int()
		if err != nil {
			return false, fmt.Errorf("reserving an MCP task slot: %w", err)
		}
		if n != 0 {
			return n == 1, nil
		}
		if attempt > 0 || !s.heal(ctx, k) {
			return false, &ActiveLimitError{Limit: s.maxActive}
		}
	}
}

// heal drops members of an active set whose task is terminal, or missing
// for longer than activeGrace, and reports whether it dropped any.
func (s *RedisStore) heal(ctx context.Context, key string) bool {
	if ok, err := s.c.SetNX(ctx, key+":heal", 1, healEvery).Result(); err != nil || !ok {
		return false
	}
	members, err := s.c.ZRangeWithScores(ctx, key, 0, int64(s.maxActive)+100).Result()
	if err != nil || len(members) == 0 {
		return false
	}
	sts, err := s.memberStatuses(ctx, members)
	if err != nil && !errors.Is(err, redis.Nil) {
		return false
	}
	stale := staleMembers(members, sts, time.Now().Add(-activeGrace).UnixMilli())
	if len(stale) == 0 {
		return false
	}
	return s.c.ZRem(ctx, key, stale...).Err() == nil
}

// memberStatuses reads the status of every active-set member that is a
// task id, in one pipeline; a member that is not has a nil command.
func (s *RedisStore) memberStatuses(ctx context.Context, members []redis.Z) ([]*redis.StringCmd, error) {
	sts := make([]*redis.StringCmd, len(members))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			if id, _ := m.Member.(string); ValidID(id) {
				sts[i] = p.HGet(ctx, s.taskKey(id), "st")
			}
		}
		return nil
	})
	return sts, err
}

// staleMembers returns the members that hold no slot: not a task id, a
// terminal task, or a task missing since before old (Unix ms).
func staleMembers(members []redis.Z, sts []*redis.StringCmd, old int64) []any {
	var stale []any
	for i, m := range members {
		if sts[i] == nil {
			stale = append(stale, m.Member) // not a task id
			continue
		}
		st, err := sts[i].Result()
		if (err == nil && Status(st).Terminal()) || (errors.Is(err, redis.Nil) && int64(m.Score) < old) {
			stale = append(stale, m.Member)
		}
	}
	return stale
}

// releaseActive gives t's slot back (best effort: a member left behind is
// healed at the cap).
func (s *RedisStore) releaseActive(t *Task) {
	if s.maxActive <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.c.ZRem(ctx, s.activeKey(t.User), t.ID).Err(); err != nil {
		s.log.Debug("releasing an MCP task slot failed; it is healed at the cap", "task_id", t.ID, "err", err)
	}
}

func (s *RedisStore) getRaw(ctx context.Context, id string) (string, error) {
	d, err := s.c.HGet(ctx, s.taskKey(id), "d").Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading MCP task: %w", err)
	}
	return d, nil
}

// Get returns a copy of the task.
func (s *RedisStore) Get(ctx context.Context, id string) (*Task, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	d, err := s.getRaw(ctx, id)
	if err != nil {
		return nil, err
	}
	return decodeTask(d)
}

// Update is an optimistic read-modify-write: the write script compares the
// record it replaces.
func (s *RedisStore) Update(ctx context.Context, id string, fn func(*Task) error) (*Task, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	for range maxUpdateRetries {
		t, done, err := s.updateOnce(ctx, id, fn)
		if done {
			return t, err
		}
	}
	return nil, ErrConflict
}

// updateOnce is one attempt of Update; done is false when the record
// changed since it was read, and the attempt must be repeated.
func (s *RedisStore) updateOnce(ctx context.Context, id string, fn func(*Task) error) (t *Task, done bool, err error) {
	oldD, old, err := s.readLive(ctx, id)
	if err != nil {
		return nil, true, err
	}
	t, bound, err := s.prepareUpdate(ctx, old, fn)
	if err != nil {
		return nil, true, err
	}
	d, err := s.encode(t)
	if err != nil {
		return nil, true, err
	}
	k := s.keys(t)
	res, err := updateScript.Run(ctx, s.c, []string{k[0], k[1], k[4], k[5]}, id, oldD, d, string(t.Status), dueAt(t), s.eventArg(t, old.Version), s.channel(shardOf(id)), expArg(t), s.c.PublishCommand()).Text()
	if (err != nil || res != "ok") && bound {
		s.unbindRemote(t)
	}
	if done, err := updateOutcome(res, err); err != nil || !done {
		return nil, done, err
	}
	if t.Status.Terminal() {
		s.releaseActive(t)
	}
	return t, true, nil
}

// readLive reads a task's record as stored and decoded; a terminal task
// is ErrTerminal.
func (s *RedisStore) readLive(ctx context.Context, id string) (string, *Task, error) {
	oldD, err := s.getRaw(ctx, id)
	if err != nil {
		return "", nil, err
	}
	old, err := decodeTask(oldD)
	if err != nil {
		return "", nil, err
	}
	if old.Status.Terminal() {
		return "", nil, ErrTerminal
	}
	return oldD, old, nil
}

// prepareUpdate is applyUpdate (the store-agnostic rule) plus the binding
// of a remote id set for the first time; bound reports that binding.
func (s *RedisStore) prepareUpdate(ctx context.Context, old *Task, fn func(*Task) error) (t *Task, bound bool, err error) {
	t, bound, err = applyUpdate(old, fn)
	if err == nil && bound {
		err = s.bindRemote(ctx, t)
	}
	if err != nil {
		return nil, false, err
	}
	return t, bound, nil
}

// updateOutcome maps the update script's answer to Update's result: done
// is false for a conflict (retry).
func updateOutcome(res string, err error) (done bool, _ error) {
	switch {
	case err != nil:
		return true, fmt.Errorf("updating MCP task: %w", err)
	case res == "missing":
		return true, ErrNotFound
	case res == "terminal":
		return true, ErrTerminal
	case res == "conflict":
		return false, nil
	}
	return true, nil
}

// List reads the user's (or thread's) index of every shard in one pipeline,
// then the newest records in a second.
func (s *RedisStore) List(ctx context.Context, q Query) ([]*Task, error) {
	limit := q.limit()
	ids, err := s.listIDs(ctx, q, limit)
	if err != nil {
		return nil, err
	}
	var out []*Task
	for start := 0; start < len(ids) && len(out) < limit; start += limit {
		if out, err = s.listBatch(ctx, q, ids[start:min(start+limit, len(ids))], out, limit); err != nil {
			return nil, err
		}
	}
	sortNewest(out)
	return out, nil
}

// listIDs reads the newest ids of q's index of every shard, newest first
// across shards (score = creation ms, then id).
func (s *RedisStore) listIDs(ctx context.Context, q Query, limit int) ([]redis.Z, error) {
	scan := limit
	if q.ActiveOnly {
		scan = maxListScan
	}
	idx := ":usr:" + hexHash(q.User)
	if q.Thread != "" {
		idx = ":thr:" + hexHash(q.User, q.Thread)
	}
	cmds := make([]*redis.ZSliceCmd, redisShards)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range redisShards {
			cmds[i] = p.ZRevRangeWithScores(ctx, s.tag(strconv.FormatInt(int64(i), 16)[0])+idx, 0, int64(scan-1))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing MCP tasks: %w", err)
	}
	var ids []redis.Z
	for _, c := range cmds {
		ids = append(ids, c.Val()...)
	}
	sortZ(ids)
	return ids, nil
}

// listBatch reads the records of batch in one pipeline and appends those
// q selects to out, up to limit; a record removed meanwhile is skipped.
func (s *RedisStore) listBatch(ctx context.Context, q Query, batch []redis.Z, out []*Task, limit int) ([]*Task, error) {
	gets := make([]*redis.StringCmd, len(batch))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range batch {
			gets[i] = p.HGet(ctx, s.taskKey(z.Member.(string)), "d")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("listing MCP tasks: %w", err)
	}
	for _, g := range gets {
		d, err := g.Result()
		if err != nil {
			continue // removed meanwhile
		}
		t, err := decodeTask(d)
		if err != nil {
			return nil, err
		}
		if q.selects(t) && len(out) < limit {
			out = append(out, t)
		}
	}
	return out, nil
}

func sortZ(z []redis.Z) {
	less := func(a, b redis.Z) bool {
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		return a.Member.(string) > b.Member.(string)
	}
	for i := 1; i < len(z); i++ { // insertion sort: the shards' lists are short and sorted
		for j := i; j > 0 && less(z[j], z[j-1]); j-- {
			z[j], z[j-1] = z[j-1], z[j]
		}
	}
}

// Claim visits the shards from a rotating start, one script per shard,
// until n tasks are leased or every shard was asked.
func (s *RedisStore) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, n int) ([]*Lease, error) {
	var out []*Lease
	exp := now.Add(lease)
	start := int(now.UnixNano() % redisShards)
	for i := 0; i < redisShards && len(out) < n; i++ {
		shard := strconv.FormatInt(int64((start+i)%redisShards), 16)[0]
		tag := s.tag(shard)
		res, err := claimScript.Run(ctx, s.c, []string{tag + ":due"}, now.UnixMilli(), exp.UnixMilli(), owner, n-len(out), tag+":task:").Slice()
		if err != nil {
			return out, fmt.Errorf("claiming MCP tasks: %w", err)
		}
		for j := 0; j+3 < len(res); j += 4 {
			d, _ := res[j+2].(string)
			t, err := decodeTask(d)
			if err != nil {
				s.log.Warn("skipping an undecodable MCP task record", "err", err)
				continue
			}
			ep, _ := res[j+1].(int64)
			tk, _ := res[j+3].(int64)
			out = append(out, &Lease{Task: t, Owner: owner, Epoch: ep, Expires: time.UnixMilli(exp.UnixMilli()), Takeover: tk == 1})
		}
	}
	return out, nil
}

// Apply is one fenced script.
func (s *RedisStore) Apply(ctx context.Context, l *Lease, t *Task, now time.Time) (bool, error) {
	if err := checkTask(t); err != nil {
		return false, err
	}
	t = t.Clone()
	t.ID, t.User, t.Thread, t.RemoteID, t.CreatedAt = l.Task.ID, l.Task.User, l.Task.Thread, l.Task.RemoteID, l.Task.CreatedAt
	d, err := s.encode(t)
	if err != nil {
		return false, err
	}
	k := s.keys(t)
	n, err := applyScript.Run(ctx, s.c, []string{k[0], k[1], k[4], k[5]}, t.ID, l.Owner, l.Epoch, now.UnixMilli(), d, string(t.Status), dueAt(t), s.eventArg(t, l.Task.Version), s.channel(shardOf(t.ID)), expArg(t), s.c.PublishCommand()).Int()
	if err != nil {
		return false, fmt.Errorf("applying MCP task poll: %w", err)
	}
	if n == 1 && t.Status.Terminal() {
		s.releaseActive(t)
	}
	return n == 1, nil
}

// Release frees leases in one pipeline.
func (s *RedisStore) Release(ctx context.Context, leases []*Lease, now time.Time) error {
	if len(leases) == 0 {
		return nil
	}
	if err := s.loadScripts(ctx, releaseScript); err != nil {
		return err
	}
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, l := range leases {
			k := s.keys(l.Task)
			releaseScript.EvalSha(ctx, p, []string{k[0], k[1]}, l.Task.ID, l.Owner, l.Epoch, now.UnixMilli())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("releasing MCP task leases: %w", err)
	}
	return nil
}

func (s *RedisStore) loadScripts(ctx context.Context, scripts ...*redis.Script) error {
	for _, sc := range scripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("loading a Redis script: %w", err)
		}
	}
	return nil
}

// Sweep visits the shards from a rotating start: the ids whose retention
// ended, their records (for the index keys), then one script per record
// and the remote handles, each step one pipeline.
func (s *RedisStore) Sweep(ctx context.Context, now time.Time, n int) (int, error) {
	removed := 0
	start := int(now.UnixNano() % redisShards)
	for i := 0; i < redisShards && removed < n; i++ {
		tag := s.tag(strconv.FormatInt(int64((start+i)%redisShards), 16)[0])
		ids, err := s.c.ZRangeByScore(ctx, tag+":exp", &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(n - removed)}).Result()
		if err != nil {
			return removed, fmt.Errorf("sweeping MCP tasks: %w", err)
		}
		if len(ids) == 0 {
			continue
		}
		m, err := s.sweepShard(ctx, tag, ids, now)
		removed += m
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// sweepShard removes the expired tasks ids of one shard names: their
// records and index entries by script, then their remote handles and
// active slots. It returns how many records it removed.
func (s *RedisStore) sweepShard(ctx context.Context, tag string, ids []string, now time.Time) (int, error) {
	tasks, gone, err := s.sweepRecords(ctx, tag, ids)
	if err != nil {
		return 0, err
	}
	if err := s.loadScripts(ctx, sweepScript, unbindScript); err != nil {
		return 0, err
	}
	runs := make([]*redis.Cmd, len(tasks))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(gone) > 0 {
			p.ZRem(ctx, tag+":exp", gone...)
		}
		for i, t := range tasks {
			k := s.keys(t)
			runs[i] = sweepScript.EvalSha(ctx, p, []string{k[0], k[2], k[3], k[4], k[5], k[1]}, t.ID, now.UnixMilli())
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweeping MCP tasks: %w", err)
	}
	return s.sweepHandles(ctx, tasks, runs)
}

// sweepRecords reads the records of a shard's expired ids in one pipeline:
// the decodable tasks, and the ids with no usable record (gone), whose
// expiry entry alone is dropped.
func (s *RedisStore) sweepRecords(ctx context.Context, tag string, ids []string) (tasks []*Task, gone []any, _ error) {
	gets := make([]*redis.StringCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			gets[i] = p.HGet(ctx, tag+":task:"+id, "d")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("sweeping MCP tasks: %w", err)
	}
	for i, g := range gets {
		if t := sweptTask(g, ids[i]); t != nil {
			tasks = append(tasks, t)
		} else {
			gone = append(gone, ids[i]) // no usable record: drop the entry only
		}
	}
	return tasks, gone, nil
}

// sweptTask decodes the record g read for id, or returns nil when it is
// missing, undecodable or not id's.
func sweptTask(g *redis.StringCmd, id string) *Task {
	d, err := g.Result()
	if err != nil || !ValidID(id) {
		return nil
	}
	t, err := decodeTask(d)
	if err != nil || t.ID != id {
		return nil
	}
	return t
}

// sweepHandles drops the remote handle and active slot of every task the
// sweep script removed (runs[i] answered 1), in one pipeline, and returns
// how many it removed.
func (s *RedisStore) sweepHandles(ctx context.Context, tasks []*Task, runs []*redis.Cmd) (int, error) {
	removed := 0
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range tasks {
			if n, _ := runs[i].Int(); n != 1 {
				continue
			}
			removed++
			if t.RemoteID != "" {
				unbindScript.EvalSha(ctx, p, []string{s.remoteKey(t)}, t.ID)
			}
			if s.maxActive > 0 {
				p.ZRem(ctx, s.activeKey(t.User), t.ID)
			}
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("sweeping MCP task handles: %w", err)
	}
	return removed, nil
}

// Counts sums the shards' status counts in one pipeline.
func (s *RedisStore) Counts(ctx context.Context) (map[Status]int, error) {
	cmds := make([]*redis.MapStringStringCmd, redisShards)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range redisShards {
			cmds[i] = p.HGetAll(ctx, s.tag(strconv.FormatInt(int64(i), 16)[0])+":counts")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting MCP tasks: %w", err)
	}
	out := make(map[Status]int)
	for _, c := range cmds {
		for k, v := range c.Val() {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				out[Status(k)] += n
			}
		}
	}
	return out, nil
}

// Ping checks the connection.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("task store (Redis) unreachable: %w", err)
	}
	return nil
}

// Subscribe registers fn; the first subscriber starts the pub/sub reader,
// which go-redis reconnects after a Redis restart.
func (s *RedisStore) Subscribe(fn func(Event)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	s.subs[id] = fn
	if s.pubsub == nil {
		chs := s.channels()
		s.pubsub = s.c.Listen(context.Background(), chs...)
		// Wait (briefly) for the confirmations, so that events written after
		// Subscribe returns are seen; with Redis down the reader connects later.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for range chs {
			if _, err := s.pubsub.Receive(ctx); err != nil {
				s.log.Warn("task events: subscribing failed; retrying in the background", "err", err)
				break
			}
		}
		cancel()
		s.done = make(chan struct{})
		go s.readEvents(s.pubsub, s.done)
	}
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}
}

func (s *RedisStore) readEvents(ps *storeclient.Subscription, done chan struct{}) {
	defer close(done)
	ctx := context.Background()
	for {
		msg, err := ps.Receive(ctx)
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		m, ok := msg.(*redis.Message)
		if err != nil || !ok {
			continue // Receive backs off after an error
		}
		var e Event
		if err := json.Unmarshal([]byte(m.Payload), &e); err != nil || !ValidID(e.TaskID) {
			continue
		}
		s.mu.Lock()
		fns := make([]func(Event), 0, len(s.subs))
		for _, fn := range s.subs {
			fns = append(fns, fn)
		}
		s.mu.Unlock()
		for _, fn := range fns {
			fn(e)
		}
	}
}

// Close stops the event reader and closes the client.
func (s *RedisStore) Close() error {
	s.mu.Lock()
	ps, done := s.pubsub, s.done
	s.pubsub = nil
	s.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
	if !s.ownsC {
		return nil
	}
	err := s.c.Close()
	if err != nil && !strings.Contains(err.Error(), "closed") {
		return err
	}
	return nil
}
