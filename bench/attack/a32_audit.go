package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Issue 32, attack 2: audit records keep a caller's unknown tool name.
// To a file: 5 calls, then 100 calls with 1 MB names through a file pair
// of max_file_mb 3 — how many of the 5 earlier records are left, and the
// longest record. To a stdout nobody reads: 400 reads of unknown 3.9 MB
// resource URIs (URIs are no metric label, so only the audit records and
// the status page's recent calls can keep them) — RSS, and
// mcp_mux_audit_records_dropped_total.

// bigCall is a tools/call of an unknown tool whose name is n bytes.
func bigCall(id, n int) string {
	name := fmt.Sprintf("t%06d", id) + strings.Repeat("z", n-7)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, name)
}

// bigRead is a resources/read of an unknown URI of n bytes.
func bigRead(id, n int) string {
	uri := fmt.Sprintf("test://r%06d/", id) + strings.Repeat("z", n-15)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%q}}`, id, uri)
}

// metricValue is the value of the series named (with labels) line by
// line on /metrics, or "?".
func (m *mux) metricValue(series string) string {
	resp, err := m.client.Get(m.base + "/metrics")
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	return "?"
}

// pageBytes is the size of GET path (and its status).
func (m *mux) pageBytes(path string) string {
	resp, err := m.client.Get(m.base + path)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	return fmt.Sprintf("%d bytes (HTTP %d)", n, resp.StatusCode)
}

// auditTrail counts the records of the audit file pair at path: all, those
// of up_echo, and the longest line.
func auditTrail(path string) (records, echoes, longest int) {
	for _, p := range []string{path + ".1", path} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			records++
			longest = max(longest, len(l))
			var r struct{ Tool string }
			if json.Unmarshal(l, &r) == nil && r.Tool == "up_echo" {
				echoes++
			}
		}
	}
	return records, echoes, longest
}

func attackAudit(bin, dir string) error {
	u := &up{}
	hostile := serve(u.script)
	defer hostile.Close()
	if err := auditToFile(bin, dir, hostile.URL+"/mcp"); err != nil {
		return err
	}
	return auditToBlockedStdout(bin, dir, hostile.URL+"/mcp")
}

// auditToFile: do the earlier records survive 100 calls with 1 MB names?
func auditToFile(bin, dir, upURL string) error {
	path := filepath.Join(dir, "audit.jsonl")
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
		"telemetry": {"audit": {"enabled": true, "output": %q, "max_file_mb": 3}}}`, upURL, path))
	if err != nil {
		return err
	}
	sid, err := m.session("2025-11-25")
	if err != nil {
		m.stop()
		return err
	}
	for i := range 5 {
		_, _, _ = m.post(context.Background(), sid, "2025-11-25", call(i+1, "echo"))
	}
	before := m.stats()
	for i := range 100 {
		_, _, _ = m.post(context.Background(), sid, "2025-11-25", bigCall(100+i, 1<<20))
	}
	after := m.stats()
	status, page := m.pageBytes("/api/status"), m.pageBytes("/")
	m.stop() // the records still queued are written
	records, echoes, longest := auditTrail(path)
	fmt.Printf("a32 audit to a file (max_file_mb 3), 5 calls then 100 with 1 MB names: %d of the 5 earlier records left; %d records in the pair, the longest %d bytes; /api/status %s, / %s\n",
		echoes, records, longest, status, page)
	fmt.Printf("a32   before %s | after %s\n", before, after)
	return nil
}

// auditToBlockedStdout: 400 reads of 3.9 MB URIs while nobody reads the
// mux's stdout: RSS and the dropped records.
func auditToBlockedStdout(bin, dir, upURL string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	m, err := startMuxOut(bin, dir, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
		"telemetry": {"audit": {"enabled": true, "output": "stdout"}}}`, upURL), w)
	_ = w.Close() // the mux holds its copy
	if err != nil {
		return err
	}
	sid, err := m.session("2025-11-25")
	if err != nil {
		m.stop()
		return err
	}
	before := m.stats()
	code, reply, _ := m.post(context.Background(), sid, "2025-11-25", bigRead(999, 64))
	for i := range 400 {
		_, _, _ = m.post(context.Background(), sid, "2025-11-25", bigRead(1000+i, 3900<<10))
	}
	fmt.Printf("a32 audit to a stdout nobody reads, 400 reads of 3.9 MB unknown URIs (a short one answers HTTP %d, error %s): dropped %s, written %s; before %s | after %s\n",
		code, between(reply, `"code":`, ","),
		m.metricValue("mcp_mux_audit_records_dropped_total"), m.metricValue("mcp_mux_audit_records_total"), before, m.stats())
	for i := range 2000 { // small records, many: past the queue's bound in bytes, not in records
		_, _, _ = m.post(context.Background(), sid, "2025-11-25", bigRead(2000+i, 16<<10))
	}
	fmt.Printf("a32   then 2000 reads of 16 KB URIs: dropped %s, written %s; %s\n",
		m.metricValue("mcp_mux_audit_records_dropped_total"), m.metricValue("mcp_mux_audit_records_total"), m.stats())
	done := make(chan struct{})
	go func() { // read what is queued, so the mux can stop
		defer close(done)
		_, _ = io.Copy(io.Discard, r)
	}()
	took, code := m.stop()
	<-done
	fmt.Printf("a32   then stdout read: exit %d after %s\n", code, took.Round(1e6))
	return nil
}
