package auth_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A password typed into the name's box is kept nowhere: not in the failed sign-in's
// audit entry (actor, target, payload), nor in the log line of the refusal once the
// address is throttled. Toolwarden's own generated passwords (26 characters of base32)
// and other passwords shaped like usernames were kept as typed, lower-cased. A name
// that is a user's is kept: it names the account attacked.
func TestUnknownNameNotKept(t *testing.T) {
	t.Parallel()
	var logged testkit.SyncBuffer
	f := newFixture(t, &auth.Options{MaxAccountFailures: 2, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	f.createUser("alice", auth.RoleToolUser)
	typed := []string{auth.GeneratePassword(), auth.GeneratePassword(), "correct-horse-battery-staple", "hunter2hunter2", "Xk9mP2vQ8rT4wZ7nL3"}
	for i, pw := range typed {
		ip := fmt.Sprintf("192.0.2.%d", 10+i)
		// Two failures, audited; the third is refused as throttled, and logged.
		for range 2 {
			if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: pw, Password: "whatever it was", IP: ip}); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("sign-in as %q: got %v, want ErrInvalidCredentials", pw, err)
			}
		}
		_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: pw, Password: "whatever it was", IP: ip})
		throttled(t, err, "account from this address")
	}
	for range 2 {
		if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "Alice", Password: "not hers", IP: "192.0.2.99"}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("sign-in as alice: got %v, want ErrInvalidCredentials", err)
		}
	}
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "not hers", IP: "192.0.2.99"})
	throttled(t, err, "account from this address")

	rows := f.audits("user.login_failed")
	if len(rows) != 2*len(typed)+2 {
		t.Fatalf("user.login_failed entries: got %d, want %d", len(rows), 2*len(typed)+2)
	}
	names := map[string]int{} // actor name as kept → entries
	for _, r := range rows {
		names[r.ActorName]++
		if r.TargetID != r.ActorName && r.ActorName != "alice" || r.Payload["username"] != r.ActorName {
			t.Errorf("an entry keeps different names: actor %q, target %q, payload %v", r.ActorName, r.TargetID, r.Payload["username"])
		}
	}
	for _, pw := range typed {
		lower := strings.ToLower(pw)
		for _, r := range rows {
			if strings.Contains(strings.ToLower(r.Raw), lower) {
				t.Errorf("the password typed as a name, %q, is in an audit entry: %s", pw, r.Raw)
			}
		}
		if strings.Contains(strings.ToLower(logged.String()), lower) {
			t.Errorf("the password typed as a name, %q, is in the log:\n%s", pw, logged.String())
		}
	}
	// Each name typed twice is kept as one tag, twice: attempts can still be told apart.
	if len(names) != len(typed)+1 || names["alice"] != 2 {
		t.Errorf("names kept: %v, want alice and one tag per name typed, twice each", names)
	}
	for n, c := range names {
		if n != "alice" && (c != 2 || !strings.HasPrefix(n, "(unknown name ") || !strings.Contains(logged.String(), n)) {
			t.Errorf("name kept %q: %d entries, want 2, \"(unknown name …\", and the same in the refusal's log line", n, c)
		}
	}
	if !strings.Contains(logged.String(), "username=alice ") {
		t.Errorf("the refusal of a user's name does not name it in the log:\n%s", logged.String())
	}
}
