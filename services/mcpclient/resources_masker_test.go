package mcpclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A read answers with the masker of the session that answered it: the server's session
// replaced (its credential changed) between the answer and its masking, the server's
// masker asked then lacks the credential the answering session sent, and the gateway
// passed it on in clear; the one the read hands back masks it.
func TestReadResourceMaskerIsTheAnsweringSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	hs.Server().MCP().AddResource(&mcp.Resource{URI: "test://key", Name: "key"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://key", Text: "sent " + req.Extra.Header.Get("X-Api-Key")}}}, nil
	})
	const first, second = "first-key-0123456789", "second-key-0123456789"
	sv := e.create(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Headers: map[string]string{"X-Api-Key": first}})
	e.waitStatus(t, sv.ID, registry.StatusConnected)

	res, used, err := e.mgr.ReadResource(ctx, sv.ID, "test://key")
	if err != nil {
		t.Fatal(err)
	}
	text := res.Contents[0].Text
	if !strings.Contains(text, first) {
		t.Fatalf("the read's text %q: want the session's credential echoed", text)
	}
	key := second
	if _, err := e.reg.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Headers: map[string]*string{"X-Api-Key": &key}}); err != nil {
		t.Fatal(err)
	}
	e.mgr.Refresh(ctx, sv.ID)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	if got := e.mgr.Masker(sv.ID).String(text); !strings.Contains(got, first) {
		t.Fatalf("the server's masker now masks the old credential (%q): the test shows nothing", got)
	}
	if got := used.String(text); strings.Contains(got, first) {
		t.Fatalf("masked with the masker the read returned: %q still holds the answering session's credential", got)
	}
	// Lists hand back theirs too: the new session's.
	// The status may read connected a moment before the new session is live.
	var listed *secrets.Masker
	testkit.WaitFor(t, 10*time.Second, func() bool {
		_, listed, err = e.mgr.ListResources(ctx, sv.ID)
		return !errors.Is(err, mcpclient.ErrNotConnected)
	}, "the new session did not list")
	if err != nil || listed == nil || strings.Contains(listed.String("sent "+second), second) {
		t.Fatalf("a list's masker after the change (err %v): want one that masks the new credential", err)
	}
}
