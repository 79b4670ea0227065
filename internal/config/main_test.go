package config

import (
	"testing"

	"go.uber.org/goleak"
)

// The watcher starts goroutines; every test must stop what it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
