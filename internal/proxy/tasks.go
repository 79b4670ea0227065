package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/proxy/modern"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessions"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// Durable tasks (taskpoll) as the MCP surface sees them.
//
// A task-enabled server's status and cancel tools are left out of the
// catalog; its submit tool keeps its name and schema, gets DeerFlow's
// contract appended to its description (package catalog), and a call to it
// goes through taskpoll.Service.Submit (callpath.Router.CallTool's one hook: submitTask).
// The built-in tools list_background_tasks, cancel_background_task and
// get_background_task are catalog routes without a server. Each task is the
// resource mux://tasks/{task_id}; every task event, from whichever replica
// wrote it, reaches the owner's sessions on this replica as a logging
// notification and notifications/resources/updated.
//
// The set of task-enabled servers and their connection settings are frozen
// at the first Apply (DeerFlow's startup snapshot): a reload that changes
// one is refused for that server only, which keeps running as it was.

// errTasksDisabled is DeerFlow's startup error.
const errTasksDisabled = "MCP task_toolsets are configured, so mcp_tasks.enabled=true is required; mcp-mux will not silently expose these tools as synchronous calls."

// TaskStartupError is DeerFlow's startup rule: an enabled server with
// task_toolsets needs mcp_tasks.enabled (and so a task store). serve fails
// with it before anything starts.
func TaskStartupError(cfg *config.Config) error {
	if cfg.Tasks.Enabled {
		return nil
	}
	for _, sc := range cfg.Servers {
		if sc.Enabled && len(sc.TaskToolsets) > 0 {
			return errors.New(errTasksDisabled)
		}
	}
	return nil
}

// taskBridge is the durable task service as the proxy runs it: started
// at the first Apply, stopped by Close, its events delivered to this
// replica's sessions and listeners, its reload rules applied.
type taskBridge struct {
	svc      *taskpoll.Service // nil: durable tasks off
	once     sync.Once
	started  bool   // the first Apply is done; under Server.applyMu
	cancel   func() // ends the event subscription
	log      hclog.Logger
	panics   *panicguard.Guard
	sessions *sessions.Table
	modern   *modern.Handler
	bg       *sync.WaitGroup
}

// change is Apply's rule for task-enabled servers, DeerFlow's startup
// snapshot: the servers with task_toolsets, their task_toolsets and their
// connection settings are fixed until a restart, since their tasks' polls
// depend on them. Removing or disabling a running task server is allowed
// (its tasks then retry); giving a server task_toolsets, changing or
// removing them, or changing a task server's connection settings is
// refused for that server. Without durable tasks (mcp_tasks was off at
// startup) a server with task_toolsets cannot run them at all.
func (s *taskBridge) change(prev, next *config.Server) error {
	if !s.started || next == nil || !next.Enabled || !hasTasks(prev) && !hasTasks(next) {
		return nil
	}
	name := next.Name
	switch {
	case s.svc == nil:
		return fmt.Errorf("MCP server '%s' has task_toolsets, but mcp_tasks was not enabled when mcp-mux started; restart mcp-mux to run durable tasks", name)
	case prev == nil || !hasTasks(prev):
		return fmt.Errorf("MCP server '%s' gained task_toolsets after mcp-mux started; restart mcp-mux to apply it", name)
	case !hasTasks(next):
		return fmt.Errorf("MCP task-enabled server '%s' lost its task_toolsets after mcp-mux started; restart mcp-mux to apply it", name)
	case !slices.Equal(prev.TaskToolsets, next.TaskToolsets):
		return fmt.Errorf("MCP task-enabled server '%s' changed its task_toolsets after mcp-mux started; restart mcp-mux to apply it", name)
	case prev.Fingerprint() != next.Fingerprint():
		return fmt.Errorf("MCP task-enabled server configuration changed after mcp-mux started (%s); restart mcp-mux to apply it", name)
	}
	return nil
}

// hasTasks reports whether sc is an enabled server with task_toolsets.
func hasTasks(sc *config.Server) bool {
	return sc != nil && sc.Enabled && len(sc.TaskToolsets) > 0
}

// event delivers one task event to this replica's sessions of its
// owner: those that called as its thread get a logging message, and they
// and any session of the user subscribed to the task's resource get
// notifications/resources/updated.
func (s *taskBridge) event(e taskpoll.Event) {
	// On the task service's goroutine (internal/panicguard).
	defer s.panics.Catch(panicguard.Task, nil)
	s.modern.TaskEvent(e) // subscriptions/listen with taskIds (package modern)
	uri := taskpoll.ResourcePrefix + e.TaskID
	data, _ := json.Marshal(map[string]any{"task_id": e.TaskID, "task_name": e.Name, "status": e.Status, "tracking_degraded": e.Degraded, "resource": uri})
	msg, _ := json.Marshal(&mcp.LoggingMessageParams{Level: "info", Logger: "mcp-mux.tasks", Data: json.RawMessage(data)})
	// Every replica hears of the event: a session hears of it from its holder.
	for _, st := range s.sessions.Held() {
		if st.User != e.User {
			continue
		}
		owner := st.ID == e.Thread || st.HasThread(e.Thread)
		if !owner && !st.Subs.Has(uri) {
			continue
		}
		s.bg.Go(func() {
			defer s.panics.Catch(panicguard.Task, nil)
			if owner {
				s.sessions.Notify(st, "notifications/message", msg)
			}
			updated, _ := json.Marshal(&mcp.ResourceUpdatedNotificationParams{URI: uri})
			s.sessions.Notify(st, "notifications/resources/updated", updated)
		})
	}
}

// TaskCounts returns the number of durable tasks by status (all replicas),
// or nil when durable tasks are off.
func (s *Server) TaskCounts(ctx context.Context) (map[taskpoll.Status]int, error) {
	if s.tasks == nil {
		return nil, nil
	}
	return s.tasks.Counts(ctx)
}

// Tasks returns the durable task service, or nil when durable tasks are off.
func (s *Server) Tasks() *taskpoll.Service { return s.tasks }

// Authenticated guards an HTTP API with /mcp's checks (Host and Origin,
// caller identity with a 401 challenge) and passes the caller's user on.
func (s *Server) Authenticated(next func(w http.ResponseWriter, r *http.Request, user string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := s.rt.Load()
		if err := rt.Origins.Check(r); err != nil {
			http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		user, err := rt.Auth.Authenticate(r)
		if err != nil {
			rt.Auth.Challenge(w, r, err)
			return
		}
		next(w, r, user)
	})
}

// warnSettings logs when a reload changes the startup-only mcp_tasks or
// store blocks.
func (s *taskBridge) warnSettings(old, cfg *config.Config) {
	if len(old.Servers) == 0 && old.Tasks == (config.Tasks{}) {
		return // the first Apply
	}
	if s.svc == nil {
		if cfg.Tasks.Enabled {
			s.log.Warn("mcp_tasks is read at startup only and was off then; restart mcp-mux to run durable tasks")
		}
		return
	}
	if old.Tasks != cfg.Tasks || old.Store.KeyPrefix != cfg.Store.KeyPrefix || old.Store.RedisURL.Reveal() != cfg.Store.RedisURL.Reveal() {
		s.log.Warn("mcp_tasks and store settings are read at startup only; restart mcp-mux to apply the change")
	}
}

// start starts the poller once, at the first Apply, and freezes the task
// settings from then on.
func (s *taskBridge) start() {
	s.started = true
	if s.svc != nil {
		s.once.Do(s.svc.Start)
	}
}

// stop stops the poller and releases this replica's leases, so that
// another replica takes its tasks at once (bounded by ctx).
func (s *taskBridge) stop(ctx context.Context) {
	if s.svc == nil {
		return
	}
	s.cancel()
	s.once.Do(func() {}) // a Close before any Apply never starts it
	if err := s.svc.Stop(ctx); err != nil {
		s.log.Warn("shutdown: releasing task leases failed; they expire after lease_seconds", "err", err)
	}
}

// reachable reports whether the task store answered its last probe (true
// when tasks are off). /readyz reads it and never waits on the store.
func (s *taskBridge) reachable() bool {
	return s.svc == nil || s.svc.Reachable()
}
