package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
)

// Pins is the pinned tool definitions' desk the admin API reads and
// accepts changes on (proxy.Server.Pins).
type Pins interface {
	// Pending returns up to n changes waiting and how many there are.
	Pending(n int) ([]toolpin.Change, int)
	// Accept pins the definition server now lists for tool, on every
	// replica (toolpin.ErrNotFound, toolpin.ErrNothing).
	Accept(ctx context.Context, server, tool string) (*toolpin.Change, error)
}

// Bounds of the pins routes.
const (
	maxPinsListed  = 200
	maxAcceptBody  = 1 << 10
	maxPinServer   = 256 // a server name in the path
	acceptAction   = "accept"
	pinsBodyDetail = `the body must be {"action": "accept"}`
)

// pinsList answers GET /api/pins: {"changes": [...], "total": n}.
func (a *admin) pinsList(w http.ResponseWriter, r *http.Request) {
	if a.o.Pins == nil {
		http.NotFound(w, r)
		return
	}
	changes, total := a.o.Pins.Pending(maxPinsListed)
	writeJSON(w, http.StatusOK, map[string]any{"changes": changes, "total": total})
}

// pinAction is the body of POST /api/pins/{server}/{tool}.
type pinAction struct {
	Action string `json:"action"`
}

// pinAccept answers POST /api/pins/{server}/{tool} {"action": "accept"}:
// 200 with the change accepted, 400 for a bad path segment or body, 404
// for a tool the server does not list (or pins off), 409 for one whose
// definition has not changed.
func (a *admin) pinAccept(w http.ResponseWriter, r *http.Request) {
	if a.o.Pins == nil {
		http.NotFound(w, r)
		return
	}
	server, tool := r.PathValue("server"), r.PathValue("tool")
	if err := pinPath(server, tool); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	var act pinAction
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAcceptBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&act); err != nil || act.Action != acceptAction || dec.More() {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("%s (at most %d bytes)", pinsBodyDetail, maxAcceptBody))
		return
	}
	c, err := a.o.Pins.Accept(r.Context(), server, tool)
	switch {
	case errors.Is(err, toolpin.ErrNotFound):
		writeDetail(w, http.StatusNotFound, "no server of that name pins a tool of that name")
	case errors.Is(err, toolpin.ErrNothing):
		writeDetail(w, http.StatusConflict, "the tool's definition has not changed since it was pinned: nothing to accept")
	case err != nil:
		a.fail(w, "Failed to accept the tool definition", err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"accepted": c})
	}
}

// pinPath checks the path's server and tool at the edge: printable text
// within bounds, the error naming the segment and never its value.
func pinPath(server, tool string) error {
	if err := bounds.Printable("the server in the path", server, maxPinServer); err != nil || server == "" {
		return errors.New("the server in the path must be printable text of 1 to 256 bytes")
	}
	if err := bounds.Printable("the tool in the path", tool, bounds.Name); err != nil || tool == "" {
		return fmt.Errorf("the tool in the path must be printable text of 1 to %d bytes", bounds.Name)
	}
	return nil
}
