package usage_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/usage"
)

// A result cut before masking (RedactCut) shows no credential RedactChanged would have
// masked: one inside what is kept, one that the cut falls in (a prose word, whole), one
// named by its key in JSON as text or structured content; and a result that fits is
// masked exactly as by RedactChanged.
func TestRedactCutMasksWhatItKeeps(t *testing.T) {
	t.Parallel()
	const (
		token = "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"
		pass  = "hunter2hunter2"
		limit = 4 << 10
	)
	filler := strings.Repeat("ordinary words of a long log line\n", 2000)
	room := limit - len("content") - len("text")
	straddling := strings.Repeat("a", room-10) + " " + token + " " + filler
	jsonText, _ := json.Marshal(map[string]any{"password": pass, "rows": strings.Split(filler, "\n")})
	result := func(text string, structured any) json.RawMessage {
		raw, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": text}},
			"structured_content": structured, "is_error": false})
		return raw
	}
	for _, c := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"a token early in prose", result("failed for "+token+" "+filler, nil)},
		{"a token the cut falls in", result(straddling, nil)},
		{"a password in JSON as text", result(string(jsonText), nil)},
		{"a password in structured content", result("ok", map[string]any{"api_key": pass, "rows": strings.Split(filler, "\n")})},
	} {
		out, changed, cut := usage.RedactCut(c.raw, limit)
		if !cut || !changed || !json.Valid(out) || len(out) > 4*limit {
			t.Errorf("%s: cut %v, masked %v, %d bytes (valid %v)", c.name, cut, changed, len(out), json.Valid(out))
		}
		if s := string(out); strings.Contains(s, token[:12]) || strings.Contains(s, pass) {
			t.Errorf("%s: a credential is shown: %.300s", c.name, s)
		}
		if !strings.Contains(string(out), usage.Mask) {
			t.Errorf("%s: nothing masked: %.300s", c.name, out)
		}
	}
	small := result("token "+token, map[string]any{"password": pass})
	want, wantChanged := usage.RedactChanged(small)
	if got, changed, cut := usage.RedactCut(small, limit); string(got) != string(want) || changed != wantChanged || cut {
		t.Errorf("a result that fits: %s (masked %v, cut %v), want %s", got, changed, cut, want)
	}
	// Cut alone keeps the text as it is.
	if got, cut := usage.Cut(result("failed for "+token+" "+filler, nil), limit); !cut || !strings.Contains(string(got), token) || len(got) > 2*limit {
		t.Errorf("Cut: %d bytes, cut %v, token kept %v", len(got), cut, strings.Contains(string(got), token))
	}
}
