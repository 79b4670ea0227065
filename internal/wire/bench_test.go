package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchBatch is a three-message batch with strings that hold brackets and
// commas, the input Elements and Scan see for a 2025-03-26 batch.
var benchBatch = []byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"q":"x,]"}}},` +
	` {"jsonrpc":"2.0","id":"two","method":"tools/list"}, {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":[1,2,3]}}]`)

// benchCall is a tools/call request with a long argument string.
var benchCall = []byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"web_search","arguments":{"query":"` +
	strings.Repeat("lorem ipsum ", 30) + `"}},"id":"req-17"}`)

func BenchmarkElements(b *testing.B) {
	b.SetBytes(int64(len(benchBatch)))
	for b.Loop() {
		_ = Elements(benchBatch)
	}
}

func BenchmarkScanBatch(b *testing.B) {
	b.SetBytes(int64(len(benchBatch)))
	for b.Loop() {
		_, _ = Scan(benchBatch)
	}
}

func BenchmarkTopLevelID(b *testing.B) {
	b.SetBytes(int64(len(benchCall)))
	for b.Loop() {
		_ = TopLevelID(benchCall)
	}
}

func BenchmarkKeysHavePrefix(b *testing.B) {
	meta := []byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"x":"]"}}}`)
	for b.Loop() {
		_ = KeysHavePrefix(meta, "io.modelcontextprotocol/")
	}
}

func BenchmarkAppendError(b *testing.B) {
	msg := "tool \"web_search\" failed:\n\tupstream <b> said \u2028 bad \x01 byte " + strings.Repeat("é", 20)
	id := json.RawMessage(`"req-17"`)
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = AppendError(buf[:0], id, -32603, msg, nil)
	}
}

func BenchmarkDecode(b *testing.B) {
	var m Message
	b.SetBytes(int64(len(benchCall)))
	for b.Loop() {
		_ = Decode(benchCall, &m)
	}
}
