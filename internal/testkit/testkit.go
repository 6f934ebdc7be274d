// Package testkit holds the small helpers every test package needs: waiting for a
// condition, counting rows, a log buffer. It imports no Toolwarden package, so any
// test may use it; fixtures that need the services live in app/apptest.
package testkit

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// WaitFor polls cond every 20 ms until it holds, failing the test with msg when it
// does not within the time given.
func WaitFor(t testing.TB, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Querier is what Count reads through (a pool, a connection or a transaction).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Count runs a query that returns one number (SELECT count(*) …) and returns it,
// failing the test when the query fails.
func Count(t testing.TB, q Querier, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := q.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", sql, err)
	}
	return n
}

// WaitForLockWait waits until a session of this database waits for a lock while
// running a statement that contains marker (a statement comment such as
// "auth.getUser"): a test that holds a lock knows the other side now waits for it.
func WaitForLockWait(t testing.TB, q Querier, marker string) {
	t.Helper()
	WaitFor(t, 30*time.Second, func() bool {
		return Count(t, q, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, marker) > 0
	}, "no statement containing "+marker+" ever waited for a lock")
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a logger's output that a
// test reads).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// LogOnFailure has t log, if it failed, the last lines of logs at level WARN or above
// (slog's text format): the server's side of a failure a test saw only from outside.
func LogOnFailure(t testing.TB, logs *SyncBuffer) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var keep []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, " level=WARN ") || strings.Contains(l, " level=ERROR ") {
				keep = append(keep, l)
			}
		}
		const most = 60
		if len(keep) > most {
			keep = keep[len(keep)-most:]
		}
		if len(keep) > 0 {
			t.Logf("the server's last warnings:\n%s", strings.Join(keep, "\n"))
		}
	})
}

// Execer is what Exec runs statements through.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Exec runs a statement, failing the test when it fails.
func Exec(t testing.TB, q Execer, sql string, args ...any) {
	t.Helper()
	if _, err := q.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Rower is what Strings reads rows through.
type Rower interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Strings runs a query that returns one text column and returns its values.
func Strings(t testing.TB, q Rower, sql string, args ...any) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// CountGoroutines counts the goroutines whose stack contains s (a function's name).
func CountGoroutines(s string) int {
	n := 0
	for _, g := range Goroutines() {
		if strings.Contains(g, s) {
			n++
		}
	}
	return n
}

// Goroutines returns the stack of every goroutine of the process, one string each
// (its header line first: "goroutine 7 [chan receive]:"), for tests that wait for a
// goroutine to be blocked, or to be gone.
func Goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
