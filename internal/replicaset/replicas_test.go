package replicaset_test

import (
	"fmt"
	"testing"
)

// TestFlowsOneReplica: every interactive flow, with both clients, through
// the balancer in front of one replica.
func TestFlowsOneReplica(t *testing.T) {
	fx := newFixture(t, 1)
	t.Run("go-sdk", func(t *testing.T) { runGoFlows(t, fx) })
	t.Run("typescript", func(t *testing.T) { runTSFlows(t, fx) })
	logSpread(t, fx)
}

// TestFlowsThreeReplicas: every flow, both clients, through the balancer
// in front of three replicas, each of which must have served requests.
func TestFlowsThreeReplicas(t *testing.T) {
	fx := newFixture(t, 3)
	t.Run("go-sdk", func(t *testing.T) { runGoFlows(t, fx) })
	t.Run("typescript", func(t *testing.T) { runTSFlows(t, fx) })
	for i, n := range logSpread(t, fx) {
		if n == 0 {
			t.Errorf("replica %d served no request", i)
		}
	}
}

// logSpread logs and returns how many requests each replica served.
func logSpread(t *testing.T, fx *fixture) []int {
	t.Helper()
	spread, err := fx.set.Spread()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("requests per replica: %v", spread)
	return spread
}

// TestFlowsDuringRollingRestart: every flow, both clients, passes while
// the replicas are restarted in turn underneath it (SIGTERM: the replica
// drains and hands its GET streams back, then starts again); each replica
// is restarted once during the go-sdk flows and once during the
// TypeScript ones.
func TestFlowsDuringRollingRestart(t *testing.T) {
	fx := newFixture(t, 3)
	for i := range fx.set.Len() {
		for _, c := range []struct {
			name string
			run  func(*testing.T, *fixture)
		}{{"go-sdk", runGoFlows}, {"typescript", runTSFlows}} {
			restarted := make(chan error, 1)
			go func() { restarted <- fx.set.Restart(i) }()
			t.Run(fmt.Sprintf("%s while replica %d restarts", c.name, i), func(t *testing.T) { c.run(t, fx) })
			if err := <-restarted; err != nil {
				t.Fatalf("restarting replica %d: %v", i, err)
			}
		}
	}
	logSpread(t, fx)
}
