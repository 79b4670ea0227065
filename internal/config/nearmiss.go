package config

import (
	"sort"
	"strings"
)

// Near misses: a key that is not known but within a small edit distance of
// one that is ("enabeld", "mcpServer", "tool_call_timout") is almost
// certainly a typo, which would otherwise be kept as an extra key and
// ignored. Such keys are warned about, naming the likely key.

// serverKeys are the keys of an mcpServers entry mcp-mux reads.
var serverKeys = []string{"enabled", "type", "transport", "command", "args", "env", "url", "headers", "oauth",
	"user_auth", "headers_from_context", "token_exchange", "description", "routing", "tools", "tool_name_prefix",
	"session_init_timeout", "tool_call_timeout", "task_toolsets", "session_scope", "max_sessions", "idle_timeout_seconds", "telemetry",
	"cwd", "processors", "result_guards", "pin_tools"}

// topLevelKeys are the top-level keys mcp-mux reads.
var topLevelKeys = []string{"mcpServers", "mcpInterceptors", "guardrails", "tool_search", "mcp_tasks", "store", "inbound", "admin", "telemetry", "profiles", "limits", "policy", "approvals", "processors", "result_guards"}

// likelyKey returns the known key that key is most likely a misspelling
// of, or "" when none is close: at most one edit for keys of up to four
// characters, two for longer ones (case-insensitively; a transposition is
// one edit).
func likelyKey(key string, known []string) string {
	limit := 2
	if len(key) <= 4 {
		limit = 1
	}
	best, bestD := "", limit+1
	k := strings.ToLower(key)
	for _, c := range known {
		if c == key {
			return ""
		}
		if d := editDistance(k, strings.ToLower(c), limit); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// or limit+1 when it is larger than limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		if distanceRow(a, b, i, prev2, prev, cur) > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// distanceRow fills cur, row i of the distance table, from the two rows
// above it (prev, prev2) and returns the row's minimum.
func distanceRow(a, b string, i int, prev2, prev, cur []int) int {
	cur[0] = i
	rowMin := cur[0]
	for j := 1; j <= len(b); j++ {
		cost := 1
		if a[i-1] == b[j-1] {
			cost = 0
		}
		cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		if transposed(a, b, i, j) {
			cur[j] = min(cur[j], prev2[j-2]+1)
		}
		rowMin = min(rowMin, cur[j])
	}
	return rowMin
}

// transposed reports whether a[:i] and b[:j] end in the same two
// characters swapped.
func transposed(a, b string, i, j int) bool {
	return i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1]
}

// knownOf returns the keys an object's parser asked for, sorted.
func knownOf(o *object) []string {
	out := make([]string, 0, len(o.used))
	for k := range o.used {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
