package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A server whose resources/list never ends (an empty page and a fresh cursor each time,
// each well within the timeout) is given up on as a whole, not after Options.MaxPages
// pages: the gateway's list waits for every server's, so it would hold every agent's.
func TestListAllBoundedAsAWhole(t *testing.T) {
	t.Parallel()
	opts := fast()
	opts.MaxPages = 5000
	e := start(t, opts)
	var endless atomic.Bool
	var pages atomic.Int64
	u := interposed(t, &mcptest.Options{Name: "endless"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method != "resources/list" || !endless.Load() {
			return false
		}
		n := pages.Add(1)
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resources":[],"nextCursor":"page-%d"}}`, id, n)
		return true
	})
	sv := e.create(t, registry.Spec{Name: "endless", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true, TimeoutMS: 1000})
	e.waitRuns(t, sv.ID, 1)
	endless.Store(true)
	items, _, err := e.mgr.ListResources(context.Background(), sv.ID)
	// Each page takes 5 ms at least: within the list's bound (twice the 1 s timeout) a
	// few hundred at most, against the 5000 MaxPages allows.
	if n := pages.Load(); n >= int64(opts.MaxPages)/2 || err == nil || !errors.Is(err, mcpclient.ErrTimeout) {
		t.Fatalf("a list that never ends: %d pages read, %d items, err %v; want it given up on as a whole, as timed out", n, len(items), err)
	}
}
