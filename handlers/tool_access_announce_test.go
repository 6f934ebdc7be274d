package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// The HX-Trigger header that has the page say an outcome is ASCII JSON: browsers read
// a header's bytes as Latin-1, so UTF-8 in it reached the live region garbled.
func TestAnnounceHXIsASCIIJSON(t *testing.T) {
	t.Parallel()
	const msg = `zoë may call "ü__😀", whatever their role.`
	rec := httptest.NewRecorder()
	announceHX(echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/", nil), rec), msg)
	h := rec.Header().Get("HX-Trigger")
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			t.Fatalf("HX-Trigger %q has a non-ASCII byte at %d", h, i)
		}
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(h), &got); err != nil || got["tw-announce"] != msg {
		t.Fatalf("HX-Trigger %q reads %v (%v), want tw-announce %q", h, got, err, msg)
	}
}
