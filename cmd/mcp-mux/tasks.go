package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// taskDataDir returns the embedded task store's directory when cfg needs
// one (durable tasks on, no store.redis_url), "" when it does not
// (dataDir). serve and validate resolve it alike.
func taskDataDir(cfg *config.Config, dir string, env func(string) (string, bool)) (string, error) {
	if !cfg.Tasks.Enabled || !cfg.Store.RedisURL.IsZero() {
		return "", nil
	}
	d, err := dataDir(dir, env)
	if err != nil {
		return "", fmt.Errorf("the embedded task store needs %w", err)
	}
	return d, nil
}

// dataDir returns the directory embedded stores live in: dir
// (--data-dir, else MCP_MUX_DATA_DIR) when given, else
// $XDG_STATE_HOME/mcp-mux (an absolute XDG_STATE_HOME), else
// $HOME/.local/state/mcp-mux.
func dataDir(dir string, env func(string) (string, bool)) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if state := lookup(env, "XDG_STATE_HOME"); filepath.IsAbs(state) {
		return filepath.Join(state, "mcp-mux"), nil
	}
	if home := lookup(env, "HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "state", "mcp-mux"), nil
	}
	return "", errors.New("a data directory: give --data-dir (or MCP_MUX_DATA_DIR), set XDG_STATE_HOME or HOME, or use store.redis_url")
}

// openTaskStore opens the durable task store when mcp_tasks.enabled: Redis
// on the shared client rc, else (rc nil) the embedded bbolt file in the
// directory taskDataDir resolves from dataDir and env (created 0700). nil
// when tasks are off.
func openTaskStore(cfg *config.Config, rc *storeclient.Client, dataDir string, env func(string) (string, bool), log hclog.Logger) (taskpoll.Store, error) {
	if !cfg.Tasks.Enabled {
		return nil, nil
	}
	if rc == nil {
		dataDir, err := taskDataDir(cfg, dataDir, env)
		if err != nil {
			return nil, fmt.Errorf("mcp_tasks: %w", err)
		}
		st, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: dataDir, MaxActivePerUser: cfg.Tasks.MaxActiveTasksPerUser})
		if err != nil {
			return nil, fmt.Errorf("mcp_tasks: %w", err)
		}
		log.Info("durable tasks: embedded store", "dir", dataDir)
		return st, nil
	}
	st := taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: rc, KeyPrefix: cfg.Store.KeyPrefix, MaxActivePerUser: cfg.Tasks.MaxActiveTasksPerUser,
		WaitReplicas: cfg.Store.WaitReplicas, WaitTimeout: cfg.Store.WaitTimeout, Logger: log.Named("store")})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		// Not fatal: submits fail cleanly and polling waits until Redis is back.
		log.Warn("durable tasks: Redis is not reachable yet", "err", err)
	}
	log.Info("durable tasks: Redis store", "key_prefix", cfg.Store.KeyPrefix, "wait_replicas", cfg.Store.WaitReplicas)
	return st, nil
}

// taskConfig is the mcp_tasks block for taskpoll.
func taskConfig(t config.Tasks) taskpoll.Config {
	return taskpoll.Config{
		PollInterval: t.PollInterval, Lease: t.Lease, MaxConcurrentPolls: t.MaxConcurrentPolls,
		MaxPollBackoff: t.MaxPollBackoff, InputRequiredPollInterval: t.InputRequiredPollInterval,
		DegradedAfterErrors: t.TrackingDegradedAfterErrors, MaxResultBytes: t.MaxResultBytes,
		ResultPreviewMaxChars: t.ResultPreviewMaxChars, Retention: t.Retention,
	}
}

// taskService is the task API's service: nil (503s) when tasks are off.
func taskService(srv *proxy.Server) api.TaskService {
	if t := srv.Tasks(); t != nil {
		return t
	}
	return nil
}

// taskCounter is the status page's task counter: nil when tasks are off.
func taskCounter(srv *proxy.Server) api.TaskCounter {
	if t := srv.Tasks(); t != nil {
		return t.Store()
	}
	return nil
}

// redisLogger is go-redis's logger on hclog (its messages name addresses,
// never the URL's password).
type redisLogger struct{ log hclog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn(fmt.Sprintf(format, v...))
}
