package web_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

type asstReply struct {
	ConversationID string `json:"conversation_id"`
	Reply          string `json:"reply"`
	Question       int64  `json:"question"`
	Choices        []struct {
		Label, Target string
	} `json:"choices"`
	Actions []struct {
		Kind       string `json:"kind"`
		TargetType string `json:"target_type"`
		TargetID   string `json:"target_id"`
		Name       string `json:"name"`
		OK         bool   `json:"ok"`
		Error      string `json:"error"`
	} `json:"actions"`
}

// asstSay sends one message and checks the reply holds want.
func asstSay(t *testing.T, api webtest.API, conv *string, msg, want string) asstReply {
	t.Helper()
	var r asstReply
	api.JSON(http.MethodPost, "/api/v1/assistant/messages", map[string]any{"conversation_id": *conv, "message": msg}, http.StatusOK, &r)
	*conv = r.ConversationID
	if !strings.Contains(r.Reply, want) {
		t.Fatalf("%q: reply %q, want it to say %q (choices %+v, actions %+v)", msg, r.Reply, want, r.Choices, r.Actions)
	}
	return r
}

// The assistant over the API, against a real MCP server: adding a server (a bad URL
// first), discovering and enabling its tools, context ("the first one"), numbered
// choices when a name fits two tools, a yes before removing, permissions, tokens, and
// preferences applied at discovery. Every act is audited with the sentence.
func TestAssistantAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "wx"})
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	ctx := t.Context()
	conv := ""

	r := asstSay(t, admin, &conv, "add a server at invalid-url", "doesn't appear to be valid")
	if conv == "" || len(r.Actions) != 0 {
		t.Fatalf("bad URL: %+v", r)
	}
	asstSay(t, admin, &conv, "Add a new MCP server at "+up.URL()+" called wx", "I've added the wx MCP server")
	r = asstSay(t, admin, &conv, "yes", "I found")
	if len(r.Actions) != 1 || r.Actions[0].TargetType != "server" {
		t.Fatalf("discovery: %+v", r)
	}
	// Tools are validated after discovery; enabling needs them validated.
	webtest.WaitFor(t, 10*time.Second, func() bool {
		var n int
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
			WHERE s.name = 'wx' AND t.status = 'validated'`).Scan(&n)
		return n > 0
	}, "the tools were never validated")
	asstSay(t, admin, &conv, "Turn on the echo tool", "enabled")
	var status, said string
	if err := srv.Pool.QueryRow(ctx, `SELECT status FROM mcp_tools WHERE name = 'echo'`).Scan(&status); err != nil || status != "enabled" {
		t.Fatalf("echo is %q (%v), want enabled", status, err)
	}
	if err := srv.Pool.QueryRow(ctx, `SELECT payload->>'said' FROM audit_log WHERE action = 'tool.enable' ORDER BY id DESC LIMIT 1`).Scan(&said); err != nil || said != "Turn on the echo tool" {
		t.Fatalf("the audit entry says %q (%v), want the sentence", said, err)
	}

	// Test, configure, tag, file and rate through the same services as the pages.
	var echoID string
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM mcp_tools WHERE name = 'echo'`).Scan(&echoID); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.App.Tools.SaveTestCase(ctx, audit.System, echoID, tools.TestCase{Name: "says hi",
		Arguments: []byte(`{"message":"hi"}`), Expect: tools.ExpectSuccess, ExpectText: "Echo: hi"}); err != nil {
		t.Fatal(err)
	}
	asstSay(t, admin, &conv, "test if the echo tool is working", "needs your confirmation")
	asstSay(t, admin, &conv, "yes", "1 of 1 test cases passed")
	asstSay(t, admin, &conv, "configure add with a=5", "I've updated")
	var mode, def string
	if err := srv.Pool.QueryRow(ctx, `SELECT configuration->'params'->'a'->>'mode', configuration->'params'->'a'->>'value'
		FROM mcp_tools WHERE name = 'add'`).Scan(&mode, &def); err != nil || mode != "default" || def != "5" {
		t.Fatalf("add's a is %q %q (%v), want the default 5", mode, def, err)
	}
	asstSay(t, admin, &conv, "tag echo with beta", "tagged")
	admin.JSON(http.MethodPost, "/api/v1/categories", map[string]any{"name": "chatter"}, http.StatusCreated, nil)
	asstSay(t, admin, &conv, "put echo in the chatter category", "in the chatter category")
	asstSay(t, admin, &conv, "put echo in the nonsense category", "there is no category")
	asstSay(t, admin, &conv, "make echo high risk", "high risk")
	var tool struct {
		Tags         []string `json:"tags"`
		Category     *string  `json:"category"`
		RiskOverride *string  `json:"risk_override"`
	}
	admin.JSON(http.MethodGet, "/api/v1/tools/"+echoID, nil, http.StatusOK, &tool)
	if !slices.Contains(tool.Tags, "beta") || tool.Category == nil || *tool.Category != "chatter" || tool.RiskOverride == nil || *tool.RiskOverride != "high" {
		t.Fatalf("echo after the assistant: %+v", tool)
	}
	asstSay(t, admin, &conv, "make echo low risk", "low risk")
	// A server that does not answer is not added, and the reply says why.
	asstSay(t, admin, &conv, "add a new MCP server at http://127.0.0.1:1/mcp called nowhere", "couldn't connect")

	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE name = 'nowhere'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("an unreachable server was added: %d", n)
	}
	// Context: a list, then "the first one".
	r = asstSay(t, admin, &conv, "show me all tools", "Here are the")
	if len(r.Choices) < 2 {
		t.Fatalf("a list without choices: %+v", r)
	}
	first := strings.SplitN(strings.TrimPrefix(r.Choices[0].Label, "1. "), " ", 2)[0]
	asstSay(t, admin, &conv, "tell me about the first one", first+" on wx")

	// Two servers offer echo: numbered choices, nothing happens until the pick.
	srv.LiveServer(t, "lo", true)
	webtest.WaitFor(t, 10*time.Second, func() bool {
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM mcp_tools WHERE name = 'echo'`).Scan(&n)
		return n == 2
	}, "lo's echo was never discovered")
	r = asstSay(t, admin, &conv, "disable echo", "Did you mean")
	if len(r.Choices) != 2 {
		t.Fatalf("choices: %+v", r.Choices)
	}
	if err := srv.Pool.QueryRow(ctx, `SELECT status FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE t.name = 'echo' AND s.name = 'wx'`).Scan(&status); err != nil || status != "enabled" {
		t.Fatalf("echo changed before the pick: %q", status)
	}
	asstSay(t, admin, &conv, "the one on wx", "disabled")
	if err := srv.Pool.QueryRow(ctx, `SELECT status FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE t.name = 'echo' AND s.name = 'wx'`).Scan(&status); err != nil || status != "disabled" {
		t.Fatalf("wx echo is %q after the pick, want disabled", status)
	}

	// Removing a server asks first; "no" keeps it.
	asstSay(t, admin, &conv, "remove the lo server", "cannot be undone")
	asstSay(t, admin, &conv, "no", "nothing was changed")
	asstSay(t, admin, &conv, "delete the lo server", "cannot be undone")
	asstSay(t, admin, &conv, "yes", "removed the server")
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE name = 'lo'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("lo still there: %d", n)
	}

	// A preference, applied when discovery validates a new tool.
	asstSay(t, admin, &conv, "always enable new forecast tools", "automatically enable new forecast tools")
	up.Server().SetTool(mcptest.ToolSpec{Name: "get_forecast", Description: "The weather forecast for a city",
		InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string","description":"The city"}},"required":["city"]}`)})
	asstSay(t, admin, &conv, "discover new tools on the wx server", "I found")
	webtest.WaitFor(t, 10*time.Second, func() bool {
		_ = srv.Pool.QueryRow(ctx, `SELECT status FROM mcp_tools WHERE name = 'get_forecast'`).Scan(&status)
		return status == "enabled"
	}, "the preference did not enable get_forecast")
	asstSay(t, admin, &conv, "what are my preferences", "forecast")

	// Someone who may not: refused, saying which permission, audited as denied.
	srv.CreateUser(t, "tina", auth.RoleToolUser, "tina-password-123")
	asstSay(t, admin, &conv, "let tina use get_forecast", "tina may now use")
	asstSay(t, admin, &conv, "stop tina from using get_forecast", "Say yes")
	asstSay(t, admin, &conv, "yes", "tina may no longer use")
	tina := webtest.API{T: t, Srv: srv, C: srv.Login(t, "tina", "tina-password-123")}
	tc := ""
	asstSay(t, tina, &tc, "disable get_forecast", "tool.enable")
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'assistant.refused' AND result = 'denied'
		AND payload->>'said' = 'disable get_forecast'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("refusal audited %d times (%v)", n, err)
	}
	// Another person's conversation id is their own: tina's history is not admin's.
	var hist int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM assistant_messages m JOIN users u ON u.id = m.user_id
		WHERE u.username = 'tina'`).Scan(&hist); err != nil || hist != 2 {
		t.Fatalf("tina's messages: %d", hist)
	}

	// An API token asks questions only.
	tok := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	k := ""
	asstSay(t, tok, &k, "list servers", "There is one MCP server")
	asstSay(t, tok, &k, "enable get_forecast", "only ask questions")

	// Bad input changes nothing.
	if e := admin.Error(http.MethodPost, "/api/v1/assistant/messages", map[string]any{"message": "  "}, 400, "invalid_input"); !strings.Contains(string(e.Error.Details)+e.Error.Message, "message") {
		t.Fatalf("empty message: %+v", e)
	}
	admin.Error(http.MethodPost, "/api/v1/assistant/messages", map[string]any{"conversation_id": "bad id!", "message": "hi"}, 400, "invalid_input")
}

// Without JavaScript the chat form posts and comes back to the page, which shows the
// conversation; a choice is a form of its own that sends its target.
func TestAssistantPageWithoutJS(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	send := func(conv, msg string) *goquery.Document {
		t.Helper()
		res := srv.PostForm(t, admin, "/assistant/messages", url.Values{"conversation_id": {conv}, "message": {msg}})
		_ = res.Body.Close()
		loc := res.Header.Get("Location")
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/assistant?c=") {
			t.Fatalf("after the post: %d to %q", res.StatusCode, loc)
		}
		return page(t, srv.Get(t, admin, loc))
	}
	doc := send("", "how do I add a server?")
	msgs := doc.Find(`[data-testid="assistant-msg-assistant"]`)
	if msgs.Length() != 1 || !strings.Contains(msgs.Text(), "guide you through adding a server") {
		t.Fatalf("the page shows %q", doc.Find(`[data-testid="assistant-log"]`).Text())
	}
	conv := doc.Find(`form[data-assistant-form] input[name=conversation_id]`).AttrOr("value", "")
	target := doc.Find(`[data-assistant-choice] input[name=message]`).First().AttrOr("value", "")
	if conv == "" || target != "yes" {
		t.Fatalf("conversation %q, first choice sends %q", conv, target)
	}
	label := strings.TrimSpace(doc.Find(`[data-testid="assistant-choice"]`).First().Text())
	doc = send(conv, target)
	if got := doc.Find(`[data-testid="assistant-msg-assistant"]`).Last().Text(); !strings.Contains(got, "what's the URL") {
		t.Fatalf("after the choice: %q", got)
	}
	// The person's side reads as the choice they clicked, not the target it sent.
	if got := strings.TrimSpace(doc.Find(`[data-testid="assistant-msg-person"]`).Last().Text()); label == target || got != label {
		t.Fatalf("the clicked choice shows as %q, want its label %q", got, label)
	}
	// The earlier reply keeps its choices to be read (a list of tools comes as choices),
	// disabled: they answer nothing now.
	old := doc.Find(`[data-testid="assistant-msg-assistant"]`).First().Find(`[data-testid="assistant-choice"]`)
	if old.Length() == 0 || old.Length() != old.Filter("[disabled]").Length() {
		t.Fatalf("the earlier reply shows %d choices, %d of them disabled; want them all shown, disabled", old.Length(), old.Filter("[disabled]").Length())
	}
	// The page without ?c= shows the latest conversation; ?new=1 a fresh one.
	if n := page(t, srv.Get(t, admin, "/assistant")).Find(`[data-testid="assistant-msg-person"]`).Length(); n != 2 {
		t.Fatalf("latest conversation: %d messages of the person", n)
	}
	if n := page(t, srv.Get(t, admin, "/assistant?new=1")).Find(`[data-testid="assistant-hello"]`).Length(); n != 1 {
		t.Fatal("a new conversation does not start empty")
	}
}

// Review findings over the API: a choice answers only the question it was shown for; a
// token leaves nothing for a person to confirm; secret values are refused and never kept.
func TestAssistantGuards(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "g1", true, "echo")
	srv.LiveServer(t, "g2", true, "echo")
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	ctx := t.Context()
	say := func(api webtest.API, conv *string, msg string, inReplyTo int64, want string) asstReply {
		t.Helper()
		var r asstReply
		api.JSON(http.MethodPost, "/api/v1/assistant/messages", map[string]any{"conversation_id": *conv, "message": msg,
			"in_reply_to": inReplyTo}, http.StatusOK, &r)
		*conv = r.ConversationID
		if !strings.Contains(r.Reply, want) {
			t.Fatalf("%q: reply %q, want %q", msg, r.Reply, want)
		}
		return r
	}
	enabled := func(server string) string {
		var st string
		if err := srv.Pool.QueryRow(ctx, `SELECT t.status FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
			WHERE t.name = 'echo' AND s.name = $1`, server).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	// An old Yes does not confirm a newer question.
	conv := ""
	q1 := say(admin, &conv, "remove the g1 server", 0, "cannot be undone")
	say(admin, &conv, "disable echo", 0, "Did you mean")
	say(admin, &conv, "yes", q1.Question, "no longer open")
	if n := srv.App.Count(t, `SELECT count(*) FROM mcp_servers WHERE name = 'g1'`); n != 1 {
		t.Fatal("a stale yes removed the server")
	}
	say(admin, &conv, "disable the echo tool on g2", 0, "disabled")
	if enabled("g2") != "disabled" || enabled("g1") != "enabled" {
		t.Fatalf("g1 %s, g2 %s", enabled("g1"), enabled("g2"))
	}

	// A token's question leaves nothing pending for the person, and its conversations
	// are not the person's.
	tok := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	tc := "shared"
	say(tok, &tc, "remove the g1 server", 0, "only ask questions")
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'assistant.refused' AND payload->>'said' = 'remove the g1 server'`); n != 1 {
		t.Fatalf("the token's refusal audited %d times", n)
	}
	pc := "shared"
	say(admin, &pc, "yes", 0, "haven't asked anything")
	say(tok, &tc, "I want to set up a new tool", 0, "")
	say(admin, &pc, "http://127.0.0.1:1/mcp", 0, "couldn't connect") // read afresh, not as the step of a set-up the token began
	// The attempt is on record, as a Test connection on the pages is.
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'server.test' AND payload->>'url' = 'http://127.0.0.1:1/mcp'`); n != 1 {
		t.Fatalf("the assistant's connection attempt audited %d times, want 1", n)
	}

	// A secret value is refused and not kept anywhere.
	const secret = "sk-live-9f8e7d6c5b4a3f2e1d0c9b8a"
	sc := ""
	say(admin, &sc, "configure echo on g1 with api_key="+secret, 0, "don't take secret values")
	if n := srv.App.Count(t, `SELECT count(*) FROM assistant_messages WHERE body LIKE '%`+secret+`%'`) +
		srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%`+secret+`%'`) +
		srv.App.Count(t, `SELECT count(*) FROM assistant_conversations WHERE state::text LIKE '%`+secret+`%'`); n != 0 {
		t.Fatalf("the secret was kept in %d places", n)
	}
	// A parameter whose stored value is kept encrypted (it looked like a credential)
	// takes no value in a conversation either, however plain the new one looks.
	g1echo := srv.ToolID(t, "g1__echo")
	if _, err := srv.Tools.Update(ctx, audit.System, g1echo, tools.Patch{Params: map[string]tools.ParamInput{
		"message": {Mode: tools.ModeFixed, Value: json.RawMessage(`"sk-live-0123456789abcdef0123"`)}}}); err != nil {
		t.Fatal(err)
	}
	const plain = "plainvalue4417"
	say(admin, &sc, "set message to "+plain+" for echo on g1", 0, "don't take secret values")
	if n := srv.App.Count(t, `SELECT count(*) FROM assistant_messages WHERE body LIKE '%`+plain+`%'`) +
		srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%`+plain+`%'`); n != 0 {
		t.Fatalf("the new secret value was kept in %d places", n)
	}
}

// "Test X" rates each saved case as the router will, not the tool as a whole:
// file_operations is high risk overall, yet its read case runs at once; a high case
// sends the person to the test panel, a medium one asks for a yes. A case that asks for
// anything stops the run before any case ran.
func TestAssistantTestsEachCaseAtItsLevel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	id := srv.App.Enable(t, "builtin__file_operations").ID
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	addCase := func(name, args string) {
		t.Helper()
		if _, err := srv.Tools.SaveTestCase(ctx, audit.System, id, tools.TestCase{Name: name, Arguments: json.RawMessage(args), Expect: tools.ExpectSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	ran := func() int {
		t.Helper()
		if err := srv.Router.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return srv.App.Count(t, `SELECT count(*) FROM tool_usage_logs WHERE tool_id = '`+id+`' AND error_code IS DISTINCT FROM 'approval_required'`)
	}
	conv := ""
	addCase("read", `{"operation":"read_file","filePath":"a.txt"}`)
	r := asstSay(t, admin, &conv, "test file_operations", "of 1 test cases passed")
	if len(r.Choices) != 0 || ran() != 1 {
		t.Fatalf("a low case: choices %+v, %d calls", r.Choices, ran())
	}

	// A write is high while the tool as a whole is; once it is low, a write is medium.
	addCase("write", `{"operation":"create_file","filePath":"a.txt","content":"x"}`)
	asstSay(t, admin, &conv, "test file_operations", "1 of the test cases of file_operations on builtin are high risk")
	if n := ran(); n != 1 {
		t.Fatalf("the read case ran although the write needs the phrase: %d calls", n)
	}
	srv.App.SetRisk(t, "builtin__file_operations", "low")
	asstSay(t, admin, &conv, "test file_operations", "1 of the 2 test cases of file_operations on builtin are medium risk, so running them needs your confirmation")
	if n := ran(); n != 1 {
		t.Fatalf("the read case ran before the yes: %d calls", n)
	}
	asstSay(t, admin, &conv, "yes", "of 2 test cases passed")
	if n := ran(); n != 3 {
		t.Fatalf("after the yes: %d calls, want 3", n)
	}

	addCase("delete", `{"operation":"delete_file","filePath":"a.txt"}`)
	asstSay(t, admin, &conv, "test file_operations", "1 of the test cases of file_operations on builtin are high risk: they run only from its test panel")
	if n := ran(); n != 3 {
		t.Fatalf("cases ran although one needs the phrase: %d calls", n)
	}
}

// With a language model configured, a sentence the rules cannot read goes to it, and a
// change it proposes waits for the person's yes; the act's audit entry says the model
// read it.
func TestAssistantModelAsksFirst(t *testing.T) {
	t.Parallel()
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"content": `{"intent":"disable_tool","tool":"echo","server":"m1"}`}}}})
	}))
	t.Cleanup(llm.Close)
	srv := webtest.Start(t, &webtest.Options{Executions: &executions.Options{Planner: planner.NewLLM(llm.URL, nil)}})
	srv.LiveServer(t, "m1", true, "echo")
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	conv := ""
	asstSay(t, admin, &conv, "that parrot thing, put it to sleep", "Shall I do that?")
	status := func() string {
		var st string
		if err := srv.Pool.QueryRow(t.Context(), `SELECT status FROM mcp_tools WHERE name = 'echo'`).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if status() != "enabled" {
		t.Fatal("the model's reading acted before the yes")
	}
	asstSay(t, admin, &conv, "yes", "disabled")
	if status() != "disabled" {
		t.Fatal("the yes did not act")
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.disable'
		AND payload->>'said' = 'that parrot thing, put it to sleep (read by the language model)'`); n != 1 {
		t.Fatalf("the act's audit entry: %d", n)
	}
}

// The assistant keeps the catalogue in memory between the events that change it: a
// change written behind the services' back (no event) is not seen, and any change made
// through them is, in the very next reply.
func TestAssistantCatalogueFollowsChanges(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "cat1", true, "echo")
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	ctx := t.Context()
	conv := ""
	echo := srv.ToolID(t, "cat1__echo")
	asstSay(t, admin, &conv, "tell me about the echo tool", "It is enabled")

	// Kept: a description changed behind the services' back is not seen...
	if _, err := srv.Pool.Exec(ctx, `UPDATE mcp_tools SET description = 'Repeats what it hears.' WHERE id = $1`, echo); err != nil {
		t.Fatal(err)
	}
	if r := asstSay(t, admin, &conv, "tell me about the echo tool", "It is enabled"); strings.Contains(r.Reply, "Repeats what it hears") {
		t.Fatalf("the catalogue was read again without an event: %q", r.Reply)
	}
	// ...until a change through a service clears it: a tag on the tool (tools topic),
	r := asstSay(t, admin, &conv, "tag the echo tool with parrots", "")
	if len(r.Actions) != 1 || !r.Actions[0].OK {
		t.Fatalf("tagging: %+v", r)
	}
	asstSay(t, admin, &conv, "tell me about the echo tool", "Repeats what it hears")
	asstSay(t, admin, &conv, "tell me about the echo tool", "Tags: parrots")
	// a state change made on the tools page's API,
	admin.JSON(http.MethodPost, "/api/v1/tools/"+echo+"/disable", nil, http.StatusOK, nil)
	asstSay(t, admin, &conv, "tell me about the echo tool", "It is disabled")
	// and a new server (servers topic).
	srv.LiveServer(t, "cat2", true)
	// Replies at the same time share what is kept, words included (the race detector
	// watches): one reply fills the copy first.
	asstSay(t, admin, &conv, "find tools that echo messages", "")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			body := strings.NewReader(`{"message": "find tools that echo messages"}`)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/assistant/messages", body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", srv.URL)
			res, err := admin.C.Do(req)
			if err == nil {
				if res.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", res.StatusCode)
				}
				res.Body.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("replies at the same time: %v", err)
	}
	r = asstSay(t, admin, &conv, "list servers", "MCP servers")
	if !slices.ContainsFunc(r.Choices, func(c struct{ Label, Target string }) bool { return strings.Contains(c.Label, "cat2") }) {
		t.Fatalf("list servers after cat2 was added: %+v", r.Choices)
	}
}

// A language model's reading that names a tool on two servers asks which one, and the
// pick is still the model's reading: the person says yes to it first, and the act's
// audit entry says the model read it.
func TestAssistantModelPickAsksFirst(t *testing.T) {
	t.Parallel()
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"content": `{"intent":"disable_tool","tool":"echo"}`}}}})
	}))
	t.Cleanup(llm.Close)
	srv := webtest.Start(t, &webtest.Options{Executions: &executions.Options{Planner: planner.NewLLM(llm.URL, nil)}})
	srv.LiveServer(t, "m1", true, "echo")
	srv.LiveServer(t, "m2", true, "echo")
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	conv := ""
	asstSay(t, admin, &conv, "that parrot thing, put it to sleep", "Did you mean")
	asstSay(t, admin, &conv, "1", "Shall I do that?")
	if n := srv.App.Count(t, `SELECT count(*) FROM mcp_tools WHERE name = 'echo' AND status = 'disabled'`); n != 0 {
		t.Fatal("the pick acted on the model's reading before the yes")
	}
	asstSay(t, admin, &conv, "yes", "disabled")
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.disable'
		AND payload->>'said' = 'that parrot thing, put it to sleep (read by the language model)'`); n != 1 {
		t.Fatalf("the act's audit entry: %d", n)
	}
}

// A secret parameter is refused whichever way the tool was named: "the first one" of a
// list, too, keeps the value out of the conversation, the audit log and the tool.
func TestAssistantSecretFromList(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "db"})
	up.Server().SetTool(mcptest.ToolSpec{Name: "unlock", Description: "Unlock the vault",
		InputSchema: []byte(`{"type":"object","properties":{"pin":{"type":"string","format":"password"}}}`)})
	srv.RegisterServer(t, registry.Spec{Name: "db", Type: registry.TypeStreamableHTTP, URL: up.URL(), Enabled: true, Trusted: true}, "unlock")
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	conv := ""
	r := asstSay(t, admin, &conv, "show me the tools on db", "Here are the")
	n := slices.IndexFunc(r.Choices, func(c struct{ Label, Target string }) bool { return strings.Contains(c.Label, "unlock") })
	if n < 0 {
		t.Fatalf("unlock is not listed: %+v", r.Choices)
	}
	const pin = "4921"
	asstSay(t, admin, &conv, fmt.Sprintf("configure number %d with pin=%s", n+1, pin), "don't take secret values")
	if n := srv.App.Count(t, `SELECT count(*) FROM assistant_messages WHERE body LIKE '%`+pin+`%'`) +
		srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%`+pin+`%'`) +
		srv.App.Count(t, `SELECT count(*) FROM assistant_conversations WHERE state::text LIKE '%`+pin+`%'`) +
		srv.App.Count(t, `SELECT count(*) FROM mcp_tools WHERE configuration::text LIKE '%`+pin+`%'`); n != 0 {
		t.Fatalf("the secret was kept in %d places", n)
	}
}

// Two tabs of one conversation: a yes or "the second one" typed in the tab the
// conversation moved on from (another tab asked something since) changes nothing and
// says why; the tab that saw the latest reply is answered. The typed form sends the
// last turn its tab showed, which each reply updates.
func TestAssistantTwoTabs(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "tab1", true)
	srv.LiveServer(t, "tab2", true)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	conv := ""
	send := func(msg, seen, want string) (string, *goquery.Document) {
		t.Helper()
		res := srv.PostFormHeaders(t, admin, "/assistant/messages", url.Values{"conversation_id": {conv}, "message": {msg}, "seen": {seen}},
			map[string]string{"HX-Request": "true"})
		if m := regexp.MustCompile(`"conversation_id":"([^"]+)"`).FindStringSubmatch(res.Header.Get("HX-Trigger")); m != nil {
			conv = m[1]
		}
		doc := page(t, res)
		if got := doc.Find(`[data-testid="assistant-msg-assistant"]`).Text(); !strings.Contains(got, want) {
			t.Fatalf("%q (seen %s): reply %q, want %q", msg, seen, got, want)
		}
		return doc.Find(`input[data-assistant-seen][hx-swap-oob]`).AttrOr("value", ""), doc
	}
	if v := page(t, srv.Get(t, admin, "/assistant?new=1")).Find(`form[data-assistant-form] input[name=seen]`).AttrOr("value", ""); v != "0" {
		t.Fatalf("a new conversation's form sends seen %q", v)
	}
	tabA, _ := send("show me all servers", "0", "MCP servers")
	tabB, _ := send("what's the status of the tab1 server?", tabA, "tab1 (")
	if tabA == "" || tabB == "" || tabA == tabB {
		t.Fatalf("turns %q then %q", tabA, tabB)
	}
	if _, doc := send("enable the second one", tabA, "went on in another window"); doc.Find(`input[data-assistant-seen]`).Length() != 0 {
		t.Fatal("a refused message moved its tab on")
	}
	send("yes", tabA, "went on in another window")
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE payload->>'said' = 'enable the second one'`); n != 0 {
		t.Fatalf("the stale tab's message acted: %d entries", n)
	}
	// Reloaded, tab A shows the latest turn; tab B was on it already.
	if v := page(t, srv.Get(t, admin, "/assistant?c="+conv)).Find(`form[data-assistant-form] input[name=seen]`).AttrOr("value", ""); v != tabB {
		t.Fatalf("the page's form sends seen %q, want %q", v, tabB)
	}
	send("enable the second one", tabB, "enabled the server")
}
