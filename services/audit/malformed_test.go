package audit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A table altered so that an entry cannot be read as the log writes it is tampering,
// not a check that could not run: a NULL names its entry, and the page's check records
// the outcome as failed (it once deleted its row, the page kept showing the last check
// that passed, and the API answered 500).
func TestMalformedEntryFailsTheRecordedCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 10)
	l := NewLog(pool)
	t.Cleanup(l.Close)
	if v, err := l.VerifyNow(ctx, "api"); err != nil || !v.OK {
		t.Fatalf("before: %+v, %v", v, err)
	}
	asSuperuser(t, pool, `ALTER TABLE audit_log ALTER COLUMN request_id DROP NOT NULL`, `UPDATE audit_log SET request_id = NULL WHERE id = 5`)
	v, err := l.VerifyNow(ctx, "api")
	if err != nil || v.OK || v.BadID != 5 || !strings.Contains(v.Reason, "its request_id is NULL") {
		t.Fatalf("a NULL column: %+v, %v; want a failed check at entry 5", v, err)
	}
	if st, err := l.VerifyStatus(ctx); err != nil || st == nil || st.OK || st.BadID != 5 {
		t.Fatalf("status after a NULL column: %+v, %v; want the failed check", st, err)
	}

	// An id of another type cannot be named: the check stops with ErrMalformedLog, its
	// result not OK, and the page records it as failed.
	asSuperuser(t, pool, `ALTER TABLE audit_log ALTER COLUMN id TYPE integer`)
	pool.Reset() // the connections' cached statements read the old type
	res, err := VerifyWith(ctx, pool, VerifyOptions{Workers: 1})
	if !errors.Is(err, ErrMalformedLog) || res.OK() {
		t.Fatalf("an id of another type: ok=%v, %v; want ErrMalformedLog and not OK", res.OK(), err)
	}
	v, err = l.VerifyNow(ctx, "api")
	if err != nil || v.OK || !strings.Contains(v.Reason, "the chain is broken") {
		t.Fatalf("an id of another type: %+v, %v; want a failed check", v, err)
	}
	if st, err := l.VerifyStatus(ctx); err != nil || st == nil || st.OK || !strings.Contains(st.Reason, "not a bigint") {
		t.Fatalf("status after an id of another type: %+v, %v; want the failed check recorded", st, err)
	}
}
