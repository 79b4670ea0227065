package telemetry

import (
	"testing"

	"go.uber.org/goleak"
)

// New starts the span and metric exporters' goroutines; every test must
// shut down what it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
