package audit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// seedChain writes n valid chained entries with COPY (much faster than n Appends), so
// Verify can be measured on a large log.
func seedChain(tb testing.TB, q interface {
	CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error)
}, n int) {
	tb.Helper()
	prev := genesis
	at := time.Now().UTC().Truncate(time.Microsecond)
	rows := make([][]any, 0, n)
	for i := 1; i <= n; i++ {
		r := Record{ID: int64(i), At: at, ActorKind: ActorUser, ActorName: "bench", Action: "bench.action",
			TargetType: "thing", TargetID: fmt.Sprint(i), IP: "127.0.0.1", Payload: []byte(fmt.Sprintf(`{"i":%d,"note":"x"}`, i)), PrevHash: prev}
		r.Hash = r.computeHash()
		prev = r.Hash
		rows = append(rows, []any{r.ID, r.At, r.ActorKind, r.ActorName, r.Action, r.TargetType, r.TargetID, r.IP, string(r.Payload), r.PrevHash, r.Hash})
	}
	_, err := q.CopyFrom(context.Background(), pgx.Identifier{"audit_log"},
		[]string{"id", "at", "actor_kind", "actor_name", "action", "target_type", "target_id", "ip", "payload", "prev_hash", "hash"},
		pgx.CopyFromRows(rows))
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkAppend measures one audited action's cost: chain head, insert, event.
func BenchmarkAppend(b *testing.B) {
	pool := dbtest.New(b)
	ctx := context.Background()
	for b.Loop() {
		err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			_, err := Append(ctx, tx, Entry{Actor: System, Action: "bench.append", Payload: map[string]int{"n": 1}})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppender measures the append a tool call waits for (the router's, through
// Appender with the head remembered), committed synchronously (MEDIUM and HIGH calls)
// and asynchronously (LOW calls). On the durable cluster of `make bench` the
// difference is the WAL flush.
func BenchmarkAppender(b *testing.B) {
	for _, tc := range []struct {
		name   string
		commit db.Commit
	}{{"synchronous", db.Synchronous}, {"asynchronous", db.Asynchronous}} {
		b.Run(tc.name, func(b *testing.B) {
			pool := dbtest.New(b)
			ctx := context.Background()
			var a Appender
			entries := []Entry{{Actor: System, Action: "bench.call", TargetType: "tool", Payload: map[string]any{"call_id": "x", "arguments": map[string]string{"message": "hi"}}}}
			for b.Loop() {
				if _, err := a.Append(ctx, pool, entries, tc.commit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
