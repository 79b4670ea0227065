package ratelimit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The limiter's lease renewer and its store client's goroutines end with
// Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
