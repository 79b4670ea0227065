package via

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	m := New()
	tests := []struct {
		name  string
		vals  []string
		chain int
		err   error
	}{
		{"none", nil, 0, nil},
		{"one other", []string{"abc"}, 1, nil},
		{"several lines", []string{"a, b", "c"}, 3, nil},
		{"this mux", []string{"a," + m.ID()}, 0, ErrLoop},
		{"this mux first", []string{m.ID() + ",a"}, 0, ErrLoop},
		{"hops at the bound", []string{strings.Repeat("x,", MaxHops-2) + "x"}, MaxHops - 1, nil},
		{"too many hops", []string{strings.Repeat("x,", MaxHops-1) + "x"}, 0, ErrTooManyHops},
		{"empty id", []string{"a,,b"}, 0, ErrMalformed},
		{"bad byte", []string{"a\x1bb"}, 0, ErrMalformed},
		{"oversized", []string{strings.Repeat("a", 600)}, 0, ErrMalformed},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.vals {
			h.Add(Header, v)
		}
		chain, err := m.Check(h)
		if !errors.Is(err, tt.err) || len(chain) != tt.chain {
			t.Errorf("%s: chain %v, err %v; want %d ids, %v", tt.name, chain, err, tt.chain, tt.err)
		}
	}
}

func TestTransportExtendsTheChain(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Values(Header) }))
	defer srv.Close()
	m := New()
	c := &http.Client{Transport: m.Transport(http.DefaultTransport)}
	for _, chain := range [][]string{nil, {"a", "b"}} {
		req, _ := http.NewRequestWithContext(With(t.Context(), chain), http.MethodGet, srv.URL, nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		want := strings.Join(append(chain, m.ID()), ",")
		if len(got) != 1 || got[0] != want || req.Header.Get(Header) != "" {
			t.Errorf("sent %q, want %q (and the caller's request untouched)", got, want)
		}
		// The next mux refuses what comes back here.
		if _, err := m.Check(http.Header{Header: got}); !errors.Is(err, ErrLoop) {
			t.Errorf("Check of our own mark: %v", err)
		}
	}
}

func FuzzCheck(f *testing.F) {
	m := New()
	for _, s := range []string{"", "a", "a,b,c", m.ID(), " a , b ", strings.Repeat("a,", 20), "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		chain, err := m.Check(http.Header{Header: {v}})
		if err != nil {
			if chain != nil {
				t.Fatal("a chain with an error")
			}
			return
		}
		if len(chain) >= MaxHops {
			t.Fatalf("accepted %d hops", len(chain))
		}
		for _, id := range chain {
			if id == m.ID() || !validID(id) {
				t.Fatalf("accepted id %q", id)
			}
		}
	})
}
