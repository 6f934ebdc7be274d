package builtin

import (
	"reflect"
	"strings"
	"testing"
)

// Empty lines run nothing and are not audited (a paste of newlines made one entry
// each); an empty line the shell fills from its history still is.
func TestLineEditorDropsEmptyLines(t *testing.T) {
	var e lineEditor
	got := e.feed([]byte(strings.Repeat("\r\n", 1000) + "ls\r\n\x1b[A\r\x0f\r"))
	want := []edited{{text: "ls"}, {text: "", shell: true}, {text: "", shell: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
