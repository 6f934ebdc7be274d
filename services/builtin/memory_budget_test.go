package builtin_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/memory"
	"github.com/toolwarden/toolwarden/services/router"
)

// search and list stop adding notes before the answer grows too large to send: five
// notes of 400 KB each (100,000 four-byte characters, the most a note may have) would
// make an answer of 4 MB as text and 4 MB again as structured content. The answer holds
// the first ones that fit, says how many were left out and how to find them, and its
// structured content has the same notes as its text.
func TestMemoryAnswerBudget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__memory_operations")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	call := func(args string) *router.Result {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__memory_operations", Arguments: json.RawMessage(args),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, Role: auth.RoleToolUser,
			Source: router.SourceTestPanel, ConversationID: "conv-1", Approval: router.Approval{Confirmed: true}})
		if err != nil || res.IsError {
			t.Fatalf("%.200s: %v %.300v", args, err, res)
		}
		return res
	}
	big := "staging " + strings.Repeat("😀", memory.MaxContent-len("staging "))
	for range 5 {
		args, _ := json.Marshal(map[string]any{"operation": "store", "content": big, "tags": []string{"big"}})
		call(string(args))
	}
	for _, args := range []string{`{"operation":"list","limit":50}`, `{"operation":"search","query":"staging"}`} {
		res := call(args)
		text := router.TextOf(res.Content)
		var structured struct{ Memories []memory.Memory }
		if err := json.Unmarshal(res.StructuredContent, &structured); err != nil {
			t.Fatalf("%s: structured content: %v", args, err)
		}
		if n := len(structured.Memories); n == 0 || n >= 5 {
			t.Fatalf("%s: %d notes of 400 KB in one answer (%d bytes of text, %d structured)", args, n, len(text), len(res.StructuredContent))
		}
		if size := len(text) + len(res.StructuredContent); size > 4<<20 {
			t.Fatalf("%s: an answer of %d bytes", args, size)
		}
		if got := strings.Count(text, "\n- ") + 1; got != len(structured.Memories) {
			t.Fatalf("%s: %d notes in the text, %d structured", args, got, len(structured.Memories))
		}
		for _, m := range structured.Memories {
			if !strings.Contains(text, "("+m.ID+"; tags: big)") {
				t.Fatalf("%s: structured note %s is not in the text", args, m.ID)
			}
		}
		if want := fmt.Sprintf("%d more matching notes were left out", 5-len(structured.Memories)); !strings.Contains(text, want) {
			t.Fatalf("%s: the text does not say %q: %q", args, want, text[max(0, len(text)-400):])
		}
	}
}
