package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/config/edit"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// maxAdminBody bounds a PUT or PATCH body.
const maxAdminBody = 1 << 20

// adminDenied is DeerFlow's message for a caller without admin rights.
const adminDenied = "Admin privileges required to manage MCP configuration."

// AdminOptions configure the admin config API.
type AdminOptions struct {
	// Path is the config file the API reads and writes.
	Path string
	// Load parses a candidate file exactly as a reload does (its LookupEnv);
	// Filename defaults to Path.
	Load config.LoadOptions
	// Token returns the running config's admin.token; zero disables the API
	// (every route answers 404).
	Token func() secret.Value
	// Reload re-reads Path and applies it (config.Watcher.Reload); an error
	// means the file was rejected and the previous config keeps serving.
	Reload func() error
	// ResetUpstreams re-discovers every server and closes pooled sessions
	// (proxy.Server.ResetUpstreams).
	ResetUpstreams func()
	// StdioCommands extend the stdio commands API-written servers may run
	// (npx and uvx are always allowed).
	StdioCommands []string
	// Disconnect forgets a user's connected account on a server
	// (proxy.Server.DisconnectAccount); nil: the route answers 404, as
	// does an error wrapping ErrNoAccountServer.
	Disconnect func(ctx context.Context, user, server string) (bool, error)
	// Approvals lists and decides approval requests (approvals.go); nil:
	// its routes answer 404.
	Approvals Approvals
	// Pins lists and accepts changed tool definitions (pins.go); nil: its
	// routes answer 404.
	Pins   Pins
	Logger hclog.Logger
}

// AdminRoutes are the admin API's route patterns.
var AdminRoutes = []string{
	"GET /api/mcp/config",
	"PUT /api/mcp/config",
	"PATCH /api/mcp/config",
	"POST /api/extensions/mcp/{name}/enable",
	"POST /api/extensions/mcp/{name}/disable",
	"POST /api/mcp/cache/reset",
	"DELETE /api/accounts/{server}",
	"GET /api/approvals",
	"POST /api/approvals/{id}",
	"GET /api/pins",
	"POST /api/pins/{server}/{tool}",
}

// MountAdmin adds the admin config API (DeerFlow's gateway shapes) to mux:
//
//	GET   /api/mcp/config  → {"mcp_servers": {name: server}}, secrets masked as "***"
//	PUT   /api/mcp/config  {"mcp_servers": {…}} → replaces every server; masked values keep the stored secret
//	PATCH /api/mcp/config  {"server_name": "…", "enabled": bool}
//	POST  /api/extensions/mcp/{name}/enable|disable
//	POST  /api/mcp/cache/reset → re-discover every server, close pooled sessions
//	DELETE /api/accounts/{server}?user=<id> → forget the user's connected account there
//	GET   /api/approvals → {"approvals": [pending records], "total": n}
//	POST  /api/approvals/{id} {"decision": "approve"|"deny", "reason"?, "by"?} → the decided record
//	GET   /api/pins → {"changes": [changed tool definitions waiting], "total": n}
//	POST  /api/pins/{server}/{tool} {"action": "accept"} → {"accepted": change}
//
// Every route needs "Authorization: Bearer <admin.token>" and answers 404
// when no token is configured. Writes go through the same parsing and
// validation as a load, are written atomically with the file's $VAR
// placeholders intact, and are then reloaded; a read-only file (a ConfigMap
// mount) answers 409. Responses never carry a secret value.
func MountAdmin(mux *http.ServeMux, o AdminOptions) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Load.Filename == "" {
		o.Load.Filename = o.Path
	}
	a := &admin{o: o, policy: newLaunchPolicy(o.StdioCommands)}
	mux.Handle(AdminRoutes[0], a.guard(a.get))
	mux.Handle(AdminRoutes[1], a.guard(a.put))
	mux.Handle(AdminRoutes[2], a.guard(a.patch))
	mux.Handle(AdminRoutes[3], a.guard(func(w http.ResponseWriter, r *http.Request) { a.setEnabled(w, r.PathValue("name"), true) }))
	mux.Handle(AdminRoutes[4], a.guard(func(w http.ResponseWriter, r *http.Request) { a.setEnabled(w, r.PathValue("name"), false) }))
	mux.Handle(AdminRoutes[5], a.guard(a.reset))
	mux.Handle(AdminRoutes[6], a.guard(a.disconnect))
	mux.Handle(AdminRoutes[7], a.guard(a.approvalsList))
	mux.Handle(AdminRoutes[8], a.guard(a.approvalDecide))
	mux.Handle(AdminRoutes[9], a.guard(a.pinsList))
	mux.Handle(AdminRoutes[10], a.guard(a.pinAccept))
}

// ErrNoAccountServer is Disconnect's error for a server where nobody
// connects an account.
var ErrNoAccountServer = errors.New("no such connected-account server")

// maxAccountUser bounds the user id the disconnect route takes.
const maxAccountUser = 256

// disconnect forgets a user's connected account on a server: 200
// {"disconnected": bool}, 400 for a missing or oversized user, 404 when
// connected accounts are off.
func (a *admin) disconnect(w http.ResponseWriter, r *http.Request) {
	if a.o.Disconnect == nil {
		http.NotFound(w, r)
		return
	}
	user := r.URL.Query().Get("user")
	if user == "" || len(user) > maxAccountUser {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("give the user as ?user=<id> (at most %d bytes)", maxAccountUser))
		return
	}
	had, err := a.o.Disconnect(r.Context(), user, r.PathValue("server"))
	if errors.Is(err, ErrNoAccountServer) {
		writeDetail(w, http.StatusNotFound, "no server of that name connects users' accounts")
		return
	}
	if err != nil {
		a.fail(w, "Failed to disconnect the account", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"disconnected": had})
}

type admin struct {
	o      AdminOptions
	policy *launchPolicy
	mu     sync.Mutex // one read-modify-write of the file at a time
}

// guard answers 404 without an admin token and 401 for a wrong bearer.
func (a *admin) guard(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := a.o.Token()
		if tok.IsZero() {
			http.NotFound(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(tok.Reveal())) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-mux admin"`)
			writeDetail(w, http.StatusUnauthorized, adminDenied)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		next(w, r)
	})
}

// read returns the file's content; nil when it does not exist.
func (a *admin) read() ([]byte, error) {
	data, err := config.ReadFile(a.o.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the config file: %w", err)
	}
	return data, nil
}

func (a *admin) get(w http.ResponseWriter, _ *http.Request) {
	data, err := a.read()
	if err != nil {
		a.fail(w, "Failed to read MCP configuration", err)
		return
	}
	a.respond(w, data)
}

// respond writes the masked servers of data.
func (a *admin) respond(w http.ResponseWriter, data []byte) {
	out, err := edit.MaskedServers(data, a.o.Load.Filename)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, "Invalid MCP configuration: "+loadText(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(out, '\n'))
}

// writable answers 409 and returns false when the file must not be written.
func (a *admin) writable(w http.ResponseWriter) bool {
	if err := config.CheckWritable(a.o.Path); err != nil {
		writeDetail(w, http.StatusConflict, "MCP configuration is read-only: "+err.Error())
		return false
	}
	switch strings.ToLower(filepath.Ext(a.o.Path)) {
	case ".yaml", ".yml":
		writeDetail(w, http.StatusConflict, "MCP configuration is read-only through the API: "+a.o.Path+" is YAML, and the admin API writes JSON files only; edit the file instead")
		return false
	}
	return true
}

func (a *admin) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeDetail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body exceeds %d bytes", maxAdminBody))
		} else {
			writeDetail(w, http.StatusBadRequest, "Invalid request body")
		}
		return nil, false
	}
	return data, true
}

func (a *admin) put(w http.ResponseWriter, r *http.Request) {
	if !a.writable(w) {
		return
	}
	if body, ok := a.body(w, r); ok {
		a.replace(w, body)
	}
}

// replace writes body's servers in place of the file's: the edit is
// validated, its new or changed launches screened, then committed.
func (a *admin) replace(w http.ResponseWriter, body []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	data, err := a.read()
	if err != nil {
		a.fail(w, "Failed to update MCP configuration", err)
		return
	}
	next, names, err := edit.ReplaceServers(data, a.o.Load.Filename, body)
	if err != nil {
		a.editFailed(w, err)
		return
	}
	cfg, ok := a.validate(w, next, names)
	if !ok {
		return
	}
	if err := a.screenWritten(data, cfg, names); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	a.commit(w, next, "Failed to update MCP configuration")
}

// screenWritten applies the launch policy to the servers a write names in
// cfg, except those the stored file (data) already runs the same way.
func (a *admin) screenWritten(data []byte, cfg *config.Config, names []string) error {
	// The stored file as a load sees it; a server it already runs the same
	// way is not screened again (nil: none is).
	prev, _ := config.Parse(data, a.o.Load)
	for _, n := range names {
		s := cfg.Server(n)
		if s == nil || (prev != nil && sameLaunch(prev.Server(n), s)) {
			continue
		}
		if err := a.policy.check(s); err != nil {
			return err
		}
	}
	return nil
}

// sameLaunch reports whether a written server starts exactly as the stored
// one does: same type, command, args, environment and working directory. Its enabled flag does
// not count: enabling a server the file already runs that way launches
// nothing the file did not say.
func sameLaunch(old, s *config.Server) bool {
	return old != nil && old.Type == s.Type && old.Command == s.Command && slices.Equal(old.Args, s.Args) &&
		sameEnv(old.Env, s.Env) && old.Cwd == s.Cwd
}

// sameEnv reports whether two environments hold the same values.
func sameEnv(old, env map[string]secret.Value) bool {
	if len(old) != len(env) {
		return false
	}
	for k, v := range env {
		if ov, ok := old[k]; !ok || ov.Reveal() != v.Reveal() {
			return false
		}
	}
	return true
}

// validate parses a candidate as a load would: a problem in the file, or in
// one of the servers the request wrote, is a 400.
func (a *admin) validate(w http.ResponseWriter, data []byte, written []string) (*config.Config, bool) {
	cfg, err := config.Parse(data, a.o.Load)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, "Invalid MCP configuration: "+loadText(err))
		return nil, false
	}
	var msgs []string
	for _, se := range cfg.Invalid {
		if slices.Contains(written, se.Name) {
			msgs = append(msgs, se.Error())
		}
	}
	if len(msgs) > 0 {
		writeDetail(w, http.StatusBadRequest, "Invalid MCP configuration: "+strings.Join(msgs, "; "))
		return nil, false
	}
	return cfg, true
}

// commit writes the file atomically, reloads it and answers the masked
// result.
func (a *admin) commit(w http.ResponseWriter, data []byte, what string) {
	if err := config.WriteFile(a.o.Path, data); err != nil {
		if errors.Is(err, config.ErrReadOnly) {
			writeDetail(w, http.StatusConflict, "MCP configuration is read-only: "+err.Error())
			return
		}
		a.fail(w, what, err)
		return
	}
	if err := a.o.Reload(); err != nil {
		a.fail(w, what, fmt.Errorf("the file was written but its reload failed: %w", err))
		return
	}
	a.respond(w, data)
}

func (a *admin) patch(w http.ResponseWriter, r *http.Request) {
	body, ok := a.body(w, r)
	if !ok {
		return
	}
	var req struct {
		ServerName *string `json:"server_name"`
		Enabled    *bool   `json:"enabled"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.ServerName == nil || req.Enabled == nil {
		writeDetail(w, http.StatusBadRequest, "Invalid request body: server_name (a string) and enabled (a boolean) are required")
		return
	}
	a.setEnabled(w, *req.ServerName, *req.Enabled)
}

// setEnabled flips one server's enabled flag in the file (nothing else).
// Enabling validates the server but does not screen its launch settings:
// they are the file's, unchanged (see sameLaunch).
func (a *admin) setEnabled(w http.ResponseWriter, name string, enabled bool) {
	if !a.writable(w) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	data, err := a.read()
	if err != nil {
		a.fail(w, "Failed to update MCP server state", err)
		return
	}
	next, err := edit.SetEnabled(data, a.o.Load.Filename, name, enabled)
	if errors.Is(err, edit.ErrNoServer) {
		writeDetail(w, http.StatusNotFound, fmt.Sprintf("MCP server '%s' not found", name))
		return
	}
	if err != nil {
		a.editFailed(w, err)
		return
	}
	if enabled {
		if _, ok := a.validate(w, next, []string{name}); !ok {
			return
		}
	}
	a.commit(w, next, "Failed to update MCP server state")
}

func (a *admin) reset(w http.ResponseWriter, _ *http.Request) {
	a.o.ResetUpstreams()
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "MCP tools cache reset. Tools will reload on next use."})
}

// editFailed answers an edit of the request (400) or of an unreadable file.
func (a *admin) editFailed(w http.ResponseWriter, err error) {
	var ee *edit.EditError
	if errors.As(err, &ee) {
		writeDetail(w, http.StatusBadRequest, ee.Msg)
		return
	}
	writeDetail(w, http.StatusBadRequest, "Invalid MCP configuration: "+loadText(err))
}

// fail answers 500; config and file errors name paths and reasons, never
// configured values.
func (a *admin) fail(w http.ResponseWriter, what string, err error) {
	a.o.Logger.Warn("admin API request failed", "what", what, "err", err)
	writeDetail(w, http.StatusInternalServerError, what+": "+err.Error())
}

// loadText is a load error as one line: every problem, "; "-separated.
func loadText(err error) string {
	if ps := config.Problems(err); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.Error()
		}
		return strings.Join(msgs, "; ")
	}
	return err.Error()
}
