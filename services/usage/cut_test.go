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

// An object's type is kept whole or not at all: cut to "image", it would read as a
// picture's when masked and its data be kept. A large picture keeps its type and
// mimeType, which say how to show it.
func TestCutKeepsTypesWhole(t *testing.T) {
	t.Parallel()
	const token = "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"
	raw, _ := json.Marshal(map[string]any{"a": strings.Repeat("b", 4042), "data": token,
		"type": "image " + strings.Repeat("of the words ", 25)})
	want, _ := usage.RedactChanged(raw)
	if strings.Contains(string(want), token) {
		t.Fatal("RedactChanged shows the token: the test proves nothing")
	}
	if out, _, _ := usage.RedactCut(raw, 4096); strings.Contains(string(out), token) {
		t.Errorf("a type cut to a picture's: the data is shown unmasked: %.200s", out[len(out)-200:])
	}
	pic, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "image", "mimeType": "image/png",
		"data": strings.Repeat("iVBORw0KGgo", 7000)}}})
	for name, out := range map[string]json.RawMessage{"Cut": first(usage.Cut(pic, 4096)), "RedactCut": first3(usage.RedactCut(pic, 4096))} {
		var got struct {
			Content []map[string]any `json:"content"`
		}
		if err := json.Unmarshal(out, &got); err != nil || len(got.Content) != 1 || got.Content[0]["type"] != "image" ||
			got.Content[0]["mimeType"] != "image/png" {
			t.Errorf("%s of a 77 KB picture: %v %.200v", name, err, got.Content)
		}
	}
}

func first(raw json.RawMessage, _ bool) json.RawMessage { return raw }

func first3(raw json.RawMessage, _, _ bool) json.RawMessage { return raw }

// ForLog keeps what fits as it is, and cuts the rest masked (a key's name masks its
// value), bounded in size whatever its shape: a picture's data that does not fit is
// left out (a page's RedactCut keeps it whole), thousands of empty values are kept as
// the start of their text.
func TestForLogBounds(t *testing.T) {
	t.Parallel()
	small := json.RawMessage(`{"password":"hunter2"}`)
	if got, cut := usage.ForLog(small); string(got) != string(small) || cut {
		t.Errorf("small: %s, cut %v; want it as it is (masked when read)", got, cut)
	}
	args, _ := json.Marshal(map[string]any{"api_key": "opensesame", "query": strings.Repeat("é", 9000)})
	if got, cut := usage.ForLog(args); !cut || !json.Valid(got) || strings.Contains(string(got), "opensesame") ||
		!strings.Contains(string(got), `"api_key":"`+usage.Mask+`"`) || len(got) > 2*usage.MaxJSONBytes {
		t.Errorf("large arguments: cut %v, %d bytes: %.200s", cut, len(got), got)
	}
	pic, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "image", "mimeType": "image/png",
		"data": strings.Repeat("iVBORw0KGgo", 7000)}}})
	got, cut := usage.ForLog(pic)
	var shown struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(got, &shown); err != nil || !cut || len(shown.Content) != 1 || shown.Content[0]["type"] != "image" ||
		shown.Content[0]["mimeType"] != "image/png" || shown.Content[0]["data"] != nil {
		t.Errorf("a 77 KB picture: cut %v, %v, %.200s", cut, err, got)
	}
	empties := json.RawMessage("[" + strings.Repeat("[],", 100_000) + "[]]")
	if got, cut := usage.ForLog(empties); !cut || !json.Valid(got) || len(got) > 2*usage.MaxJSONBytes {
		t.Errorf("100,000 empty arrays: cut %v, %d bytes", cut, len(got))
	}
}
