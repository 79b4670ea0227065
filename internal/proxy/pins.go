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

// pinDesk runs pinned tool definitions (pin_tools) on this server: its
// Guard (Options.Pins) checks each server's tools as the catalog is built
// (callpath.Backend.Pins), and the catalog is built again when a pin
// changes in the store — accepted through the admin API here, or on
// another replica, learnt on this replica's next call of the tool or
// within a poll.
type pinDesk struct {
	s *Server
	g *toolpin.Guard // nil: no pins
}

// setUp takes opts' Guard, registers its metric and starts its watch.
func (d *pinDesk) setUp(s *Server, opts Options) {
	d.s, d.g = s, opts.Pins
	if d.g == nil {
		return
	}
	if err := d.g.Register(s.metrics.reg); err != nil {
		s.log.Error("pins metrics are off", "err", err)
	}
	poll := opts.PinPoll
	if poll <= 0 {
		poll = defaultPinPoll
	}
	s.bg.Go(func() { d.watch(s.life, poll) })
}

// watch builds the catalog again when a pin changed in the store: when
// the Guard says so or a poll finds one, until ctx ends.
func (d *pinDesk) watch(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.g.Changed():
		case <-t.C:
			if !d.g.Recheck(ctx) {
				continue
			}
		}
		d.s.refreshCatalog(nil)
	}
}

// status adds the changes waiting to st.
func (d *pinDesk) status(st *Status) {
	if d.g == nil {
		return
	}
	changes, total := d.g.Pending(status.MaxToolChangesShown)
	st.PendingToolChanges = total
	for _, c := range changes {
		st.ToolChanges = append(st.ToolChanges, status.ToolChange{Server: c.Server, Tool: c.Tool, Mode: c.Mode, Parts: c.Parts, Since: c.Since, Held: c.Held})
	}
}
