package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// The test binary started with defsEnv=1 is a stdio server of one tool, tool_x, whose
// definition is the release named by defsVariantEnv: v1 read-only, v2 destructive (a
// package run as pkg@latest that changed between two replicas' starts). It writes
// defsCalled on its standard error for each call it receives.
const (
	defsEnv        = "TOOLWARDEN_TEST_DEFS"
	defsVariantEnv = "TOOLWARDEN_TEST_DEFS_VARIANT"
	defsCalled     = "defs: tool_x called"
)

func init() {
	if os.Getenv(defsEnv) != "1" {
		return
	}
	os.Exit(serveDefs(os.Getenv(defsVariantEnv)))
}

func serveDefs(variant string) int {
	ann := &mcp.ToolAnnotations{ReadOnlyHint: true}
	if variant == "v2" {
		ann = &mcp.ToolAnnotations{DestructiveHint: new(true)}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "defs", Version: variant}, nil)
	srv.AddTool(&mcp.Tool{Name: "tool_x", Description: "Does x.", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: ann},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, defsCalled)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + variant}}}, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Two replicas (two managers on one database) each run their own process of a stdio
// server, and the two list different definitions of tool_x. The definition stored, and
// so vetted and pinned, is the last discovery's: a call pinned to it runs on the replica
// whose session lists it, and is refused on the other before its process receives it,
// which then discovers the server again. A session that has listed nothing yet lists its
// tools before the first call is sent.
func TestCallRefusedWhereSessionListsAnotherDefinition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	reg := registry.New(pool, newKeys(t), nil)
	replica := func(variant string, debounce time.Duration) *mcpclient.Manager {
		t.Helper()
		opts := fast()
		opts.Debounce = debounce
		opts.InheritEnv = mcpclient.InheritedEnv(os.LookupEnv)
		// Not in the server's own env, so each replica's process gets its own.
		opts.InheritEnv[defsVariantEnv] = variant
		opts.Confine.Hide = append(opts.Confine.Hide, dbtest.ClusterDir(t))
		mgr := mcpclient.New(reg, opts)
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = mgr.Run(rctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		testkit.WaitFor(t, 5*time.Second, mgr.Running, "manager did not start")
		return mgr
	}
	a, b := replica("v2", 150*time.Millisecond), replica("v1", 150*time.Millisecond)

	cmd, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	sv, err := reg.CreateServer(ctx, audit.System, registry.Spec{Name: "defs", Type: registry.TypeStdio, Command: cmd,
		Args: []string{"-test.run=^$"}, Enabled: true, HealthIntervalMS: 1000,
		Env: map[string]string{defsEnv: "1", "GORACE": strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")}})
	if err != nil {
		t.Fatal(err)
	}
	// The definition stored now, and whether it is v2's (destructive): both replicas also
	// discover on their own when they connect, so which stored last is read, not assumed.
	stored := func() (hash string, isV2 bool) {
		h := testkit.Strings(t, pool, `SELECT definition_hash || ' ' || coalesce(annotations->>'destructiveHint', 'false')
			FROM mcp_tools WHERE server_id = $1 AND name = 'tool_x'`, sv.ID)
		if len(h) == 0 {
			return "", false
		}
		hash, hint, _ := strings.Cut(h[0], " ")
		return hash, hint == "true"
	}
	// waitStored waits for the variant's definition to be stored and returns its hash.
	waitStored := func(wantV2 bool, msg string) string {
		t.Helper()
		var hash string
		testkit.WaitFor(t, 30*time.Second, func() bool {
			h, isV2 := stored()
			hash = h
			return h != "" && isV2 == wantV2
		}, msg)
		return hash
	}
	calls := func(m *mcpclient.Manager) int {
		n := 0
		for _, line := range m.Snapshot(sv.ID).Stderr {
			if strings.Contains(line, defsCalled) {
				n++
			}
		}
		return n
	}
	call := func(m *mcpclient.Manager, tool, hash string) error {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		res, err := m.CallToolServed(cctx, sv.ID, "", tool, hash, nil, nil, nil)
		if err == nil && res.IsError {
			t.Fatalf("call of %s: tool error %+v", tool, res.Content)
		}
		return err
	}
	refused := func(err error, listed bool) {
		t.Helper()
		var de *mcpclient.DefinitionError
		if !errors.Is(err, mcpclient.ErrDefinitionDiffers) || !errors.As(err, &de) || de.Listed != listed {
			t.Fatalf("call: %v, want it refused as listing another definition (listed %v)", err, listed)
		}
	}

	// Replica a (v2) discovers, then b (v1): each definition is stored in turn.
	a.Refresh(ctx, sv.ID)
	v2 := waitStored(true, "replica a never stored its definition of tool_x")
	b.Refresh(ctx, sv.ID)
	v1 := waitStored(false, "replica b's discovery never stored its definition")
	if v1 == v2 {
		t.Fatalf("v1 and v2 stored with one definition hash %s", v1)
	}

	// Pinned to v1: runs on b, whose session lists v1.
	if err := call(b, "tool_x", v1); err != nil {
		t.Fatalf("call on the replica listing the stored definition: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { return calls(b) == 1 }, "b's process never received the call")
	// On a, whose session lists v2, it is refused before a's process receives it...
	refused(call(a, "tool_x", v1), true)
	// ...and a discovers again, storing what its session lists.
	testkit.WaitFor(t, 30*time.Second, func() bool { h, _ := stored(); return h == v2 }, "the refusal never had a discover the server again")
	if n := calls(a); n != 0 {
		t.Fatalf("a's process received %d calls of a definition it does not list", n)
	}
	// Pinned to v2 now: runs on a, refused on b.
	if err := call(a, "tool_x", v2); err != nil {
		t.Fatalf("call on a once its definition is stored: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { return calls(a) == 1 }, "a's process never received the call")
	refused(call(b, "tool_x", v2), true)
	if n := calls(b); n != 1 {
		t.Fatalf("b's process received %d calls, want 1", n)
	}
	// A tool the session does not list at all.
	refused(call(a, "tool_y", v2), false)

	// Replica c's session never discovers (its debounce outlasts the test): its first call
	// lists the session's tools before it is sent.
	c := replica("v1", time.Hour)
	c.Refresh(ctx, sv.ID)
	testkit.WaitFor(t, 30*time.Second, func() bool { return c.Snapshot(sv.ID).Status == registry.StatusConnected }, "c never connected")
	refused(call(c, "tool_x", v2), true)
	if err := call(c, "tool_x", v1); err != nil {
		t.Fatalf("call on c, whose session lists v1: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { return calls(c) == 1 }, "c's process never received the call")
}
