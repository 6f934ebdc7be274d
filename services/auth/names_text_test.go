package auth_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// Names shown to other people (a user's display name, a token's name) are refused with
// a control character (a newline forging a line of a log, ESC driving a terminal) or an
// invisible format character (U+202E reversing what follows, a zero-width space making
// two names look alike), as names read from configuration files are; the zero-width
// joiners that scripts and emoji are written with are not refused.
var hiddenInNames = []struct{ name, text string }{
	{"newline", "Alice\nroot"},
	{"tab", "Alice\tSmith"},
	{"ESC", "Alice \x1b[31mred"},
	{"DEL", "Alice\x7f"},
	{"C1 control", "Alice\u0085Smith"},
	{"right-to-left override", "Alice \u202egpj.exe"},
	{"zero-width space", "Ali\u200bce"},
	{"byte order mark", "\ufeffAlice"},
	{"word joiner", "Ali\u2060ce"},
	{"line separator", "Alice\u2028root"},
}

// Letters of any script, marks and symbols are names as typed; so are the zero-width
// non-joiner of Persian (می‌خواهم) and the joiner of emoji sequences.
var plainNames = []string{"Zoë Ångström", "李小龙", "Ж. Петрова 🙂", "O'Brien-Smith (ops)", "مهسا می‌خواهد", "ops 👩‍💻"}

func TestDisplayNameRefusesHiddenCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for i, tc := range hiddenInNames {
		u, _, err := f.svc.CreateUser(f.ctx, audit.System, auth.NewUser{Username: "user" + string(rune('a'+i)), DisplayName: tc.text,
			Role: auth.RoleGuest, Password: testPassword})
		if err == nil {
			t.Errorf("%s: created a user named %q, want display_name refused", tc.name, u.DisplayName)
			continue
		}
		ve := fieldErr(t, err)
		if msg := ve.For("display_name"); !strings.Contains(msg, "U+") || len(ve.Fields) != 1 {
			t.Errorf("%s: got %+v, want only display_name refused, naming the character", tc.name, ve.Fields)
		}
	}
	if n := f.count(`SELECT count(*) FROM users`); n != 0 {
		t.Errorf("users after refused display names: %d, want 0", n)
	}
	f.verifyAudit(0)
	for i, name := range plainNames {
		u, _, err := f.svc.CreateUser(f.ctx, audit.System, auth.NewUser{Username: "plain" + string(rune('a'+i)), DisplayName: name,
			Role: auth.RoleGuest, Password: testPassword})
		if err != nil || u.DisplayName != name {
			t.Errorf("display name %q: got %q, %v; want it kept", name, u.DisplayName, err)
		}
	}
}

func TestTokenNameRefusesHiddenCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	for _, tc := range hiddenInNames {
		plain, tok, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, auth.NewToken{Name: tc.text})
		if err == nil {
			t.Errorf("%s: created a token named %q (%s), want the name refused", tc.name, tok.Name, plain[:12])
			continue
		}
		ve := fieldErr(t, err)
		if msg := ve.For("name"); !strings.Contains(msg, "U+") || len(ve.Fields) != 1 {
			t.Errorf("%s: got %+v, want only name refused, naming the character", tc.name, ve.Fields)
		}
	}
	if n := f.count(`SELECT count(*) FROM api_tokens`); n != 0 {
		t.Errorf("tokens after refused names: %d, want 0", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'token.create'`); n != 0 {
		t.Errorf("token.create entries after refused names: %d, want 0", n)
	}
	for _, name := range plainNames {
		if _, tok, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, auth.NewToken{Name: name}); err != nil || tok.Name != name {
			t.Errorf("token name %q: got %q, %v; want it kept", name, tok.Name, err)
		}
	}
}
