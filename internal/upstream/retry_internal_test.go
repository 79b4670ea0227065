package upstream

import (
	"testing"
	"time"
)

func TestBackoffSchedule(t *testing.T) {
	lo := backoff{min: time.Second, max: 60 * time.Second, jitter: func(int64) int64 { return 0 }}
	hi := backoff{min: time.Second, max: 60 * time.Second, jitter: func(n int64) int64 { return n - 1 }}
	wantLo := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range wantLo {
		if got := lo.next(); got != w {
			t.Errorf("wait %d, lowest jitter: %s, want %s", i+1, got, w)
		}
		d := min(time.Second<<i, 60*time.Second)
		if got := hi.next(); got != d {
			t.Errorf("wait %d, highest jitter: %s, want %s", i+1, got, d)
		}
	}
	lo.reset()
	if got := lo.next(); got != 500*time.Millisecond {
		t.Errorf("after reset: %s, want 500ms", got)
	}
}
