package executions

import (
	"encoding/json"
	"testing"
)

// A compensation's mapped arguments carry the undone step's numbers as written: an id
// past 2^53 or a long decimal read as float64 would name another record.
func TestMapArgumentsKeepsNumbers(t *testing.T) {
	t.Parallel()
	m := map[string]MappedArgument{"id": {From: "/id"}, "price": {From: "/item/price"}, "all": {From: "/item"}}
	got, err := mapArguments(m, json.RawMessage(`{"id":9007199254740993,"item":{"price":0.1000000000000000055511151231257827}}`))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"all":{"price":0.1000000000000000055511151231257827},"id":9007199254740993,"price":0.1000000000000000055511151231257827}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
