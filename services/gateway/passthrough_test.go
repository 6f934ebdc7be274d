package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/gateway"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// listAll follows a list's cursors through the gateway.
func listAll[T any](t *testing.T, seq func(yield func(*T, error) bool)) []*T {
	t.Helper()
	var out []*T
	for it, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

func uris(rs []*mcp.Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.URI)
	}
	return out
}

func promptNames(ps []*mcp.Prompt) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// expand fills a template the gateway listed, as a client would.
func expand(t *testing.T, tmpl, name, value string) string {
	t.Helper()
	tp, err := uritemplate.New(tmpl)
	if err != nil {
		t.Fatalf("%q is not a valid URI template: %v", tmpl, err)
	}
	vals := uritemplate.Values{}
	vals.Set(name, uritemplate.String(value))
	out, err := tp.Expand(vals)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readText(t *testing.T, cs *mcp.ClientSession, uri string) (string, *mcp.ReadResourceResult) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) == 0 {
		t.Fatalf("read %s: no contents", uri)
	}
	return res.Contents[0].Text, res
}

func promptText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]string) (string, *mcp.GetPromptResult) {
	t.Helper()
	res, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	if len(res.Messages) == 0 {
		t.Fatalf("get %s: no messages", name)
	}
	tc, _ := res.Messages[0].Content.(*mcp.TextContent)
	if tc == nil {
		t.Fatalf("get %s: the first message is %#v, not text", name, res.Messages[0].Content)
	}
	return tc.Text, res
}

// The resources and prompts of the in-repo server and of the reference server pass
// through the gateway, namespaced per server, merged by server and item across pages;
// a templated URI the client expands reaches the upstream exactly; a user reaches only
// the servers whose tools they may use, and a read or get elsewhere is refused and
// audited; every read and get is audited as the token's user. In both protocol eras.
func TestResourcesAndPromptsThroughGateway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	mt := srv.LiveServer(t, "mt", true, "echo")
	for i := range 150 { // more than a page, with the reference server's
		uri := fmt.Sprintf("test://gen/%03d", i)
		mt.Server().MCP().AddResource(&mcp.Resource{URI: uri, Name: fmt.Sprintf("gen-%03d", i)},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "generated"}}}, nil
			})
	}
	srv.LiveServer(t, "other", true, "echo")
	cmd, args := everything.StdioCommand(t)
	srv.RegisterServer(t, registry.Spec{Name: "everything", Type: registry.TypeStdio, Command: cmd, Args: args,
		Enabled: true, Trusted: true}, "echo")
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	gina := srv.CreateUser(t, "gina", auth.RoleGuest, password)
	audrey := srv.CreateUser(t, "audrey", auth.RoleAuditor, password) // server.view, but no tool.use
	no, yes := false, true
	if err := srv.Tools.SetPermission(ctx, audit.System, srv.ToolID(t, "other__echo"), "tina", &no); err != nil {
		t.Fatal(err)
	}
	if err := srv.Tools.SetPermission(ctx, audit.System, srv.ToolID(t, "mt__echo"), "gina", &yes); err != nil {
		t.Fatal(err)
	}
	tinaToken, ginaToken, audreyToken := srv.Token(t, "tina"), srv.Token(t, "gina"), srv.Token(t, "audrey")

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := mustConnect(t, srv, tinaToken, era)
			if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || caps.Prompts == nil {
				t.Fatalf("capabilities: %+v, want resources and prompts", caps)
			}

			// Resources: everything's, then mt's, each by URI, over pages of 100.
			first, err := cs.ListResources(ctx, nil)
			if err != nil || len(first.Resources) != 100 || first.NextCursor == "" {
				t.Fatalf("the first page: %d resources, cursor %q, %v; want 100 and a cursor", len(first.Resources), first.NextCursor, err)
			}
			if _, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "bogus"}); err == nil {
				t.Fatal("a bogus cursor was taken")
			}
			all := listAll(t, cs.Resources(ctx, nil))
			got := uris(all)
			var ev, mts []string
			for _, u := range got {
				switch {
				case strings.HasPrefix(u, "toolwarden://everything/demo://"):
					ev = append(ev, u)
				case strings.HasPrefix(u, "toolwarden://mt/test://"):
					mts = append(mts, u)
				default:
					t.Fatalf("a resource tina may not reach, or not namespaced: %q", u)
				}
			}
			if len(ev) == 0 || len(mts) != 151 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("tina's resources: %d of everything, %d of mt (want 151), sorted %v: %v", len(ev), len(mts), slices.IsSorted(got), got)
			}
			byURI := map[string]*mcp.Resource{}
			for _, r := range all {
				byURI[r.URI] = r
			}
			if r := byURI["toolwarden://mt/test://readme"]; r == nil || r.Name != "mt__readme" || r.Title != "Read me" || r.MIMEType != "text/plain" {
				t.Fatalf("mt's readme as listed: %+v", r)
			}

			text, res := readText(t, cs, "toolwarden://mt/test://readme")
			if text != "This is the Toolwarden MCP test server.\n" || res.Contents[0].URI != "toolwarden://mt/test://readme" {
				t.Fatalf("read readme: %q at %q", text, res.Contents[0].URI)
			}
			if text, _ := readText(t, cs, ev[0]); text == "" {
				t.Fatalf("read %s: empty", ev[0])
			}

			// Templates stay templates; what the client expands reaches the upstream
			// byte for byte.
			var tmpls []string
			for _, rt := range listAll(t, cs.ResourceTemplates(ctx, nil)) {
				tmpls = append(tmpls, rt.URITemplate)
			}
			for _, want := range []string{"toolwarden://mt/test://notes/{name}", "toolwarden://everything/demo://resource/dynamic/text/{resourceId}",
				"toolwarden://everything/demo://resource/dynamic/blob/{resourceId}"} {
				if !slices.Contains(tmpls, want) {
					t.Fatalf("templates %v lack %s", tmpls, want)
				}
			}
			note := expand(t, "toolwarden://mt/test://notes/{name}", "name", "a b/"+era)
			text, res = readText(t, cs, note)
			if want := "Note at test://notes/a%20b%2F" + era; text != want || res.Contents[0].URI != note {
				t.Fatalf("read %s: %q at %q, want %q at the URI read", note, text, res.Contents[0].URI, want)
			}
			if text, _ := readText(t, cs, expand(t, "toolwarden://everything/demo://resource/dynamic/text/{resourceId}", "resourceId", "7")); !strings.Contains(text, "Resource 7") {
				t.Fatalf("everything's text resource 7: %q", text)
			}
			_, res = readText(t, cs, expand(t, "toolwarden://everything/demo://resource/dynamic/blob/{resourceId}", "resourceId", "3"))
			if len(res.Contents[0].Blob) == 0 || !strings.Contains(string(res.Contents[0].Blob), "Resource 3") {
				t.Fatalf("everything's blob resource 3: %+v", res.Contents[0])
			}

			// Prompts, by server then name, with their arguments.
			prompts := listAll(t, cs.Prompts(ctx, nil))
			pnames := promptNames(prompts)
			for _, want := range []string{"everything__args-prompt", "everything__resource-prompt", "everything__simple-prompt", "mt__greet"} {
				if !slices.Contains(pnames, want) {
					t.Fatalf("prompts %v lack %s", pnames, want)
				}
			}
			if !slices.IsSorted(pnames) || slices.ContainsFunc(pnames, func(n string) bool { return strings.HasPrefix(n, "other__") }) {
				t.Fatalf("tina's prompts: %v", pnames)
			}
			greet := prompts[slices.Index(pnames, "mt__greet")]
			if len(greet.Arguments) != 1 || greet.Arguments[0].Name != "name" || !greet.Arguments[0].Required {
				t.Fatalf("mt__greet's arguments: %+v", greet.Arguments)
			}
			if text, _ := promptText(t, cs, "mt__greet", map[string]string{"name": "Ada " + era}); text != "Hello, Ada "+era+"!" {
				t.Fatalf("mt__greet: %q", text)
			}
			if text, _ := promptText(t, cs, "everything__args-prompt", map[string]string{"city": "Paris", "state": "TX"}); !strings.Contains(text, "Paris, TX") {
				t.Fatalf("everything__args-prompt: %q", text)
			}
			_, pr := promptText(t, cs, "everything__resource-prompt", map[string]string{"resourceType": "Text", "resourceId": "2"})
			emb, _ := pr.Messages[len(pr.Messages)-1].Content.(*mcp.EmbeddedResource)
			if emb == nil || emb.Resource == nil || emb.Resource.URI != "toolwarden://everything/demo://resource/dynamic/text/2" {
				t.Fatalf("everything__resource-prompt's embedded resource: %#v", pr.Messages[len(pr.Messages)-1].Content)
			}
			if text, _ := readText(t, cs, emb.Resource.URI); !strings.Contains(text, "Resource 2") {
				t.Fatalf("the embedded resource read back: %q", text)
			}

			// Refused: a server tina may use none of the tools of, names of nothing, an
			// upstream's own error.
			// A server she may use none of the tools of is answered as one that does not
			// exist (its name would tell a guesser it does).
			answers := map[string]string{}
			for _, uri := range []string{"toolwarden://other/test://readme", "toolwarden://nope/test://readme", "test://readme",
				"toolwarden://mt/test://nope"} {
				res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err == nil {
					t.Fatalf("read %s: got %+v, want an error", uri, res)
				}
				answers[uri] = strings.ReplaceAll(err.Error(), uri, "URI")
			}
			if answers["toolwarden://other/test://readme"] != answers["toolwarden://nope/test://readme"] {
				t.Errorf("reading from a server she may not use: %q; from none: %q", answers["toolwarden://other/test://readme"],
					answers["toolwarden://nope/test://readme"])
			}
			for _, name := range []string{"other__greet", "nope__greet", "greet"} {
				res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"name": "x"}})
				if err == nil {
					t.Fatalf("get %s: got %+v, want an error", name, res)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("unknown prompt %q", name)) {
					t.Errorf("get %s: %v, want the answer an unknown prompt gets", name, err)
				}
			}

			// A guest allowed one tool of mt reaches mt only; an auditor reaches nothing.
			guest := mustConnect(t, srv, ginaToken, era)
			for _, u := range uris(listAll(t, guest.Resources(ctx, nil))) {
				if !strings.HasPrefix(u, "toolwarden://mt/") {
					t.Fatalf("gina reaches %s", u)
				}
			}
			if got := promptNames(listAll(t, guest.Prompts(ctx, nil))); !slices.Equal(got, []string{"mt__greet"}) {
				t.Fatalf("gina's prompts: %v", got)
			}
			readText(t, guest, "toolwarden://mt/test://readme")
			auditor := mustConnect(t, srv, audreyToken, era)
			if got := listAll(t, auditor.Resources(ctx, nil)); len(got) != 0 {
				t.Fatalf("audrey reaches %v", uris(got))
			}
			if got := listAll(t, auditor.Prompts(ctx, nil)); len(got) != 0 {
				t.Fatalf("audrey reaches %v", promptNames(got))
			}
			if _, err := auditor.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwarden://mt/test://readme"}); err == nil {
				t.Fatal("audrey read mt's readme")
			}

			// Audited as the token's user, in the session's conversation.
			row := func(who auth.User, action, server, result, key, value string) int {
				return srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND actor_kind = 'token' AND actor_id = $2
					AND target_type = 'server' AND target_name = $3 AND result = $4 AND payload->>$5 = $6
					AND payload->>'source' = 'mcp' AND coalesce(payload->>'conversation_id', '') = $7`,
					action, who.ID, server, result, key, value, conversationID(cs, who.ID == tina.ID))
			}
			for _, c := range []struct {
				who                                auth.User
				action, server, result, key, value string
			}{
				{tina, "resource.read", "mt", audit.ResultSuccess, "uri", "test://notes/a%20b%2F" + era},
				{tina, "resource.read", "everything", audit.ResultSuccess, "uri", "demo://resource/dynamic/text/7"},
				{tina, "prompt.get", "mt", audit.ResultSuccess, "prompt", "greet"},
				{tina, "resource.read", "other", audit.ResultDenied, "uri", "test://readme"},
				{tina, "prompt.get", "other", audit.ResultDenied, "prompt", "greet"},
				{tina, "resource.read", "mt", audit.ResultFailure, "uri", "test://nope"},
			} {
				if n := row(c.who, c.action, c.server, c.result, c.key, c.value); n != 1 {
					t.Errorf("audit rows %s %s %s %s=%s: %d, want 1", c.action, c.server, c.result, c.key, c.value, n)
				}
			}
			for _, who := range []auth.User{gina, audrey} {
				want := audit.ResultSuccess
				if who.ID == audrey.ID {
					want = audit.ResultDenied
				}
				if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'resource.read' AND actor_id = $1
					AND target_name = 'mt' AND result = $2 AND payload->>'uri' = 'test://readme'`, who.ID, want); n < 1 {
					t.Errorf("%s's read of mt's readme is not audited as %s", who.Username, want)
				}
			}
		})
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE target_name = 'nope'`); n != 0 {
		t.Fatalf("a name of no server was audited (%d rows)", n)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'prompt.get' AND actor_id = $1 AND target_name = 'mt'
		AND (payload->'arguments')::jsonb = '["name"]'::jsonb AND target_id <> ''`, tina.ID); n != len(eras) {
		t.Fatalf("prompt.get rows with the arguments' names: %d, want %d", n, len(eras))
	}
}

// conversationID is the conversation tina's session records: its session id (none on
// the stateless protocol); other users' sessions are not checked for it.
func conversationID(cs *mcp.ClientSession, mine bool) string {
	if !mine {
		return ""
	}
	return cs.ID()
}

// Reads and gets spend the caller's call rate, and a read over it is refused without
// an audit row.
func TestPassthroughRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Router: &router.Options{UserRate: 1}})
	srv.LiveServer(t, "mt", true, "echo")
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	cs := mustConnect(t, srv, srv.Token(t, "tina"), eras[0])
	readText(t, cs, "toolwarden://mt/test://readme")
	_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwarden://mt/test://readme"})
	if err == nil || !strings.Contains(err.Error(), "rate limited") {
		t.Fatalf("a second read within the minute: %v, want rate limited", err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mt__greet"}); err == nil || !strings.Contains(err.Error(), "rate limited") {
		t.Fatalf("a get within the minute: %v, want rate limited", err)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE actor_id = $1 AND action IN ('resource.read', 'prompt.get')`, tina.ID); n != 1 {
		t.Fatalf("audit rows: %d, want the one read that went through", n)
	}
	// Lists (a page of resources asks every reachable server) and the gateway's own
	// tools spend the same budget.
	if _, err := cs.ListResources(ctx, nil); err == nil || !strings.Contains(err.Error(), "rate limited") {
		t.Fatalf("a resource list within the minute: %v, want rate limited", err)
	}
	if _, err := cs.ListTools(ctx, nil); err == nil || !strings.Contains(err.Error(), "rate limited") {
		t.Fatalf("a tool list within the minute: %v, want rate limited", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.PendingTool})
	if err != nil || !res.IsError || !strings.Contains(text(res), "Rate limited") {
		t.Fatalf("list_pending within the minute: %v %+v, want a rate-limited result", err, res)
	}
}

// What an upstream says through the gateway hides the secret values its session runs
// with (its headers here), as tool results do: in a resource's text, in a blob that is
// UTF-8 text, in the URI it is listed under, and in a prompt's messages; a blob that is
// not text is passed on as it came.
func TestPassthroughMasksSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	const secret = "sk-live-0123456789abcdef"
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	up := hs.Server().MCP()
	up.AddResource(&mcp.Resource{URI: "test://leak?key=" + secret, Name: "leak", Description: "keyed by " + secret},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "the key is " + secret}}}, nil
		})
	binary := append([]byte{0xff, 0xfe, 0x00}, secret...) // not UTF-8: passed on as it is
	up.AddResource(&mcp.Resource{URI: "test://blobs", Name: "blobs"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: "test://blobs/text", MIMEType: "application/octet-stream", Blob: []byte("key=" + secret + "\n")},
				{URI: "test://blobs/binary", MIMEType: "application/octet-stream", Blob: binary}}}, nil
		})
	up.AddPrompt(&mcp.Prompt{Name: "leak"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "use " + secret}},
			{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://blobs/text",
				Blob: []byte("key=" + secret)}}}}}, nil
	})
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true,
		Headers: map[string]string{"X-Api-Key": secret}}, "echo")
	cs := mustConnect(t, srv, srv.Token(t, "admin"), eras[0])
	for _, r := range listAll(t, cs.Resources(ctx, nil)) {
		if strings.Contains(r.URI+r.Description, secret) {
			t.Fatalf("a listed resource shows the secret: %+v", r)
		}
	}
	// The upstream's own URI still reads; what comes back is masked.
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwarden://mt/test://leak?key=" + secret})
	if err != nil || len(res.Contents) != 1 || strings.Contains(res.Contents[0].Text+res.Contents[0].URI, secret) ||
		!strings.HasPrefix(res.Contents[0].Text, "the key is ") {
		t.Fatalf("read: %+v, %v; want the text with the secret masked", res, err)
	}
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwarden://mt/test://blobs"})
	if err != nil || len(res.Contents) != 2 {
		t.Fatalf("read the blobs: %+v, %v", res, err)
	}
	if got := string(res.Contents[0].Blob); got != "key=***\n" {
		t.Fatalf("a text blob: %q, want the secret masked", got)
	}
	if !bytes.Equal(res.Contents[1].Blob, binary) {
		t.Fatalf("a binary blob: %q, want it as it came", res.Contents[1].Blob)
	}
	text, pr := promptText(t, cs, "mt__leak", nil)
	if strings.Contains(text, secret) || !strings.HasPrefix(text, "use ") {
		t.Fatalf("prompt: %q, want the secret masked", text)
	}
	if emb, _ := pr.Messages[1].Content.(*mcp.EmbeddedResource); emb == nil || emb.Resource == nil || string(emb.Resource.Blob) != "key=***" {
		t.Fatalf("the prompt's embedded blob: %#v, want the secret masked", pr.Messages[1].Content)
	}
}

// An upstream's list that fails is left out and logged, and the log hides the secret
// values its session runs with as the answers do: the upstream's error may quote them.
func TestPassthroughListErrorLoggedMasked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	const secret = "sk-live-fedcba9876543210"
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "resources/list", "resources/templates/list", "prompts/list":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the key " + secret + " is not valid here"}
			}
			return next(ctx, method, req)
		}
	})
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true,
		Headers: map[string]string{"X-Api-Key": secret}}, "echo")
	cs := mustConnect(t, srv, srv.Token(t, "admin"), eras[0])
	if got := listAll(t, cs.Resources(ctx, nil)); len(got) != 0 {
		t.Fatalf("resources of a server that cannot list them: %v", uris(got))
	}
	if got := listAll(t, cs.ResourceTemplates(ctx, nil)); len(got) != 0 {
		t.Fatalf("templates of a server that cannot list them: %d", len(got))
	}
	if got := listAll(t, cs.Prompts(ctx, nil)); len(got) != 0 {
		t.Fatalf("prompts of a server that cannot list them: %v", promptNames(got))
	}
	logs := srv.Logs.String()
	if n := strings.Count(logs, "an upstream's list left out"); n != 3 || !strings.Contains(logs, "is not valid here") {
		t.Fatalf("%d list failures logged, want 3 with the upstream's reason:\n%s", n, logs)
	}
	if strings.Contains(logs, secret) {
		t.Fatalf("the log shows the server's secret:\n%s", logs)
	}
}

// An upstream's transport refusing a read (a proxy's 413, or a 503) is passed on with
// its status, not as a bare "rejected by transport".
func TestPassthroughRefusalSaysItsStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	target, err := url.Parse(hs.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		for marker, status := range map[string]int{"readme": http.StatusRequestEntityTooLarge, "greet": http.StatusServiceUnavailable} {
			if bytes.Contains(body, []byte(marker)) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, "<html>refused</html>")
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() })
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: front.URL + target.Path, Enabled: true, Trusted: true}, "echo")
	cs := mustConnect(t, srv, srv.Token(t, "admin"), eras[0])
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwarden://mt/test://readme"})
	if err == nil || !strings.Contains(err.Error(), "Request Entity Too Large") {
		t.Fatalf("a read refused with 413: %v, want the status said", err)
	}
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mt__greet"})
	if err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Fatalf("a get refused with 503: %v, want the status said", err)
	}
}
