package mcpclient_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// What the SDK's streamable HTTP transport logs about a server (here: its standalone
// GET stream answered with another content type, which the server picks and which
// quotes its key) reaches the manager's log, tagged with the server and masked.
func TestTransportLogsMasked(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	opts := fast()
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e := start(t, opts)
	const canary = "sk-canary-transportlog-13579"
	u := interposed(t, &mcptest.Options{Name: "getlog"}, func(w http.ResponseWriter, r *http.Request, _ string, _ json.RawMessage, _ []byte) bool {
		if r.Method != http.MethodGet {
			return false
		}
		w.Header().Set("Content-Type", "text/plain; key="+canary)
		fmt.Fprint(w, "no stream here")
		return true
	})
	sv := e.create(t, registry.Spec{Name: "getlog", Type: registry.TypeStreamableHTTP, URL: u,
		AuthType: registry.AuthBearer, AuthToken: canary, Enabled: true})

	var line map[string]any
	testkit.WaitFor(t, 20*time.Second, func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(fmt.Sprint(m["msg"]), "instead of text/event-stream for standalone SSE stream") {
				line = m
				return true
			}
		}
		return false
	}, "no line about the standalone stream's content type in the manager's log")
	if strings.Contains(logs.String(), canary) {
		t.Fatal("the manager's log holds the server's key")
	}
	if msg := fmt.Sprint(line["msg"]); !strings.HasPrefix(msg, "mcpclient: sdk: ") || !strings.Contains(msg, "text/plain") || !strings.Contains(msg, "***") {
		t.Errorf("the line %q: want the SDK's words, the content type kept and the key masked", msg)
	}
	if line["server"] != "getlog" || line["server_id"] != sv.ID {
		t.Errorf("the line names server %v (%v), want getlog (%s)", line["server"], line["server_id"], sv.ID)
	}
}
