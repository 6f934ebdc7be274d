package audit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// loadChain appends n valid entries after the chain's head (ids from 1 on an empty
// log) with one COPY, hashes computed here: millions of rows load in seconds, where
// Append would take an hour. Payloads are the size of a tool call's.
func loadChain(tb testing.TB, q interface {
	CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error)
}, from int64, prev []byte, n int) []byte {
	tb.Helper()
	at := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Duration(n) * time.Millisecond)
	actor := "00000000-0000-0000-0000-00000000000a"
	i := 0
	var row [16]any
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		id := from + int64(i)
		r := Record{ID: id, At: at.Add(time.Duration(i) * time.Millisecond), ActorKind: ActorToken, ActorID: &actor, ActorName: "agent-7",
			Action: "tool.call", TargetType: "tool", TargetID: "2f7c1a52-3a43-4c55-9d1e-6f5a0d8c" + fmt.Sprintf("%04x", i&0xffff),
			TargetName: "everything__echo", IP: "10.1.2.3", RequestID: "req-" + strconv.FormatInt(id, 36),
			Payload: fmt.Appendf(nil, `{"call_id":"c%d","arguments":{"message":"hello %d"},"risk":"low","duration_ms":1.2}`, id, i),
			Result:  ResultSuccess, PrevHash: prev}
		if i%97 == 0 {
			r.Result = ResultDenied
		}
		r.Hash = r.computeHash()
		prev = r.Hash
		i++
		row = [16]any{r.ID, r.At, r.ActorKind, r.ActorID, r.ActorName, r.Action, r.TargetType, r.TargetID, r.TargetName, r.IP,
			r.RequestID, string(r.Payload), r.Result, r.PrevHash, r.Hash}
		return row[:15], nil
	})
	_, err := q.CopyFrom(context.Background(), pgx.Identifier{"audit_log"},
		[]string{"id", "at", "actor_kind", "actor_id", "actor_name", "action", "target_type", "target_id", "target_name", "ip",
			"request_id", "payload", "result", "prev_hash", "hash"}, src)
	if err != nil {
		tb.Fatal(err)
	}
	return prev
}

// BenchmarkVerify measures `audit verify` throughput (docs/architecture.md,
// Performance, P6: at least 2,000,000 rows/s) on a chain of TOOLWARDEN_BENCH_AUDIT_ROWS
// entries (default 2,000,000), with one worker and with one per CPU.
func BenchmarkVerify(b *testing.B) {
	n := 2_000_000
	if v, err := strconv.Atoi(os.Getenv("TOOLWARDEN_BENCH_AUDIT_ROWS")); err == nil && v > 0 {
		n = v
	}
	pool := dbtest.New(b)
	ctx := context.Background()
	start := time.Now()
	loadChain(b, pool, 1, genesis, n)
	// As autovacuum leaves a table that has been written a while ago.
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE audit_log"); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d entries in %s", n, time.Since(start).Round(time.Millisecond))
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			// CPU time besides the wall clock: on a shared machine the rate says how
			// busy the others were; CPU per row says what verify costs, and 2 cores ÷
			// (Go + database CPU per row) is the rate an idle 2-core machine gets.
			goCPU0, dbCPU0 := processCPU(b), databaseCPU(b, pool)
			var rows int64
			for b.Loop() {
				res, err := VerifyWith(ctx, pool, VerifyOptions{Workers: workers})
				if err != nil || !res.OK() || res.Checked != int64(n) {
					b.Fatalf("verify: %+v %v", res, err)
				}
				rows += res.Checked
			}
			goCPU, dbCPU := processCPU(b)-goCPU0, databaseCPU(b, pool)-dbCPU0
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(goCPU.Nanoseconds())/float64(rows), "go-cpu-ns/row")
			b.ReportMetric(float64(dbCPU.Nanoseconds())/float64(rows), "db-cpu-ns/row")
			b.ReportMetric(float64(n), "rows") // the chain's length
		})
	}
	// The rows alone: verify's COPY of the whole chain into nothing, on one connection.
	// Cores ÷ (database + Go CPU per row) is the most any verify that reads its rows
	// from PostgreSQL can reach on this machine, whatever it does with them.
	b.Run("copy-only", func(b *testing.B) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, readPlan); err != nil {
			b.Fatal(err)
		}
		goCPU0, dbCPU0 := processCPU(b), databaseCPU(b, pool)
		var rows int64
		for b.Loop() {
			tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, chunkCopy(1, int64(n)))
			if err != nil || tag.RowsAffected() != int64(n) {
				b.Fatalf("copy: %v %v", tag, err)
			}
			rows += tag.RowsAffected()
		}
		goCPU, dbCPU := processCPU(b)-goCPU0, databaseCPU(b, pool)-dbCPU0
		perRow := float64((goCPU + dbCPU).Nanoseconds()) / float64(rows)
		b.ReportMetric(float64(goCPU.Nanoseconds())/float64(rows), "go-cpu-ns/row")
		b.ReportMetric(float64(dbCPU.Nanoseconds())/float64(rows), "db-cpu-ns/row")
		// Every core, not GOMAXPROCS: PostgreSQL's part runs outside this process.
		b.ReportMetric(float64(runtime.NumCPU())*1e9/perRow, "ceiling-rows/s")
	})
}

// processCPU is the CPU time this process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// databaseCPU is the CPU time the server processes of pool's database have used (its
// connections stay open across runs, so a difference counts what verify made them do).
func databaseCPU(tb testing.TB, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) time.Duration {
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		tb.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		tb.Fatal(err)
	}
	var total time.Duration
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // a connection that ended
		}
		// Fields after the command name (which may hold spaces): utime and stime are
		// the 14th and 15th fields, in clock ticks (100 a second on Linux).
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total
}
