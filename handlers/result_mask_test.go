package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/executions"
)

// A step's result as others read it has credentials masked but its pictures and sound
// whole: their base64 looks like a credential to the masking, and a page showed a
// broken image in their place.
func TestStepResultShownKeepsMedia(t *testing.T) {
	t.Parallel()
	const token = "ghp_Z7c3Kq9Wm2Xv5Bn8Lp4Rt6Yh1Df0Gs3Ja9Uu"
	png := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", 3)
	st := executions.Step{Tool: "ev__get_image", Result: json.RawMessage(`{"content":[{"type":"text","text":"key ` + token + `"},` +
		`{"type":"image","mimeType":"image/png","data":"` + png + `"},{"type":"audio","mimeType":"audio/wav","data":"` + png + `"}],"is_error":false}`)}
	res, masked := stepResultShown(st, false)
	var got struct {
		Content []struct{ Type, Text, Data string } `json:"content"`
	}
	if err := json.Unmarshal(res, &got); err != nil || len(got.Content) != 3 {
		t.Fatalf("the result as shown: %s (%v)", res, err)
	}
	if !masked || strings.Contains(got.Content[0].Text, token) {
		t.Errorf("the text as shown: %q (masked %v), want the token masked", got.Content[0].Text, masked)
	}
	if got.Content[1].Data != png || got.Content[2].Data != png {
		t.Errorf("the image and the sound as shown: %.40q, %.40q; want their data whole", got.Content[1].Data, got.Content[2].Data)
	}
	if whole, masked := stepResultShown(st, true); masked || string(whole) != string(st.Result) {
		t.Errorf("to its requester: %s (masked %v), want it whole", whole, masked)
	}
}
