package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// rawListen opens a subscriptions/listen on a bare TCP connection (no
// client-side goroutines or buffers) and waits for its acknowledgement.
func rawListen(t *testing.T, base string, hdr map[string]string, body string) net.Conn {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", u.Host, len(body))
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReaderSize(c, 512)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		if strings.Contains(line, `"error"`) {
			t.Fatalf("listen refused: %s", line)
		}
		if strings.Contains(line, "notifications/subscriptions/acknowledged") {
			break
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

type memSample struct {
	bytes      uint64
	goroutines int
}

func sampleMem() memSample {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return memSample{bytes: ms.HeapInuse + ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// An idle subscriptions/listen costs a few KiB and one goroutine (it was
// ~46 KiB of heap and stack and four goroutines served through the SDK), and
// both come back when the streams close. Generous bounds, measured over many
// streams on bare connections (no client-side goroutines or buffers).
func TestListenCostBounded(t *testing.T) {
	m := modernMux(t, "")
	body := `{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{` + modernMeta("{}") +
		`,"notifications":{"toolsListChanged":true}}}`
	hdr := modernHeaders("subscriptions/listen", "")
	const n = 200
	// Warm up with as many streams as are measured: the tables that track
	// streams and connections grow to n once and keep their size (a leak
	// grows again with every round).
	base := settled(t, -1).goroutines
	warm := make([]net.Conn, 0, n)
	for range n {
		warm = append(warm, rawListen(t, m.ts.URL, hdr, body))
	}
	for _, c := range warm {
		c.Close()
	}
	settled(t, base)
	before := settled(t, -1)
	conns := make([]net.Conn, 0, n)
	for range n {
		conns = append(conns, rawListen(t, m.ts.URL, hdr, body))
	}
	during := sampleMem()
	for _, c := range conns {
		c.Close()
	}
	after := settled(t, before.goroutines)
	perKiB := float64(int64(during.bytes)-int64(before.bytes)) / n / 1024
	perG := float64(during.goroutines-before.goroutines) / n
	leftKiB := float64(int64(after.bytes)-int64(before.bytes)) / n / 1024
	// What is left is sampled again for a while: a leak stays, while the
	// garbage of whatever else the process is doing comes and goes.
	for deadline := time.Now().Add(2 * time.Second); leftKiB > 4 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		leftKiB = min(leftKiB, float64(int64(sampleMem().bytes)-int64(before.bytes))/n/1024)
	}
	t.Logf("per listen: %.1f KiB, %.2f goroutines; left after close: %.1f KiB per listen", perKiB, perG, leftKiB)
	if perKiB > 16 || perG > 2 {
		t.Errorf("an idle listen holds %.1f KiB and %.2f goroutines, want at most 16 KiB and 2", perKiB, perG)
	}
	if leftKiB > 4 {
		t.Errorf("closed listens left %.1f KiB each (of the %.1f they held), want at most 4", leftKiB, perKiB)
	}
}

// settled samples memory once the goroutine count has come down to want
// (or, with want < 0, has stopped changing).
func settled(t *testing.T, want int) memSample {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last := -1
	for {
		s := sampleMem()
		if (want >= 0 && s.goroutines <= want) || (want < 0 && s.goroutines == last) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines did not settle: %d, want %d", s.goroutines, want)
		}
		last = s.goroutines
		time.Sleep(20 * time.Millisecond)
	}
}
