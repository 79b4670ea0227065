package mcptest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RedisCluster is a Redis Cluster of masters without replicas that a test
// started (redis-server --cluster-enabled yes, redis-cli --cluster create).
type RedisCluster struct {
	Nodes []*Redis
}

// StartRedisCluster starts a cluster of n masters (n ≥ 3) on free loopback
// ports and waits until every node reports cluster_state:ok.
func StartRedisCluster(t testing.TB, n int) *RedisCluster {
	t.Helper()
	c := &RedisCluster{}
	addrs := make([]string, n)
	for i := range n {
		r := startRedis(t, false, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		c.Nodes = append(c.Nodes, r)
		addrs[i] = r.Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, r := range c.Nodes {
		for !strings.Contains(info(r.Addr, "cluster", "info"), "cluster_state:ok") {
			if time.Now().After(deadline) {
				t.Fatalf("redis cluster node %s never reported cluster_state:ok", r.Addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// URL is the cluster's URL in go-redis's form (ParseClusterURL): the first
// node, the others as addr=.
func (c *RedisCluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr
	for i, r := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + r.Addr
	}
	return u
}

// Keys returns how many keys each node holds, in node order.
func (c *RedisCluster) Keys() []int {
	out := make([]int, len(c.Nodes))
	for i, r := range c.Nodes {
		v, _ := r.Do("DBSIZE")
		_, _ = fmt.Sscan(v, &out[i])
	}
	return out
}

// RedisSentinel is a primary, a replica and three sentinels watching them
// (master name "mymaster", down after 1 s).
type RedisSentinel struct {
	Primary, Replica *Redis
	Sentinels        []*Redis
}

// SentinelMaster is the master name a RedisSentinel's sentinels know.
const SentinelMaster = "mymaster"

// StartRedisSentinel starts the primary, its replica and three sentinels,
// and waits until the sentinels see the replica.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	// Diskless sync at once (the default waits 5 s for more replicas),
	// on both: the replica is the primary after a failover.
	fast := []string{"--repl-diskless-sync-delay", "0"}
	s := &RedisSentinel{Primary: startRedis(t, false, fast...)}
	h, p, _ := net.SplitHostPort(s.Primary.Addr)
	s.Replica = startRedis(t, false, append(fast, "--replicaof", h, p)...)
	for range 3 {
		addr := FreeAddr(t)
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		_, port, _ := net.SplitHostPort(addr)
		text := fmt.Sprintf("port %s\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
			"sentinel monitor %s %s 2\nsentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			port, dir, SentinelMaster, hostPort(s.Primary.Addr), SentinelMaster, SentinelMaster, SentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		r := &Redis{t: t, Addr: addr, dir: dir, sentinelConf: conf}
		r.Start()
		t.Cleanup(r.Stop)
		s.Sentinels = append(s.Sentinels, r)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(info(s.Replica.Addr, "info", "replication"), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatalf("the replica %s never synced with the primary", s.Replica.Addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, r := range s.Sentinels {
		for !strings.Contains(info(r.Addr, "info", "sentinel"), "slaves=1,sentinels=3") {
			if time.Now().After(deadline) {
				t.Fatalf("sentinel %s never saw the replica and the other sentinels: %s", r.Addr, info(r.Addr, "info", "sentinel"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return s
}

// URL is the sentinels' URL in go-redis's form (ParseFailoverURL).
func (s *RedisSentinel) URL() string {
	u := "redis://" + s.Sentinels[0].Addr + "?master_name=" + SentinelMaster
	for _, r := range s.Sentinels[1:] {
		u += "&addr=" + r.Addr
	}
	return u
}

// Master returns the address the sentinels name as the primary now.
func (s *RedisSentinel) Master() string {
	for _, r := range s.Sentinels {
		if out := info(r.Addr, "sentinel", "get-master-addr-by-name", SentinelMaster); out != "" {
			f := strings.Fields(out)
			if len(f) == 2 {
				return net.JoinHostPort(f[0], f[1])
			}
		}
	}
	return ""
}

// hostPort is "host port" as redis-server's replicaof and sentinel monitor
// take it.
func hostPort(addr string) string {
	h, p, _ := net.SplitHostPort(addr)
	return h + " " + p
}

// info runs redis-cli against addr and returns its output ("" on error).
func info(addr string, args ...string) string {
	h, p, _ := net.SplitHostPort(addr)
	out, err := exec.Command("redis-cli", append([]string{"-h", h, "-p", p}, args...)...).Output()
	if err != nil {
		return ""
	}
	return strings.ReplaceAll(string(out), "\r", "")
}

// KillPrimary SIGKILLs whichever server the sentinels name as the primary
// now.
func (s *RedisSentinel) KillPrimary() {
	m := s.Master()
	for _, r := range []*Redis{s.Primary, s.Replica} {
		if r.Addr == m {
			r.Stop()
		}
	}
}
