package registry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

func TestPatchEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		patch registry.Patch
		want  map[string]string
	}{
		{"nil value removes, others kept", registry.Patch{Env: map[string]*string{"A": nil, "B": ptr("22")}},
			map[string]string{"B": "22", "C": "3"}},
		{"new name added, others kept", registry.Patch{Env: map[string]*string{"D": ptr("4")}},
			map[string]string{"A": "1", "B": "2", "C": "3", "D": "4"}},
		{"no env in patch keeps all", registry.Patch{Description: ptr("x")},
			map[string]string{"A": "1", "B": "2", "C": "3"}},
		{"removing an unknown name is a no-op", registry.Patch{Env: map[string]*string{"ZZ": nil}},
			map[string]string{"A": "1", "B": "2", "C": "3"}},
		{"empty value is kept as empty", registry.Patch{Env: map[string]*string{"A": ptr("")}},
			map[string]string{"A": "", "B": "2", "C": "3"}},
		{"replace removes unmentioned", registry.Patch{ReplaceEnv: true, Env: map[string]*string{"B": ptr("22"), "D": ptr("4")}},
			map[string]string{"B": "22", "D": "4"}},
		{"replace with nothing clears", registry.Patch{ReplaceEnv: true},
			map[string]string{}},
	}
	f := newFixture(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := stdioSpec(fmt.Sprintf("env-%d", i))
			sp.Env = map[string]string{"A": "1", "B": "2", "C": "3"}
			sv := f.create(sp)
			got := f.update(sv.ID, tc.patch)
			if c := f.connection(sv.ID); !maps.Equal(c.Env, tc.want) {
				t.Fatalf("env: got %v, want %v", c.Env, tc.want)
			}
			if wantNames := slices.Sorted(maps.Keys(tc.want)); !slices.Equal(got.EnvNames, wantNames) {
				t.Fatalf("env names: got %v, want %v", got.EnvNames, wantNames)
			}
		})
	}
}

func TestPatchHeadersAndAuth(t *testing.T) {
	t.Parallel()
	base := func() registry.Spec {
		s := httpSpec("auth")
		s.Headers = map[string]string{"X-A": "a", "X-B": "b"}
		s.AuthType, s.AuthToken = registry.AuthBearer, "tok1"
		return s
	}
	cases := []struct {
		name        string
		patch       registry.Patch
		wantErr     []string // fields of the validation error
		wantHeaders map[string]string
		wantToken   bool // auth_token column set
	}{
		{"auth token nil keeps it", registry.Patch{Description: ptr("d")}, nil,
			map[string]string{"X-A": "a", "X-B": "b", "Authorization": "Bearer tok1"}, true},
		{"new auth token", registry.Patch{AuthToken: ptr("tok2")}, nil,
			map[string]string{"X-A": "a", "X-B": "b", "Authorization": "Bearer tok2"}, true},
		{"empty token with auth none clears", registry.Patch{AuthType: ptr(registry.AuthNone), AuthToken: ptr("")}, nil,
			map[string]string{"X-A": "a", "X-B": "b"}, false},
		{"auth none clears even a kept token", registry.Patch{AuthType: ptr(registry.AuthNone)}, nil,
			map[string]string{"X-A": "a", "X-B": "b"}, false},
		{"empty token with bearer is an error", registry.Patch{AuthToken: ptr("")}, []string{"auth_token"}, nil, true},
		{"switch to header auth keeps the token", registry.Patch{AuthType: ptr(registry.AuthHeader), AuthHeader: ptr("X-Key")}, nil,
			map[string]string{"X-A": "a", "X-B": "b", "X-Key": "tok1"}, true},
		{"header nil removes, others kept", registry.Patch{Headers: map[string]*string{"X-A": nil, "X-C": ptr("c")}}, nil,
			map[string]string{"X-B": "b", "X-C": "c", "Authorization": "Bearer tok1"}, true},
		{"replace headers removes unmentioned", registry.Patch{ReplaceHeaders: true, Headers: map[string]*string{"X-C": ptr("c")}}, nil,
			map[string]string{"X-C": "c", "Authorization": "Bearer tok1"}, true},
		{"adding Authorization header conflicts with bearer", registry.Patch{Headers: map[string]*string{"Authorization": ptr("Basic x")}},
			[]string{"headers/Authorization"}, nil, true},
		{"header value with CRLF", registry.Patch{Headers: map[string]*string{"X-B": ptr("b\r\nX-Evil: 1")}},
			[]string{"headers/X-B"}, nil, true},
		{"header value too long", registry.Patch{Headers: map[string]*string{"X-B": ptr(strings.Repeat("b", registry.MaxHeaderValueLength+1))}},
			[]string{"headers/X-B"}, nil, true},
		{"too many headers", registry.Patch{Headers: manyHeaders(registry.MaxHeaders)}, []string{"headers"}, nil, true},
	}
	f := newFixture(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := base()
			sp.Name = fmt.Sprintf("auth-%d", i)
			sv := f.create(sp)
			before := f.connection(sv.ID)
			got, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, tc.patch)
			if tc.wantErr != nil {
				wantFields(t, err, tc.wantErr...)
				if after := f.connection(sv.ID); after.Fingerprint != before.Fingerprint {
					t.Fatalf("a refused patch changed the connection: got %v, want %v", after.Headers, before.Headers)
				}
				if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'server.update' AND target_id = $1`, sv.ID); n != 0 {
					t.Fatalf("got %d server.update audit rows after a refused patch, want 0", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if c := f.connection(sv.ID); !maps.Equal(c.Headers, tc.wantHeaders) {
				t.Fatalf("headers: got %v, want %v", c.Headers, tc.wantHeaders)
			}
			_, _, token := f.storedSecrets(sv.ID)
			if (token != "") != tc.wantToken || got.AuthConfigured != tc.wantToken {
				t.Fatalf("token: got stored %v, auth_configured %v; want %v", token != "", got.AuthConfigured, tc.wantToken)
			}
		})
	}
}

func TestPatchSwitchType(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	toHTTP := registry.Patch{Type: ptr(registry.TypeStreamableHTTP), URL: ptr("http://127.0.0.1:9/mcp"),
		Command: ptr(""), Args: &[]string{}}

	sv := f.create(stdioSpec("switch"))
	_, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, toHTTP)
	wantFields(t, err, "env")
	if got := mustGet(t, f, sv.ID); got.Type != registry.TypeStdio {
		t.Fatalf("after a refused switch: got type %q, want stdio", got.Type)
	}

	withoutCommand := toHTTP
	withoutCommand.Command, withoutCommand.Args = nil, nil
	withoutCommand.ReplaceEnv = true
	_, err = f.reg.UpdateServer(f.ctx, audit.System, sv.ID, withoutCommand)
	wantFields(t, err, "command")

	cleared := toHTTP
	cleared.ReplaceEnv = true
	got := f.update(sv.ID, cleared)
	if got.Type != registry.TypeStreamableHTTP || len(got.EnvNames) != 0 || got.Command != "" || len(got.Args) != 0 {
		t.Fatalf("after switch: got type %q env %v command %q args %v, want streamable_http with no env, command or args",
			got.Type, got.EnvNames, got.Command, got.Args)
	}
	c := f.connection(sv.ID)
	if c.URL != "http://127.0.0.1:9/mcp" || len(c.Env) != 0 {
		t.Fatalf("connection: got url %q env %v", c.URL, c.Env)
	}
	// Back to stdio: headers must go.
	sp := stdioSpec("switch")
	_, err = f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Type: ptr(registry.TypeStdio), Command: ptr("srv"),
		Headers: map[string]*string{"X-A": ptr("a")}})
	wantFields(t, err, "headers")
	got = f.update(sv.ID, registry.PatchFromSpec(sp))
	if got.Type != registry.TypeStdio || got.URL != "" || !slices.Equal(got.EnvNames, []string{"API_KEY"}) {
		t.Fatalf("back to stdio: got type %q url %q env %v, want stdio, no url, API_KEY", got.Type, got.URL, got.EnvNames)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		patch registry.Patch
		same  bool
	}{
		{"description", registry.Patch{Description: ptr("other words")}, true},
		{"trusted", registry.Patch{Trusted: ptr(true)}, true},
		{"same secret value again", registry.Patch{Env: map[string]*string{"API_KEY": ptr("k1")}}, true},
		{"name", registry.Patch{Name: ptr("renamed-fp")}, true},
		{"secret value", registry.Patch{Env: map[string]*string{"API_KEY": ptr("k2")}}, false},
		{"secret added", registry.Patch{Env: map[string]*string{"MORE": ptr("x")}}, false},
		{"secret removed", registry.Patch{Env: map[string]*string{"API_KEY": nil}}, false},
		{"args", registry.Patch{Args: &[]string{"-y"}}, false},
		{"command", registry.Patch{Command: ptr("node")}, false},
		{"working dir", registry.Patch{WorkingDir: ptr("/tmp")}, false},
		{"timeout", registry.Patch{TimeoutMS: ptr(1000)}, false},
		{"retries", registry.Patch{Retries: ptr(0)}, false},
		{"health interval", registry.Patch{HealthIntervalMS: ptr(1000)}, false},
	}
	f := newFixture(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sv := f.create(stdioSpec(fmt.Sprintf("fp-%d", i)))
			before := f.connection(sv.ID)
			if len(before.Fingerprint) != 64 {
				t.Fatalf("fingerprint: got %q, want 64 hex characters", before.Fingerprint)
			}
			if again := f.connection(sv.ID); again.Fingerprint != before.Fingerprint {
				t.Fatalf("fingerprint: got %s then %s with no change, want it stable", before.Fingerprint, again.Fingerprint)
			}
			f.update(sv.ID, tc.patch)
			after := f.connection(sv.ID)
			if got := after.Fingerprint == before.Fingerprint; got != tc.same {
				t.Fatalf("fingerprint unchanged: got %v, want %v", got, tc.same)
			}
		})
	}
}

func TestSetEnabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sp := stdioSpec("toggle")
	sp.Env = map[string]string{"API_KEY": canary}
	sv := f.create(sp)
	if sv.Status != registry.StatusConnecting || !sv.Enabled {
		t.Fatalf("created: got status %q enabled %v, want connecting true", sv.Status, sv.Enabled)
	}
	steps := []struct {
		enabled    bool
		wantStatus string
	}{
		{false, registry.StatusDisconnected},
		{false, registry.StatusDisconnected},
		{true, registry.StatusConnecting},
	}
	for i, st := range steps {
		got, err := f.reg.SetEnabled(f.ctx, audit.Actor{Kind: audit.ActorUser, ID: "00000000-0000-0000-0000-000000000001", Name: "alice"}, sv.ID, st.enabled)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got.Enabled != st.enabled || got.Status != st.wantStatus {
			t.Fatalf("step %d: got enabled %v status %q, want %v %q", i, got.Enabled, got.Status, st.enabled, st.wantStatus)
		}
	}
	upd := f.auditPayloads("server.update")
	if len(upd) != len(steps) {
		t.Fatalf("got %d server.update audit rows, want %d", len(upd), len(steps))
	}
	first, _ := json.Marshal(upd[0])
	if want := `{"changes":{"enabled":{"from":true,"to":false}}}`; string(first) != want {
		t.Fatalf("audit payload: got %s, want %s", first, want)
	}
	if actor := f.strings(`SELECT actor_name FROM audit_log WHERE action = 'server.update' ORDER BY id LIMIT 1`); actor[0] != "alice" {
		t.Fatalf("audit actor: got %q, want alice", actor[0])
	}
	f.assertNoCanary(t)
	changed := f.eventPayloads("server.changed")
	if len(changed) != 1+len(steps) {
		t.Fatalf("got %d server.changed events, want %d", len(changed), 1+len(steps))
	}
	if last := changed[len(changed)-1]; last["status"] != registry.StatusConnecting || last["enabled"] != true {
		t.Fatalf("last server.changed: got %v, want connecting and enabled", last)
	}
	// Enabling an enabled, connected server leaves the status alone.
	if _, err := f.reg.SetStatus(f.ctx, sv.ID, registry.StatusUpdate{Status: registry.StatusConnected}); err != nil {
		t.Fatal(err)
	}
	if got, err := f.reg.SetEnabled(f.ctx, audit.System, sv.ID, true); err != nil || got.Status != registry.StatusConnected {
		t.Fatalf("enable again: got %q, %v; want connected", got.Status, err)
	}
	// The secret survived all of it.
	if c := f.connection(sv.ID); c.Env["API_KEY"] != canary {
		t.Fatalf("env after toggling: got %q, want the canary", c.Env["API_KEY"])
	}
	ids, err := f.reg.EnabledServerIDs(f.ctx)
	if err != nil || !slices.Equal(ids, []string{sv.ID}) {
		t.Fatalf("enabled ids: got %v, %v; want [%s]", ids, err, sv.ID)
	}
}

func TestDeleteServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("doomed"))
	keep := f.create(stdioSpec("kept"))
	f.discover(sv.ID, discovery("connect", tool("a", "A", nil), tool("b", "B", nil)))
	f.discover(keep.ID, discovery("connect", tool("a", "A", nil)))
	if err := f.reg.RecordHealth(f.ctx, sv.ID, true, 0, ""); err != nil {
		t.Fatal(err)
	}

	if err := f.reg.DeleteServer(f.ctx, audit.System, sv.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for table, want := range map[string]int{"mcp_tools": 1, "tool_schemas": 1, "tool_state_history": 3, "tool_validations": 1, "discovery_runs": 1, "server_health": 0, "mcp_servers": 1} {
		if n := f.count(`SELECT count(*) FROM ` + table); n != want {
			t.Errorf("%s: got %d rows, want %d", table, n, want)
		}
	}
	if _, err := f.reg.GetServer(f.ctx, sv.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("get deleted: got %v, want ErrNotFound", err)
	}
	del := f.auditPayloads("server.delete")
	if len(del) != 1 || del[0]["name"] != "doomed" || del[0]["tool_count"] != float64(2) || del[0]["type"] != registry.TypeStdio {
		t.Fatalf("server.delete audit: got %v, want one entry for doomed with 2 tools", del)
	}
	if tid := f.strings(`SELECT target_id FROM audit_log WHERE action = 'server.delete'`); tid[0] != sv.ID {
		t.Fatalf("server.delete target: got %q, want %q", tid[0], sv.ID)
	}
	// One on the servers' topic, one on the tools' (the tool list's pages follow that one).
	ev := f.eventPayloads("server.deleted")
	if len(ev) != 2 || ev[0]["id"] != sv.ID || ev[0]["name"] != "doomed" || ev[1]["id"] != sv.ID {
		t.Fatalf("server.deleted events: got %v, want two for %s", ev, sv.ID)
	}
	if topics := f.strings(`SELECT topic FROM events WHERE kind = 'server.deleted' ORDER BY id`); !slices.Equal(topics, []string{"servers", "tools"}) {
		t.Fatalf("server.deleted topics: got %v, want servers and tools", topics)
	}
	if err := f.reg.DeleteServer(f.ctx, audit.System, sv.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("delete again: got %v, want ErrNotFound", err)
	}
	if err := f.reg.DeleteServer(f.ctx, audit.System, "not-a-uuid"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("delete bad id: got %v, want ErrNotFound", err)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'server.delete'`); n != 1 {
		t.Fatalf("got %d server.delete audit rows, want 1", n)
	}
}

func TestSetStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(httpSpec("status"))
	info := &registry.ServerInfo{Name: "remote", Version: "1.2.3", ProtocolVersion: "2025-06-18",
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true}}`), Instructions: "be nice"}
	steps := []struct {
		name          string
		update        registry.StatusUpdate
		wantChanged   bool
		wantStatus    string
		wantLastError *string
		wantConnected bool // last_connected is set
	}{
		{"connected with info", registry.StatusUpdate{Status: registry.StatusConnected, Info: info}, true, registry.StatusConnected, nil, true},
		{"connected again", registry.StatusUpdate{Status: registry.StatusConnected}, false, registry.StatusConnected, nil, true},
		{"error", registry.StatusUpdate{Status: registry.StatusError, Error: "boom"}, true, registry.StatusError, ptr("boom"), true},
		{"same error again", registry.StatusUpdate{Status: registry.StatusError, Error: "boom"}, false, registry.StatusError, ptr("boom"), true},
		{"other error", registry.StatusUpdate{Status: registry.StatusError, Error: "bang"}, true, registry.StatusError, ptr("bang"), true},
		{"connected clears the error", registry.StatusUpdate{Status: registry.StatusConnected}, true, registry.StatusConnected, nil, true},
		{"connecting", registry.StatusUpdate{Status: registry.StatusConnecting}, true, registry.StatusConnecting, nil, true},
		{"connecting again", registry.StatusUpdate{Status: registry.StatusConnecting}, false, registry.StatusConnecting, nil, true},
		{"error before leaving it", registry.StatusUpdate{Status: registry.StatusError, Error: "gone"}, true, registry.StatusError, ptr("gone"), true},
		// The last error stays on record after the error status ends; repeating the
		// new status is still no change.
		{"disconnected keeps the last error", registry.StatusUpdate{Status: registry.StatusDisconnected}, true, registry.StatusDisconnected, ptr("gone"), true},
		{"disconnected again", registry.StatusUpdate{Status: registry.StatusDisconnected}, false, registry.StatusDisconnected, ptr("gone"), true},
		{"disconnected a third time", registry.StatusUpdate{Status: registry.StatusDisconnected}, false, registry.StatusDisconnected, ptr("gone"), true},
	}
	for _, st := range steps {
		before := len(f.eventPayloads("server.status"))
		changed, err := f.reg.SetStatus(f.ctx, sv.ID, st.update)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if changed != st.wantChanged {
			t.Fatalf("%s: got changed %v, want %v", st.name, changed, st.wantChanged)
		}
		evs := f.eventPayloads("server.status")
		wantEvents := before
		if st.wantChanged {
			wantEvents++
		}
		if len(evs) != wantEvents {
			t.Fatalf("%s: got %d server.status events, want %d", st.name, len(evs), wantEvents)
		}
		got := mustGet(t, f, sv.ID)
		if got.Status != st.wantStatus {
			t.Fatalf("%s: got status %q, want %q", st.name, got.Status, st.wantStatus)
		}
		if fmt.Sprint(deref(got.LastError)) != fmt.Sprint(deref(st.wantLastError)) || (got.LastError == nil) != (st.wantLastError == nil) {
			t.Fatalf("%s: got last_error %v, want %v", st.name, deref(got.LastError), deref(st.wantLastError))
		}
		if (got.LastConnected != nil) != st.wantConnected {
			t.Fatalf("%s: got last_connected %v, want set %v", st.name, got.LastConnected, st.wantConnected)
		}
		if st.wantChanged {
			ev := evs[len(evs)-1]
			if ev["status"] != st.wantStatus || ev["id"] != sv.ID || ev["name"] != "status" {
				t.Fatalf("%s: got event %v, want status %q for %s", st.name, ev, st.wantStatus, sv.ID)
			}
			if st.wantLastError != nil && ev["last_error"] != *st.wantLastError {
				t.Fatalf("%s: got event last_error %v, want %q", st.name, ev["last_error"], *st.wantLastError)
			}
		}
	}
	got := mustGet(t, f, sv.ID)
	if got.Info.Name != "remote" || got.Info.Version != "1.2.3" || got.Info.ProtocolVersion != "2025-06-18" || got.Info.Instructions != "be nice" {
		t.Fatalf("server info: got %+v, want %+v", got.Info, *info)
	}
	var caps map[string]any
	if err := json.Unmarshal(got.Info.Capabilities, &caps); err != nil || caps["tools"] == nil {
		t.Fatalf("capabilities: got %s, %v", got.Info.Capabilities, err)
	}
	if raw := f.strings(`SELECT server_info->>'version' FROM mcp_servers WHERE id = $1`, sv.ID); raw[0] != "1.2.3" {
		t.Fatalf("server_info column: got version %q, want 1.2.3", raw[0])
	}
	if evs := f.eventPayloads("server.status"); evs[1]["previous"] != registry.StatusConnected {
		t.Fatalf("error event: got previous %v, want connected", evs[1]["previous"])
	}
	counts, err := f.reg.CountServers(f.ctx)
	if err != nil || counts[registry.StatusDisconnected] != 1 || len(counts) != 1 {
		t.Fatalf("count by status: got %v, %v; want disconnected: 1", counts, err)
	}
	if _, err := f.reg.SetStatus(f.ctx, "00000000-0000-0000-0000-0000000000ff", registry.StatusUpdate{Status: registry.StatusConnected}); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("unknown server: got %v, want ErrNotFound", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestHealthHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("health"))
	if err := f.reg.RecordHealth(f.ctx, sv.ID, true, 1500*time.Microsecond, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.RecordHealth(f.ctx, sv.ID, false, 0, "timeout"); err != nil {
		t.Fatal(err)
	}
	hs, err := f.reg.HealthHistory(f.ctx, sv.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("got %d health rows, want 2", len(hs))
	}
	var ok, bad registry.Health
	for _, h := range hs {
		if h.OK {
			ok = h
		} else {
			bad = h
		}
	}
	if ok.LatencyMS == nil || *ok.LatencyMS != 1.5 || ok.Error != nil {
		t.Fatalf("ok check: got latency %v error %v, want 1.5 ms and no error", ok.LatencyMS, ok.Error)
	}
	if bad.LatencyMS != nil || bad.Error == nil || *bad.Error != "timeout" {
		t.Fatalf("failed check: got latency %v error %v, want none and timeout", bad.LatencyMS, bad.Error)
	}
	f.exec(`UPDATE server_health SET checked_at = now() - interval '2 days' WHERE ok`)
	n, err := f.reg.PruneHealth(f.ctx, 24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("prune: got %d, %v; want 1", n, err)
	}
}

func TestListServers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mk := func(sp registry.Spec, desc string) registry.Server {
		sp.Description = desc
		return f.create(sp)
	}
	mk(stdioSpec("alpha"), "Files on disk")
	mk(stdioSpec("beta"), "100% cotton")
	mk(stdioSpec("gamma"), "under_score here")
	delta := mk(httpSpec("delta"), "Remote FILES")
	eps := stdioSpec("epsilon")
	eps.Enabled = false
	mk(eps, "backslash \\ inside")
	mk(func() registry.Spec { s := httpSpec("zeta"); s.Type = registry.TypeSSE; return s }(), "percent-free")
	if _, err := f.reg.SetStatus(f.ctx, delta.ID, registry.StatusUpdate{Status: registry.StatusConnected}); err != nil {
		t.Fatal(err)
	}
	all := []string{"alpha", "beta", "delta", "epsilon", "gamma", "zeta"}
	cases := []struct {
		name      string
		q         registry.ListQuery
		want      []string
		wantTotal int
	}{
		{"all by name", registry.ListQuery{}, all, 6},
		{"name, case-insensitive", registry.ListQuery{Q: "ALP"}, []string{"alpha"}, 1},
		{"description, case-insensitive", registry.ListQuery{Q: "files"}, []string{"alpha", "delta"}, 2},
		{"query trimmed", registry.ListQuery{Q: "  files  "}, []string{"alpha", "delta"}, 2},
		{"percent literal", registry.ListQuery{Q: "%"}, []string{"beta"}, 1},
		{"percent inside literal", registry.ListQuery{Q: "0% c"}, []string{"beta"}, 1},
		{"underscore literal", registry.ListQuery{Q: "_"}, []string{"gamma"}, 1},
		{"underscore not a wildcard", registry.ListQuery{Q: "a_p"}, []string{}, 0},
		{"backslash literal", registry.ListQuery{Q: `\`}, []string{"epsilon"}, 1},
		{"no match", registry.ListQuery{Q: "nothing"}, []string{}, 0},
		{"status connected", registry.ListQuery{Status: registry.StatusConnected}, []string{"delta"}, 1},
		{"status disconnected", registry.ListQuery{Status: registry.StatusDisconnected}, []string{"epsilon"}, 1},
		{"status connecting", registry.ListQuery{Status: registry.StatusConnecting}, []string{"alpha", "beta", "gamma", "zeta"}, 4},
		{"type stdio", registry.ListQuery{Type: registry.TypeStdio}, []string{"alpha", "beta", "epsilon", "gamma"}, 4},
		{"type sse", registry.ListQuery{Type: registry.TypeSSE}, []string{"zeta"}, 1},
		{"type streamable_http", registry.ListQuery{Type: registry.TypeStreamableHTTP}, []string{"delta"}, 1},
		{"enabled", registry.ListQuery{Enabled: ptr(true)}, []string{"alpha", "beta", "delta", "gamma", "zeta"}, 5},
		{"disabled", registry.ListQuery{Enabled: ptr(false)}, []string{"epsilon"}, 1},
		{"query and type", registry.ListQuery{Q: "files", Type: registry.TypeStdio}, []string{"alpha"}, 1},
		{"page 1", registry.ListQuery{Limit: 2}, []string{"alpha", "beta"}, 6},
		{"page 2", registry.ListQuery{Limit: 2, Offset: 2}, []string{"delta", "epsilon"}, 6},
		{"page 3", registry.ListQuery{Limit: 2, Offset: 4}, []string{"gamma", "zeta"}, 6},
		{"past the end", registry.ListQuery{Limit: 2, Offset: 6}, []string{}, 6},
		{"negative offset", registry.ListQuery{Limit: 1, Offset: -5}, []string{"alpha"}, 6},
		{"filtered page", registry.ListQuery{Type: registry.TypeStdio, Limit: 2, Offset: 1}, []string{"beta", "epsilon"}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			list, total, err := f.reg.ListServers(f.ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, s := range list {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, tc.want) || total != tc.wantTotal {
				t.Fatalf("got %v (total %d), want %v (total %d)", got, total, tc.want, tc.wantTotal)
			}
		})
	}
}

// TestListServersToolCount checks tool_count counts available tools only.
func TestListServersToolCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("counted"))
	f.discover(sv.ID, discovery("connect", tool("a", "", nil), tool("b", "", nil), tool("c", "", nil)))
	f.discover(sv.ID, discovery("connect", tool("a", "", nil), tool("b", "", nil)))
	list, _, err := f.reg.ListServers(f.ctx, registry.ListQuery{Q: "counted"})
	if err != nil || len(list) != 1 || list[0].ToolCount != 2 {
		t.Fatalf("got %+v, %v; want one server with 2 tools", list, err)
	}
	if got := mustGet(t, f, sv.ID); got.ToolCount != 2 {
		t.Fatalf("get: got tool_count %d, want 2", got.ToolCount)
	}
	if got, err := f.reg.GetServerByName(f.ctx, "counted"); err != nil || got.ID != sv.ID {
		t.Fatalf("by name: got %v, %v", got.ID, err)
	}
}

func TestPreviewConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sp := httpSpec("preview")
	sp.Headers = map[string]string{"X-A": "a", "X-B": "b"}
	sp.AuthType, sp.AuthToken = registry.AuthBearer, "tok"
	sv := f.create(sp)
	stored := f.connection(sv.ID)
	cases := []struct {
		name        string
		id          string
		patch       registry.Patch
		wantHeaders map[string]string
		wantErr     []string
	}{
		{"existing, unchanged", sv.ID, registry.Patch{}, map[string]string{"X-A": "a", "X-B": "b", "Authorization": "Bearer tok"}, nil},
		{"existing with a new header value", sv.ID, registry.Patch{Headers: map[string]*string{"X-A": ptr("a2"), "X-B": nil}},
			map[string]string{"X-A": "a2", "Authorization": "Bearer tok"}, nil},
		{"existing with a new token", sv.ID, registry.Patch{AuthToken: ptr("tok2")},
			map[string]string{"X-A": "a", "X-B": "b", "Authorization": "Bearer tok2"}, nil},
		{"existing with a bad patch", sv.ID, registry.Patch{URL: ptr("ftp://x")}, nil, []string{"url"}},
		{"new server", "", registry.PatchFromSpec(httpSpec("new")), map[string]string{"X-Trace": "1"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := f.reg.PreviewConnection(f.ctx, tc.id, tc.patch)
			if tc.wantErr != nil {
				wantFields(t, err, tc.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(c.Headers, tc.wantHeaders) {
				t.Fatalf("headers: got %v, want %v", c.Headers, tc.wantHeaders)
			}
		})
	}
	t.Cleanup(func() {
		// Previews store nothing.
		if after := f.connection(sv.ID); after.Fingerprint != stored.Fingerprint {
			t.Errorf("stored connection changed by a preview: got %v, want %v", after.Headers, stored.Headers)
		}
		if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 1 {
			t.Errorf("got %d servers, want 1", n)
		}
	})
	if _, err := f.reg.PreviewConnection(f.ctx, "00000000-0000-0000-0000-0000000000ff", registry.Patch{}); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("unknown id: got %v, want ErrNotFound", err)
	}
}

// PruneDiscoveries keeps a server's newest discoveries (past the count, none), and of
// the old ones only the newest; another server's are its own.
func TestPruneDiscoveries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.create(stdioSpec("pa")), f.create(stdioSpec("pb"))
	for i := range 6 {
		for _, sv := range []registry.Server{a, b} {
			f.exec(`INSERT INTO discovery_runs (server_id, trigger, actor, status, pages, error, started_at)
				VALUES ($1, 'list_changed', 'system', 'failed', 1, 'x', now() - make_interval(days => $2))`, sv.ID, 60-10*i)
		}
	}
	// Newest first, a's runs are 10, 20, ... 60 days old; b's too.
	n, err := f.reg.PruneDiscoveries(f.ctx, 4, 35*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Each keeps its 4 newest (10 to 40 days old), less the one past 35 days (40): 3.
	if n != 6 || f.count(`SELECT count(*) FROM discovery_runs WHERE server_id = $1`, a.ID) != 3 ||
		f.count(`SELECT count(*) FROM discovery_runs WHERE server_id = $1`, b.ID) != 3 {
		t.Fatalf("pruned %d; left a %d, b %d", n, f.count(`SELECT count(*) FROM discovery_runs WHERE server_id = $1`, a.ID),
			f.count(`SELECT count(*) FROM discovery_runs WHERE server_id = $1`, b.ID))
	}
	// All of a server's old: the newest stays, as what the page shows last.
	f.exec(`UPDATE discovery_runs SET started_at = now() - interval '90 days'`)
	if _, err := f.reg.PruneDiscoveries(f.ctx, 4, 35*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := f.count(`SELECT count(*) FROM discovery_runs`); got != 2 {
		t.Fatalf("after all were old: %d left, want each server's newest", got)
	}
}

// manyHeaders is n headers X-0 … X-(n-1) with empty values.
func manyHeaders(n int) map[string]*string {
	h := map[string]*string{}
	for i := range n {
		h[fmt.Sprintf("X-%d", i)] = ptr("")
	}
	return h
}

// A server's env variables are bounded, as its headers are (TestPatchHeadersAndAuth).
func TestEnvVarsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sp := stdioSpec("many-env")
	sp.Env = map[string]string{}
	for i := range registry.MaxEnvVars + 1 {
		sp.Env[fmt.Sprintf("V%d", i)] = "x"
	}
	if _, err := f.reg.CreateServer(f.ctx, audit.System, sp); err == nil {
		t.Fatal("a server with more env variables than the bound was registered")
	} else {
		wantFields(t, err, "env")
	}
}
