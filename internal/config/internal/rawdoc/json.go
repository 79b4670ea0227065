package rawdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// DecodeJSON parses a JSON document into a node tree.
func DecodeJSON(data []byte, file string) (*Node, []DupKey, error) {
	if err := checkJSONBounds(data, file); err != nil {
		return nil, nil, err
	}
	// encoding/json reports accurate offsets only from a whole-input scan,
	// so validate first and build the ordered tree from tokens afterwards.
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, nil, syntaxAtOffset(file, data, se.Offset, se.Error())
		}
		return nil, nil, &SyntaxError{File: file, Msg: err.Error()}
	}
	d := jsonDecoder{dec: json.NewDecoder(bytes.NewReader(data))}
	d.dec.UseNumber()
	n, err := d.value()
	if err != nil {
		return nil, nil, &SyntaxError{File: file, Msg: err.Error()}
	}
	return n, d.dups, nil
}

// jsonDecoder builds a Node tree from encoding/json's tokens.
type jsonDecoder struct {
	dec  *json.Decoder
	path []string // keys leading to the value being decoded
	dups []DupKey
}

// value decodes the next value.
func (d *jsonDecoder) value() (*Node, error) {
	tok, err := d.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if delim, ok := tok.(json.Delim); ok {
		return d.collection(delim)
	}
	if n := scalarNode(tok); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// scalarNode returns the node of a scalar token, or nil for any other.
func scalarNode(tok json.Token) *Node {
	switch t := tok.(type) {
	case nil:
		return &Node{Kind: Null}
	case bool:
		return &Node{Kind: Bool, Bool: t}
	case json.Number:
		return &Node{Kind: Number, Text: string(t)}
	case string:
		return &Node{Kind: String, Text: t, Value: t}
	}
	return nil
}

// collection decodes the array or object that delim opens.
func (d *jsonDecoder) collection(delim json.Delim) (*Node, error) {
	switch delim {
	case '[':
		return d.array()
	case '{':
		return d.object()
	}
	return nil, fmt.Errorf("unexpected JSON token %v", delim)
}

// array decodes an array's items and its closing bracket.
func (d *jsonDecoder) array() (*Node, error) {
	n := &Node{Kind: Array}
	for d.dec.More() {
		item, err := d.value()
		if err != nil {
			return nil, err
		}
		n.Items = append(n.Items, item)
	}
	_, err := d.dec.Token() // ']'
	return n, err
}

// object decodes an object's members and its closing brace, recording
// duplicate keys.
func (d *jsonDecoder) object() (*Node, error) {
	b := newObjectBuilder()
	for d.dec.More() {
		if err := d.member(b); err != nil {
			return nil, err
		}
	}
	_, err := d.dec.Token() // '}'
	return b.n, err
}

// member decodes one key and its value into b.
func (d *jsonDecoder) member(b *objectBuilder) error {
	kt, err := d.dec.Token()
	if err != nil {
		return err
	}
	key, ok := kt.(string)
	if !ok {
		return fmt.Errorf("object key is not a string")
	}
	d.path = append(d.path, key)
	v, err := d.value()
	if err != nil {
		return err
	}
	if b.set(key, v) {
		d.dups = append(d.dups, DupKey{Path: slices.Clone(d.path)})
	}
	d.path = d.path[:len(d.path)-1]
	return nil
}

// syntaxAtOffset builds a SyntaxError whose line and column (1-based, in
// characters) point at the byte encoding/json complained about.
func syntaxAtOffset(file string, data []byte, offset int64, msg string) *SyntaxError {
	// json.SyntaxError.Offset counts the offending byte itself, except at
	// end of input.
	idx := int(offset) - 1
	if offset >= int64(len(data)) {
		idx = len(data)
	}
	idx = max(idx, 0)
	line := 1 + bytes.Count(data[:idx], []byte{'\n'})
	start := bytes.LastIndexByte(data[:idx], '\n') + 1
	col := utf8.RuneCount(data[start:idx]) + 1
	return &SyntaxError{File: file, Line: line, Column: col, Msg: msg}
}
