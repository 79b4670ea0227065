package toolpin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// The parts of a tool's definition that are pinned and compared, as a
// change names them.
const (
	PartTitle        = "title"
	PartDescription  = "description"
	PartInputSchema  = "input_schema"
	PartOutputSchema = "output_schema"
	PartAnnotations  = "annotations"
)

// parts are the pinned fields of a tool object, in the order a change
// lists them.
var parts = [...]struct{ part, field string }{
	{PartTitle, "title"},
	{PartDescription, "description"},
	{PartInputSchema, "inputSchema"},
	{PartOutputSchema, "outputSchema"},
	{PartAnnotations, "annotations"},
}

// Record is a tool's pin: the hash of its definition and of each part.
type Record struct {
	Hash  string            `json:"h"`
	Parts map[string]string `json:"p"`
	At    time.Time         `json:"t"` // when it was pinned
}

// Digest is the pin of raw, a tool object as its server listed it: the
// SHA-256 of the canonical JSON (keys sorted, insignificant space dropped,
// numbers as written) of its title, description, inputSchema, outputSchema
// and annotations, each part hashed alone and the whole hashed over the
// parts. Its name and _meta are not part of it. A tool that is not a JSON
// object is hashed as its bytes, one part of its own.
func Digest(raw json.RawMessage) Record {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		h := sum(raw)
		return Record{Hash: h, Parts: map[string]string{"raw": h}}
	}
	rec := Record{Parts: make(map[string]string, len(parts))}
	whole := sha256.New()
	for _, p := range parts {
		h := sum(canonical(obj[p.field]))
		rec.Parts[p.part] = h
		fmt.Fprintf(whole, "%s=%s;", p.part, h)
	}
	rec.Hash = hex.EncodeToString(whole.Sum(nil))
	return rec
}

// Diff lists the parts whose hashes differ between was and now, in the
// order of parts ("raw" when either is not a tool object).
func Diff(was, now *Record) []string {
	if was.Hash == now.Hash {
		return nil
	}
	if was.Parts["raw"] != "" || now.Parts["raw"] != "" {
		return []string{"raw"}
	}
	var out []string
	for _, p := range parts {
		if was.Parts[p.part] != now.Parts[p.part] {
			out = append(out, p.part)
		}
	}
	if len(out) == 0 && was.Hash != now.Hash {
		out = append(out, "raw")
	}
	return out
}

// canonical is v decoded and encoded again (object keys sorted, numbers
// kept as written); absent is null, and what does not decode is itself.
func canonical(v json.RawMessage) []byte {
	if len(v) == 0 {
		return []byte("null")
	}
	var x any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if d.Decode(&x) != nil {
		return v
	}
	b, err := json.Marshal(x)
	if err != nil {
		return v
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
