package planner_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// everyday is a catalogue like a new user's: the in-repo test server's tools, a
// weather server, files on two servers, and the built-in file tool.
var everyday = []planner.Tool{
	{Name: "test__echo", Description: "Echoes the message back", InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)},
	{Name: "test__add", Description: "Adds two numbers", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
	{Name: "test__multiply", Description: "Multiplies two integers", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"]}`)},
	{Name: "weather__get_forecast", Description: "Get the weather forecast for a city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["metric","imperial"]},"days":{"type":"integer"}},"required":["city"]}`)},
	{Name: "fs__write_file", Description: "Write content to a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)},
	{Name: "fs__read_file", Description: "Read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "backup__read_file", Description: "Read a file from the backup", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "web__fetch", Description: "Fetch a URL and return its content", InputSchema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"},"max_length":{"type":"integer"}},"required":["url"]}`)},
	{Name: "builtin__file_operations", Description: "Read, write and search files in the conversation's workspace",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"operation":{"type":"string","enum":["read_file","list_dir","create_file","delete_file"]},"filePath":{"type":"string"},"content":{"type":"string"}},"required":["operation"]}`)},
}

// Sentences become plans: the tool by its name and description words (synonyms and
// plurals too), the arguments by the schema; several steps joined by "then"; a
// rollback clause. Where two tools fit equally, or the sentence misses an argument
// or has one too many, or no tool fits, the message says so and what was understood.
func TestSentences(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		prompt string
		plan   string   // the plan's JSON, or "" for a refusal
		says   []string // the refusal's message contains these
	}{
		{`echo 'hello'`, `{"steps":[{"tool":"test__echo","arguments":{"message":"hello"}}]}`, nil},
		{`echo "hello, world"`, `{"steps":[{"tool":"test__echo","arguments":{"message":"hello, world"}}]}`, nil},
		{`echo hello world`, `{"steps":[{"tool":"test__echo","arguments":{"message":"hello world"}}]}`, nil},
		{`please repeat 'again'`, `{"steps":[{"tool":"test__echo","arguments":{"message":"again"}}]}`, nil},
		{`add 17 and 25`, `{"steps":[{"tool":"test__add","arguments":{"a":17,"b":25}}]}`, nil},
		{`what is the sum of 2.5 and -1`, `{"steps":[{"tool":"test__add","arguments":{"a":2.5,"b":-1}}]}`, nil},
		{`multiply 6 by 7`, `{"steps":[{"tool":"test__multiply","arguments":{"x":6,"y":7}}]}`, nil},
		{`add 1 and 2 then echo 'done'`, `{"steps":[{"tool":"test__add","arguments":{"a":1,"b":2}},{"tool":"test__echo","arguments":{"message":"done"}}]}`, nil},
		{"add 1 and 2\necho 'x'; echo 'y'", `{"steps":[{"tool":"test__add","arguments":{"a":1,"b":2}},{"tool":"test__echo","arguments":{"message":"x"}},{"tool":"test__echo","arguments":{"message":"y"}}]}`, nil},
		{`get the weather forecast for 'Paris' in imperial`, `{"steps":[{"tool":"weather__get_forecast","arguments":{"city":"Paris","units":"imperial"}}]}`, nil},
		{`forecast for 'Oslo' for 3 days`, `{"steps":[{"tool":"weather__get_forecast","arguments":{"city":"Oslo","days":3}}]}`, nil},
		{`weather city=Lyon units=metric`, `{"steps":[{"tool":"weather__get_forecast","arguments":{"city":"Lyon","units":"metric"}}]}`, nil},
		{`write 'hi' to /tmp/x`, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"hi"}}]}`, nil},
		{`save "a b" into ./notes.txt rollback: echo 'undo'`, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"./notes.txt","content":"a b"}}],"rollback":[{"tool":"test__echo","arguments":{"message":"undo"}}]}`, nil},
		{`fetch https://example.com/a?b=1`, `{"steps":[{"tool":"web__fetch","arguments":{"url":"https://example.com/a?b=1"}}]}`, nil},
		{`list dir in the workspace with file operations`, `{"steps":[{"tool":"builtin__file_operations","arguments":{"operation":"list_dir"}}]}`, nil},
		{`file operations read file 'notes.txt'`, `{"steps":[{"tool":"builtin__file_operations","arguments":{"operation":"read_file","filePath":"notes.txt"}}]}`, nil},

		{`read /etc/hosts`, "", []string{"Several tools fit", "backup__read_file (it matches", "fs__read_file (it matches", `"read"`}},
		{`add 5`, "", []string{"test__add fits", "nothing in it gives b (number)", "call test__add a=1 b=1"}},
		{`add 1 and 2 and 3`, "", []string{"it does not take \"3\""}},
		{`do a barrel roll`, "", []string{`No tool fits "do a barrel roll"`, `I read the words "barrel", "roll"`}},
		{`echo 'x' then do a barrel roll`, "", []string{`No tool fits "do a barrel roll"`}},
	} {
		plan, err := planner.NewRules().Plan(context.Background(), c.prompt, everyday)
		if c.plan != "" {
			if err != nil {
				t.Errorf("%q: %v", c.prompt, err)
			} else if got := marshal(t, plan); got != c.plan {
				t.Errorf("%q:\n got %s\nwant %s", c.prompt, got, c.plan)
			}
			continue
		}
		nu, ok := planner.NotUnderstoodIn(err)
		if !ok {
			t.Errorf("%q: got %s, %v; want a refusal", c.prompt, marshal(t, plan), err)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(nu.Message, s) {
				t.Errorf("%q: %q does not say %q", c.prompt, nu.Message, s)
			}
		}
		if nu.Offset < 0 || !strings.HasPrefix(c.prompt[nu.Offset:], nu.Fragment) {
			t.Errorf("%q: fragment %q at %d", c.prompt, nu.Fragment, nu.Offset)
		}
	}
}
