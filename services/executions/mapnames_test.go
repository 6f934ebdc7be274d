package executions_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/executions"
)

// A compensation may name an argument that only a variant of the undo tool's schema
// declares (a tool whose operations take different arguments), and take a value from
// one only a variant of the undone step's declares; a name declared nowhere is still
// refused, with the names there are.
func TestCheckMapNamesReadsVariants(t *testing.T) {
	t.Parallel()
	undo := json.RawMessage(`{"type":"object","properties":{"operation":{"enum":["delete","move"]}},
		"oneOf":[{"properties":{"path":{"type":"string"}}},{"properties":{"from":{},"to":{}}}]}`)
	self := json.RawMessage(`{"type":"object","anyOf":[{"properties":{"filePath":{"type":"string"}}}]}`)
	ok := map[string]executions.MappedArgument{"operation": {Value: json.RawMessage(`"delete"`)}, "path": {From: "/filePath"}}
	if err := executions.CheckMapNames(ok, self, undo, "files__change"); err != nil {
		t.Fatalf("a mapping onto variants' arguments: %v", err)
	}
	bad := map[string]executions.MappedArgument{"paht": {From: "/filePath"}}
	err := executions.CheckMapNames(bad, self, undo, "files__change")
	if err == nil || !strings.Contains(err.Error(), `takes no argument "paht" (it takes from, operation, path, to)`) {
		t.Fatalf("a misspelt argument: %v", err)
	}
}
