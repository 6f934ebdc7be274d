package mcpclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// DiscoverOnce (the import's discovery) counts and names the tools it leaves out for
// their names, as a session's discovery does, with the server's secret masked.
func TestDiscoverOnceCountsLeftOut(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-once-secret-987654321"
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "once"})
	for _, name := range []string{"tab\tname " + secret, strings.Repeat("x", 3000)} {
		hs.Server().SetTool(mcptest.ToolSpec{Name: name})
	}
	// Disabled: no session of the manager's discovers it meanwhile.
	sv := e.create(t, registry.Spec{Name: "once", Type: registry.TypeStreamableHTTP, URL: hs.URL(),
		Headers: map[string]string{"Authorization": "Bearer " + secret}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.mgr.DiscoverOnce(ctx, sv.ID, "import", audit.System)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(hs.Server().Tools()) - 2; res.Total != want || res.LeftOut != 2 {
		t.Fatalf("DiscoverOnce kept %d tools and left out %d, want %d and 2", res.Total, res.LeftOut, want)
	}
	runs, err := e.reg.DiscoveryRuns(ctx, sv.ID, 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	r := runs[0]
	names := strings.Join(r.LeftOutNames, "\n")
	if r.LeftOut != 2 || len(r.LeftOutNames) != 2 || !strings.Contains(names, `"tab\tname ***": a control character in its name`) ||
		!strings.Contains(names, "a name of 3000 bytes") {
		t.Fatalf("the run's tools left out: %d %q", r.LeftOut, r.LeftOutNames)
	}
	if strings.Contains(names, secret[3:]) {
		t.Fatalf("the names left out show the server's secret: %q", names)
	}
}
