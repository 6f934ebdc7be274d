package registry_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// manyArgs is n arguments a0 … a(n-1).
func manyArgs(n int) []string {
	a := make([]string, n)
	for i := range a {
		a[i] = fmt.Sprintf("a%d", i)
	}
	return a
}

// A stdio server's arguments are bounded, as its env variables are: every list of
// servers reads them all. The refusal is one problem on args, not one per argument.
func TestArgsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sp := stdioSpec("many-args")
	sp.Args = manyArgs(registry.MaxArgs)
	sv := f.create(sp)

	sp.Name, sp.Args = "too-many-args", manyArgs(registry.MaxArgs+1)
	_, err := f.reg.CreateServer(f.ctx, audit.System, sp)
	wantFields(t, err, "args")
	wantMessage(t, err, "args", fmt.Sprintf("has %d arguments, at most %d", registry.MaxArgs+1, registry.MaxArgs))
	// Many bad arguments past the bound: still the one problem.
	sp.Args = make([]string, 10*registry.MaxArgs)
	for i := range sp.Args {
		sp.Args[i] = "x\x00"
	}
	_, err = f.reg.CreateServer(f.ctx, audit.System, sp)
	wantFields(t, err, "args")
	if n := f.count(`SELECT count(*) FROM mcp_servers WHERE name = 'too-many-args'`); n != 0 {
		t.Fatalf("%d servers with too many arguments stored", n)
	}

	// Growing past the bound is refused, and nothing changes.
	more := manyArgs(registry.MaxArgs + 1)
	if _, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Args: &more}); err == nil {
		t.Fatal("an update past the bound was accepted")
	} else {
		wantFields(t, err, "args")
	}
	if got := f.count(`SELECT jsonb_array_length(args) FROM mcp_servers WHERE id = $1`, sv.ID); got != registry.MaxArgs {
		t.Fatalf("after a refused update: %d arguments stored, want %d", got, registry.MaxArgs)
	}

	// A server stored with more before the bound keeps them while they do not grow.
	raw, _ := json.Marshal(manyArgs(registry.MaxArgs + 10))
	f.exec(`UPDATE mcp_servers SET args = $2::jsonb WHERE id = $1`, sv.ID, string(raw))
	f.update(sv.ID, registry.Patch{Description: ptr("still runs")})
	fewer := manyArgs(registry.MaxArgs + 5)
	f.update(sv.ID, registry.Patch{Args: &fewer})
	grown := manyArgs(registry.MaxArgs + 6)
	if _, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Args: &grown}); err == nil {
		t.Fatal("an update growing a list already past the bound was accepted")
	} else {
		wantFields(t, err, "args")
	}
}

// An import goes through the same bound, reporting it on the server's args.
func TestImportArgsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	args := strings.Join(manyArgs(registry.MaxArgs+1), ", ")
	plan := f.plan("servers.yaml", "version: 1\nservers:\n  - {name: many, type: stdio, command: npx, args: ["+args+"]}\n", false)
	if len(plan.Errors) != 1 || plan.Errors[0].Server != "many" || plan.Errors[0].Field != "args" ||
		!strings.Contains(plan.Errors[0].Message, fmt.Sprintf("at most %d", registry.MaxArgs)) {
		t.Fatalf("plan errors %v: want one on many's args naming the bound", plan.Errors)
	}
	ok := f.plan("servers.yaml", "version: 1\nservers:\n  - {name: many, type: stdio, command: npx, args: ["+
		strings.Join(manyArgs(registry.MaxArgs), ", ")+"]}\n", false)
	if len(ok.Errors) != 0 {
		t.Fatalf("plan of %d arguments: errors %v, want none", registry.MaxArgs, ok.Errors)
	}
}

// A server's description is shown to everyone: control characters (ESC) and invisible
// format characters (U+202E) are refused, naming the character; line breaks and tabs
// (its field is a textarea) and zero-width joiners (Persian, emoji) are not.
func TestServerDescriptionText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i, desc := range []string{
		"line one\r\nline two\n\tindented",
		"نامه\u200cها", // Persian, with a zero-width non-joiner
		"👩\u200d💻 tools",
	} {
		sp := stdioSpec(fmt.Sprintf("fine-%d", i))
		sp.Description = desc
		if got := f.create(sp); got.Description != desc {
			t.Errorf("description %q stored as %q", desc, got.Description)
		}
	}
	for i, tc := range []struct{ desc, want string }{
		{"hi\u202e\u001b[31mred", "contains the invisible format character U+202E"},
		{"hi\u001b[31mred", "contains the control character U+001B"},
		{"a\rb", "contains the control character U+000D"},
		{"a\u0085b", "contains the control character U+0085"},
		{"a\u200bb", "contains the invisible format character U+200B"},
		{"a\u2066b", "contains the invisible format character U+2066"},
		{"a\u2028b", "contains the invisible format character U+2028"},
		{"a\ufeffb", "contains the invisible format character U+FEFF"},
	} {
		sp := stdioSpec(fmt.Sprintf("bad-%d", i))
		sp.Description = tc.desc
		_, err := f.reg.CreateServer(f.ctx, audit.System, sp)
		wantFields(t, err, "description")
		wantMessage(t, err, "description", tc.want)
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers WHERE name LIKE 'bad-%'`); n != 0 {
		t.Fatalf("%d servers with a bad description stored", n)
	}

	// An update to such a description is refused, and nothing changes.
	sv := f.create(stdioSpec("edited"))
	if _, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Description: ptr("hi\u202eeht"), Retries: ptr(2)}); err == nil {
		t.Fatal("an update to a description with U+202E was accepted")
	} else {
		wantMessage(t, err, "description", "contains the invisible format character U+202E")
	}
	if got := f.strings(`SELECT description || '/' || retries FROM mcp_servers WHERE id = $1`, sv.ID); got[0] != "local files/"+fmt.Sprint(sv.Retries) {
		t.Fatalf("after a refused update: %q", got)
	}

	// One stored before the rule stays while it is not changed: the server can still be
	// disabled or otherwise edited.
	f.exec(`UPDATE mcp_servers SET description = $2 WHERE id = $1`, sv.ID, "old\u202eone")
	f.update(sv.ID, registry.Patch{Retries: ptr(1)})
	if _, err := f.reg.SetEnabled(f.ctx, audit.System, sv.ID, false); err != nil {
		t.Fatalf("disabling a server with an old description: %v", err)
	}
}
