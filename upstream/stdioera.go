package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/upstream/modernreq"
	"github.com/mcp-mux/mcp-mux/upstream/stdioproc"
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
//   - the process exits or closes stdout on the probe, or says nothing for
//     stdioProbeTimeout: the process is stopped and a new one is started
//     with initialize, since the server may be gone or in an undefined state;
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

// probeBound is how long the probe waits for an answer.
func probeBound(initTimeout time.Duration) time.Duration {
	if initTimeout > 0 {
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
	probeRestart                     // exited, closed stdout or said nothing: restart, then initialize
	probeDead                        // exited without reading the probe: the start failed
)

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
	res, s := probeStdio(d.connCtx, p, probeBound(u.opts.InitTimeout))
	switch res {
	case probeDead:
		// The era stays unknown: the next start is probed again.
		return "", p, errExitedUnread
	case probeRestart:
		u.log.Info("stdio server did not answer server/discover (exited, closed stdout or was silent); restarting it for initialize")
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
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	meta := modernreq.New(discoveryCapsJSON(), nil)
	req := wire.AppendRequest(nil, []byte(probeID), "server/discover", meta.Params(nil))
	if _, err := p.Stdin().Write(append(req, '\n')); err != nil {
		return probeDead, eraSet{} // no reader left: it exited (or closed stdin) unprompted
	}
	for range maxProbeLines {
		line, ok, closed := nextLine(ctx, p.Lines())
		if closed {
			if n, known := p.StdinUnread(); known && n > 0 {
				return probeDead, eraSet{}
			}
			return probeRestart, eraSet{}
		}
		if !ok {
			return probeRestart, eraSet{}
		}
		var m wire.Message
		if wire.Decode(line, &m) != nil || !m.IsResponse() || !bytes.Equal(m.ID, []byte(probeID)) {
			continue
		}
		return probeAnswered, classifyDiscover(&m)
	}
	return probeRestart, eraSet{}
}

// nextLine waits for the next stdout line; ok is false when stdout ended
// (closed) or ctx is done first.
func nextLine(ctx context.Context, lines <-chan []byte) (line []byte, ok, closed bool) {
	select {
	case <-ctx.Done():
		return nil, false, false
	case l, ok := <-lines:
		return l, ok, !ok
	}
}

// classifyDiscover reads the answer to server/discover: an error means
// 2025-11-25 only.
func classifyDiscover(m *wire.Message) eraSet {
	if m.Error != nil {
		return eraSet{legacy: true}
	}
	return discoverEras(m.Result)
}
