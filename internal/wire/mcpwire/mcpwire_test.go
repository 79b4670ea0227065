package mcpwire

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, http.StatusBadRequest, json.RawMessage(`"a"`), -32600, "a<b", nil)
	if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Body.String() != `{"jsonrpc":"2.0","id":"a","error":{"code":-32600,"message":"a<b"}}` {
		t.Errorf("WriteError: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = httptest.NewRecorder()
	WriteError(rec, http.StatusOK, json.RawMessage(`"\x"`), -32600, "m", nil)
	if rec.Body.String() != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}` {
		t.Errorf("WriteError with an invalid id: %s", rec.Body)
	}
}
