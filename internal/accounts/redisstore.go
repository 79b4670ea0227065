package accounts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// RedisOptions configure NewRedisStore.
type RedisOptions struct {
	Client    *storeclient.Client // shared; Close leaves it open
	KeyPrefix string
}

// RedisStore is the Store shared by replicas. Its keys, under KeyPrefix:
//
//	acct:{u:<uh>}:pending     sorted set: the user's pending consent ids, scored by expiry (ms)
//	acct:{u:<uh>}:p:<id>      a pending consent's sealed record (PX: its lifetime)
//	acct:{u:<uh>}:tok         hash: server → the sealed vault entry
//	acct:{u:<uh>}:lock:<srv>  the refresh lock of (user, server)
//	acct:{p}:pending          sorted set: every pending consent id, scored by expiry
//	acct:{s:<srv>}:users      set: the hashes of the users connected to a server
//	acct:r:{<id>}             a consent's result (PX)
//	acct:reg:{<hash>}         a sealed client registration
//	acct:done                 channel: ids of consents that finished
//
// Each script touches the keys of one hash tag, so all run on Redis Cluster.
type RedisStore struct {
	c      *storeclient.Client
	prefix string

	takeScript, unlockScript *redis.Script

	subs listeners
	mu   sync.Mutex // guards sub and done
	sub  *storeclient.Subscription
	done chan struct{}
}

var _ Store = (*RedisStore)(nil)

// takeLua: KEYS record, user zset; ARGV id. The record, deleted, or nil.
const takeLua = `
local v = redis.call('GET', KEYS[1])
if v then redis.call('DEL', KEYS[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
return v`

// unlockLua: KEYS lock; ARGV owner.
const unlockLua = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

// NewRedisStore returns the Store on o.Client.
func NewRedisStore(o RedisOptions) *RedisStore {
	return &RedisStore{
		c: o.Client, prefix: o.KeyPrefix,
		takeScript:   redis.NewScript(takeLua),
		unlockScript: redis.NewScript(unlockLua),
	}
}

func (s *RedisStore) user(uh, rest string) string { return s.prefix + "acct:{u:" + uh + "}:" + rest }
func (s *RedisStore) all() string                 { return s.prefix + "acct:{p}:pending" }
func (s *RedisStore) usersKey(server string) string {
	return s.prefix + "acct:{s:" + server + "}:users"
}
func (s *RedisStore) resultKey(id string) string { return s.prefix + "acct:r:{" + id + "}" }
func (s *RedisStore) channel() string            { return s.prefix + "acct:done" }

func (s *RedisStore) reserve(ctx context.Context, uh, id string, ttl time.Duration, maxUser, maxAll int) error {
	now := time.Now()
	ok, err := s.c.Reserve(ctx, s.user(uh, "pending"), id, now, now.Add(ttl), maxUser)
	if err != nil {
		return fmt.Errorf("reserving a pending consent: %w", err)
	}
	if !ok {
		return errTooManyUser
	}
	ok, err = s.c.Reserve(ctx, s.all(), id, now, now.Add(ttl), maxAll)
	if err == nil && ok {
		return nil
	}
	_ = s.c.ZRem(ctx, s.user(uh, "pending"), id).Err() // best effort: the entry expires anyway
	if err != nil {
		return fmt.Errorf("reserving a pending consent: %w", err)
	}
	return errTooManyAll
}

func (s *RedisStore) release(ctx context.Context, uh, id string) error {
	err1 := s.c.ZRem(ctx, s.user(uh, "pending"), id).Err()
	err2 := s.c.ZRem(ctx, s.all(), id).Err()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("releasing a pending consent: %w", err)
	}
	return nil
}

func (s *RedisStore) putPending(ctx context.Context, uh, id string, rec []byte, ttl time.Duration) error {
	if err := s.c.Set(ctx, s.user(uh, "p:"+id), rec, ttl).Err(); err != nil {
		return fmt.Errorf("storing a pending consent: %w", err)
	}
	return nil
}

func (s *RedisStore) takePending(ctx context.Context, uh, id string) ([]byte, error) {
	v, err := s.takeScript.Run(ctx, s.c, []string{s.user(uh, "p:"+id), s.user(uh, "pending")}, id).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("taking a pending consent: %w", err)
	}
	_ = s.c.ZRem(ctx, s.all(), id).Err() // best effort: the entry expires anyway
	return []byte(v), nil
}

func (s *RedisStore) putResult(ctx context.Context, id string, res []byte, ttl time.Duration, wake bool) error {
	if err := s.c.Set(ctx, s.resultKey(id), res, ttl).Err(); err != nil {
		return fmt.Errorf("storing a consent's result: %w", err)
	}
	if !wake {
		return nil
	}
	if err := s.c.Publish(ctx, s.channel(), id).Err(); err != nil {
		return fmt.Errorf("announcing a consent's result: %w", err)
	}
	return nil
}

func (s *RedisStore) result(ctx context.Context, id string) ([]byte, error) {
	v, err := s.c.Get(ctx, s.resultKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading a consent's result: %w", err)
	}
	return v, nil
}

func (s *RedisStore) getToken(ctx context.Context, uh, server string) ([]byte, error) {
	v, err := s.c.HGet(ctx, s.user(uh, "tok"), server).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the token vault: %w", err)
	}
	return v, nil
}

func (s *RedisStore) putToken(ctx context.Context, uh, server string, rec []byte) error {
	if err := s.c.HSet(ctx, s.user(uh, "tok"), server, rec).Err(); err != nil {
		return fmt.Errorf("writing the token vault: %w", err)
	}
	if err := s.c.SAdd(ctx, s.usersKey(server), uh).Err(); err != nil {
		return fmt.Errorf("writing the connected users: %w", err)
	}
	return nil
}

func (s *RedisStore) deleteToken(ctx context.Context, uh, server string) (bool, error) {
	n, err := s.c.HDel(ctx, s.user(uh, "tok"), server).Result()
	if err != nil {
		return false, fmt.Errorf("deleting from the token vault: %w", err)
	}
	if err := s.c.SRem(ctx, s.usersKey(server), uh).Err(); err != nil {
		return n > 0, fmt.Errorf("writing the connected users: %w", err)
	}
	return n > 0, nil
}

func (s *RedisStore) servers(ctx context.Context, uh string) ([]string, error) {
	v, err := s.c.HKeys(ctx, s.user(uh, "tok")).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the token vault: %w", err)
	}
	return v, nil
}

func (s *RedisStore) users(ctx context.Context, server string, n int) ([]string, int, error) {
	count, err := s.c.SCard(ctx, s.usersKey(server)).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("counting the connected users: %w", err)
	}
	some, err := s.c.SRandMemberN(ctx, s.usersKey(server), int64(n)).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the connected users: %w", err)
	}
	return some, int(count), nil
}

func (s *RedisStore) getReg(ctx context.Context, key string) ([]byte, error) {
	v, err := s.c.Get(ctx, s.prefix+"acct:reg:{"+key+"}").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading a client registration: %w", err)
	}
	return v, nil
}

func (s *RedisStore) putReg(ctx context.Context, key string, rec []byte) error {
	if err := s.c.Set(ctx, s.prefix+"acct:reg:{"+key+"}", rec, 0).Err(); err != nil {
		return fmt.Errorf("storing a client registration: %w", err)
	}
	return nil
}

func (s *RedisStore) lock(ctx context.Context, uh, server string, ttl time.Duration) (func(), bool, error) {
	k := s.user(uh, "lock:"+server)
	owner := rand.Text()
	ok, err := s.c.SetNX(ctx, k, owner, ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("taking the refresh lock: %w", err)
	}
	if !ok {
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.unlockScript.Run(ctx, s.c, []string{k}, owner).Err() // else it expires
	}, true, nil
}

// listen starts the channel's reader with the first listener.
func (s *RedisStore) listen(fn func(string)) func() {
	remove := s.subs.add(fn)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sub == nil {
		s.sub = s.c.Listen(context.Background(), s.channel())
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = s.sub.Receive(ctx) // the confirmation; a missed one is caught by Wait's re-check
		cancel()
		s.done = make(chan struct{})
		go s.read(s.sub, s.done)
	}
	return remove
}

// read dispatches the ids published on the channel until sub closes.
func (s *RedisStore) read(sub *storeclient.Subscription, done chan struct{}) {
	defer close(done)
	for {
		msg, err := sub.Receive(context.Background())
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		if m, ok := msg.(*redis.Message); ok && err == nil && validID(m.Payload) {
			s.subs.call(m.Payload)
		}
	}
}

// Close stops the channel's reader.
func (s *RedisStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sub != nil { // read takes no lock: waiting for it here is safe
		_ = s.sub.Close()
		<-s.done
		s.sub = nil
	}
	return nil
}
