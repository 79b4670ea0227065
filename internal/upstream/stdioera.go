package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/upstream/modernreq"
	"github.com/mcp-mux/mcp-mux/internal/upstream/stdioproc"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// The era of a stdio server.
//
// Unpinned, the first process of a stdio server is asked with
// server/discover (written and read here, by mcp-mux's own bounded reader,
// before the SDK session starts), and the answer holds for the server's
// later processes:
//
//   - a result listing 2026-07-28: the session speaks 2026-07-28 on this
//     process (the SDK's own server/discover, then per-request _meta). If
//     the result lists an earlier version too, the server speaks both eras
//     and a legacy client's session gets a process of its own that
//     initializes (a go-sdk server takes a probed process as 2026-07-28 and
//     refuses initialize on it); later sessions start on their client's era;
//   - a JSON-RPC error (or a result without 2026-07-28): initialize on the
//     same process;
//   - the process exits or closes stdout on the probe: it is stopped and a
//     new one is started with initialize;
//   - the process read the probe and said nothing for stdioProbeTimeout:
//     initialize on the same process (a server that ignores an unknown
//     first message). While the probe is still unread in its stdin the
//     server has not started reading (npx downloading it, say): the probe
//     keeps waiting, within InitTimeout, and a slow start costs no restart;
//   - the process exits without having read the probe (it is still in its
//     stdin pipe, or the pipe had no reader left to take it): it failed on
//     its own, and the session fails without a second start.
//
// Some legacy servers exit on any first message but initialize (go-sdk issue
// 1177 is the SDK client's side of this); the restart is what keeps them
// working.

// stdioProbeTimeout bounds the server/discover probe of a stdio process
// (and half of InitTimeout does, when that is shorter: a silent server must
// leave time for the restart and initialize).
const stdioProbeTimeout = 10 * time.Second

// probeBound is how long the probe waits for an answer: o.ProbeTimeout,
// or by default stdioProbeTimeout or half of InitTimeout.
func probeBound(o *Options) time.Duration {
	if o.ProbeTimeout > 0 {
		return o.ProbeTimeout
	}
	if initTimeout := o.InitTimeout; initTimeout > 0 {
		return min(stdioProbeTimeout, initTimeout/2)
	}
	return stdioProbeTimeout
}

// maxProbeLines bounds the other lines a server may write before answering
// the probe (log notifications, say).
const maxProbeLines = 64

// probeID is the id of the probe: no SDK or mux request uses it.
const probeID = `"mux-discover"`

// probe outcomes.
type probeResult int

const (
	probeAnswered probeResult = iota // answered: the eras it lists (a JSON-RPC error: 2025-11-25)
	probeRestart                     // exited or closed stdout after reading it (or wrote only other lines): restart, then initialize
	probeDead                        // exited without reading the probe: the start failed
	probeSilent                      // read the probe and said nothing: initialize on this process
)

// unreadPoll is how often a probe whose bound passed checks whether the
// server has read it yet.
const unreadPoll = 50 * time.Millisecond

// errExitedUnread is a server process that exited before it read its
// first message.
var errExitedUnread = errors.New("the server process exited before reading its first message")

// probed is the process a probe talks to (a *stdioproc.Process).
type probed interface {
	Stdin() io.Writer
	Lines() <-chan []byte
	StdinUnread() (int, bool)
}

// stdioVersion returns the protocol version the session of a new stdio
// process asks for, and the process to use (p, or a restarted one).
func (d *dialing) stdioVersion(p *stdioproc.Process) (string, *stdioproc.Process, error) {
	u := d.u
	if v := u.opts.ProtocolVersion; v != VersionAuto {
		return v, p, nil
	}
	if s := u.eras.load(); s != nil {
		return s.pick(d.want()), p, nil
	}
	res, s := probeStdio(d.connCtx, p, probeBound(&u.opts))
	switch res {
	case probeDead:
		// The era stays unknown: the next start is probed again.
		return "", p, errExitedUnread
	case probeSilent:
		u.log.Info("stdio server did not answer server/discover; sending initialize on the same process")
		return ProtocolVersion, p, nil
	case probeRestart:
		if err := d.connCtx.Err(); err != nil {
			return "", p, err // the bring-up ended (InitTimeout) while the probe waited
		}
		u.log.Info("stdio server exited or closed stdout on server/discover; restarting it for initialize")
		// The era is remembered once initialize works (dial): a server
		// that dies at every start is asked again when it next starts.
		return d.restart(p)
	}
	u.eras.learn(s)
	v := s.pick(d.want())
	if v < VersionModern && s.modern {
		// A legacy client's session of a server that speaks both eras: the
		// probed process took server/discover as 2026-07-28.
		u.log.Debug("the stdio server speaks both eras; starting a process for this 2025-11-25 session")
		return d.restart(p)
	}
	return v, p, nil
}

// restart stops a probed process that cannot serve the session and starts
// a new one, which initializes.
func (d *dialing) restart(p *stdioproc.Process) (string, *stdioproc.Process, error) {
	u := d.u
	if err := d.connCtx.Err(); err != nil {
		return "", p, err
	}
	p.Stop()
	// Its start-up lines were logged for the probed process already:
	// muted until its session is up (adopt).
	np, err := stdioproc.Start(&u.proc, u.stderr.Writer(true))
	if err != nil {
		return "", nil, fmt.Errorf("restarting after the server/discover probe: %w", err)
	}
	return ProtocolVersion, np, nil
}

// probeStdio sends server/discover on the stdin of a fresh process and
// classifies the answer among its stdout lines, with the eras an answer
// lists. Nothing the server writes is logged.
func probeStdio(ctx context.Context, p probed, bound time.Duration) (probeResult, eraSet) {
	meta := modernreq.New(discoveryCapsJSON(), nil)
	req := wire.AppendRequest(nil, []byte(probeID), "server/discover", meta.Params(nil))
	if _, err := p.Stdin().Write(append(req, '\n')); err != nil {
		return probeDead, eraSet{} // no reader left: it exited (or closed stdin) unprompted
	}
	w := probeWait{p: p, bound: bound, timer: time.NewTimer(bound)}
	defer w.timer.Stop()
	for other := 0; other < maxProbeLines; {
		select {
		case <-ctx.Done():
			return probeRestart, eraSet{} // the bring-up's end: restart returns its error
		case <-w.timer.C:
			if !w.again() {
				return probeSilent, eraSet{}
			}
		case line, ok := <-p.Lines():
			if !ok {
				return w.closed(), eraSet{}
			}
			var m wire.Message
			if wire.Decode(line, &m) != nil || !m.IsResponse() || !bytes.Equal(m.ID, []byte(probeID)) {
				other++
				continue
			}
			return probeAnswered, classifyDiscover(&m)
		}
	}
	return probeRestart, eraSet{}
}

// probeWait is how long a probe waits: bound for an answer once the server
// has read the probe, and for as long as the probe lies unread in its stdin
// (the server is still starting).
type probeWait struct {
	p      probed
	bound  time.Duration
	timer  *time.Timer
	unread bool // the probe was unread at the last check
}

// again is called when the timer fires: it reports whether to keep
// waiting, and sets the timer for the next check.
func (w *probeWait) again() bool {
	n, known := w.p.StdinUnread()
	switch {
	case known && n > 0:
		w.unread = true
		w.timer.Reset(unreadPoll)
	case w.unread: // read since the last check: a full bound to answer
		w.unread = false
		w.timer.Reset(w.bound)
	default:
		return false
	}
	return true
}

// closed classifies a stdout that ended before the answer: a process that
// never read the probe failed on its own.
func (w *probeWait) closed() probeResult {
	if n, known := w.p.StdinUnread(); known && n > 0 {
		return probeDead
	}
	return probeRestart
}

// classifyDiscover reads the answer to server/discover: an error means
// 2025-11-25 only.
func classifyDiscover(m *wire.Message) eraSet {
	if m.Error != nil {
		return eraSet{legacy: true}
	}
	return discoverEras(m.Result)
}
