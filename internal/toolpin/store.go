package toolpin

import (
	"context"
	"encoding/json"
	"errors"
)

// Bounds of the store.
const (
	// MaxPins bounds the pins of one server: as many tools as one
	// discovery may list (internal/upstream's cap on a list's items).
	MaxPins = 10000
	// MaxDefinition bounds the definition kept with a pin (the tool object
	// as its server listed it), which block mode serves while a change
	// waits; a larger one is not kept, and such a tool is withheld while
	// its change waits.
	MaxDefinition = 64 << 10
)

// ErrFull is add's error when a server has MaxPins pins already.
var ErrFull = errors.New("the server has as many pinned tools as mcp-mux keeps")

// Store keeps the pins of every server: NewRedisStore (shared by
// replicas) and OpenBoltStore make one. Its methods are the Guard's alone.
type Store interface {
	// records returns the pins of server's tools, by name (absent: none).
	records(ctx context.Context, server string, tools []string) (map[string]*Record, error)
	// add pins tool with rec and its definition def (nil: not kept)
	// unless it is pinned already, and returns the pin in force; ErrFull
	// when server has max pins.
	add(ctx context.Context, server, tool string, rec *Record, def []byte, max int) (*Record, error)
	// definition returns the definition kept with tool's pin (nil: none).
	definition(ctx context.Context, server, tool string) ([]byte, error)
	// put pins tool with rec and def (nil: none kept), replacing its pin.
	put(ctx context.Context, server, tool string, rec *Record, def []byte) error
	// Close releases the store's resources (not a client it was given).
	Close() error
}

// kept is the definition a pin keeps of raw: raw, or nil past MaxDefinition.
func kept(raw json.RawMessage) []byte {
	if len(raw) > MaxDefinition {
		return nil
	}
	return raw
}

// decodeRecord is the record v holds; nil for none or a damaged one.
func decodeRecord(v []byte) *Record {
	if len(v) == 0 {
		return nil
	}
	var r Record
	if json.Unmarshal(v, &r) != nil || r.Hash == "" {
		return nil
	}
	return &r
}
