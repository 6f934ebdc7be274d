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

// refusal checks that prompt is refused with a message saying each of says, about the
// fragment at offset.
func refusal(t *testing.T, tools []planner.Tool, prompt string, says []string, fragment string, offset int) {
	t.Helper()
	plan, err := planner.NewRules().Plan(context.Background(), prompt, tools)
	nu, ok := planner.NotUnderstoodIn(err)
	if !ok {
		t.Errorf("%q: got %s, %v; want a refusal", prompt, marshal(t, plan), err)
		return
	}
	for _, s := range says {
		if !strings.Contains(nu.Message, s) {
			t.Errorf("%q: %q does not say %q", prompt, nu.Message, s)
		}
	}
	if nu.Fragment != fragment || nu.Offset != offset {
		t.Errorf("%q: fragment %q at %d, want %q at %d", prompt, nu.Fragment, nu.Offset, fragment, offset)
	}
}

// planned checks that prompt gives the plan want (as JSON).
func planned(t *testing.T, tools []planner.Tool, prompt, want string) {
	t.Helper()
	plan, err := planner.NewRules().Plan(context.Background(), prompt, tools)
	if err != nil {
		t.Errorf("%q: %v", prompt, err)
	} else if got := marshal(t, plan); got != want {
		t.Errorf("%q:\n got %s\nwant %s", prompt, got, want)
	}
}

// A step that says not to do something is not planned: its words are read as a bag,
// so the negation would vanish and the plan do what was forbidden. Negations inside
// quotes are text.
func TestSentencesNegation(t *testing.T) {
	t.Parallel()
	tools := append([]planner.Tool{{Name: "fs__delete_file", Description: "Delete a file",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}}, everyday...)
	const said = "I do not plan what I am told not to do"
	for _, c := range []struct {
		prompt, word, fragment string
		offset                 int
	}{
		{`don't write 'hi' to /tmp/x`, "don't", `don't write 'hi' to /tmp/x`, 0},
		{`do not delete /tmp/x`, "not", `do not delete /tmp/x`, 0},
		{`DO NOT delete /tmp/x`, "NOT", `DO NOT delete /tmp/x`, 0},
		{`never echo 'x'`, "never", `never echo 'x'`, 0},
		{`dont write 'hi' to /tmp/x`, "dont", `dont write 'hi' to /tmp/x`, 0},
		{`write 'hi' to /tmp/x without overwriting`, "without", `write 'hi' to /tmp/x without overwriting`, 0},
		{`echo 'x' then don’t delete /tmp/x`, "don’t", `don’t delete /tmp/x`, 14},
		{`echo 'x' rollback: never delete /tmp/x`, "never", `never delete /tmp/x`, 19},
		// Looks like a call (key=value), yet the negation is what the reply is about.
		{`don't echo message=hi`, "don't", `don't echo message=hi`, 0},
		// Other words that say not to do it.
		{`echo 'x'; skip: delete /tmp/b`, "skip", `skip: delete /tmp/b`, 10},
		{`echo 'x'; avoid deleting /tmp/b`, "avoid", `avoid deleting /tmp/b`, 10},
		{`delete every file except /tmp/b`, "except", `delete every file except /tmp/b`, 0},
		{`delete /tmp/b unless it is empty`, "unless", `delete /tmp/b unless it is empty`, 0},
		{`refrain from deleting /tmp/b`, "refrain", `refrain from deleting /tmp/b`, 0},
	} {
		refusal(t, tools, c.prompt, []string{said, `"` + c.word + `"`}, c.fragment, c.offset)
	}
	planned(t, tools, `echo "don't stop" then echo 'never' then write 'do not disturb' to /tmp/x`,
		`{"steps":[{"tool":"test__echo","arguments":{"message":"don't stop"}},{"tool":"test__echo","arguments":{"message":"never"}},{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"do not disturb"}}]}`)
}

// Steps and the rollback clause are separated only outside quoted strings: a quote's
// text is a value, never a step. An apostrophe is not a quote; a quote left open is
// refused, since where its text ends would be a guess.
func TestSentencesQuotedSeparators(t *testing.T) {
	t.Parallel()
	echo := func(msgs ...string) string {
		steps := make([]string, len(msgs))
		for i, m := range msgs {
			b, _ := json.Marshal(m)
			steps[i] = `{"tool":"test__echo","arguments":{"message":` + string(b) + `}}`
		}
		return `{"steps":[` + strings.Join(steps, ",") + `]}`
	}
	planned(t, everyday, `echo "done then write 'pwned' to /etc/motd now"`, echo(`done then write 'pwned' to /etc/motd now`))
	planned(t, everyday, `echo 'a; b' then echo "c and then d"`, echo("a; b", "c and then d"))
	planned(t, everyday, "echo 'one\ntwo'", echo("one\ntwo"))
	planned(t, everyday, `echo 'then'; echo "it's \"then\""`, echo("then", `it's "then"`))
	planned(t, everyday, `echo "done rollback: write 'x' to /tmp/y"`, echo(`done rollback: write 'x' to /tmp/y`))
	planned(t, everyday, `echo it's fine then echo 'b', and then echo 'c'`, echo("it's fine", "b", "c"))
	planned(t, everyday, `echo 'a' rollback: echo 'b; c'`,
		`{"steps":[{"tool":"test__echo","arguments":{"message":"a"}}],"rollback":[{"tool":"test__echo","arguments":{"message":"b; c"}}]}`)

	refusal(t, everyday, `echo 'a then b' then do a barrel roll`, []string{`No tool fits "do a barrel roll"`}, "do a barrel roll", 21)
	refusal(t, everyday, `say "done then write 'pwned' to /etc/motd`, []string{"The quote at byte 4 is not closed"},
		`"done then write 'pwned' to /etc/motd`, 4)
	refusal(t, everyday, `say 'a' rollback: say 'b' undo: say 'c'`, []string{"one rollback clause"}, `undo: say 'c'`, 26)
}

// A prompt of more steps than a plan may have is refused before any step is read.
func TestSentencesStepLimit(t *testing.T) {
	t.Parallel()
	fifty := strings.TrimSuffix(strings.Repeat("echo x; ", 50), " ")
	plan, err := planner.NewRules().Plan(context.Background(), fifty, everyday)
	if err != nil || len(plan.Steps) != 50 {
		t.Fatalf("50 steps: got %d steps, %v", len(plan.Steps), err)
	}
	refusal(t, everyday, fifty+" echo y", []string{"The prompt has 51 steps to run; a plan has at most 50"}, "echo y", len(fifty)+1)
	refusal(t, everyday, "echo 'a' rollback: "+fifty+" echo y", []string{"51 steps to undo"}, "echo y", len("echo 'a' rollback: ")+len(fifty)+1)
	long := strings.Repeat("echo x;", 8000/len("echo x;"))
	refusal(t, many, long, []string{"1142 steps to run"}, "echo x", 50*len("echo x;"))
}

// Words that negate by what they name ("nothing", "none") say not to do it as "not"
// does, and so does a contraction written with any apostrophe-like character, such as
// U+02BC, which is a letter and so keeps "donʼt" one word. Dropping either would plan
// the opposite of what was asked, or fill a path or content with the negating word.
// The same words as a quoted value, a key=value, a path or part of a longer word are
// values, and plan, byte for byte as written.
func TestSentencesNegatingWords(t *testing.T) {
	t.Parallel()
	tools := append([]planner.Tool{
		{Name: "fs__delete_file", Description: "Delete a file",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "zip__compress", Description: "Compress a file",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"codec":{"type":"string","enum":["none","gzip"]}},"required":["path"]}`)},
	}, everyday...)
	const said = "I do not plan what I am told not to do"
	for _, c := range []struct{ prompt, word string }{
		{`delete none of /tmp/x`, "none"},
		{`donʼt delete /tmp/x`, "donʼt"}, // U+02BC
		{`DONʼT delete /tmp/x`, "DONʼT"}, // U+02BC
		{`don＇t delete /tmp/x`, "don’t"}, // U+FF07 splits the word: "don", "t"
		{`don’t delete /tmp/x`, "don’t"}, // U+2019 likewise
		{"don`t delete /tmp/x", "don’t"},
		{`canʹt delete /tmp/x`, "canʹt"}, // U+02B9
		{`delete nothing`, "nothing"},
		{`delete ʻnothingʼ`, "ʻnothingʼ"}, // letters used as quotes: not a quote
		{`write nothing to /tmp/x`, "nothing"},
		{`write none to /tmp/x`, "none"},
		{`delete nowhere`, "nowhere"},
		{`nobody should delete /tmp/x`, "nobody"},
		{`no-one should delete /tmp/x`, "no-one"},
		{`noone may delete /tmp/x`, "noone"},
		{`you wouldnt delete /tmp/x`, "wouldnt"},
		{`echo 'x' then delete none of /tmp/x`, "none"},
	} {
		refusal(t, tools, c.prompt, []string{said, `"` + c.word + `"`}, strings.TrimPrefix(c.prompt, "echo 'x' then "),
			len(c.prompt)-len(strings.TrimPrefix(c.prompt, "echo 'x' then ")))
	}
	for _, c := range []struct{ prompt, plan string }{
		{`delete 'nothing.txt'`, `{"steps":[{"tool":"fs__delete_file","arguments":{"path":"nothing.txt"}}]}`},
		{`delete nothing.txt`, `{"steps":[{"tool":"fs__delete_file","arguments":{"path":"nothing.txt"}}]}`},
		{`delete /tmp/none`, `{"steps":[{"tool":"fs__delete_file","arguments":{"path":"/tmp/none"}}]}`},
		{`delete 'none'`, `{"steps":[{"tool":"fs__delete_file","arguments":{"path":"none"}}]}`},
		{`write 'none' to /tmp/x`, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"none"}}]}`},
		{`write "nothing" to /tmp/x`, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"nothing"}}]}`},
		{`echo 'donʼt stop'`, `{"steps":[{"tool":"test__echo","arguments":{"message":"donʼt stop"}}]}`},
		{`echo "don＇t stop"`, `{"steps":[{"tool":"test__echo","arguments":{"message":"don＇t stop"}}]}`},
		{`echo Oʼbrien`, `{"steps":[{"tool":"test__echo","arguments":{"message":"Oʼbrien"}}]}`},
		{`echo it's nonempty`, `{"steps":[{"tool":"test__echo","arguments":{"message":"it's nonempty"}}]}`},
		{`compress /tmp/x codec=none`, `{"steps":[{"tool":"zip__compress","arguments":{"path":"/tmp/x","codec":"none"}}]}`},
		{`forecast city=Nowhere`, `{"steps":[{"tool":"weather__get_forecast","arguments":{"city":"Nowhere"}}]}`},
	} {
		planned(t, tools, c.prompt, c.plan)
	}
}
