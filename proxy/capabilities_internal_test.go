package proxy

import (
	"context"
	"testing"
)

func TestExtensionsOnlyOnDiscover(t *testing.T) {
	s := New(Options{})
	defer func() { _ = s.Close(context.Background()) }()
	s.addExtension("example.com/ext", nil)
	if got := s.advertised(true).Extensions["example.com/ext"]; got == nil {
		t.Errorf("discover extensions %v: want example.com/ext", s.advertised(true).Extensions)
	}
	if got := s.advertised(false).Extensions; got != nil {
		t.Errorf("initialize extensions %v: want none", got)
	}
}
