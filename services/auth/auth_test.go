package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testPassword is the password of every user made by fixture.createUser.
const testPassword = "correct horse battery staple"

// fixture is one test's database and auth service.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	svc  *auth.Service
}

func newFixture(t *testing.T, opts *auth.Options) *fixture {
	t.Helper()
	o := auth.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	pool := dbtest.New(t)
	f := &fixture{t: t, ctx: context.Background(), pool: pool, svc: auth.New(pool, &o)}
	// Closed before the database goes (cleanups run last first): its quiet flush of
	// failed sign-ins held back would otherwise write to a closed pool.
	t.Cleanup(func() { _ = f.svc.Close(context.Background()) })
	return f
}

// createUser adds a user with testPassword, as the system.
func (f *fixture) createUser(username string, role auth.Role) auth.User {
	f.t.Helper()
	u, generated, err := f.svc.CreateUser(f.ctx, audit.System, auth.NewUser{Username: username, Role: role, Password: testPassword})
	if err != nil {
		f.t.Fatalf("create user %q: %v", username, err)
	}
	if generated != "" {
		f.t.Fatalf("create user %q with a password: got generated password %q, want none", username, generated)
	}
	return u
}

// login signs username in with pw and fails the test when that does not work.
func (f *fixture) login(username, pw string) auth.Session {
	f.t.Helper()
	return f.loginReq(auth.LoginRequest{Username: username, Password: pw, IP: "192.0.2.1", UserAgent: "test"})
}

func (f *fixture) loginReq(req auth.LoginRequest) auth.Session {
	f.t.Helper()
	s, err := f.svc.Login(f.ctx, req)
	if err != nil {
		f.t.Fatalf("login %q: %v", req.Username, err)
	}
	return s
}

// mustAuth checks that the session token authenticates as u.
func (f *fixture) mustAuth(token string, u auth.User) *auth.Principal {
	f.t.Helper()
	p, err := f.svc.Authenticate(f.ctx, token)
	if err != nil {
		f.t.Fatalf("authenticate session of %s: got %v, want a principal", u.Username, err)
	}
	if p.User.ID != u.ID || p.Kind != audit.ActorUser {
		f.t.Fatalf("authenticate session: got user %s kind %q, want %s kind %q", p.User.Username, p.Kind, u.Username, audit.ActorUser)
	}
	return p
}

// mustNotAuth checks that the session token no longer authenticates.
func (f *fixture) mustNotAuth(token, why string) {
	f.t.Helper()
	if p, err := f.svc.Authenticate(f.ctx, token); !errors.Is(err, auth.ErrUnauthenticated) {
		f.t.Fatalf("authenticate %s: got %+v, %v; want auth.ErrUnauthenticated", why, p, err)
	}
}

// mustNotAuthToken checks that the API token does not authenticate.
func (f *fixture) mustNotAuthToken(token, why string) {
	f.t.Helper()
	if p, err := f.svc.AuthenticateToken(f.ctx, token); !errors.Is(err, auth.ErrUnauthenticated) {
		f.t.Fatalf("authenticate token %s: got %+v, %v; want auth.ErrUnauthenticated", why, p, err)
	}
}

// exec runs SQL that sets up a test case.
// exec changes the database behind the service's back, so its token cache is dropped.
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	testkit.Exec(f.t, f.pool, sql, args...)
	f.svc.ForgetTokens()
}

// count runs a query that returns one number.
func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	return testkit.Count(f.t, f.pool, sql, args...)
}

// auditRow is one audit_log row as the tests look at it.
type auditRow struct {
	Action     string
	ActorKind  string
	ActorID    string
	ActorName  string
	TargetType string
	TargetID   string
	RequestID  string
	Payload    map[string]any
	Raw        string // the whole row as text
}

// audits returns the audit rows with action, oldest first.
func (f *fixture) audits(action string) []auditRow {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT action, actor_kind, coalesce(actor_id::text, ''), actor_name, target_type, target_id,
		request_id, payload::text, a::text FROM audit_log a WHERE action = $1 ORDER BY id`, action)
	if err != nil {
		f.t.Fatalf("audit rows %s: %v", action, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (auditRow, error) {
		var r auditRow
		var payload string
		if err := row.Scan(&r.Action, &r.ActorKind, &r.ActorID, &r.ActorName, &r.TargetType, &r.TargetID, &r.RequestID, &payload, &r.Raw); err != nil {
			return r, err
		}
		return r, json.Unmarshal([]byte(payload), &r.Payload)
	})
	if err != nil {
		f.t.Fatalf("audit rows %s: %v", action, err)
	}
	return out
}

// oneAudit returns the only audit row with action.
func (f *fixture) oneAudit(action string) auditRow {
	f.t.Helper()
	rows := f.audits(action)
	if len(rows) != 1 {
		f.t.Fatalf("audit rows %s: got %d, want 1: %+v", action, len(rows), rows)
	}
	return rows[0]
}

// eventRow is one events row.
type eventRow struct {
	Topic, Kind string
	Payload     auth.SessionEvent
}

// events returns the events of kind, oldest first.
func (f *fixture) events(kind string) []eventRow {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT topic, kind, payload::text FROM events WHERE kind = $1 ORDER BY id`, kind)
	if err != nil {
		f.t.Fatalf("events %s: %v", kind, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (eventRow, error) {
		var e eventRow
		var payload string
		if err := row.Scan(&e.Topic, &e.Kind, &payload); err != nil {
			return e, err
		}
		return e, json.Unmarshal([]byte(payload), &e.Payload)
	})
	if err != nil {
		f.t.Fatalf("events %s: %v", kind, err)
	}
	return out
}

// verifyAudit checks the whole audit chain and that it holds want entries (want < 0:
// any number).
func (f *fixture) verifyAudit(want int64) {
	f.t.Helper()
	res, err := audit.Verify(f.ctx, f.pool)
	if err != nil {
		f.t.Fatalf("audit.Verify: %v", err)
	}
	if !res.OK() {
		f.t.Fatalf("audit.Verify: got bad entry %d (%s), want OK", res.BadID, res.Reason)
	}
	if want >= 0 && res.Checked != want {
		f.t.Fatalf("audit.Verify: got %d entries checked, want %d", res.Checked, want)
	}
}

// actorOf is the audit actor of u acting through the web UI.
func actorOf(u auth.User) audit.Actor {
	return audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username, IP: "192.0.2.10", RequestID: "req-1"}
}

// fieldErr returns err as a *verr.Error or fails the test.
func fieldErr(t *testing.T, err error) *verr.Error {
	t.Helper()
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got error %v (%T), want *verr.Error", err, err)
	}
	return ve
}

// conflictErr returns err as a conflict fault or fails the test.
func conflictErr(t *testing.T, err error) *fault.Error {
	t.Helper()
	ce, ok := fault.As(err)
	if !ok || ce.Kind != fault.KindConflict {
		t.Fatalf("got error %v (%T), want a conflict", err, err)
	}
	if ce.Message == "" {
		t.Fatal("the conflict has an empty message, want one for people")
	}
	return ce
}

func sha(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func TestPrincipalActor(t *testing.T) {
	t.Parallel()
	var nobody *auth.Principal
	if got, want := nobody.Actor("198.51.100.1", "r1"), (audit.Actor{Kind: audit.ActorAnonymous, IP: "198.51.100.1", RequestID: "r1"}); got != want {
		t.Errorf("nil principal actor: got %+v, want %+v", got, want)
	}
	u := auth.User{ID: "0d4c1f5e-0000-4000-8000-000000000001", Username: "alice", Role: auth.RoleToolUser}
	for _, kind := range []string{audit.ActorUser, audit.ActorToken} {
		p := &auth.Principal{User: u, Kind: kind}
		want := audit.Actor{Kind: kind, ID: u.ID, Name: "alice", IP: "198.51.100.1", RequestID: "r1"}
		if got := p.Actor("198.51.100.1", "r1"); got != want {
			t.Errorf("%s principal actor: got %+v, want %+v", kind, got, want)
		}
	}
}

func TestUserHelpers(t *testing.T) {
	t.Parallel()
	if got := (auth.User{Username: "alice"}).Name(); got != "alice" {
		t.Errorf("Name without display name: got %q, want %q", got, "alice")
	}
	if got := (auth.User{Username: "alice", DisplayName: "Alice A."}).Name(); got != "Alice A." {
		t.Errorf("Name with display name: got %q, want %q", got, "Alice A.")
	}
	if got := auth.NormalizeUsername("  Alice.Smith "); got != "alice.smith" {
		t.Errorf("NormalizeUsername: got %q, want %q", got, "alice.smith")
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	e := auth.Throttled(90*time.Second, "account from this address")
	if got, want := e.Error(), "too many failed sign-ins for this account from this address; try again in 1m30s"; got != want {
		t.Errorf("Throttled: got %q, want %q", got, want)
	}
}
