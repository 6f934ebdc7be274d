package usage_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/usage"
)

// A credential used as an object's key ({"ghp_…": {"scopes": …}}, a tool listing tokens
// by token) is masked as it is as a value, by every walker a page or a log row goes
// through: the keys become Mask, Mask#2, … (none lost to another, a key "********"
// already there included), and what they held stays under them.
func TestRedactMasksSecretKeys(t *testing.T) {
	t.Parallel()
	const (
		ghp  = "ghp_1234567890abcdefghijABCDEFGHIJ123456"
		sk   = "sk-proj-Zx8Kq2Lm4Nt7Wv1Bc3Df6Gh9Jk0"
		slck = "xoxb-2024-8675309-AbCdEfGhIjKlMn"
	)
	secretsIn := func(s string) []string {
		var out []string
		for _, tok := range []string{ghp, sk, slck} {
			if strings.Contains(s, tok[:14]) {
				out = append(out, tok)
			}
		}
		return out
	}
	keysOf := func(t *testing.T, raw json.RawMessage, path ...string) []string {
		t.Helper()
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("not JSON: %v: %.300s", err, raw)
		}
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no object at %v: %.300s", path, raw)
		}
		return slices.Sorted(maps.Keys(m))
	}

	// Redact, RedactChanged and RedactText (JSON as text).
	one := json.RawMessage(`{"` + ghp + `":{"scopes":["repo"]}}`)
	if got := string(usage.Redact(one)); got != `{"********":{"scopes":["repo"]}}` {
		t.Errorf("Redact: %s", got)
	}
	if got, changed := usage.RedactChanged(one); !changed || len(secretsIn(string(got))) > 0 {
		t.Errorf("RedactChanged: %s (changed %v)", got, changed)
	}
	if got := usage.RedactText(string(one)); len(secretsIn(got)) > 0 || !strings.Contains(got, "scopes") {
		t.Errorf("RedactText: %s", got)
	}
	many := json.RawMessage(`{"tokens":{"` + ghp + `":1,"` + sk + `":2,"********":3,"plain":4},` +
		`"content":[{"type":"text","text":"{\"` + slck + `\":\"bot\"}"}]}`)
	out := usage.Redact(many)
	if s := string(out); len(secretsIn(s)) > 0 {
		t.Errorf("Redact shows %v: %s", secretsIn(s), s)
	}
	if got, want := keysOf(t, out, "tokens"), []string{"********", "********#2", "********#3", "plain"}; !slices.Equal(got, want) {
		t.Errorf("Redact: keys %q, want %q: %s", got, want, out)
	}
	var back struct{ Tokens map[string]int }
	_ = json.Unmarshal(out, &back)
	if sum := back.Tokens["********"] + back.Tokens["********#2"] + back.Tokens["********#3"]; sum != 6 || back.Tokens["********"] != 3 {
		t.Errorf("Redact: the values moved or were lost: %v", back.Tokens)
	}
	// A key already masked is kept as it is: masking twice (RedactCut, a row read again)
	// changes nothing.
	if again, changed := usage.RedactChanged(out); changed || string(again) != string(out) {
		t.Errorf("masked twice: %s (changed %v)", again, changed)
	}

	// RedactCut (an execution step's result) and ForLog (a log row), cut or not.
	filler := strings.Repeat("ordinary words of a long log line ", 1000)
	big, _ := json.Marshal(map[string]any{
		"content":            []map[string]any{{"type": "text", "text": `{"` + slck + `":"bot","note":"` + filler[:200] + `"}`}},
		"structured_content": map[string]any{"tokens": map[string]any{ghp: map[string]any{"scopes": []string{"repo"}}, sk: "org"}, "z": filler},
	})
	for _, limit := range []int{4 << 10, 1 << 20} {
		got, changed, cut := usage.RedactCut(big, limit)
		if !changed || cut != (limit < len(big)) || len(secretsIn(string(got))) > 0 {
			t.Errorf("RedactCut(%d): changed %v, cut %v, shows %v: %.400s", limit, changed, cut, secretsIn(string(got)), got)
		}
		if keys := keysOf(t, got, "structured_content", "tokens"); !slices.Equal(keys, []string{"********", "********#2"}) {
			t.Errorf("RedactCut(%d): keys %q", limit, keys)
		}
	}
	if len(big) <= usage.MaxJSONBytes {
		t.Fatalf("the result is %d bytes: ForLog would not cut it", len(big))
	}
	logged, cut := usage.ForLog(big)
	if !cut || len(secretsIn(string(logged))) > 0 {
		t.Errorf("ForLog: cut %v, shows %v: %.400s", cut, secretsIn(string(logged)), logged)
	}
	if keys := keysOf(t, logged, "structured_content", "tokens"); !slices.Equal(keys, []string{"********", "********#2"}) {
		t.Errorf("ForLog: keys %q", keys)
	}
	// Cut alone (a requester reading their own result) keeps the keys as they are.
	if whole, _ := usage.Cut(big, 4<<10); len(secretsIn(string(whole))) == 0 {
		t.Errorf("Cut masked a key: %.400s", whole)
	}
}
