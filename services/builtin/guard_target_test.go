package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/router"
)

// shownTarget is the target of the one pending question, as the person is shown it.
func shownTarget(f *grantFixture) string {
	f.t.Helper()
	waitPending(f.t, f.session)
	var shown struct {
		Items []struct {
			Target string `json:"target"`
		}
	}
	f.session.JSON(http.MethodGet, "/api/v1/collaborations?status=pending", nil, http.StatusOK, &shown)
	if len(shown.Items) != 1 {
		f.t.Fatalf("pending: %+v", shown.Items)
	}
	return shown.Items[0].Target
}

// A grant asked for with a target the agent wrote in another form than the guard's
// (relative to the conversation's workspace, or absolute but not clean) is asked,
// shown and granted as the file's clean absolute path, so the approved retry of the
// write the guard refused succeeds. The refusal names the forms it takes.
func TestGrantTargetInTheGuardsForm(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t)
	target := filepath.Join(f.other, "notes.md")

	refused := f.write(target, "granted")
	if text := router.TextOf(refused.Content); !refused.IsError || !strings.Contains(text, `"target": `+strconv.Quote(target)) ||
		!strings.Contains(text, "absolute path") {
		t.Fatalf("the refusal does not name the target's form: %s", text)
	}

	for _, asked := range []string{filepath.Join("..", filepath.Base(f.other), "notes.md"), f.other + "/./notes.md/"} {
		done := f.ask(context.Background(), map[string]any{"prompt": "May I write notes.md?",
			"authorize_operation": "file_operations.create_file", "target": asked, "one_time_use": true})
		if got := shownTarget(f); got != target {
			t.Errorf("asked for %q, the person is shown %q, want %q", asked, got, target)
		}
		if res := f.answer(done, "yes"); res.IsError {
			t.Fatalf("user_collaboration: %s", router.TextOf(res.Content))
		}
		_ = os.Remove(target)
		if res := f.write(target, "granted"); res.IsError {
			t.Fatalf("asked for %q, the approved retry: %s", asked, router.TextOf(res.Content))
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != "granted" {
			t.Fatalf("the file: %q %v", b, err)
		}
	}
}

// Every name of a file operation a grant takes (with builtin__, a bare operation's,
// the whole tool's) has its target put in the guard's form; a command, and the target
// of a question that authorizes nothing, are asked as written (grants store targets as
// given).
func TestGrantTargetFormByOperation(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t)
	ws, err := f.srv.App.Builtin.Workspace("conv-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ op, target, want string }{
		{"builtin__file_operations.create_file", f.other + "/x/../y", filepath.Join(f.other, "y")},
		{"delete_file", f.other + "//z", filepath.Join(f.other, "z")},
		{"file_search", "d/./e/", filepath.Join(ws, "d", "e")},
		{"file_operations", "d/./e/", filepath.Join(ws, "d", "e")},
		{"terminal_operations.run_command", "make  test/./", "make  test/./"},
		{"", "../somewhere/", "../somewhere/"},
	} {
		done := f.ask(context.Background(), map[string]any{"prompt": "May I?", "authorize_operation": tc.op, "target": tc.target})
		if got := shownTarget(f); got != tc.want {
			t.Errorf("%q on %q: the person is shown %q, want %q", tc.op, tc.target, got, tc.want)
		}
		f.answer(done, "no")
	}
}

// With no workspace to resolve it in, a file operation's relative target is refused,
// saying the form expected, and nobody is asked.
func TestGrantRelativeTargetWithoutWorkspace(t *testing.T) {
	t.Parallel()
	run := builtin.UserCollaboration(nobodyAsked{t}).Operations[0].Run
	args, _ := json.Marshal(map[string]any{"prompt": "May I?", "authorize_operation": "file_operations.create_file",
		"target": "../ws/notes.md"})
	res, err := run(context.Background(), builtin.Call{}, args)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), `"../ws/notes.md" is a relative path`) ||
		!strings.Contains(resultText(res), "absolute path") {
		t.Fatalf("a relative target with no workspace: %+v %v", res, err)
	}
}

// nobodyAsked is an Asker a test expects not to be asked.
type nobodyAsked struct{ t *testing.T }

func (n nobodyAsked) Ask(context.Context, builtin.Question) (builtin.Answer, error) {
	n.t.Error("a person was asked")
	return builtin.Answer{}, nil
}
