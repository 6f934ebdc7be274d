package mcpclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A person's Reconnect whose audit record cannot be written does not happen: the
// server's process is not restarted, no replica is told to reconnect, and the caller is
// told why. Once the record can be written it goes ahead, recorded and announced.
func TestReconnectAskedRefusedWithoutItsAuditRecord(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, _ := stdioSpec(t, "audited", &mcptest.Options{Name: "audited"})
	sv := e.create(t, spec)
	starts := func() int {
		n := 0
		for _, line := range e.mgr.Snapshot(sv.ID).Stderr {
			if strings.Contains(line, "mcptest: audited started pid") {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { _, err := e.mgr.Session(sv.ID); return err == nil && starts() == 1 },
		"never connected")
	before, _ := e.mgr.Session(sv.ID)
	reconnects := func() (records, events int) {
		return testkit.Count(t, e.pool, `SELECT count(*) FROM audit_log WHERE action = 'server.reconnect' AND target_id = $1`, sv.ID),
			testkit.Count(t, e.pool, `SELECT count(*) FROM events WHERE kind = 'server.reconnect' AND payload->>'id' = $1`, sv.ID)
	}

	testkit.Exec(t, e.pool, `
		CREATE FUNCTION refuse_reconnect() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.action = 'server.reconnect' THEN RAISE EXCEPTION 'audit log full'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_reconnect BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_reconnect();`)
	_, err := e.mgr.ReconnectAsked(context.Background(), audit.System, sv.ID)
	if f, ok := fault.As(err); !ok || f.Kind != fault.KindUnavailable || !strings.Contains(f.Message, "audit record could not be written") {
		t.Fatalf("Reconnect without its audit record: got %v, want an unavailable fault that says the audit record could not be written", err)
	}
	if cs, err := e.mgr.Session(sv.ID); err != nil || cs != before {
		t.Fatalf("after a refused Reconnect: session %p (%v), want the one before, %p", cs, err, before)
	}
	never(t, time.Second, func() bool { return starts() != 1 }, "the server's process was restarted with no audit record")
	if r, ev := reconnects(); r != 0 || ev != 0 {
		t.Fatalf("after a refused Reconnect: %d audit records, %d events; want none", r, ev)
	}

	testkit.Exec(t, e.pool, `DROP TRIGGER refuse_reconnect ON audit_log`)
	got, err := e.mgr.ReconnectAsked(context.Background(), audit.System, sv.ID)
	if err != nil || got.ID != sv.ID {
		t.Fatalf("Reconnect: got %v (server %q)", err, got.ID)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return starts() == 2 }, "the server's process was never started again")
	if r, ev := reconnects(); r != 1 || ev != 1 {
		t.Fatalf("after a Reconnect: %d audit records, %d events; want 1 and 1", r, ev)
	}
}

// A person's Reconnect of a disabled server is refused before anything is recorded.
func TestReconnectAskedOfADisabledServerIsNotRecorded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, _ := stdioSpec(t, "off", &mcptest.Options{Name: "off"})
	spec.Enabled = false
	sv := e.create(t, spec)
	if _, err := e.mgr.ReconnectAsked(context.Background(), audit.System, sv.ID); !errors.Is(err, mcpclient.ErrNotConnected) {
		t.Fatalf("Reconnect of a disabled server: got %v, want not connected", err)
	}
	if n := testkit.Count(t, e.pool, `SELECT count(*) FROM audit_log WHERE action = 'server.reconnect'`); n != 0 {
		t.Fatalf("a refused Reconnect was recorded: %d audit records", n)
	}
	if _, err := e.mgr.ReconnectAsked(context.Background(), audit.System, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Reconnect of no server: got %v, want not found", err)
	}
}
