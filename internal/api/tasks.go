package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

// TaskService is what the task API needs (a *taskpoll.Service).
type TaskService interface {
	List(ctx context.Context, q taskpoll.Query) ([]*taskpoll.Task, error)
	Get(ctx context.Context, user, id string) (*taskpoll.Task, error)
	RequestCancel(ctx context.Context, user, id string) (*taskpoll.Task, error)
}

// TasksOptions configure Tasks.
type TasksOptions struct {
	// Service is nil when durable tasks are off: every route answers 503.
	Service TaskService
	// Authenticated wraps a handler with /mcp's caller identification
	// (proxy.Server.Authenticated): next runs only for an identified user.
	Authenticated func(next func(w http.ResponseWriter, r *http.Request, user string)) http.Handler
}

// TaskRoutes are the task API's route patterns.
var TaskRoutes = []string{
	"GET /api/threads/{thread_id}/mcp-tasks",
	"GET /api/threads/{thread_id}/mcp-tasks/{task_id}",
	"POST /api/threads/{thread_id}/mcp-tasks/{task_id}/cancel",
}

// MountTasks adds DeerFlow's task REST API to mux:
//
//	GET  /api/threads/{thread_id}/mcp-tasks?limit=50      → [summary, …] newest first
//	GET  /api/threads/{thread_id}/mcp-tasks/{task_id}     → detail
//	POST /api/threads/{thread_id}/mcp-tasks/{task_id}/cancel → detail (cancel requested)
//
// A caller sees only its own tasks of that thread: anything else is 404
// "MCP task not found". Responses never carry the remote task id or the
// server name.
func MountTasks(mux *http.ServeMux, o TasksOptions) {
	h := &taskAPI{svc: o.Service}
	mux.Handle(TaskRoutes[0], o.Authenticated(h.list))
	mux.Handle(TaskRoutes[1], o.Authenticated(h.detail))
	mux.Handle(TaskRoutes[2], o.Authenticated(h.cancel))
}

type taskAPI struct{ svc TaskService }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeDetail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"detail": msg})
}

func (h *taskAPI) available(w http.ResponseWriter) bool {
	if h.svc == nil {
		writeDetail(w, http.StatusServiceUnavailable, "MCP task service not available")
		return false
	}
	return true
}

func (h *taskAPI) storeError(w http.ResponseWriter, err error) {
	if errors.Is(err, taskpoll.ErrNotFound) {
		writeDetail(w, http.StatusNotFound, "MCP task not found")
		return
	}
	// The store's error may name hosts: keep it out of the response.
	writeDetail(w, http.StatusServiceUnavailable, "MCP task store not available")
}

func (h *taskAPI) list(w http.ResponseWriter, r *http.Request, user string) {
	if !h.available(w) {
		return
	}
	limit, ok := listLimit(r)
	if !ok {
		writeDetail(w, http.StatusUnprocessableEntity, "limit must be an integer from 1 to 100")
		return
	}
	ts, err := h.svc.List(r.Context(), taskpoll.Query{User: user, Thread: r.PathValue("thread_id"), Limit: limit})
	if err != nil {
		h.storeError(w, err)
		return
	}
	out := make([]taskpoll.Summary, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskpoll.SummaryOf(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// listLimit is the request's limit query parameter (default
// taskpoll.DefaultListLimit); false when it is not an integer from 1 to
// taskpoll.MaxListLimit.
func listLimit(r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return taskpoll.DefaultListLimit, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 1 && n <= taskpoll.MaxListLimit
}

// owned returns the caller's task of the path's thread, or writes the error.
func (h *taskAPI) owned(w http.ResponseWriter, r *http.Request, user string) *taskpoll.Task {
	if !h.available(w) {
		return nil
	}
	t, err := h.svc.Get(r.Context(), user, r.PathValue("task_id"))
	if err == nil && t.Thread != r.PathValue("thread_id") {
		err = taskpoll.ErrNotFound
	}
	if err != nil {
		h.storeError(w, err)
		return nil
	}
	return t
}

func (h *taskAPI) detail(w http.ResponseWriter, r *http.Request, user string) {
	if t := h.owned(w, r, user); t != nil {
		writeJSON(w, http.StatusOK, taskpoll.DetailOf(t))
	}
}

func (h *taskAPI) cancel(w http.ResponseWriter, r *http.Request, user string) {
	t := h.owned(w, r, user)
	if t == nil {
		return
	}
	t, err := h.svc.RequestCancel(r.Context(), user, t.ID)
	if err != nil {
		h.storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, taskpoll.DetailOf(t))
}
