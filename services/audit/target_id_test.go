package audit

import (
	"bytes"
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// DESIGN §1 lists target_type and target_id as separate optional filters: a target id
// alone selects that id's entries under any type, in the list, its count of newer
// entries and the export, and is answered from an index on target_id (migration 65),
// not by walking the log, so it stays within P6 on a large log.
func TestTargetIDAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	// 20,000 entries of distinct targets, then four of "x1" under two types and one of
	// "x2" with none of the others' type.
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (id, at, actor_kind, actor_name, action, target_type, target_id, ip, payload, prev_hash, hash)
		SELECT g, now(), 'user', 'bench', 'tool.call', 'tool', 't' || g, '', '{}', '\x00'::bytea, decode(md5(g::text), 'hex')
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entry{
		{Actor: System, Action: "execution.create", TargetType: "execution", TargetID: "x1"},
		{Actor: System, Action: "tool.call", TargetType: "tool", TargetID: "x1"},
		{Actor: System, Action: "server.update", TargetType: "server", TargetID: "x2"},
		{Actor: System, Action: "execution.reject", TargetType: "execution", TargetID: "x1"},
		{Actor: System, Action: "user.login", TargetType: "user"},
	} {
		if err := AppendAlone(ctx, pool, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE audit_log`); err != nil {
		t.Fatal(err)
	}
	l := NewLog(pool)

	f, err := ParseFilter(url.Values{"target_id": {"x1"}})
	if err != nil {
		t.Fatalf("target_id alone: got %v, want it accepted", err)
	}
	p, err := l.List(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Items {
		got = append(got, r.TargetType+"/"+r.Action)
	}
	if want := "execution/execution.reject tool/tool.call execution/execution.create"; strings.Join(got, " ") != want {
		t.Errorf("target_id=x1: got %v, want %s", got, want)
	}
	if n, err := l.CountNewer(ctx, f, p.Items[2].ID); err != nil || n != 2 {
		t.Errorf("count newer of target_id=x1: got %d, %v; want 2", n, err)
	}
	var buf bytes.Buffer
	if err := l.Export(ctx, System, f, FormatJSONL, &buf); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Errorf("export of target_id=x1: got %d lines, want 3", n)
	}

	// The page's own query (its conditions and order) is planned on the target id's
	// index: without one it walks the log by id or reads the whole (type, id) index.
	where, args := f.where()
	args = append(args, DefaultLimit+1)
	rows, err := pool.Query(ctx, `EXPLAIN SELECT id FROM audit_log`+where+f.order()+` LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan, "\n"), "audit_log_target_id_idx") {
		t.Errorf("a page of target_id alone is not read from audit_log_target_id_idx:\n%s", strings.Join(plan, "\n"))
	}
}
