package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
)

// Approvals is the approval desk the admin API reads and decides on
// (proxy.Server.Approvals).
type Approvals interface {
	// Pending returns up to n pending requests and how many there are.
	Pending(ctx context.Context, n int) ([]*approvals.Record, int, error)
	// Decide approves or denies a pending request, as by, for reason.
	Decide(ctx context.Context, id, decision, by, reason string) (*approvals.Record, error)
}

// Bounds of the approvals routes.
const (
	maxApprovalsListed = 200
	maxDecisionBody    = 4 << 10
)

// approvalsList answers GET /api/approvals: {"approvals": [...], "total": n}.
func (a *admin) approvalsList(w http.ResponseWriter, r *http.Request) {
	if a.o.Approvals == nil {
		http.NotFound(w, r)
		return
	}
	recs, total, err := a.o.Approvals.Pending(r.Context(), maxApprovalsListed)
	if err != nil {
		a.fail(w, "Failed to list approvals", err)
		return
	}
	if recs == nil {
		recs = []*approvals.Record{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": recs, "total": total})
}

// decision is the body of POST /api/approvals/{id}.
type decision struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	By       string `json:"by"`
}

// approvalDecide answers POST /api/approvals/{id}: 200 with the decided
// record, 404 for an unknown id, 409 for one decided already or expired.
func (a *admin) approvalDecide(w http.ResponseWriter, r *http.Request) {
	if a.o.Approvals == nil {
		http.NotFound(w, r)
		return
	}
	var d decision
	dec := json.NewDecoder(io.LimitReader(r.Body, maxDecisionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf(`the body must be {"decision": "approve"|"deny", "reason"?, "by"?} (at most %d bytes)`, maxDecisionBody))
		return
	}
	if d.Decision != approvals.Approve && d.Decision != approvals.Deny {
		writeDetail(w, http.StatusBadRequest, `decision must be "approve" or "deny"`)
		return
	}
	by := strings.TrimSpace(d.By)
	if by == "" {
		by = "operator"
	}
	if len(by) > approvals.MaxDecider || len(d.Reason) > approvals.MaxReason {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("by is at most %d bytes and reason at most %d", approvals.MaxDecider, approvals.MaxReason))
		return
	}
	rec, err := a.o.Approvals.Decide(r.Context(), r.PathValue("id"), d.Decision, "operator:"+by, d.Reason)
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		writeDetail(w, http.StatusNotFound, "no such approval request")
	case errors.Is(err, approvals.ErrDecided):
		state := "decided"
		if rec != nil {
			state = rec.State
		}
		writeDetail(w, http.StatusConflict, "the approval request was decided already ("+state+")")
	case errors.Is(err, approvals.ErrExpired):
		writeDetail(w, http.StatusConflict, "the approval request expired")
	case err != nil:
		a.fail(w, "Failed to decide the approval", err)
	default:
		writeJSON(w, http.StatusOK, rec)
	}
}
