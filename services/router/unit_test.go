package router

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Retries only for what cannot change anything, and only when the server is trusted.
func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		annotations string
		trusted     bool
		want        bool
	}{
		{`{"readOnlyHint":true}`, true, true},
		{`{"readOnlyHint":true}`, false, false},
		{`{"idempotentHint":true,"destructiveHint":false}`, true, true},
		{`{"idempotentHint":true}`, true, false}, // destructive by default
		{`{"idempotentHint":true,"destructiveHint":true}`, true, false},
		{`{"destructiveHint":false}`, true, false},
		{`{}`, true, false},
		{`null`, true, false},
		{``, true, false},
	} {
		if got := retryable(json.RawMessage(tc.annotations), tc.trusted); got != tc.want {
			t.Errorf("%s trusted=%v: got %v, want %v", tc.annotations, tc.trusted, got, tc.want)
		}
	}
}

// Each MCP content kind becomes one normalized item.
func TestNormalize(t *testing.T) {
	t.Parallel()
	size := int64(42)
	png := []byte{0x89, 'P', 'N', 'G'}
	got := normalize([]mcp.Content{
		&mcp.TextContent{Text: "hello"},
		&mcp.ImageContent{Data: png, MIMEType: "image/png"},
		&mcp.AudioContent{Data: []byte("RIFF"), MIMEType: "audio/wav"},
		&mcp.ResourceLink{URI: "file:///a.txt", Name: "a.txt", Title: "A", Description: "a file", MIMEType: "text/plain", Size: &size},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://x", MIMEType: "text/plain", Text: "inside"}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://b", MIMEType: "application/gzip", Blob: []byte{1, 2}}},
	})
	want := []Content{
		{Type: "text", Text: "hello"},
		{Type: "image", Data: base64.StdEncoding.EncodeToString(png), MIMEType: "image/png"},
		{Type: "audio", Data: base64.StdEncoding.EncodeToString([]byte("RIFF")), MIMEType: "audio/wav"},
		{Type: "resource_link", URI: "file:///a.txt", Name: "a.txt", Title: "A", Description: "a file", MIMEType: "text/plain", Size: &size},
		{Type: "resource", Resource: &Resource{URI: "mem://x", MIMEType: "text/plain", Text: "inside"}},
		{Type: "resource", Resource: &Resource{URI: "mem://b", MIMEType: "application/gzip", Blob: "AQI="}},
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("got  %s\nwant %s", g, w)
	}
	if s := TextOf(got); s != "hello\ninside" {
		t.Fatalf("TextOf: got %q", s)
	}
}

// Structured content must match the output schema unless the result is an error.
func TestCheckOutput(t *testing.T) {
	t.Parallel()
	out, err := schema.CompileSchema(json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := &entry{t: tools.Target{Item: tools.Item{Row: tools.Row{Server: "s", Name: "add"}}}, output: out}
	for _, tc := range []struct {
		name       string
		isError    bool
		structured string
		ok         bool
	}{
		{"conforming", false, `{"sum":3}`, true},
		{"wrong type", false, `{"sum":"3"}`, false},
		{"missing", false, ``, false},
		{"null", false, `null`, false},
		{"error results are not checked", true, ``, true},
	} {
		err := checkOutput(e, tc.isError, json.RawMessage(tc.structured))
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && err.(*Error).Code != CodeUpstream {
			t.Errorf("%s: got code %s, want upstream_error", tc.name, err.(*Error).Code)
		}
	}
	if err := checkOutput(&entry{}, false, nil); err != nil {
		t.Errorf("no output schema: got %v", err)
	}
}

// Structured content too large to check against the output schema's patterns within
// the bound counts as not matching it, and says so.
func TestCheckOutputTooLarge(t *testing.T) {
	t.Parallel()
	out, err := schema.CompileSchema(json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","pattern":"^x(?:a|b){1000}$"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e := &entry{t: tools.Target{Item: tools.Item{Row: tools.Row{Server: "s", Name: "get"}}}, output: out}
	big, _ := json.Marshal(map[string]any{"other": strings.Repeat("z", 2_000_000)})
	err = checkOutput(e, false, big)
	var re *Error
	if !errors.As(err, &re) || re.Code != CodeUpstream || !strings.Contains(re.Message, "does not match its output schema: it is too large to check") {
		t.Fatalf("got %.300v, want upstream_error saying the content is too large to check", err)
	}
	if err := checkOutput(e, false, json.RawMessage(`{"other":"z"}`)); err != nil {
		t.Errorf("small content: %v", err)
	}
}

// take spends from every limiter or none, and says which one refused.
func TestTakeAllOrNothing(t *testing.T) {
	t.Parallel()
	user, tool := perMinute(60), perMinute(10) // bursts of 6 and 1
	if d, which := take(user, tool); d != 0 || which != -1 {
		t.Fatalf("first: got %s %d, want allowed", d, which)
	}
	d, which := take(user, tool)
	if which != 1 || d <= 0 {
		t.Fatalf("second: got %s %d, want the tool's limiter to refuse with a wait", d, which)
	}
	// The user's token was given back: five more calls fit in its burst.
	for i := range 5 {
		if d, which := take(user); which != -1 {
			t.Fatalf("user call %d: got %s %d, want allowed", i, d, which)
		}
	}
	if _, which := take(user); which != 0 {
		t.Fatalf("user burst spent: got %d, want refused by limiter 0", which)
	}
	if d, which := take(nil, nil); d != 0 || which != -1 {
		t.Fatal("no limiters must allow")
	}
}

// consent: risk levels, sources and who sends the approval (a token's form fields
// approve nothing: issue #17, finding 1).
func TestConsent(t *testing.T) {
	t.Parallel()
	mk := func(l risk.Level) *entry {
		return &entry{t: tools.Target{Item: tools.Item{Row: tools.Row{Server: "s", Name: "t"}}}, risk: risk.Decision{Level: l, Why: "because"}}
	}
	person := audit.Actor{Kind: audit.ActorUser, ID: "u1", Name: "alice"}
	token := audit.Actor{Kind: audit.ActorToken, ID: "u1", Name: "alice", TokenID: "t1"}
	for _, tc := range []struct {
		level  risk.Level
		source string
		actor  audit.Actor
		ap     Approval
		ok     bool
	}{
		{risk.Low, SourceAPI, token, Approval{}, true},
		{risk.Medium, SourceTestPanel, person, Approval{Confirmed: true}, true},
		{risk.Medium, SourceTestPanel, token, Approval{Confirmed: true}, false},
		{risk.Medium, SourceGateway, person, Approval{Confirmed: true}, false},
		{risk.High, SourceTestPanel, person, Approval{Phrase: "s__t"}, true},
		{risk.High, SourceTestPanel, token, Approval{Phrase: "s__t"}, false},
		{risk.High, SourceTestPanel, audit.Actor{Kind: audit.ActorAnonymous}, Approval{Phrase: "s__t"}, false},
		{risk.High, SourceTestPanel, person, Approval{Phrase: " s__t"}, false},
		{risk.High, SourceAPI, person, Approval{Phrase: "s__t"}, false},
		{risk.High, SourceAPI, person, Approval{Execution: "x"}, false}, // only executions carry execution approvals
		{risk.High, SourceExecution, token, Approval{Execution: "x"}, true},
	} {
		err := consent(mk(tc.level), Call{Source: tc.source, Actor: tc.actor, Approval: tc.ap})
		if (err == nil) != tc.ok {
			t.Errorf("%s from %s by %s with %+v: got %v, want ok=%v", tc.level, tc.source, tc.actor.Kind, tc.ap, err, tc.ok)
		}
	}
}

// Validation messages about configured secret values never quote them.
func TestHideSecrets(t *testing.T) {
	t.Parallel()
	err := hideSecrets(&verr.Error{Fields: []verr.Field{
		{Field: "/token", Message: "'sk-live-123' does not match pattern '^tok_'"},
		{Field: "/nested/token", Message: "fine to show"},
		{Field: "/query", Message: "'hello' is too short"},
	}}, map[string]bool{"token": true})
	ve := err.(*verr.Error)
	if strings.Contains(ve.Fields[0].Message, "sk-live") || ve.Fields[2].Message != "'hello' is too short" || ve.Fields[1].Message != "fine to show" {
		t.Fatalf("got %+v", ve.Fields)
	}
}

// A tool's limiter is one per tool id, however the tool is named, and follows rate changes.
func TestToolLimitersByID(t *testing.T) {
	t.Parallel()
	var l toolLimiters
	ten, twenty := 10, 20
	a := l.get("tool-1", &ten)
	if l.get("tool-1", &ten) != a {
		t.Fatal("the same tool got a second limiter")
	}
	if l.get("tool-1", &twenty) == a {
		t.Fatal("a changed rate kept the old limiter")
	}
	if l.get("tool-1", nil) != nil {
		t.Fatal("no rate must mean no limiter")
	}
}

// masks hide configured secret values in everything of a call that leaves the router:
// text, resources, structured content, error messages and progress.
func TestMasks(t *testing.T) {
	t.Parallel()
	const secret = "sk-configured-0123456789"
	ms := masks{secrets.Maskers{secrets.NewMasker(secret), nil}}
	res := &Result{Content: []Content{{Type: "text", Text: "key " + secret},
		{Type: "resource", Resource: &Resource{URI: "file:///" + secret, Text: secret}},
		{Type: "resource_link", URI: "x://" + secret, Name: secret, Title: secret, Description: secret}},
		StructuredContent: json.RawMessage(`{"nested":{"value":"` + secret + `"}}`)}
	ms.result(res)
	raw, _ := json.Marshal(res)
	if strings.Contains(string(raw), secret) {
		t.Errorf("result still shows the secret: %s", raw)
	}
	err := ms.err(errorOf(CodeUpstream, "server s failed the call: bad key "+secret))
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error still shows the secret: %v", err)
	}
	// An output that fails its schema is quoted in the fields' messages.
	err = ms.err(errorOf(CodeUpstream, "s__t returned structured content that does not match its output schema").
		with([]verr.Field{{Field: "/mode", Message: `value must be one of "a", "b"; got "` + secret + `"`, Kind: verr.KindValue}}))
	if raw, _ := json.Marshal(err.(*Error).Details); strings.Contains(string(raw), secret) {
		t.Errorf("error details still show the secret: %s", raw)
	}
	// A progress message is masked before it is cut: a secret across the cut leaves no
	// part of itself.
	long := strings.Repeat("a", maxProgressMessage-10) + secret
	if got := ms.progress(long); strings.Contains(got, secret[:8]) || len(got) > maxProgressMessage+len("…") {
		t.Errorf("progress cut across the secret: ends %q", got[len(got)-20:])
	}
	if got := ms.text("slept with " + secret); strings.Contains(got, secret) {
		t.Errorf("progress message still shows the secret: %q", got)
	}
	// A blob whose bytes are text (a configuration file as application/octet-stream) is
	// masked as text is; other bytes (an image) are left as they came.
	textBlob := base64.StdEncoding.EncodeToString([]byte("API_KEY=" + secret + "\n"))
	binBlob := base64.StdEncoding.EncodeToString(append([]byte{0xff, 0xfe}, secret...))
	res = &Result{Content: []Content{{Type: "resource", Resource: &Resource{URI: "file:///env", Blob: textBlob}},
		{Type: "resource", Resource: &Resource{URI: "file:///img", Blob: binBlob}}}}
	ms.result(res)
	if got, _ := base64.StdEncoding.DecodeString(res.Content[0].Resource.Blob); string(got) != "API_KEY=***\n" {
		t.Errorf("a text blob reads %q, want the secret masked", got)
	}
	if res.Content[1].Resource.Blob != binBlob {
		t.Error("a blob that is not UTF-8 was changed")
	}
}

// A LOW call's records may commit asynchronously; MEDIUM and HIGH calls' and audited
// refusals' commit synchronously, and so does any transaction holding one of them.
func TestCommitClasses(t *testing.T) {
	t.Parallel()
	for level, want := range map[risk.Level]db.Commit{risk.Low: db.Asynchronous, risk.Medium: db.Synchronous, risk.High: db.Synchronous} {
		cr := &callRecord{e: &entry{risk: risk.Decision{Level: level}}}
		if got := cr.commit(); got != want {
			t.Errorf("%s call: got %v, want %v", level, got, want)
		}
	}
	low, high := &job{commit: db.Asynchronous}, &job{commit: db.Synchronous}
	flush := &job{flush: true}
	for _, tc := range []struct {
		batch []*job
		want  db.Commit
	}{
		{[]*job{low}, db.Asynchronous},
		{[]*job{low, low, flush}, db.Asynchronous},
		{[]*job{low, high, low}, db.Synchronous},
		{[]*job{high}, db.Synchronous},
		{[]*job{{}}, db.Synchronous}, // the zero value is the safe one
	} {
		if got := commitOf(tc.batch); got != tc.want {
			t.Errorf("batch of %d: got %v, want %v", len(tc.batch), got, tc.want)
		}
	}
}
