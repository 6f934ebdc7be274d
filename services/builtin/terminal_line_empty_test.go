package builtin

import (
	"reflect"
	"strings"
	"testing"
)

// Enter alone is a line too (it answers a program's [Y/n]); a paste of newlines is
// bounded by its input's one audit entry, not by dropping them.
func TestLineEditorKeepsEmptyLines(t *testing.T) {
	var e lineEditor
	got := readlineOnly(e.feed([]byte(strings.Repeat("\r", 3) + "ls\r\x1b[A\r")))
	want := []edited{{}, {}, {}, {text: "ls"}, {text: "", shell: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
