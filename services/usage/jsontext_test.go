package usage_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/usage"
)

// A credential inside compact JSON written as text (a tool's text content is often a
// JSON object without spaces: one word to the word-by-word masking) is masked, whole or
// cut short, and as a value of a result's content; a picture's base64 is not.
func TestRedactCompactJSONText(t *testing.T) {
	t.Parallel()
	const token = "ghp_Q2w8Er5Ty1Ui7Op3As6Df9Gh4Jk0Lz2Xc5Vb"
	whole := `{"token":"` + token + `","id":1,"password":"hunter2-and-more"}`
	for _, s := range []string{whole, whole[:len(whole)-25], "created " + whole} {
		if got := usage.RedactText(s); strings.Contains(got, token) {
			t.Errorf("RedactText(%q) = %q, want the token masked", s, got)
		}
	}
	if got := usage.RedactText(whole); strings.Contains(got, "hunter2") {
		t.Errorf("RedactText of JSON with a password key: %q, want it masked", got)
	}
	png := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk", 3)
	raw, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": whole},
		map[string]any{"type": "image", "mimeType": "image/png", "data": png}}})
	out, changed := usage.RedactChanged(raw)
	if !changed || strings.Contains(string(out), token) || !strings.Contains(string(out), png) {
		t.Errorf("RedactChanged: %s (changed %v), want the token masked and the picture kept", out, changed)
	}
	img, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "image", "data": png}}})
	if out, changed := usage.RedactChanged(img); changed || string(out) != string(img) {
		t.Errorf("a picture alone: %s (changed %v), want it as it was", out, changed)
	}
}
