package audit_test

import (
	"context"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// The appender's own transactions keep the chain whole whether its remembered head is
// current (one round trip), stale (someone else appended: it reads the head again) or
// forgotten around an append in the caller's transaction.
func TestAppender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var a audit.Appender
	two := []audit.Entry{{Actor: audit.System, Action: "appender.a"}, {Actor: audit.System, Action: "appender.b"}}
	for round := range 2 { // no head known, then the remembered one
		announce, err := a.Append(ctx, pool, two, db.Synchronous)
		if err != nil || len(announce) != 2 {
			t.Fatalf("round %d: got %d announcements, %v; want 2", round, len(announce), err)
		}
	}
	appendN(t, pool, 1) // someone else appends: the remembered head is stale
	if _, err := a.Append(ctx, pool, two, db.Synchronous); err != nil {
		t.Fatalf("after a stale head: %v", err)
	}
	if announce, err := a.Append(ctx, pool, nil, db.Synchronous); err != nil || announce != nil {
		t.Fatalf("nothing to append: got %v, %v", announce, err)
	}
	// Asynchronous commits (a LOW call's row) chain like the others, with a remembered
	// head and after a stale one.
	if _, err := a.Append(ctx, pool, two, db.Asynchronous); err != nil {
		t.Fatalf("asynchronous: %v", err)
	}
	appendN(t, pool, 1)
	if _, err := a.Append(ctx, pool, two, db.Asynchronous); err != nil {
		t.Fatalf("asynchronous after a stale head: %v", err)
	}
	if _, err := a.Append(ctx, pool, two, db.Synchronous); err != nil {
		t.Fatalf("synchronous after asynchronous: %v", err)
	}
	res, err := audit.Verify(ctx, pool)
	if err != nil || !res.OK() || res.Checked != 14 {
		t.Fatalf("verify: got %+v, %v; want OK with 14 checked", res, err)
	}
}
