package planner_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolwarden/toolwarden/services/planner"
)

func ExampleRules() {
	tools := []planner.Tool{
		{Name: "fs__write_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"integer"}}}`)},
		{Name: "fs__delete_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	}
	plan, err := planner.NewRules().Plan(context.Background(),
		`call write_file path=/tmp/x content="hi there" mode=384 rollback: call fs__delete_file path=/tmp/x`, tools)
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(plan)
	fmt.Println(string(out))

	_, err = planner.NewRules().Plan(context.Background(), `call fs__write_file path=/tmp/x mode=rw`, tools)
	if nu, ok := planner.NotUnderstoodIn(err); ok {
		fmt.Printf("%s (%q at byte %d)\n", nu.Message, nu.Fragment, nu.Offset)
	}
	// Output:
	// {"steps":[{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"hi there","mode":384}}],"rollback":[{"tool":"fs__delete_file","arguments":{"path":"/tmp/x"}}]}
	// The argument mode must be an integer; got "rw". ("rw" at byte 37)
}
