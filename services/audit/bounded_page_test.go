package audit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/verr"
)

// onQuery runs fn, once, as the first statement whose SQL starts with prefix starts.
type onQuery struct {
	prefix string
	once   sync.Once
	fn     func()
}

func (o *onQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, o.prefix) {
		o.once.Do(o.fn)
	}
	return ctx
}

func (o *onQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A page's statements are bounded together, not each by its own statement_timeout:
// a search whose two statements each wait 0.9 of browseTimeout (the words' index, then
// the log, each locked by another transaction as the page starts reading and released
// in turn) is stopped at the page's deadline, 1.1 of it, as too broad. The statements
// used to run with the request's context, which bounded only BEGIN and COMMIT: the
// page waited out both locks, 1.8 of it, and failed only at its commit.
func TestBrowsePageStatementsBoundedTogether(t *testing.T) {
	// Not parallel: it sets the package's timeout.
	defer func(d time.Duration) { browseTimeout = d }(browseTimeout)
	browseTimeout = 2 * time.Second
	wait := browseTimeout * 9 / 10

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := dbtest.New(t)
	seedLeaver(t, pool, 10, 10)

	var held sync.WaitGroup
	defer held.Wait() // the locks released before the database goes
	// Taken while the page's transaction has begun (after its IndexSearch, which needs
	// both tables) and has read nothing yet: audit_search, which the page reads first
	// (searchable), for wait, and audit_log, which it reads next, for twice that.
	lock := func() {
		for i, table := range []string{"audit_search", "audit_log"} {
			tx, err := pool.Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`)
			}
			if err != nil {
				t.Errorf("lock %s: %v", table, err)
				if tx != nil {
					tx.Rollback(context.Background()) //nolint:errcheck // only releases the lock
				}
				continue
			}
			held.Add(1)
			time.AfterFunc(time.Duration(i+1)*wait, func() {
				defer held.Done()
				tx.Rollback(context.Background()) //nolint:errcheck // only releases the lock
			})
		}
	}
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = &onQuery{prefix: "/* audit.searchable */", fn: lock}
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	l := NewLog(traced)
	defer l.Close()

	begun := time.Now()
	_, err = l.List(ctx, Filter{Q: "leaver"})
	took := time.Since(begun)
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("q"), "too broad") {
		t.Errorf("q=leaver with each of its statements waiting %s: got %v; want the too-broad error on q", wait, err)
	}
	// The page's deadline is 1.1 of browseTimeout; the locks held it to 1.8.
	if limit := browseTimeout * 29 / 20; took > limit {
		t.Errorf("q=leaver with each of its statements waiting %s: stopped after %s; want at most %s (browseTimeout %s bounds the page's statements together)",
			wait, took.Round(time.Millisecond), limit, browseTimeout)
	}
}
