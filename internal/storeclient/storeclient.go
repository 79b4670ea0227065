// Package storeclient builds the one Redis client every room of mcp-mux
// shares (sessions, durable tasks, limits, the shared requestState key) from
// the store block, in any of Redis's deployment modes, and the pub/sub that
// fits the mode: classic channels on one node or Sentinel, sharded channels
// (SPUBLISH, SSUBSCRIBE) on Cluster, where a classic PUBLISH goes to every
// node of the cluster.
package storeclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// The deployment modes of store.redis_mode.
const (
	Standalone = "standalone"
	Sentinel   = "sentinel"
	Cluster    = "cluster"
)

// Round-trip bounds of every client this package builds. A request path's
// own deadline (a context's) ends a round trip sooner: the client honours
// it (ContextTimeoutEnabled).
const (
	DialTimeout = 5 * time.Second
	IOTimeout   = 5 * time.Second
	// bufferSize is each connection's read and write buffer: the stores'
	// commands and replies are small (a session record is at most 2 KiB),
	// and go-redis's default 32 KiB per buffer would cost more than the
	// sessions.
	bufferSize = 8 << 10
)

// Options configure Open.
type Options struct {
	// Mode is Standalone (""), Sentinel or Cluster.
	Mode string
	// URL is go-redis's URL form for the mode: redis://, rediss:// or
	// unix:// (standalone; redis.ParseURL); the sentinels, master_name and
	// addr= for more sentinels (sentinel; redis.ParseFailoverURL, whose
	// user info is the sentinels' and whose username= and password= are the
	// primary's); seed nodes with addr= (cluster; redis.ParseClusterURL, a
	// single configuration endpoint works).
	URL secret.Value
	// SentinelPassword, when set, authenticates to the sentinels instead of
	// the URL's user info.
	SentinelPassword secret.Value
	// CAFile is a PEM bundle of the CAs a rediss:// server's certificate
	// must chain to (default: the system's).
	CAFile string
	// PoolSize is the connections per node (0: go-redis's default, 10 per
	// CPU).
	PoolSize int
}

// Client is the shared connection: a redis.UniversalClient (a *redis.Client
// for standalone and Sentinel, a *redis.ClusterClient for Cluster) that
// knows which pub/sub its mode wants.
type Client struct {
	redis.UniversalClient
	mode string
}

// Open checks o and builds its client; it does not connect. Its errors name
// what is wrong and never repeat the URL or its credentials.
func Open(o Options) (*Client, error) {
	p, err := Parse(o.Mode, o.URL)
	if err != nil {
		return nil, err
	}
	if !o.SentinelPassword.IsZero() && p.Sentinel == nil {
		return nil, errors.New("store.sentinel_password is set but store.redis_mode is not sentinel")
	}
	switch {
	case p.Sentinel != nil:
		f := p.Sentinel
		if !o.SentinelPassword.IsZero() {
			f.SentinelPassword = o.SentinelPassword.Reveal()
		}
		if err := o.tls(f.TLSConfig); err != nil {
			return nil, err
		}
		f.PoolSize = o.poolSize(f.PoolSize)
		f.DialTimeout, f.ReadTimeout, f.WriteTimeout, f.ContextTimeoutEnabled = DialTimeout, IOTimeout, IOTimeout, true
		f.ReadBufferSize, f.WriteBufferSize, f.PipelinePoolSize = bufferSize, bufferSize, -1
		return &Client{UniversalClient: redis.NewFailoverClient(f), mode: Sentinel}, nil
	case p.Cluster != nil:
		c := p.Cluster
		if err := o.tls(c.TLSConfig); err != nil {
			return nil, err
		}
		c.PoolSize = o.poolSize(c.PoolSize)
		c.DialTimeout, c.ReadTimeout, c.WriteTimeout, c.ContextTimeoutEnabled = DialTimeout, IOTimeout, IOTimeout, true
		c.ReadBufferSize, c.WriteBufferSize = bufferSize, bufferSize
		return &Client{UniversalClient: redis.NewClusterClient(c), mode: Cluster}, nil
	default:
		c := p.Standalone
		if err := o.tls(c.TLSConfig); err != nil {
			return nil, err
		}
		c.PoolSize = o.poolSize(c.PoolSize)
		c.DialTimeout, c.ReadTimeout, c.WriteTimeout, c.ContextTimeoutEnabled = DialTimeout, IOTimeout, IOTimeout, true
		c.ReadBufferSize, c.WriteBufferSize, c.PipelinePoolSize = bufferSize, bufferSize, -1
		return &Client{UniversalClient: redis.NewClient(c), mode: Standalone}, nil
	}
}

// poolSize is the pool size: Options.PoolSize, else the URL's pool_size,
// else go-redis's default (0).
func (o Options) poolSize(fromURL int) int {
	if o.PoolSize > 0 {
		return o.PoolSize
	}
	return fromURL
}

// Parsed is what go-redis parsed from a URL in one mode: exactly one field
// is set.
type Parsed struct {
	Standalone *redis.Options
	Sentinel   *redis.FailoverOptions
	Cluster    *redis.ClusterOptions
}

// Parse parses url in mode (go-redis's ParseURL, ParseFailoverURL or
// ParseClusterURL), checked: a parse error names what is wrong with the URL
// but never quotes it, a skip_verify query parameter is refused, and
// sentinel mode needs master_name.
func Parse(mode string, raw secret.Value) (*Parsed, error) {
	scrub := &secret.Scrubber{}
	scrub.AddURL(raw.Reveal())
	q, err := url.Parse(raw.Reveal())
	if err != nil {
		return nil, errors.New("store.redis_url is not a URL")
	}
	if q.Query().Has("skip_verify") {
		return nil, errors.New("store.redis_url: skip_verify turns certificate checks off; give store.tls_ca_file instead")
	}
	p := &Parsed{}
	switch mode {
	case "", Standalone:
		p.Standalone, err = redis.ParseURL(raw.Reveal())
	case Sentinel:
		p.Sentinel, err = redis.ParseFailoverURL(raw.Reveal())
		if err == nil && p.Sentinel.MasterName == "" {
			return nil, errors.New("store.redis_url: sentinel mode needs master_name=<the primary's name> in the URL")
		}
	case Cluster:
		p.Cluster, err = redis.ParseClusterURL(raw.Reveal())
	default:
		return nil, fmt.Errorf("store.redis_mode is %q; want standalone, sentinel or cluster", mode)
	}
	if err != nil {
		if mode == "" {
			mode = Standalone
		}
		return nil, fmt.Errorf("store.redis_url is not a valid %s URL: %w", mode, scrub.Error(err))
	}
	return p, nil
}

// tls completes a rediss:// URL's TLS settings (cfg; nil for none) from o:
// the CA bundle. Certificate checks are never off (a URL's skip_verify is
// refused).
func (o Options) tls(cfg *tls.Config) error {
	if cfg == nil {
		if o.CAFile != "" {
			return errors.New("store.tls_ca_file is set but store.redis_url is not a rediss:// URL")
		}
		return nil
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return fmt.Errorf("store.tls_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("store.tls_ca_file %s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	cfg.MinVersion = tls.VersionTLS12
	return nil
}

// Mode is the client's deployment mode.
func (c *Client) Mode() string { return c.mode }

// Sharded reports whether the client's pub/sub is sharded (Cluster).
func (c *Client) Sharded() bool { return c.mode == Cluster }

// PublishCommand is the command a script publishes with: SPUBLISH on
// Cluster (the channel must then share the script's hash slot), PUBLISH
// otherwise.
func (c *Client) PublishCommand() string {
	if c.Sharded() {
		return "spublish"
	}
	return "publish"
}

// Publish sends msg on channel, sharded on Cluster; its value is the
// number of subscribers that got it.
func (c *Client) Publish(ctx context.Context, channel string, msg any) *redis.IntCmd {
	if c.Sharded() {
		return c.SPublish(ctx, channel, msg)
	}
	return c.UniversalClient.Publish(ctx, channel, msg)
}

// PublishIn queues a Publish of msg on channel in p.
func (c *Client) PublishIn(ctx context.Context, p redis.Pipeliner, channel string, msg any) {
	if c.Sharded() {
		p.SPublish(ctx, channel, msg)
		return
	}
	p.Publish(ctx, channel, msg)
}

// PingAll checks one round trip to the store (to every master on Cluster).
func (c *Client) PingAll(ctx context.Context) error {
	if cc, ok := c.UniversalClient.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
	}
	return c.UniversalClient.Ping(ctx).Err()
}

// Node returns the client whose connections reach the primary that holds
// key: on Cluster that key's master, else the client itself. A pipeline
// on it runs on one connection, which is what WAIT needs.
func (c *Client) Node(ctx context.Context, key string) (redis.UniversalClient, error) {
	if cc, ok := c.UniversalClient.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("finding the Redis Cluster master of a key: %w", err)
		}
		return m, nil
	}
	return c.UniversalClient, nil
}

// Wrap is a Client on an existing go-redis client (tests and benches that
// build their own): sharded pub/sub when c is a *redis.ClusterClient.
func Wrap(c redis.UniversalClient) *Client {
	mode := Standalone
	if _, ok := c.(*redis.ClusterClient); ok {
		mode = Cluster
	}
	return &Client{UniversalClient: c, mode: mode}
}

// Dial is Open in standalone mode for a single owner (tests, benches): the
// bare go-redis client, which a store given it closes.
func Dial(url string) (redis.UniversalClient, error) {
	c, err := Open(Options{URL: secret.Value(url)})
	if err != nil {
		return nil, err
	}
	return c.UniversalClient, nil
}
