package config

import "time"

// What a result over its budget becomes (result_guards.on_exceed).
const (
	OnExceedTruncate = "truncate" // the head within the budget and a marker
	OnExceedError    = "error"    // a tool error naming the size and the bound
	OnExceedSpill    = "spill"    // the head, and the full result as a resource of the mux
)

// Bounds and defaults of result_guards.
const (
	MinResultChars   = 1000
	MaxResultChars   = 50_000_000
	CharsPerToken    = 4 // max_result_tokens is max_result_chars / 4
	DefaultSpillTTL  = time.Hour
	MaxSpillTTL      = 24 * time.Hour
	minResultTokens  = MinResultChars / CharsPerToken
	maxResultTokens  = MaxResultChars / CharsPerToken
	resultGuardsName = "result_guards"
)

// ResultGuards is a "result_guards" block, top level or a server's (which
// replaces the top-level one for that server): what the mux checks in a
// tool's result before the caller gets it. Off unless set. Reloadable.
type ResultGuards struct {
	// Redact replaces credentials in text and structured content: the
	// values the mux knows (the server's, the caller's carried secrets)
	// and credential-shaped strings.
	Redact bool
	// MaxChars and MaxTokens bound a result's size (0: unset); tokens are
	// approximated as CharsPerToken characters each, and the smaller bound
	// wins.
	MaxChars, MaxTokens int
	// OnExceed is what a result over the budget becomes (OnExceed*).
	OnExceed string
	// SpillTTL is how long a spilled result is kept.
	SpillTTL time.Duration
}

// Budget is the result size in characters g allows, and the setting that
// sets it ("" and 0: no budget).
func (g *ResultGuards) Budget() (chars int, setting string) {
	if g == nil {
		return 0, ""
	}
	chars, setting = g.MaxChars, resultGuardsName+".max_result_chars"
	if t := g.MaxTokens * CharsPerToken; t > 0 && (chars == 0 || t < chars) {
		chars, setting = t, resultGuardsName+".max_result_tokens"
	}
	if chars == 0 {
		return 0, ""
	}
	return chars, setting
}

// ResultGuardsFor is the result_guards block that applies to server s:
// its own, else the top-level one (nil: none).
func (c *Config) ResultGuardsFor(s *Server) *ResultGuards {
	if s != nil && s.ResultGuards != nil {
		return s.ResultGuards
	}
	return c.ResultGuards
}

// parseResultGuardsBlock reads the top-level "result_guards" block.
// Without redact or a budget it does nothing (a server's such block turns
// the guards off for that server).
func (c *Config) parseResultGuardsBlock(o *object) {
	c.ResultGuards = parseResultGuards(o)
	if g := c.ResultGuards; !g.Redact && g.MaxChars == 0 && g.MaxTokens == 0 {
		o.f.warn(o.path, "neither redact nor a budget is set: the block does nothing")
	}
}

// parseServerResultGuards reads a server's "result_guards" object.
func parseServerResultGuards(o *object) *ResultGuards {
	g := objectAt(o.take(resultGuardsName), resultGuardsName, o.f)
	if g == nil {
		return nil
	}
	defer g.rejectUnknown()
	return parseResultGuards(g)
}

// parseResultGuards reads one result_guards object (strict).
func parseResultGuards(o *object) *ResultGuards {
	g := &ResultGuards{Redact: o.boolean("redact", false)}
	g.MaxChars = o.intInRange("max_result_chars", 0, MinResultChars, MaxResultChars)
	g.MaxTokens = o.intInRange("max_result_tokens", 0, minResultTokens, maxResultTokens)
	budget := g.MaxChars > 0 || g.MaxTokens > 0
	g.OnExceed = o.oneOf("on_exceed", OnExceedTruncate, OnExceedTruncate, OnExceedError, OnExceedSpill)
	if o.has("on_exceed") && !budget {
		o.f.problem(o.field("on_exceed"), "applies only with max_result_chars or max_result_tokens")
	}
	g.SpillTTL = o.secondsInRange("spill_ttl_seconds", DefaultSpillTTL, 1, MaxSpillTTL.Seconds())
	if o.has("spill_ttl_seconds") && g.OnExceed != OnExceedSpill {
		o.f.problem(o.field("spill_ttl_seconds"), "applies only with on_exceed %q", OnExceedSpill)
	}
	return g
}
