package replicaset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loopStats is what happened to one client's calls while replicas were
// restarted or killed underneath it (replicas.mjs loop reports the same
// fields).
type loopStats struct {
	Calls           int      `json:"calls"`
	OK              int      `json:"ok"`
	Failed          int      `json:"failed"`
	SessionNotFound int      `json:"session_not_found"`
	Unanswered      int      `json:"unanswered"` // timed out
	FinalOK         bool     `json:"final_ok"`   // a call after the loop worked: the session survived
	Errors          []string `json:"errors"`     // the first ones
}

func (s *loopStats) fail(err error) {
	s.Failed++
	if errors.Is(err, mcp.ErrSessionMissing) || strings.Contains(err.Error(), "session not found") {
		s.SessionNotFound++
	}
	if errors.Is(err, context.DeadlineExceeded) {
		s.Unanswered++
	}
	if len(s.Errors) < 10 {
		s.Errors = append(s.Errors, err.Error())
	}
}

// check reports the session losses, "session not found" errors and
// unanswered calls (all must be zero) and logs the other failures, which
// must be clear errors of calls in flight on a replica that went away.
func (s loopStats) check(t *testing.T, who string, maxOtherFailures int) {
	t.Helper()
	t.Logf("%s: %d calls, %d ok, %d failed (%d session not found, %d unanswered), session survived: %v; errors: %q",
		who, s.Calls, s.OK, s.Failed, s.SessionNotFound, s.Unanswered, s.FinalOK, s.Errors)
	if !s.FinalOK {
		t.Errorf("%s: the session was lost", who)
	}
	if s.SessionNotFound > 0 {
		t.Errorf("%s: %d calls failed with session not found", who, s.SessionNotFound)
	}
	if s.Unanswered > 0 {
		t.Errorf("%s: %d calls went unanswered", who, s.Unanswered)
	}
	if other := s.Failed - s.SessionNotFound - s.Unanswered; other > maxOtherFailures {
		t.Errorf("%s: %d calls failed, at most %d may (calls in flight on a replica that went away)", who, other, maxOtherFailures)
	}
}

// maxFailing is how many calls in a row may fail before a loop gives up
// on its session (it stays lost unless the final call works).
const maxFailing = 5

// loopCall is one call of a loop: echo, and every third call sampling
// (a server→client request answered through whichever replica).
func loopCall(ctx context.Context, c *goClient, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if i%3 == 2 {
		tag := "go" + strconv.Itoa(i)
		return c.expect(ctx, "inter_sample", map[string]any{"tag": tag}, "go-sampled: sample "+tag)
	}
	text := "go" + strconv.Itoa(i)
	return c.expect(ctx, "inter_echo", map[string]any{"text": text}, text)
}

// clientLoops are a go-sdk client and a TypeScript client calling tools
// through the balancer until stopped.
type clientLoops struct {
	goOK, tsOK     atomic.Int64
	goDone, tsDone chan struct{} // closed when the loop ended
	stop           chan struct{}
	stopOnce       sync.Once
	wg             sync.WaitGroup
	goStats        loopStats
	tsStats        loopStats
	tsErr          error
}

// startLoops connects both clients and starts their loops.
func startLoops(ctx context.Context, t *testing.T, fx *fixture) *clientLoops {
	t.Helper()
	l := &clientLoops{stop: make(chan struct{}), goDone: make(chan struct{}), tsDone: make(chan struct{})}
	c, err := connectGo(ctx, fx.set.URL(), "go-loop")
	if err != nil {
		l.goStats.fail(err)
		close(l.goDone)
	} else {
		l.wg.Go(func() {
			defer close(l.goDone)
			defer c.close()
			defer func() { l.goStats.FinalOK = loopCall(ctx, c, 2) == nil }()
			for i, failing := 0, 0; failing < maxFailing; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.goStats.Calls++
				if err := loopCall(ctx, c, i); err != nil {
					l.goStats.fail(err)
					failing++
					continue
				}
				failing = 0
				l.goStats.OK++
				l.goOK.Add(1)
			}
		})
	}
	t.Cleanup(l.halt) // a test that ends early
	s := startTS(ctx, t, "loop", fx.set.URL())
	l.wg.Go(func() {
		defer close(l.tsDone)
		go func() { <-l.stop; s.reply("stop") }()
		for {
			line, ok := s.next(t)
			if !ok {
				break
			}
			switch line.Check {
			case "tick":
				n, _ := strconv.Atoi(line.Detail)
				l.tsOK.Store(int64(n))
			case "loop":
				if err := json.Unmarshal([]byte(line.Detail), &l.tsStats); err != nil {
					l.tsErr = fmt.Errorf("loop report %q: %w", line.Detail, err)
				}
			}
		}
		s.wait(t)
	})
	return l
}

// waitCalls waits until each client has had n more calls answered than
// when it was called; it returns false at the timeout or when a loop
// ended (finish reports why).
func (l *clientLoops) waitCalls(n int64, timeout time.Duration) bool {
	goFrom, tsFrom := l.goOK.Load(), l.tsOK.Load()
	deadline := time.Now().Add(timeout)
	for l.goOK.Load() < goFrom+n || l.tsOK.Load() < tsFrom+n {
		select {
		case <-l.goDone:
			return false
		case <-l.tsDone:
			return false
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling the counters
	}
	return true
}

// halt stops the loops and waits for them.
func (l *clientLoops) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// finish stops the loops and checks what happened to their calls.
func (l *clientLoops) finish(t *testing.T, maxOtherFailures int) {
	t.Helper()
	l.halt()
	if l.tsErr != nil {
		t.Error(l.tsErr)
	}
	l.goStats.check(t, "go-sdk", maxOtherFailures)
	l.tsStats.check(t, "typescript", maxOtherFailures)
}

// TestRollingRestart: both clients keep calling (sampling included) while
// every replica in turn is stopped with SIGTERM and started again; no
// session is lost, no call meets "session not found" or goes unanswered.
func TestRollingRestart(t *testing.T) {
	fx := newFixture(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	loops := startLoops(ctx, t, fx)
	if !loops.waitCalls(6, 30*time.Second) {
		t.Errorf("the clients did not get going before the restarts")
	}
	if err := fx.set.RollingRestart(ctx); err != nil {
		t.Error(err)
	}
	if !loops.waitCalls(6, 30*time.Second) {
		t.Errorf("the clients did not carry on after the restarts")
	}
	// A call in flight on a stopping replica finishes (the replica drains)
	// or fails with a clear error: one per restart at most.
	loops.finish(t, fx.set.Len())
	logSpread(t, fx)
}

// TestReplicaKilled: a replica is killed (SIGKILL) while both clients
// call and slow calls are in flight on every replica. Only calls in
// flight on the dead replica fail, with a clear error (not a timeout, not
// "session not found"); the sessions carry on through the others.
func TestReplicaKilled(t *testing.T) {
	fx := newFixture(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := connectGo(ctx, fx.set.URL(), "go-kill")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	loops := startLoops(ctx, t, fx)
	if !loops.waitCalls(6, 30*time.Second) {
		t.Errorf("the clients did not get going before the kill")
	}
	const slow = 6
	results := make(chan error, slow)
	for range slow {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, _, err := c.call(ctx, "inter_sleep", map[string]any{"ms": 2000}, nil)
			results <- err
		}()
	}
	if err := waitUntil(ctx, 20*time.Second, func() bool { return fx.sleeping.Load() == slow }); err != nil {
		t.Errorf("the slow calls did not all reach the upstream: %v", err)
	}
	inflight, err := fx.set.InFlight()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in flight per replica before the kill: %v", inflight)
	if err := fx.set.Kill(1); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range slow {
		err := <-results
		if err == nil {
			continue
		}
		failed++
		t.Logf("slow call failed: %v", err)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, mcp.ErrSessionMissing) || strings.Contains(err.Error(), "session not found") {
			t.Errorf("a slow call failed without a clear error: %v", err)
		}
	}
	if failed > inflight[1] {
		t.Errorf("%d slow calls failed; the killed replica had %d requests in flight", failed, inflight[1])
	}
	for i := range 6 {
		if err := loopCall(ctx, c, i); err != nil {
			t.Errorf("after the kill: %v", err)
		}
	}
	if !loops.waitCalls(6, 30*time.Second) {
		t.Errorf("the clients did not carry on after the kill")
	}
	loops.finish(t, 1)
	logSpread(t, fx)
}

// waitUntil polls cond until it holds, ctx ends or the timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
