package web

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/loglimit"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A flood of forged replica hops is refused with a bounded number of warnings, the
// next one logged saying how many were left out: anyone may send the header.
func TestRefusedHopsLogBounded(t *testing.T) {
	t.Parallel()
	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secrets.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	var sink testkit.SyncBuffer
	s := &Server{log: slog.New(slog.NewTextHandler(&sink, nil)), hops: replicahop.NewVerifier(kr, "id-r0"), hopLog: loglimit.New(hopLogEvery, hopLogBurst)}
	e := echo.New()
	h := s.replicaHop(func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	for i := 0; i < 1000; i++ {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/servers", nil)
		req.Header.Set(replicahop.Header, "v3 forged")
		if err := h(e.NewContext(req, httptest.NewRecorder())); err == nil {
			t.Fatal("a forged hop was let through")
		}
	}
	if n := strings.Count(sink.String(), "claimed to come from a replica"); n == 0 || n > hopLogBurst+1 {
		t.Fatalf("1,000 forged hops logged %d warnings, want 1..%d", n, hopLogBurst+1)
	}
}
