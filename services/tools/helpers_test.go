package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var (
	alice = audit.Actor{Kind: audit.ActorUser, Name: "alice"}
	bob   = audit.Actor{Kind: audit.ActorUser, Name: "bob"}
)

// fixture is one test's database with the tool service on it.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	keys *secrets.Keyring
	svc  *tools.Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.New(t)
	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: context.Background(), pool: pool, keys: keys,
		svc: tools.New(pool, keys, &tools.Options{Logger: slog.New(slog.DiscardHandler)})}
}

// server registers a server row directly and returns its id.
func (f *fixture) server(name string, trusted bool) string {
	f.t.Helper()
	id := uuid.NewString()
	f.exec(`INSERT INTO mcp_servers (id, name, server_type, command, trusted) VALUES ($1, $2, 'stdio', 'x', $3)`, id, name, trusted)
	return id
}

// toolSpec is a tool row to insert.
type toolSpec struct {
	server      string
	name        string
	title       string
	description string
	status      string
	schema      string // input schema; "" for an empty object schema
	annotations string // "" for NULL
	risk        string // risk_override; "" for NULL
}

// tool inserts a tool row directly and returns its id.
func (f *fixture) tool(s toolSpec) string {
	f.t.Helper()
	id := uuid.NewString()
	if s.status == "" {
		s.status = "validated"
	}
	if s.schema == "" {
		s.schema = `{"type":"object","properties":{}}`
	}
	if s.description == "" {
		s.description = "Does " + s.name + " for the tests and returns what it did."
	}
	var ann, rk *string
	if s.annotations != "" {
		ann = &s.annotations
	}
	if s.risk != "" {
		rk = &s.risk
	}
	def, _ := json.Marshal(map[string]any{"name": s.name, "description": s.description, "inputSchema": json.RawMessage(s.schema)})
	f.exec(`INSERT INTO mcp_tools (id, server_id, name, title, description, input_schema, annotations, definition,
		definition_hash, status, risk_override) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		id, s.server, s.name, s.title, s.description, s.schema, ann, def, "hash-"+s.name, s.status, rk)
	return id
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

func (f *fixture) strings(sql string, args ...any) []string {
	f.t.Helper()
	return testkit.Strings(f.t, f.pool, sql, args...)
}

func (f *fixture) str(sql string, args ...any) string {
	f.t.Helper()
	var s string
	if err := f.pool.QueryRow(f.ctx, sql, args...).Scan(&s); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func (f *fixture) get(id string) tools.Item {
	f.t.Helper()
	it, err := f.svc.Get(f.ctx, id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return it
}

func (f *fixture) status(id string) string {
	f.t.Helper()
	return f.str(`SELECT status FROM mcp_tools WHERE id = $1`, id)
}

// history is a tool's state history, oldest first, as "from→to".
func (f *fixture) history(id string) []string {
	f.t.Helper()
	return f.strings(`SELECT coalesce(from_status, '') || '→' || to_status FROM tool_state_history WHERE tool_id = $1 ORDER BY id`, id)
}

// auditPayloads returns the payloads of the audit rows with action on target id, oldest first.
func (f *fixture) auditPayloads(action, id string) []map[string]any {
	f.t.Helper()
	raws := f.strings(`SELECT payload::text FROM audit_log WHERE action = $1 AND target_id = $2 ORDER BY id`, action, id)
	out := make([]map[string]any, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal([]byte(r), &out[i]); err != nil {
			f.t.Fatalf("payload %s: %v", r, err)
		}
	}
	return out
}

// listAll pages through q and returns every item.
func (f *fixture) listAll(q tools.Query) []tools.Item {
	f.t.Helper()
	var all []tools.Item
	for pages := 0; ; pages++ {
		if pages > 10000 {
			f.t.Fatal("paging does not end")
		}
		p, err := f.svc.List(f.ctx, q)
		if err != nil {
			f.t.Fatalf("list %+v: %v", q, err)
		}
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			return all
		}
		q.Cursor = p.NextCursor
	}
}

func names(items []tools.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Name
	}
	return out
}

func ids(items []tools.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func sortedNames(items []tools.Item) []string {
	return slices.Sorted(slices.Values(names(items)))
}

// wantFields fails unless err is a *verr.Error naming exactly the fields want (in any order).
func wantFields(t *testing.T, err error, want ...string) *verr.Error {
	t.Helper()
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got error %v (%T), want a *verr.Error naming %v", err, err, want)
	}
	var got []string
	for _, fl := range ve.Fields {
		got = append(got, fl.Field)
		if strings.TrimSpace(fl.Message) == "" {
			t.Errorf("field %s has no message", fl.Field)
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, w) {
		t.Fatalf("error %v names %v, want %v", err, got, w)
	}
	return ve
}

func ptr[T any](v T) *T { return &v }
