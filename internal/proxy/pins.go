package proxy

import (
	"context"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/status"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
)

// defaultPinPoll is how often a replica rereads the pins of the changes it
// lists, to learn of one accepted on another replica.
const defaultPinPoll = 5 * time.Second

// pinDesk is what operators see of pinned tool definitions (pin_tools):
// the changes waiting and their acceptance (the admin API's /api/pins).
// Its Guard checks each server's tools as the catalog is built
// (callpath.Backend.Pins); a change accepted on another replica is learnt
// from the store on this replica's next call of the tool or within a poll.
type pinDesk struct {
	s    *Server
	g    *toolpin.Guard // nil: no pins store
	kick chan struct{}  // a pin changed in the store: build the catalog again
}

// setUp makes the desk's Guard over opts' store, opened at first use, and
// starts its poll.
func (d *pinDesk) setUp(s *Server, opts Options) {
	d.s = s
	if opts.PinStore == nil {
		return
	}
	d.kick = make(chan struct{}, 1)
	d.g = toolpin.New(toolpin.Options{Open: opts.PinStore, Log: s.log.Named("pins"), Changed: d.signal})
	if err := d.g.Register(s.metrics.reg); err != nil {
		s.log.Error("pins metrics are off", "err", err)
	}
	poll := opts.PinPoll
	if poll <= 0 {
		poll = defaultPinPoll
	}
	s.bg.Go(func() { d.watch(s.life, poll) })
}

// signal asks watch to build the catalog again (never blocks).
func (d *pinDesk) signal() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// watch builds the catalog again when a pin changed in the store: when
// told (signal) or when a poll finds one, until ctx ends.
func (d *pinDesk) watch(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-t.C:
			if !d.g.Recheck(ctx) {
				continue
			}
		}
		d.s.refreshCatalog(nil)
	}
}

// Pins is the pins desk of the admin API.
func (s *Server) Pins() *pinDesk { return &s.pins }

// Pending returns up to n changes waiting for an operator and how many
// there are.
func (d *pinDesk) Pending(n int) ([]toolpin.Change, int) {
	if d.g == nil {
		return nil, 0
	}
	return d.g.Pending(n)
}

// Accept pins the definition server now lists for tool (on every replica)
// and builds the catalog again, so that clients are told their tools
// changed.
func (d *pinDesk) Accept(ctx context.Context, server, tool string) (*toolpin.Change, error) {
	if d.g == nil {
		return nil, toolpin.ErrNotFound
	}
	c, err := d.g.Accept(ctx, server, tool)
	if err != nil {
		return nil, err
	}
	d.s.refreshCatalog(nil)
	return c, nil
}

// status adds the changes waiting to st.
func (d *pinDesk) status(st *Status) {
	changes, total := d.Pending(status.MaxToolChangesShown)
	st.PendingToolChanges = total
	for _, c := range changes {
		st.ToolChanges = append(st.ToolChanges, status.ToolChange{Server: c.Server, Tool: c.Tool, Mode: c.Mode, Parts: c.Parts, Since: c.Since, Held: c.Held})
	}
}

// close closes the store, if it was opened (after watch ended).
func (d *pinDesk) close() {
	if d.g == nil {
		return
	}
	if err := d.g.Close(); err != nil {
		d.s.log.Warn("closing the pins store", "err", err)
	}
}
