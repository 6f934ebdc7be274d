package registry_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// planText renders p, checking that rendering is deterministic.
func planText(t *testing.T, p *registry.Plan) string {
	t.Helper()
	s := p.String()
	if s != p.String() {
		t.Fatal("Plan.String is not deterministic")
	}
	return s
}

func TestPlanAndApplyImport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "same", Type: registry.TypeStdio, Command: "same-cmd", Enabled: true})
	f.create(registry.Spec{Name: "changed", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:1/mcp", Enabled: true})
	f.create(registry.Spec{Name: "legacy", Type: registry.TypeStdio, Command: "old", Enabled: true})
	sec := f.create(registry.Spec{Name: "secrets", Type: registry.TypeStdio, Command: "s", Enabled: true,
		Env: map[string]string{"KEPT": cfgCanary + "-kept", "REPLACED": cfgCanary + "-old", "SAME": cfgCanary + "-same", "GONE": cfgCanary + "-gone"}})
	file := `version: 1
servers:
  - name: same
    type: stdio
    command: same-cmd
  - name: changed
    type: streamable_http
    url: http://127.0.0.1:2/mcp
    timeout_ms: 5000
    description: now described
    headers:
      X-New: ` + cfgCanary + `-xnew
  - name: secrets
    type: stdio
    command: s
    env:
      KEPT: null
      REPLACED: ` + cfgCanary + `-new
      SAME: ` + cfgCanary + `-same
      ADDED: ` + cfgCanary + `-added
      UNKNOWN: null
  - name: brand-new
    type: stdio
    command: npx
    args: [-y, pkg]
    env:
      TOKEN: null
`
	tests := []struct {
		prune     bool
		legacy    string
		legacyOut string
	}{
		{false, registry.PlanKeep, "  kept legacy (not in file)\n"},
		{true, registry.PlanDelete, "- delete legacy (stdio)\n"},
	}
	for _, tt := range tests {
		plan := f.plan("servers.yaml", file, tt.prune)
		if plan.HasErrors() {
			t.Fatalf("prune=%v: unexpected errors %v", tt.prune, plan.Errors)
		}
		actions := map[string]string{}
		for _, it := range plan.Items {
			actions[it.Name] = it.Action
		}
		want := map[string]string{"same": registry.PlanUnchanged, "changed": registry.PlanUpdate, "secrets": registry.PlanUpdate,
			"brand-new": registry.PlanCreate, "legacy": tt.legacy}
		for k, v := range want {
			if actions[k] != v {
				t.Errorf("prune=%v: %s: got %q, want %q", tt.prune, k, actions[k], v)
			}
		}
		text := planText(t, plan)
		for _, line := range []string{
			"+ create brand-new (stdio)\n    command: \"npx\"\n    args: [\"-y\", \"pkg\"]\n",
			"~ update changed (streamable_http)\n    description: \"\" → \"now described\"\n    url: \"http://127.0.0.1:1/mcp\" → \"http://127.0.0.1:2/mcp\"\n    timeout_ms: 30000 → 5000\n    headers X-New: set\n",
			"= unchanged same\n",
			"~ update secrets (stdio)\n    env ADDED: set\n    env REPLACED: replaced\n    env GONE: removed\n",
			tt.legacyOut,
			`! servers.yaml: server "brand-new": env.TOKEN: has no value in the file and none is stored: it is skipped; set env TOKEN after import`,
			`! servers.yaml: server "secrets": env.UNKNOWN: has no value`,
		} {
			if !strings.Contains(text, line) {
				t.Errorf("prune=%v: plan\n%s\nwant it to contain\n%s", tt.prune, text, line)
			}
		}
		if strings.Contains(text, cfgCanary) {
			t.Fatalf("the plan shows a secret value:\n%s", text)
		}
	}

	// Apply the pruning plan.
	plan := f.plan("servers.yaml", file, true)
	lastEvent := f.count(`SELECT coalesce(max(id), 0)::int FROM events`)
	res, err := f.reg.ApplyImport(f.ctx, audit.Actor{Kind: audit.ActorUser, Name: "ada"}, plan)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res.String() != "1 created, 2 updated, 1 deleted, 1 unchanged, 0 kept" {
		t.Fatalf("apply: got %s", res)
	}
	if res.Created[0].Name != "brand-new" || res.Created[0].ID == "" || res.Deleted[0].Name != "legacy" {
		t.Fatalf("apply: got %+v", res)
	}
	c := f.connection(sec.ID)
	wantEnv := map[string]string{"KEPT": cfgCanary + "-kept", "REPLACED": cfgCanary + "-new", "SAME": cfgCanary + "-same", "ADDED": cfgCanary + "-added"}
	if len(c.Env) != len(wantEnv) {
		t.Errorf("env after import: got names %v, want %v", sortedKeys(c.Env), sortedKeys(wantEnv))
	}
	for k, v := range wantEnv {
		if c.Env[k] != v {
			t.Errorf("env %s after import: got %q, want %q", k, c.Env[k], v)
		}
	}
	if _, err := f.reg.GetServerByName(f.ctx, "legacy"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("legacy after a pruning import: got %v, want ErrNotFound", err)
	}
	nw := f.connection(f.serverID("brand-new"))
	if len(nw.Env) != 0 || nw.Command != "npx" {
		t.Errorf("brand-new: got %+v env %v, want command npx and no env", nw, sortedKeys(nw.Env))
	}

	// One audit entry per server, naming secrets but never their values.
	for action, n := range map[string]int{"server.import.create": 1, "server.import.update": 2, "server.import.delete": 1} {
		if got := f.count(`SELECT count(*) FROM audit_log WHERE action = $1 AND actor_name = 'ada'`, action); got != n {
			t.Errorf("audit %s: got %d entries, want %d", action, got, n)
		}
	}
	payloads := f.strings(`SELECT payload::text FROM audit_log WHERE action LIKE 'server.import.%'`)
	for _, p := range payloads {
		if strings.Contains(p, cfgCanary) {
			t.Fatalf("audit payload holds a secret value: %s", p)
		}
	}
	if !slices.ContainsFunc(payloads, func(p string) bool { return strings.Contains(p, "env/REPLACED: replaced") }) {
		t.Errorf("audit payloads %q: want the replaced secret named", payloads)
	}
	events := f.strings(`SELECT kind || ' ' || (payload->>'name') FROM events WHERE topic = 'servers' AND id > $1 ORDER BY id`, lastEvent)
	if len(events) != 4 {
		t.Errorf("events: got %q, want one per created, updated or deleted server", events)
	}
	for _, want := range []string{"server.changed brand-new", "server.changed changed", "server.changed secrets", "server.deleted legacy"} {
		if !slices.Contains(events, want) {
			t.Errorf("events %q: want %q", events, want)
		}
	}
	for _, e := range f.strings(`SELECT payload::text FROM events`) {
		if strings.Contains(e, cfgCanary) {
			t.Fatalf("event holds a secret value: %s", e)
		}
	}

	// The same file again: nothing left to do.
	again := f.plan("servers.yaml", file, true)
	for _, it := range again.Items {
		if it.Action != registry.PlanUnchanged {
			t.Errorf("second import: %s: got %s %v, want unchanged", it.Name, it.Action, it.Changes)
		}
	}
}

// TestImportClientKeepsUnstatedFields: a Claude Desktop file says nothing about
// descriptions, trust or timeouts, so importing it leaves them as they are.
func TestImportClientKeepsUnstatedFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "files", Description: "curated", Type: registry.TypeStdio, Command: "npx",
		Args: []string{"-y", "fs"}, Env: map[string]string{"ROOT": "/data"}, TimeoutMS: 9000, Trusted: true, Enabled: true})
	f.create(registry.Spec{Name: "remote", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:5/mcp",
		AuthType: registry.AuthBearer, AuthToken: "tok", Enabled: true})
	plan := f.plan("claude_desktop_config.json", `{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "fs"], "env": {"ROOT": "/data"}},
		"remote": {"type": "http", "url": "http://127.0.0.1:5/mcp"}}}`, false)
	for _, it := range plan.Items {
		if it.Action != registry.PlanUnchanged {
			t.Errorf("%s: got %s %v, want unchanged", it.Name, it.Action, it.Changes)
		}
	}
	plan = f.plan("claude_desktop_config.json", `{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "fs", "--ro"]},
		"remote": {"command": "remote-stdio"}}}`, false)
	text := planText(t, plan)
	for _, want := range []string{
		"~ update files (stdio)\n    args: [\"-y\", \"fs\"] → [\"-y\", \"fs\", \"--ro\"]\n    env ROOT: removed\n",
		"~ update remote (stdio)\n    type: \"streamable_http\" → \"stdio\"\n    command: \"\" → \"remote-stdio\"\n    url: \"http://127.0.0.1:5/mcp\" → \"\"\n    auth.type: \"bearer\" → \"none\"\n    auth token: removed\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan\n%s\nwant it to contain\n%s", text, want)
		}
	}
	if plan.HasErrors() {
		t.Fatalf("unexpected errors: %v", plan.Errors)
	}
}

func TestPlanImportValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "ok", Type: registry.TypeStdio, Command: "x", Enabled: true})
	plan := f.plan("servers.yaml", `version: 1
servers:
  - name: bad-url
    type: sse
    url: ftp://example.com
  - name: no-command
    type: stdio
  - name: bad-env
    type: stdio
    command: x
    env:
      1BAD: v
    timeout_ms: 5
  - name: ok
    type: stdio
    command: x
    retries: 99
`, false)
	var got []string
	for _, e := range plan.Errors {
		got = append(got, e.String())
	}
	want := []string{
		`servers.yaml: server "bad-env": env.1BAD: is not a valid variable name`,
		`servers.yaml: server "bad-env": timeout_ms: must be between`,
		`servers.yaml: server "bad-url": url: must start with http:// or https://`,
		`servers.yaml: server "no-command": command: is required`,
		`servers.yaml: server "ok": retries: must be between 0 and 10`,
	}
	if len(got) != len(want) {
		t.Fatalf("got errors\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("errors\n%s\nwant one starting %q", strings.Join(got, "\n"), w)
		}
	}
	if !strings.Contains(plan.String(), "Errors (nothing can be imported until they are fixed):") {
		t.Errorf("plan text does not list the errors:\n%s", plan)
	}
	before := f.count(`SELECT count(*) FROM audit_log`)
	if _, err := f.reg.ApplyImport(f.ctx, audit.System, plan); !errors.Is(err, registry.ErrInvalidPlan) || !strings.Contains(err.Error(), "bad-url") {
		t.Fatalf("apply: got %v, want ErrInvalidPlan naming the problems", err)
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 1 {
		t.Fatalf("after a refused import: got %d servers, want 1", n)
	}
	if after := f.count(`SELECT count(*) FROM audit_log`); after != before {
		t.Fatalf("a refused import wrote %d audit entries", after-before)
	}
}

// TestApplyImportAllOrNothing makes the second of two creates fail at apply time (its
// name was taken after the plan was made): the first is not created either.
func TestApplyImportAllOrNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		between func(f *fixture)
		wantErr string
	}{
		{"name taken after planning", func(f *fixture) {
			f.create(registry.Spec{Name: "bbb", Type: registry.TypeStdio, Command: "other", Enabled: true})
		}, `create server "bbb"`},
		{"server edited after planning", func(f *fixture) {
			f.update(f.serverID("ccc"), registry.Patch{Description: ptr("edited")})
		}, `server "ccc" was changed`},
		{"server deleted after planning", func(f *fixture) {
			if err := f.reg.DeleteServer(f.ctx, audit.System, f.serverID("ccc")); err != nil {
				f.t.Fatal(err)
			}
		}, `server "ccc" was deleted`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.create(registry.Spec{Name: "ccc", Type: registry.TypeStdio, Command: "c", Enabled: true})
			plan := f.plan("servers.yaml", `version: 1
servers:
  - {name: aaa, type: stdio, command: a}
  - {name: bbb, type: stdio, command: b}
  - {name: ccc, type: stdio, command: c2}
`, false)
			if plan.Count(registry.PlanCreate) != 2 || plan.Count(registry.PlanUpdate) != 1 {
				t.Fatalf("plan:\n%s", plan)
			}
			tt.between(f)
			before := f.count(`SELECT count(*) FROM audit_log`)
			_, err := f.reg.ApplyImport(f.ctx, audit.System, plan)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("apply: got %v, want an error containing %q", err, tt.wantErr)
			}
			if n := f.count(`SELECT count(*) FROM mcp_servers WHERE name = 'aaa'`); n != 0 {
				t.Fatalf("aaa was created although the import failed")
			}
			if n := f.count(`SELECT count(*) FROM mcp_servers WHERE command = 'c2'`); n != 0 {
				t.Fatalf("ccc was updated although the import failed")
			}
			if after := f.count(`SELECT count(*) FROM audit_log`); after != before {
				t.Fatalf("a failed import wrote %d audit entries", after-before)
			}
		})
	}
}

// TestPlanDoesNotConfirmGuesses: without CompareSecrets (a caller who cannot read the
// secrets), a value in the file that equals the stored one is still "replaced", so the
// plan cannot be used to check a guess. With it, an equal value leaves the server alone.
func TestPlanDoesNotConfirmGuesses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "api", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:1/mcp", Enabled: true,
		AuthType: registry.AuthBearer, AuthToken: cfgCanary + "-token", Headers: map[string]string{"X-Key": cfgCanary + "-key"}})
	for _, guess := range []string{cfgCanary + "-key", cfgCanary + "-wrong"} {
		file := "version: 1\nservers:\n  - name: api\n    type: streamable_http\n    url: http://127.0.0.1:1/mcp\n" +
			"    headers:\n      X-Key: " + guess + "\n    auth:\n      type: bearer\n      token: null\n"
		cfg, err := registry.ParseConfig("guess.yaml", []byte(file), registry.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, compare := range []bool{false, true} {
			plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{CompareSecrets: compare})
			if err != nil || plan.HasErrors() {
				t.Fatalf("plan: %v %v", err, plan.Errors)
			}
			it := plan.Items[0]
			right := guess == cfgCanary+"-key"
			want := registry.PlanUpdate
			if compare && right {
				want = registry.PlanUnchanged
			}
			if it.Action != want {
				t.Errorf("guess right=%v, compare=%v: action %q, want %q (changes %v)", right, compare, it.Action, want, it.Changes)
			}
			if want == registry.PlanUpdate && (len(it.Changes) != 1 || it.Changes[0].To != "replaced") {
				t.Errorf("guess right=%v, compare=%v: changes %+v, want only the header replaced", right, compare, it.Changes)
			}
		}
	}
}

// A file naming a server builtin cannot import over the built-in server (Toolwarden's
// own, which only can be enabled or disabled): the plan names the entry as an error and
// the server stays as it is.
func TestImportCannotOverwriteBuiltin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bi, err := f.reg.EnsureBuiltin(f.ctx, "Toolwarden's own tools")
	if err != nil {
		t.Fatal(err)
	}
	plan := f.plan("servers.yaml", "version: 1\nservers:\n  - {name: builtin, type: stdio, command: sh, args: [-c, 'id']}\n", false)
	if len(plan.Errors) != 1 || plan.Errors[0].Server != "builtin" ||
		!strings.Contains(plan.Errors[0].Message, "builtin is Toolwarden's own server and cannot be imported over") {
		t.Fatalf("plan errors: %+v, want one on the builtin entry", plan.Errors)
	}
	if _, err := f.reg.ApplyImport(f.ctx, audit.System, plan); !errors.Is(err, registry.ErrInvalidPlan) {
		t.Fatalf("apply: got %v, want ErrInvalidPlan", err)
	}
	if got := mustGet(t, f, bi.ID); got.Type != registry.TypeBuiltin || got.Command != "" || got.Description != bi.Description {
		t.Fatalf("the built-in server after the import: %+v", got)
	}
}
