package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The server builtin is there from the start, trusted and connected, and its tools are
// discovered like any server's; it can be disabled and enabled, not edited or deleted.
// think runs through the router, in the caller's conversation.
func TestBuiltinServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	sv, err := srv.Registry.GetServerByName(ctx, registry.BuiltinName)
	if err != nil {
		t.Fatal(err)
	}
	if sv.Type != registry.TypeBuiltin || !sv.Trusted || !sv.Enabled || sv.NameReserved {
		t.Fatalf("the built-in server: %+v", sv)
	}
	srv.App.Enable(t, "builtin__think")
	admin := audit.Actor{Kind: audit.ActorUser, ID: "", Name: "admin"}
	res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__think", Arguments: json.RawMessage(`{"thought":"first the tests"}`),
		Actor: admin, Role: auth.RoleAdmin, Source: router.SourceAPI, ConversationID: "conv-1"})
	if err != nil || res.IsError || router.TextOf(res.Content) != "first the tests" {
		t.Fatalf("think: %v %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(srv.App.Builtin.Root(), "conv-1")); err != nil {
		t.Fatalf("the conversation's workspace: %v", err)
	}
	if _, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__think", Arguments: json.RawMessage(`{}`),
		Actor: admin, Role: auth.RoleAdmin, Source: router.SourceAPI}); err == nil || !strings.Contains(err.Error(), "thought") {
		t.Fatalf("think without a thought: %v", err)
	}

	name := "mine"
	if _, err := srv.Registry.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Name: &name}); !errors.Is(err, registry.ErrBuiltinFixed) {
		t.Fatalf("renaming the built-in server: %v", err)
	}
	if err := srv.Registry.DeleteServer(ctx, audit.System, sv.ID); !errors.Is(err, registry.ErrBuiltinFixed) {
		t.Fatalf("deleting the built-in server: %v", err)
	}
	if _, err := srv.Registry.SetEnabled(ctx, audit.System, sv.ID, false); err != nil {
		t.Fatalf("disabling the built-in server: %v", err)
	}
	// While it is disabled its tools are refused (the router learns of it through the
	// bus); once enabled again they run.
	think := func() (*router.Result, error) {
		return srv.Router.Call(ctx, router.Call{Tool: "builtin__think", Arguments: json.RawMessage(`{"thought":"again"}`),
			Actor: admin, Role: auth.RoleAdmin, Source: router.SourceAPI, ConversationID: "conv-1"})
	}
	var callErr error
	webtest.WaitFor(t, 10*time.Second, func() bool { _, callErr = think(); return callErr != nil }, "a call refused while builtin is disabled")
	if !strings.Contains(callErr.Error(), "builtin__think cannot be called: its server builtin is disabled") {
		t.Fatalf("a call while builtin is disabled: %v", callErr)
	}
	if _, err := srv.Registry.SetEnabled(ctx, audit.System, sv.ID, true); err != nil {
		t.Fatalf("enabling the built-in server: %v", err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		res, err := think()
		return err == nil && !res.IsError && router.TextOf(res.Content) == "again"
	}, "think running again once builtin is enabled")
	if _, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "other", Type: registry.TypeBuiltin}); err == nil {
		t.Fatal("a second built-in server was created")
	}
	out, err := srv.Registry.Export(ctx)
	if err != nil || strings.Contains(string(out), "builtin") {
		t.Fatalf("the export carries the built-in server: %v\n%s", err, out)
	}
}

// A consolidated tool's schema asks for its operation and, once chosen, for that
// operation's own required parameters; a conversation id that is not a plain name
// gets a workspace named by its hash, inside the root.
func TestSchemaAndWorkspace(t *testing.T) {
	t.Parallel()
	b, err := builtin.New(&builtin.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(builtin.Tool{Name: "demo", Operations: []builtin.Operation{
		{Name: "a", Properties: map[string]any{"x": map[string]any{"type": "string"}}, Required: []string{"x"}},
		{Name: "b"},
	}})
	cs := connect(t, b)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 {
		t.Fatal(err, res)
	}
	s, _ := json.Marshal(res.Tools[0].InputSchema)
	for _, want := range []string{`"enum":["a","b"]`, `"then":{"properties":{"x":{}},"required":["x"]}`, `"required":["operation"]`} {
		if !strings.Contains(string(s), want) {
			t.Fatalf("schema %s lacks %s", s, want)
		}
	}
	for _, conv := range []string{"../../etc", "/abs", ".", "..", strings.Repeat("x", 300), "a/b", "ok-1"} {
		dir, err := b.Workspace(conv)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(dir) != b.Root() {
			t.Fatalf("the workspace of %q is %s, not directly under the root", conv, dir)
		}
	}
	// A link planted in a workspace's place is refused, not followed.
	if err := os.Symlink(t.TempDir(), filepath.Join(b.Root(), "planted")); err != nil {
		t.Fatal(err)
	}
	if dir, err := b.Workspace("planted"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("a workspace that is a symbolic link: got %q, %v; want it refused", dir, err)
	}
}

func connect(t testing.TB, b *builtin.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := b.MCP().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// The built-in server's pages offer no edit or delete, and its edit form is refused.
func TestBuiltinServerPages(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	sv, err := srv.Registry.GetServerByName(context.Background(), registry.BuiltinName)
	if err != nil {
		t.Fatal(err)
	}
	c := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.Get(t, c, "/servers/"+sv.ID)
	body := readAll(t, res)
	if res.StatusCode != 200 || strings.Contains(body, `data-testid="edit-server"`) || strings.Contains(body, `data-testid="delete-server"`) ||
		!strings.Contains(body, `data-testid="builtin-note"`) {
		t.Fatalf("the built-in server's page (%d) offers edit or delete, or lacks the note", res.StatusCode)
	}
	if list := readAll(t, srv.Get(t, c, "/servers")); !strings.Contains(list, `data-testid="first-server"`) {
		t.Fatal("with only the built-in server the servers page does not invite to add one")
	}
	if res := srv.Get(t, c, "/servers/"+sv.ID+"/edit"); res.StatusCode != 403 {
		t.Fatalf("the built-in server's edit form: %d, want 403", res.StatusCode)
	}
	if res := srv.PostForm(t, c, "/servers/"+sv.ID+"/delete", nil); res.StatusCode != 403 {
		t.Fatalf("deleting the built-in server from the page: %d, want 403", res.StatusCode)
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
