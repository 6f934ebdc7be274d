package router

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// TextOf joins any number of items in one pass, and TextOfMax stops at its bound: a
// tool's result of 200,000 one-character items (which took a minute to join item by
// item) gives the whole text, or its clipped start.
func TestTextOfManyItems(t *testing.T) {
	cs := make([]Content, 200_000)
	for i := range cs {
		cs[i] = Content{Type: "text", Text: "é"}
	}
	cs = append(cs, Content{Type: "image", Data: "AAAA"}, Content{Type: "resource", Resource: &Resource{Text: "end"}})
	full := TextOf(cs)
	if want := strings.Repeat("é\n", 200_000) + "end"; full != want {
		t.Fatalf("TextOf: got %d bytes, want %d", len(full), len(want))
	}
	for _, n := range []int{0, 1, 2, 3, 4096, len(full) - 1, len(full), len(full) + 1} {
		got := TextOfMax(cs, n)
		if want := textcheck.Clip(full, n, "…"); got != want {
			t.Errorf("TextOfMax(%d): got %d bytes %.20q, want %d bytes %.20q", n, len(got), got, len(want), want)
		}
	}
	if got := TextOfMax(cs[:0], 10); got != "" {
		t.Errorf("TextOfMax of nothing: %q", got)
	}
}
