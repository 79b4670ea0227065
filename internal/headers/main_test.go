package headers

import (
	"testing"

	"go.uber.org/goleak"
)

// Token fetches run on singleflight goroutines and token endpoints are real
// httptest servers, so every test must leave nothing running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
