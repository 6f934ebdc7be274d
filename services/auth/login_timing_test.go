package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// traceKey marks the context of the calls whose statements statementLog keeps.
type traceKey struct{}

// statementLog keeps the SQL of every statement run with a traceKey context.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(traceKey{}) != nil {
		l.mu.Lock()
		l.sql = append(l.sql, d.SQL)
		l.mu.Unlock()
	}
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// during returns the statements fn runs with the context it is given.
func (l *statementLog) during(fn func(ctx context.Context)) []string {
	l.mu.Lock()
	l.sql = nil
	l.mu.Unlock()
	fn(context.WithValue(context.Background(), traceKey{}, true))
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sql)
}

// A failed sign-in with a name that is nobody's runs the statements a wrong password
// for an account runs, the count of the account's failures from all addresses among
// them: a round trip fewer would tell, by the time the answer takes, which names are
// accounts. Only what follows from the account reaching its limit (a mark and an audit
// entry naming it) is not done for a name that is nobody's.
func TestFailedSignInRunsTheSameStatementsForAnUnknownName(t *testing.T) {
	t.Parallel()
	log := &statementLog{}
	cfg := dbtest.New(t).Config()
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := &fixture{t: t, ctx: context.Background(), pool: pool,
		svc: auth.New(pool, &auth.Options{Logger: slog.New(slog.DiscardHandler), MaxAccountFailuresAnywhere: 2})}
	t.Cleanup(func() { _ = f.svc.Close(context.Background()) })
	f.createUser("alice", auth.RoleToolUser)

	fail := func(username, ip string) []string {
		return log.during(func(ctx context.Context) {
			if _, err := f.svc.Login(ctx, auth.LoginRequest{Username: username, Password: "not the password", IP: ip}); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("sign-in as %s: got %v, want ErrInvalidCredentials", username, err)
			}
		})
	}
	known := fail("alice", "192.0.2.1")
	unknown := fail("ghost", "192.0.2.2")
	if !slices.Equal(known, unknown) {
		t.Errorf("statements of a failed sign-in:\n  a wrong password for an account: %q\n  a name that is nobody's:         %q\nwant the same",
			firstLines(known), firstLines(unknown))
	}
	counted := 0
	for _, sql := range unknown {
		if strings.Contains(sql, "auth.noteThrottledAnywhere.count") {
			counted++
		}
	}
	if counted != 1 {
		t.Errorf("a failed sign-in with a name that is nobody's counted its failures from all addresses %d times, want once", counted)
	}

	// At the limit, a name that is nobody's is marked and audited as no account is.
	fail("ghost", "192.0.2.3")
	if n := f.count(`SELECT count(*) FROM login_account_throttles WHERE username = 'ghost'`); n != 0 {
		t.Errorf("account throttle marks of a name that is nobody's: %d, want 0", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE payload->>'scope' = 'account'`); n != 0 {
		t.Errorf("account throttle entries of a name that is nobody's: %d, want 0", n)
	}
}

// firstLines is each statement's first line (its marker comment, where it has one).
func firstLines(sqls []string) []string {
	out := make([]string, len(sqls))
	for i, sql := range sqls {
		out[i], _, _ = strings.Cut(strings.TrimSpace(sql), "\n")
	}
	return out
}
