package assistant_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/registry"
)

// startListingModel answers every chat completion as a model reading the message as
// "list the servers", and counts the requests.
func startListingModel(t *testing.T, asked *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		asked.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": `{"intent":"list_servers"}`}}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A typed answer to "which one did you mean?" is read against the open choice by the
// rules, never sent to the model: the model does not see the choice, and its reading
// ("list the servers") replaced the pick, spent the person's model budget and, past
// it, refused the answer with 429.
func TestChoiceAnswerNotAskedOfModel(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	a := apptest.Start(t, withModel(startListingModel(t, &asked)))
	for _, s := range []struct{ name, desc string }{{"alpha", "Search charging stations near a place"}, {"beta", "Search file contents in the workspace"}} {
		hs := mcptest.StartHTTP(t, &mcptest.Options{Name: s.name})
		hs.Server().SetTool(mcptest.ToolSpec{Name: "search", Description: s.desc,
			InputSchema: []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)})
		a.RegisterServer(t, registry.Spec{Name: s.name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
		a.Enable(t, toolname.Join(s.name, "search"))
	}
	// The person's model budget is spent already: an answer the rules read needs none.
	assistant.SetModelRate(a.Assistant, time.Hour, 1)
	c := newChat(t, a)
	if r := c.say(unclear); asked.Load() != 1 {
		t.Fatalf("%q: %q, the model asked %d times, want once", unclear, r.Reply, asked.Load())
	}
	asked.Store(0)
	if r := c.say("disable search"); len(r.Choices) < 2 {
		t.Fatalf("\"disable search\": %q with %d choices, want which of the two", r.Reply, len(r.Choices))
	}
	const answer = "the charging stations one"
	r, err := a.Assistant.Handle(t.Context(), c.p, c.p.Actor("", ""), c.conv, answer, 0, 0)
	if err != nil {
		t.Fatalf("%q: %v, want it read against the open choice", answer, err)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("%q was sent to the model (%d requests)", answer, n)
	}
	if strings.Contains(r.Reply, "language model") || strings.Contains(strings.ToLower(r.Reply), "servers") && !strings.Contains(r.Reply, "alpha") {
		t.Errorf("%q: the model's reading replaced the pick: %q", answer, r.Reply)
	}
	// The pick is alpha's search: done, or asked about by name.
	if tg := a.Settled(t, toolname.Join("alpha", "search")); tg.Status != "disabled" && !strings.Contains(r.Reply, "alpha") {
		t.Errorf("%q: %q (alpha's search is %s), want alpha's search picked", answer, r.Reply, tg.Status)
	}
}

// A message that picks none of the open choices is a new request in other words: the
// model reads it (with the choice open, everything the rules could not read stayed
// with them, answered "please pick one").
func TestNewRequestWithChoiceOpenAskedOfModel(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	a := apptest.Start(t, withModel(startListingModel(t, &asked)))
	for _, name := range []string{"alpha", "beta"} {
		hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name})
		hs.Server().SetTool(mcptest.ToolSpec{Name: "search", Description: "Search things for " + name,
			InputSchema: []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)})
		a.RegisterServer(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
		a.Enable(t, toolname.Join(name, "search"))
	}
	c := newChat(t, a)
	if r := c.say("disable search"); len(r.Choices) < 2 {
		t.Fatalf("\"disable search\": %q with %d choices, want which of the two", r.Reply, len(r.Choices))
	}
	r := c.say(unclear)
	if n := asked.Load(); n != 1 {
		t.Fatalf("%q with a choice open: the model was asked %d times, want once (reply %q)", unclear, n, r.Reply)
	}
	for _, name := range []string{"alpha", "beta"} {
		if tg := a.Settled(t, toolname.Join(name, "search")); tg.Status == "disabled" {
			t.Errorf("%s's search was disabled by a message that picked neither", name)
		}
	}
}
