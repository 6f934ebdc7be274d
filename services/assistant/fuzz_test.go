package assistant

import "testing"

// Any message, in any state, is read and answered without a panic, and an op only ever
// acts on ids of its own kind.
func FuzzUnderstandDecide(f *testing.F) {
	for _, s := range []string{"q", "'q'", "risk 'q'", "tell me about q", "disable echo", "2", "yes", "all of them",
		"add a server at https://x.example/mcp", "set units to metric for get_forecast", "tag 'a' with 'b'", "",
		"turn off", "the one on", "'", "\"", "untag", "let use", "q0 q1 url0"} {
		f.Add(s, s)
	}
	cat := fixture()
	f.Fuzz(func(t *testing.T, a, b string) {
		st := State{}
		for _, msg := range []string{a, b, "2", "yes"} {
			d := Decide(msg, Understand(msg, cat), st, cat)
			st = d.State
			if d.Do == nil {
				continue
			}
			for _, id := range d.Do.IDs {
				if serverIntent(d.Do.Intent) && d.Do.Intent != IntentDiscover && !isServer(cat, id) {
					t.Fatalf("%q: %s on %s, not a server", msg, d.Do.Intent, id)
				}
			}
		}
	})
}
