package replicaset_test

import (
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
	needSharedSessions(t)
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
