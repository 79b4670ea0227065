package accounts

import (
	"bytes"
	"encoding/hex"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/seal"
)

// userHash is the keyed hash the store knows a user by.
func (m *Manager) userHash(user string) string {
	return hex.EncodeToString(m.o.Sealer.MAC("accounts user\x00" + user)[:16])
}

// sealJSON seals v with p for the binding.
func sealJSON(p *seal.Purpose, binding string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return []byte(p.Seal(binding, b, 0)), nil
}

// openJSON opens what sealJSON sealed into v.
func openJSON(p *seal.Purpose, binding string, b []byte, v any) error {
	pt, err := p.Open(string(b), binding)
	if err != nil {
		return err
	}
	return json.Unmarshal(pt, v)
}

// jsonBytes marshals v.
func jsonBytes(v any) ([]byte, error) {
	var b bytes.Buffer
	err := json.NewEncoder(&b).Encode(v)
	return bytes.TrimSpace(b.Bytes()), err
}
