package assistant

import "testing"

// A credential is masked as Understand reads a value: a quoted string whole, and an
// Authorization scheme with the word after it; words that only look like a scheme's are
// kept, and a quoted string that is no credential still has its words looked at.
func TestRedactQuotedAndSchemeValues(t *testing.T) {
	t.Parallel()
	const tok = "abcdefghijklmnop1234"
	for _, c := range []struct {
		msg, want string
		masked    bool
	}{
		{`set prefix to "Bearer ` + tok + `" for http_call`, `set prefix to "***" for http_call`, true},
		{`set prefix to 'Token ` + tok + `' for http_call`, `set prefix to '***' for http_call`, true},
		{`set prefix to Bearer ` + tok + ` for http_call`, `set prefix to Bearer *** for http_call`, true},
		{`configure x with prefix="Bearer ` + tok + `"`, `configure x with prefix=***`, true},
		{`configure x with prefix=Bearer ` + tok, `configure x with prefix=***`, true},
		{`configure x with prefix=basic sk-proj-abcdefghijklmnopqrstuvwxyz123`, `configure x with prefix=basic ***`, true},
		{`"use api_key=xyz for it" please`, `"use api_key=*** for it" please`, true},
		{`set the token limit to 5 for "my tool"`, `set the token limit to 5 for "my tool"`, false},
		{`don't disable 'search' on ev2, it's fine`, `don't disable 'search' on ev2, it's fine`, false},
		{`bearer`, `bearer`, false},
	} {
		got, masked := redact(c.msg)
		if got != c.want || masked != c.masked {
			t.Errorf("redact(%q) = %q, %v; want %q, %v", c.msg, got, masked, c.want, c.masked)
		}
	}
}

// Any message is redacted without a panic, and a masked one is changed.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{`"`, `'`, `""`, `x="`, `bearer `, "token\tx", `'a "b c" d'`, `"a 'b c' d"`, "Bearer\u00a0abcdefghijklmnop1234x y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if out, masked := redact(msg); masked && out == msg {
			t.Fatalf("redact(%q) masked nothing it says it masked", msg)
		}
	})
}
