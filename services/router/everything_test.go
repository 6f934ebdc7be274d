package router_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// The reference server through the router: text, sums, an image, structured content
// checked against its output schema, and a long operation's progress.
func TestEverything(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	cmd, args := everything.StdioCommand(t)
	e.register(registry.Spec{Name: "everything", Type: registry.TypeStdio, Command: cmd, Args: args, Enabled: true, Trusted: true},
		"echo", "get-sum", "get-tiny-image", "get-structured-content", "trigger-long-running-operation")

	res, err := e.call("everything__echo", `{"message":"hi"}`)
	if err != nil || !strings.Contains(router.TextOf(res.Content), "hi") {
		t.Fatalf("echo: got %+v %v", res, err)
	}
	res, err = e.call("everything__get-sum", `{"a":2,"b":40}`)
	if err != nil || !strings.Contains(router.TextOf(res.Content), "42") {
		t.Fatalf("get-sum: got %+v %v", res, err)
	}
	if _, err := e.call("everything__get-sum", `{"a":"two"}`); codeOf(err) != router.CodeInvalidArguments {
		t.Fatalf("get-sum with bad arguments: got %v, want invalid_arguments", err)
	}
	res, err = e.call("everything__get-tiny-image", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var image *router.Content
	for i, c := range res.Content {
		if c.Type == "image" {
			image = &res.Content[i]
		}
	}
	if image == nil || image.MIMEType != "image/png" || len(image.Data) < 100 {
		t.Fatalf("get-tiny-image: got %+v, want a base64 PNG", res.Content)
	}
	res, err = e.call("everything__get-structured-content", `{"location":"Chicago"}`)
	if err != nil {
		t.Fatal(err)
	}
	var weather map[string]any
	if err := json.Unmarshal(res.StructuredContent, &weather); err != nil || weather["temperature"] == nil {
		t.Fatalf("get-structured-content: got %s (%v), want a temperature", res.StructuredContent, err)
	}
	var mu sync.Mutex
	var steps []router.Progress
	res, err = e.r.Call(e.ctx, router.Call{Tool: "everything__trigger-long-running-operation", Arguments: json.RawMessage(`{"duration":1,"steps":4}`),
		Actor: admin, Role: auth.RoleAdmin, Source: router.SourceAPI,
		Progress: func(p router.Progress) { mu.Lock(); steps = append(steps, p); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(steps) < 3 || steps[0].Total != 4 {
		t.Fatalf("long operation: got progress %+v, want steps of 4", steps)
	}
	if !strings.Contains(strings.ToLower(router.TextOf(res.Content)), "completed") {
		t.Fatalf("long operation: got %q", router.TextOf(res.Content))
	}
}
