package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fixture is one test's database, keyring and registry.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	keys *secrets.Keyring
	reg  *registry.Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.New(t)
	keys := newKeyring(t)
	return &fixture{t: t, ctx: context.Background(), pool: pool, keys: keys, reg: registry.New(pool, keys, nil)}
}

// newKeyring returns a keyring holding the given keys, or one fresh key when none are given.
func newKeyring(t testing.TB, keys ...secrets.Key) *secrets.Keyring {
	t.Helper()
	if len(keys) == 0 {
		keys = []secrets.Key{newKey(t)}
	}
	kr, err := secrets.NewKeyring(keys...)
	if err != nil {
		t.Fatalf("new keyring: %v", err)
	}
	return kr
}

func newKey(t testing.TB) secrets.Key {
	t.Helper()
	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return k
}

func ptr[T any](v T) *T { return &v }

// stdioSpec is a valid stdio registration.
func stdioSpec(name string) registry.Spec {
	return registry.Spec{Name: name, Description: "local files", Type: registry.TypeStdio, Command: "npx",
		Args: []string{"-y", "@example/server"}, Env: map[string]string{"API_KEY": "k1"}, Enabled: true}
}

// httpSpec is a valid streamable HTTP registration.
func httpSpec(name string) registry.Spec {
	return registry.Spec{Name: name, Description: "remote tools", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:3001/mcp", Headers: map[string]string{"X-Trace": "1"}, Enabled: true}
}

// create registers sp as the system and fails the test when that does not work.
func (f *fixture) create(sp registry.Spec) registry.Server {
	f.t.Helper()
	sv, err := f.reg.CreateServer(f.ctx, audit.System, sp)
	if err != nil {
		f.t.Fatalf("create server %q: %v", sp.Name, err)
	}
	return sv
}

// update applies p as the system and fails the test when that does not work.
func (f *fixture) update(id string, p registry.Patch) registry.Server {
	f.t.Helper()
	sv, err := f.reg.UpdateServer(f.ctx, audit.System, id, p)
	if err != nil {
		f.t.Fatalf("update server %s: %v", id, err)
	}
	return sv
}

// connection returns the decrypted connection of server id.
func (f *fixture) connection(id string) registry.Connection {
	f.t.Helper()
	c, err := f.reg.Connection(f.ctx, id)
	if err != nil {
		f.t.Fatalf("connection of %s: %v", id, err)
	}
	return c
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	testkit.Exec(f.t, f.pool, sql, args...)
}

// count runs a query that returns one number.
func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	return testkit.Count(f.t, f.pool, sql, args...)
}

// strings runs a query that returns one text column.
func (f *fixture) strings(sql string, args ...any) []string {
	f.t.Helper()
	return testkit.Strings(f.t, f.pool, sql, args...)
}

// auditPayloads returns the payloads of the audit entries with action, oldest first.
func (f *fixture) auditPayloads(action string) []map[string]any {
	f.t.Helper()
	return decodeAll(f.t, f.strings(`SELECT payload::text FROM audit_log WHERE action = $1 ORDER BY id`, action))
}

// eventPayloads returns the payloads of the events of kind, oldest first.
func (f *fixture) eventPayloads(kind string) []map[string]any {
	f.t.Helper()
	return decodeAll(f.t, f.strings(`SELECT payload::text FROM events WHERE kind = $1 ORDER BY id`, kind))
}

func decodeAll(t *testing.T, raws []string) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal([]byte(r), &out[i]); err != nil {
			t.Fatalf("decode %s: %v", r, err)
		}
	}
	return out
}

// wantFields checks that err is a *verr.Error naming exactly the fields want (any order).
func wantFields(t *testing.T, err error, want ...string) {
	t.Helper()
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got error %v (%T), want a *verr.Error naming %v", err, err, want)
	}
	var got []string
	for _, fe := range ve.Fields {
		got = append(got, fe.Field)
		if fe.Message == "" {
			t.Errorf("field %q: got an empty message, want an explanation", fe.Field)
		}
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got error fields %q (%v), want %q", got, err, want)
	}
	if !registry.IsValidation(err) {
		t.Fatalf("IsValidation(%v): got false, want true", err)
	}
}

// tool is a tool definition with an object input schema built from props (name → JSON
// schema) and required.
func tool(name, description string, props map[string]string, required ...string) registry.ToolDef {
	schema := `{"type":"object","properties":{`
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			schema += ","
		}
		schema += fmt.Sprintf("%q:%s", k, props[k])
	}
	schema += "}"
	if len(required) > 0 {
		req, _ := json.Marshal(required)
		schema += `,"required":` + string(req)
	}
	schema += "}"
	d := registry.ToolDef{Name: name, Description: description, InputSchema: json.RawMessage(schema)}
	d.Raw, _ = json.Marshal(map[string]any{"name": name, "description": description, "inputSchema": json.RawMessage(schema)})
	return d
}

// discovery is a connect-triggered discovery of tools as the system.
func discovery(trigger string, tools ...registry.ToolDef) registry.Discovery {
	return registry.Discovery{Trigger: trigger, Actor: audit.System, StartedAt: time.Now(), Pages: 1, Tools: tools}
}

func (f *fixture) discover(serverID string, d registry.Discovery) registry.DiscoveryResult {
	f.t.Helper()
	res, err := f.reg.ApplyDiscovery(f.ctx, serverID, d)
	if err != nil {
		f.t.Fatalf("apply discovery: %v", err)
	}
	return res
}

// toolsByName returns the stored tools of a server keyed by name.
func (f *fixture) toolsByName(serverID string) map[string]registry.Tool {
	f.t.Helper()
	list, err := f.reg.ServerTools(f.ctx, serverID)
	if err != nil {
		f.t.Fatalf("server tools: %v", err)
	}
	out := make(map[string]registry.Tool, len(list))
	for _, tl := range list {
		out[tl.Name] = tl
	}
	return out
}

// Replicas starting together each ensure the built-in server: one registers it, the
// others find it.
func TestEnsureBuiltinConcurrently(t *testing.T) {
	f := newFixture(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := registry.New(f.pool, f.keys, nil).EnsureBuiltin(f.ctx, "built in")
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("EnsureBuiltin beside three others: %v", err)
		}
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM mcp_servers WHERE server_type = 'builtin'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d built-in servers (%v), want 1", n, err)
	}
}
