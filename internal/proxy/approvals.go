package proxy

import (
	"context"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/status"
)

// approvalDesk is what operators see of the approvals rules' requests:
// the pending ones and their decisions (the admin API's
// /api/approvals), each decision audited and counted.
type approvalDesk struct {
	s   *Server
	m   *approvals.Manager // nil: no approvals store
	ids *secret.IDHash     // callers as the status page shows them
}

// setUp makes the desk's Manager over opts' store, opened at first use.
func (d *approvalDesk) setUp(s *Server, opts Options) {
	d.s, d.ids = s, opts.Telemetry.IDs
	if d.ids == nil {
		d.ids = secret.NewIDHash("")
	}
	if opts.ApprovalStore == nil {
		return
	}
	d.m = approvals.New(approvals.Options{Open: opts.ApprovalStore})
	if err := d.m.Register(s.metrics.reg); err != nil {
		s.log.Error("approvals metrics are off", "err", err)
	}
}

// Approvals is the approval desk of the admin API.
func (s *Server) Approvals() *approvalDesk { return &s.approvals }

// Pending returns up to n pending requests and how many there are.
func (d *approvalDesk) Pending(ctx context.Context, n int) ([]*approvals.Record, int, error) {
	if d.m == nil {
		return nil, 0, nil
	}
	return d.m.Pending(ctx, n)
}

// Decide approves or denies the pending request id, as by (an operator),
// for reason: audited and counted like a caller's decision.
func (d *approvalDesk) Decide(ctx context.Context, id, decision, by, reason string) (*approvals.Record, error) {
	if d.m == nil {
		return nil, approvals.ErrNotFound
	}
	rec, err := d.m.Decide(ctx, id, decision, by, reason)
	if err != nil {
		return rec, err
	}
	d.s.log.Info("approval decided", "approval", rec.ID, "rule", rec.Rule, "decision", decision, "by", rec.By)
	d.s.calls.NoteApprovalDecision(ctx, rec, decision, rec.By)
	return rec, nil
}

// status adds the pending requests to st (one store round trip per
// request listed, bounded by status.MaxApprovalsShown).
func (d *approvalDesk) status(ctx context.Context, st *Status) {
	if d.m == nil || len(d.s.rt.Load().Config.Approvals.Rules) == 0 {
		return
	}
	recs, total, err := d.m.Pending(ctx, status.MaxApprovalsShown)
	if err != nil {
		d.s.log.Warn("listing pending approvals for the status", "err", err)
		return
	}
	st.PendingApprovals = total
	for _, r := range recs {
		st.Approvals = append(st.Approvals, status.Approval{ID: r.ID, Caller: d.ids.Of(r.User), Server: r.Server, Tool: r.Tool,
			Rule: r.Rule, Preview: r.Preview, Created: r.Created, Expires: r.Expires})
	}
}

// close closes the store, if it was opened.
func (d *approvalDesk) close() {
	if d.m == nil {
		return
	}
	if err := d.m.Close(); err != nil {
		d.s.log.Warn("closing the approvals store", "err", err)
	}
}
