package template_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/template"
)

// The check follows a bounded number of wrappers to the program; past them the template
// is refused, not saved with its program unchecked.
func TestManyWrappersRefused(t *testing.T) {
	t.Parallel()
	many := strings.Repeat("nohup, ", 17)
	for _, command := range []string{
		`{argv: [` + many + `awk, "{p}"]}`,
		`{argv: [` + many + `"{p}"]}`,
		`{argv: [` + many + `sh], stdin: "{p}"}`,
	} {
		_, err := template.Parse(commandTool(command))
		if err == nil || !strings.Contains(err.Error(), "wrappers") {
			t.Errorf("%s: got %v, want it refused for its wrappers", command, err)
		}
	}
	// Sixteen are followed: the program after them is checked as usual.
	sixteen := strings.Repeat("nohup, ", 16)
	if _, err := template.Parse(commandTool(`{argv: [` + sixteen + `awk, '{{print}', "{p}"]}`)); err != nil {
		t.Errorf("16 wrappers: %v", err)
	}
	if _, err := template.Parse(commandTool(`{argv: [` + sixteen + `awk, "{p}"]}`)); err == nil || !strings.Contains(err.Error(), "argv[17] is awk code") {
		t.Errorf("16 wrappers: got %v, want argv[17] refused as awk code", err)
	}
}
