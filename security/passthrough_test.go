package security_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// No token passthrough: what an upstream server receives carries the credentials the
// administrator configured for it, never the API token or session of whoever called
// through Toolwarden (MCP's "token passthrough" anti-pattern).
func TestNoTokenPassthrough(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "up"})
	target, _ := url.Parse(up.URL())
	var mu sync.Mutex
	var seen bytes.Buffer // every header and body the upstream got
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	spy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		_ = r.Header.Write(&seen)
		seen.Write(body)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { spy.CloseClientConnections(); spy.Close() })
	e.srv.RegisterServer(t, registry.Spec{Name: "up", Type: registry.TypeStreamableHTTP, URL: spy.URL + target.Path, Enabled: true, Trusted: true,
		AuthType: registry.AuthBearer, AuthToken: "configured-upstream-credential"}, "echo")

	admin := e.people[auth.RoleAdmin]
	admin.token.JSON(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "up__echo", "arguments": map[string]any{"message": "via token"}}, 200, nil)
	panel(t, e, admin.session, e.srv.ToolID(t, "up__echo"), url.Values{"mode": {"json"}, "arguments_json": {`{"message":"via session"}`}})
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(seen.String(), "via session") && strings.Contains(seen.String(), "via token")
	}, "the upstream never got both calls")

	mu.Lock()
	got := seen.String()
	mu.Unlock()
	if !strings.Contains(got, "Bearer configured-upstream-credential") {
		t.Error("the upstream did not get its configured credential")
	}
	for what, v := range map[string]string{"the caller's API token": admin.token.Bearer, "an API token's prefix": "tw_",
		"a session cookie": "tw_session", "a session token": "tws_"} {
		if strings.Contains(got, v) {
			t.Errorf("the upstream received %s", what)
		}
	}
}
