package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// How the key set is kept. A set is used for keyTTL, then refreshed in the
// background. A token naming a key the set lacks makes the cache refetch
// it, at most once per refetchGap for one kid (so bad tokens cannot hammer
// the issuer) and at most one fetch per fetchGap in all, each bounded by
// fetchTimeout. The kids seen are remembered by hash, at most maxKids.
const (
	keyTTL       = 10 * time.Minute
	refetchGap   = 30 * time.Second
	fetchGap     = time.Second
	fetchTimeout = 10 * time.Second
	maxKids      = 4096
	maxJWKS      = 1 << 20 // bytes of a key set response
)

// errNoKey: the token names a key the issuer's set does not have.
var errNoKey = errors.New("the token's key id (kid) names no signing key of the issuer")

// keyCache holds the issuer's key set. Its fetches run detached from the
// requests that asked for them: one at a time, and one more queued for the
// requests that arrived while it ran; no caller can cancel one, and a
// caller waits for one only as long as its own context allows.
type keyCache struct {
	url    string
	client *http.Client
	now    func() time.Time
	log    hclog.Logger

	mu        sync.Mutex
	set       *jose.JSONWebKeySet
	fetched   time.Time
	lastStart time.Time
	running   *round // the fetch in flight
	queued    *round // the fetch that starts when running ends
	tried     map[[sha256.Size]byte]time.Time
}

// round is one fetch of the key set; done is closed when it ends, with err
// set when it failed.
type round struct {
	done chan struct{}
	err  error
}

func newKeyCache(url string, client *http.Client, now func() time.Time, log hclog.Logger) *keyCache {
	return &keyCache{url: url, client: client, now: now, log: log, tried: map[[sha256.Size]byte]time.Time{}}
}

// key returns the signing key kid names (the only key, for no kid). A key
// of the cached set is returned at once; otherwise the caller waits, until
// ctx ends at most, for a fetch that starts after it asked.
func (c *keyCache) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	k, r, err := c.lookup(kid)
	if r == nil {
		return k, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the issuer's signing keys: %w", ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := pick(c.set, kid); k != nil {
		return k, nil
	}
	if r.err != nil {
		return nil, r.err
	}
	return nil, errNoKey
}

// lookup returns kid's key from the cached set, asking for a background
// refresh when the set is stale; or, for a kid the set lacks, the fetch to
// wait for — none when kid caused one within refetchGap and the set is
// fresh.
func (c *keyCache) lookup(kid string) (*jose.JSONWebKey, *round, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	stale := c.set == nil || now.Sub(c.fetched) > keyTTL
	if k := pick(c.set, kid); k != nil {
		if stale {
			c.requestLocked(now)
		}
		return k, nil, nil
	}
	if !stale && !c.mayRefetchLocked(kid, now) {
		return nil, nil, errNoKey
	}
	return nil, c.requestLocked(now), nil
}

// mayRefetchLocked reports whether kid may cause a fetch at now (it caused
// none within refetchGap), and if so records that it did.
func (c *keyCache) mayRefetchLocked(kid string, now time.Time) bool {
	h := sha256.Sum256([]byte(kid))
	if t, ok := c.tried[h]; ok && now.Sub(t) < refetchGap {
		return false
	}
	if len(c.tried) >= maxKids {
		for k, t := range c.tried {
			if now.Sub(t) >= refetchGap || len(c.tried) >= maxKids {
				delete(c.tried, k)
			}
		}
	}
	c.tried[h] = now
	return true
}

// requestLocked returns a fetch that starts at or after now: the queued
// one, else a new one, queued behind the one in flight or started.
func (c *keyCache) requestLocked(now time.Time) *round {
	if c.queued != nil {
		return c.queued
	}
	r := &round{done: make(chan struct{})}
	if c.running != nil {
		c.queued = r
		return r
	}
	c.startLocked(r, now)
	return r
}

// startLocked runs r, fetchGap after the start of the previous fetch at
// the earliest.
func (c *keyCache) startLocked(r *round, now time.Time) {
	delay := max(c.lastStart.Add(fetchGap).Sub(now), 0)
	c.lastStart = now.Add(delay)
	c.running = r
	go c.run(r, delay)
}

// run waits delay, fetches the set and ends r, then starts the queued
// fetch if there is one.
func (c *keyCache) run(r *round, delay time.Duration) {
	if delay > 0 {
		t := time.NewTimer(delay)
		<-t.C
	}
	set, err := c.fetch()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.set, c.fetched = set, c.now()
	} else if c.set != nil {
		c.log.Warn("refetching the JWKS failed; keeping the keys fetched before", "reason", err)
	}
	r.err = err
	close(r.done)
	c.running = nil
	if q := c.queued; q != nil {
		c.queued = nil
		c.startLocked(q, c.now())
	}
}

// fetch gets the key set, within fetchTimeout. Its errors name the URL
// (redacted), never the response.
func (c *keyCache) fetch() (*jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	where := secret.RedactURL(c.url)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, fmt.Errorf("jwks url %s: %w", where, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error would repeat the URL, or name a redirect's target
		}
		return nil, fmt.Errorf("fetching the JWKS from %s: %w", where, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the JWKS from %s: HTTP %d", where, resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, maxJWKS)).Decode(&set); err != nil {
		return nil, fmt.Errorf("decoding the JWKS from %s: not a key set of at most %d bytes", where, maxJWKS)
	}
	return &set, nil
}

// pick returns the key of set that kid names, or its only key when kid is
// empty; nil when there is none.
func pick(set *jose.JSONWebKeySet, kid string) *jose.JSONWebKey {
	if set == nil {
		return nil
	}
	if kid != "" {
		if ks := set.Key(kid); len(ks) > 0 {
			return &ks[0]
		}
		return nil
	}
	if len(set.Keys) == 1 {
		return &set.Keys[0]
	}
	return nil
}
