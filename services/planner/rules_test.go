package planner_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// catalog is the tools the grammar tests plan over.
var catalog = []planner.Tool{
	{Name: "fs__write_file", Description: "Write a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"integer"},"append":{"type":"boolean"}},"required":["path","content"]}`)},
	{Name: "fs__read_file", Description: "Read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}}}`)},
	{Name: "other__read_file", Description: "Read another file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	{Name: "calc__add", Description: "Add", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)},
	{Name: "tagger__tag", Description: "Tag things", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"tags":{"type":"array","items":{"type":"string"}},
		"meta":{"type":"object"},
		"note":{"type":["string","null"]},
		"level":{"anyOf":[{"type":"integer"},{"type":"string"}]},
		"pattern":{"type":"string"},
		"choice":{"enum":[1,2,3]}}}`)},
	{Name: "builtin__file_operations", Description: "Files", InputSchema: json.RawMessage(`{"type":"object","properties":{"operation":{"type":"string"},"path":{"type":"string"}},"required":["operation"]}`)},
	{Name: "shell__run", Description: "Run a command", InputSchema: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}}}`)},
	{Name: "web__page.get", Description: "A tool whose own name has a dot", InputSchema: json.RawMessage(`{"type":"object"}`)},
}

// failure is what a NotUnderstood must say: substrings of its message, its fragment
// and offset.
type failure struct {
	msg      []string
	fragment string
	offset   int
}

func TestRulesGrammar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		prompt string
		tools  []planner.Tool // nil: catalog
		plan   string         // the plan as JSON, when the prompt plans
		fail   *failure
	}{
		// Calls and their names.
		{"qualified name with call", `call fs__write_file path=/tmp/x content="hi"`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"hi"}}]}`, nil},
		{"no leading word", `fs__read_file path=/a`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}}]}`, nil},
		{"run and keywords in any case", `RUN fs__read_file path=/a THEN Call fs__read_file path=/b`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}},{"tool":"fs__read_file","arguments":{"path":"/b"}}]}`, nil},
		{"no arguments", `call fs__read_file`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{}}]}`, nil},
		{"bare name one tool has", `call write_file path=/a content=x`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/a","content":"x"}}]}`, nil},
		{"a tool named run", `run cmd=ls`,
			nil, `{"steps":[{"tool":"shell__run","arguments":{"cmd":"ls"}}]}`, nil},
		{"run before a tool named run", `run run cmd=ls`,
			nil, `{"steps":[{"tool":"shell__run","arguments":{"cmd":"ls"}}]}`, nil},
		{"dotted bare name", `call file_operations.read_file path=/a`,
			nil, `{"steps":[{"tool":"builtin__file_operations","arguments":{"operation":"read_file","path":"/a"}}]}`, nil},
		{"dotted qualified name", `builtin__file_operations.list_dir`,
			nil, `{"steps":[{"tool":"builtin__file_operations","arguments":{"operation":"list_dir"}}]}`, nil},
		{"dotted name keeps a given operation", `file_operations.read_file operation=list_dir path=/a`,
			nil, `{"steps":[{"tool":"builtin__file_operations","arguments":{"operation":"list_dir","path":"/a"}}]}`, nil},
		{"dotted name with a JSON object", `file_operations.read_file {"path":"/a"}`,
			nil, `{"steps":[{"tool":"builtin__file_operations","arguments":{"operation":"read_file","path":"/a"}}]}`, nil},
		{"a name with a dot of its own", `call web__page.get`,
			nil, `{"steps":[{"tool":"web__page.get","arguments":{}}]}`, nil},
		{"a tool named like another server's dotted operation", `call file_operations.read_file path=/a`,
			append([]planner.Tool{{Name: "evil__file_operations.read_file"}}, catalog...), "",
			&failure{[]string{`"file_operations.read_file" is a tool of several servers`, "builtin__file_operations.read_file, evil__file_operations.read_file"}, "file_operations.read_file", 5}},
		{"a look-alike does not take the qualified dotted name", `call builtin__file_operations.read_file path=/a`,
			append([]planner.Tool{{Name: "evil__file_operations.read_file"}}, catalog...),
			`{"steps":[{"tool":"builtin__file_operations","arguments":{"operation":"read_file","path":"/a"}}]}`, nil},
		{"one server's tool and its dotted operation: the whole name", `call page.get`,
			append([]planner.Tool{{Name: "web__page", InputSchema: json.RawMessage(`{"type":"object"}`)}}, catalog...),
			`{"steps":[{"tool":"web__page.get","arguments":{}}]}`, nil},
		{"ambiguous bare name", `call read_file path=/a`,
			nil, "", &failure{[]string{`"read_file" is a tool of several servers`, "fs__read_file, other__read_file"}, "read_file", 5}},
		{"ambiguous dotted name", `call read_file.x`,
			nil, "", &failure{[]string{"fs__read_file, other__read_file"}, "read_file.x", 5}},
		{"unknown tool, close names", `call fs__writ_file path=/a`,
			nil, "", &failure{[]string{`There is no tool "fs__writ_file"`, "Did you mean fs__write_file"}, "fs__writ_file", 5}},
		{"unknown tool, a name containing it", `then_ok; call write path=/a`,
			[]planner.Tool{{Name: "x__then_ok"}, {Name: "fs__write_file"}, {Name: "fs__read_file"}}, "", &failure{[]string{`There is no tool "write"`, "Did you mean fs__write_file?"}, "write", 14}},
		{"unknown tool, nothing close", `call zzzzzzzzzz`,
			nil, "", &failure{[]string{`There is no tool "zzzzzzzzzz"`, "The tools you may use are builtin__file_operations, calc__add, fs__read_file"}, "zzzzzzzzzz", 5}},
		{"unknown tool, no tools", `call fs__read_file`,
			[]planner.Tool{}, "", &failure{[]string{"no tools are available"}, "fs__read_file", 5}},
		{"argument where a name goes", `call fs__read_file then path=/a`,
			nil, "", &failure{[]string{`"path=/a" looks like an argument`}, "path=/a", 24}},

		// Values.
		{"typed integer and boolean", `fs__write_file path=/a content=x mode=420 append=true`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/a","content":"x","mode":420,"append":true}}]}`, nil},
		{"boolean in any case", `fs__write_file append=FALSE`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"append":false}}]}`, nil},
		{"integer written with an exponent", `fs__read_file limit=1e2`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"limit":1e2}}]}`, nil},
		{"numbers", `calc__add a=1.5 b=-2e3`,
			nil, `{"steps":[{"tool":"calc__add","arguments":{"a":1.5,"b":-2e3}}]}`, nil},
		{"not an integer", `fs__write_file path=/a mode=abc`,
			nil, "", &failure{[]string{`The argument mode must be an integer; got "abc"`}, "abc", 28}},
		{"not an integer either", `fs__read_file limit=1.5`,
			nil, "", &failure{[]string{"limit must be an integer"}, "1.5", 20}},
		{"not a number", `calc__add a=one`,
			nil, "", &failure{[]string{`The argument a must be a number; got "one"`}, "one", 12}},
		{"not a boolean", `fs__write_file append=yes`,
			nil, "", &failure{[]string{"append must be true or false"}, "yes", 22}},
		{"array must be JSON", `tagger__tag tags=a,b`,
			nil, "", &failure{[]string{"tags must be a JSON array"}, "a,b", 17}},
		{"array and object as JSON", `tagger__tag tags=["a", "b"] meta={"k": [1, 2]}`,
			nil, `{"steps":[{"tool":"tagger__tag","arguments":{"tags":["a","b"],"meta":{"k":[1,2]}}}]}`, nil},
		{"a string key starting with a bracket", `tagger__tag pattern=[a-z]+ note={x}`,
			nil, "", &failure{[]string{"The value of note is not valid JSON"}, "{x}", 32}},
		{"a pattern is a string", `tagger__tag pattern=[a-z]+`,
			nil, `{"steps":[{"tool":"tagger__tag","arguments":{"pattern":"[a-z]+"}}]}`, nil},
		{"types from type lists, anyOf and enum", `tagger__tag note=null level=3 choice=2`,
			nil, `{"steps":[{"tool":"tagger__tag","arguments":{"note":null,"level":3,"choice":2}}]}`, nil},
		{"strings where the types allow them", `tagger__tag note=hello level=high`,
			nil, `{"steps":[{"tool":"tagger__tag","arguments":{"note":"hello","level":"high"}}]}`, nil},
		{"a number-like string stays a string", `fs__write_file content=42`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"content":"42"}}]}`, nil},
		{"a quoted value is a string", `fs__write_file mode="7"`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"mode":"7"}}]}`, nil},
		{"keys the schema does not list are kept", `fs__read_file path=/a extra=5 flag=true`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a","extra":"5","flag":"true"}}]}`, nil},
		{"double quotes and escapes", `fs__write_file content="a \"b\"\n\tc\\d \u00e9 \ud83d\ude00 <&>"`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"content":"a \"b\"\n\tc\\d é 😀 <&>"}}]}`, nil},
		{"single quotes", `fs__write_file content='it\'s "fine"'`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"content":"it's \"fine\""}}]}`, nil},
		{"unknown escapes are kept", `fs__write_file path="C:\dir\x"`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"C:\\dir\\x"}}]}`, nil},
		{"quoted values keep separators", `fs__write_file content="a then b; c" path=/a`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"content":"a then b; c","path":"/a"}}]}`, nil},
		{"empty quotes", `fs__write_file content=""`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"content":""}}]}`, nil},
		{"spaces around = and commas between", `fs__read_file path = /a, limit=2`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a","limit":2}}]}`, nil},
		{"a comma inside a bare value", `fs__write_file content=a,b`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"content":"a,b"}}]}`, nil},
		{"JSON object after the name", `call fs__write_file {"path": "/a",  "content": "x", "mode": 1}`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/a","content":"x","mode":1}}]}`, nil},
		{"JSON object without a space", `fs__read_file{"path":"/a"} then fs__read_file {}`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}},{"tool":"fs__read_file","arguments":{}}]}`, nil},
		{"unclosed quote", `fs__write_file path=/a content="hi`,
			nil, "", &failure{[]string{"The quote at byte 31 is not closed"}, `"hi`, 31}},
		{"text right after a quote", `fs__write_file content="a"b`,
			nil, "", &failure{[]string{"put a space before the next argument"}, "b", 26}},
		{"invalid JSON object", `call fs__write_file {"a":}`,
			nil, "", &failure{[]string{"The arguments object is not valid JSON", "at byte 25"}, `{"a":}`, 20}},
		{"unclosed JSON", `tagger__tag tags=["a"`,
			nil, "", &failure{[]string{"The value of tags is JSON that is not closed"}, `["a"`, 17}},
		{"a key given twice", `fs__read_file path=/a path=/b`,
			nil, "", &failure{[]string{"The argument path is given twice"}, "path", 22}},
		{"a key given twice in JSON", `fs__read_file {"path":"/a","path":"/b"}`,
			nil, "", &failure{[]string{`the key "path" is given twice`}, `{"path":"/a","path":"/b"}`, 14}},
		{"a key with no value", `fs__read_file path=`,
			nil, "", &failure{[]string{`The argument path has no value; write path=""`}, "", 19}},

		// Joining calls.
		{"then, and then, comma then, semicolon", `fs__read_file path=/a then fs__read_file path=/b and then fs__read_file path=/c, then fs__read_file path=/d; fs__read_file path=/e`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}},{"tool":"fs__read_file","arguments":{"path":"/b"}},{"tool":"fs__read_file","arguments":{"path":"/c"}},{"tool":"fs__read_file","arguments":{"path":"/d"}},{"tool":"fs__read_file","arguments":{"path":"/e"}}]}`, nil},
		{"and call", `call fs__read_file path=/a and call fs__read_file path=/b`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}},{"tool":"fs__read_file","arguments":{"path":"/b"}}]}`, nil},
		{"new lines", "\n  call fs__read_file path=/a\ncall fs__read_file\n   path=/b limit=2\r\nthen fs__read_file path=/c;\n\n",
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}},{"tool":"fs__read_file","arguments":{"path":"/b","limit":2}},{"tool":"fs__read_file","arguments":{"path":"/c"}}]}`, nil},
		{"then at the end", `fs__read_file path=/a then`,
			nil, "", &failure{[]string{`"then" must be followed by another call`}, "then", 22}},
		{"a value named then", `fs__write_file content=then path=/a`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"content":"then","path":"/a"}}]}`, nil},

		// Rollback.
		{"rollback clause", `call fs__write_file path=/a content=x rollback: call fs__write_file path=/a content=old then fs__read_file path=/a`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/a","content":"x"}}],"rollback":[{"tool":"fs__write_file","arguments":{"path":"/a","content":"old"}},{"tool":"fs__read_file","arguments":{"path":"/a"}}]}`, nil},
		{"undo clause on its own line", "fs__read_file path=/a then fs__read_file path=/b\nUndo : fs__read_file path=/c",
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}},{"tool":"fs__read_file","arguments":{"path":"/b"}}],"rollback":[{"tool":"fs__read_file","arguments":{"path":"/c"}}]}`, nil},
		{"rollback after a separator", `fs__read_file path=/a; rollback: fs__read_file path=/b`,
			nil, `{"steps":[{"tool":"fs__read_file","arguments":{"path":"/a"}}],"rollback":[{"tool":"fs__read_file","arguments":{"path":"/b"}}]}`, nil},
		{"rollback with no calls", `fs__read_file path=/a rollback:  `,
			nil, "", &failure{[]string{"The rollback clause has no calls"}, "rollback:  ", 22}},
		{"rollback first", `rollback: fs__read_file path=/a`,
			nil, "", &failure{[]string{"starts with a rollback clause"}, "rollback: fs__read_file path=/a", 0}},
		{"two rollback clauses", `fs__read_file rollback: fs__read_file undo: fs__read_file`,
			nil, "", &failure{[]string{"one rollback clause"}, "undo: fs__read_file", 38}},
		{"errors in the rollback are found", `fs__read_file rollback: fs__read_file limit=x`,
			nil, "", &failure{[]string{"limit must be an integer"}, "x", 44}},

		// Text that is not a call.
		{"empty", ``, nil, "", &failure{[]string{"The prompt is empty", "call fs__write_file"}, "", -1}},
		{"blank", " \n\t ", nil, "", &failure{[]string{"The prompt is empty"}, "", -1}},
		{"prose becomes a plan (words.go)", `please write hi into /tmp/x`,
			nil, `{"steps":[{"tool":"fs__write_file","arguments":{"path":"/tmp/x","content":"hi"}}]}`, nil},
		{"prose after a call", `call fs__read_file path=/a then do something nice; fs__read_file`,
			nil, "", &failure{[]string{`Could not understand "do something nice"`, "not a tool call"}, "do something nice", 32}},
		{"words after the arguments", `call fs__write_file content=hello world then fs__read_file`,
			nil, "", &failure{[]string{`Could not understand "world" at byte 34`, `quote values with spaces`}, "world", 34}},
		{"call and nothing else", `call  `,
			nil, "", &failure{[]string{"Something is missing at byte 6", "A tool name was expected"}, "", 6}},
		{"a name where one cannot be", `call {"a":1}`,
			nil, "", &failure{[]string{"A tool name was expected here", "call fs__write_file"}, `{"a":1}`, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tools := tt.tools
			if tools == nil {
				tools = catalog
			}
			plan, err := planner.NewRules().Plan(context.Background(), tt.prompt, tools)
			if tt.fail == nil {
				if err != nil {
					t.Fatalf("got error %v, want plan %s", err, tt.plan)
				}
				if got := marshal(t, plan); got != tt.plan {
					t.Fatalf("got plan\n%s\nwant\n%s", got, tt.plan)
				}
				return
			}
			nu, ok := planner.NotUnderstoodIn(err)
			if !ok {
				t.Fatalf("got plan %+v and error %v, want NotUnderstood", plan, err)
			}
			for _, m := range tt.fail.msg {
				if !strings.Contains(nu.Message, m) {
					t.Errorf("got message %q, want it to contain %q", nu.Message, m)
				}
			}
			if nu.Fragment != tt.fail.fragment || nu.Offset != tt.fail.offset {
				t.Errorf("got fragment %q at %d, want %q at %d", nu.Fragment, nu.Offset, tt.fail.fragment, tt.fail.offset)
			}
			if nu.Offset >= 0 && !strings.HasPrefix(tt.prompt[nu.Offset:], nu.Fragment) {
				t.Errorf("got fragment %q at %d, but the prompt there is %q", nu.Fragment, nu.Offset, tt.prompt[nu.Offset:])
			}
			if err.Error() != nu.Message {
				t.Errorf("got Error() %q, want the message %q", err.Error(), nu.Message)
			}
		})
	}
}

// The same prompt gives the same bytes every time, error messages included.
func TestRulesDeterministic(t *testing.T) {
	t.Parallel()
	prompts := []string{
		`call fs__write_file content="x" path=/a mode=1 append=true then file_operations.read_file {"z": 1, "a": [1, 2]} rollback: fs__read_file`,
		`tagger__tag meta={"b": 1, "a": 2} tags=["x"] note=null`,
		`call fs__read_fil path=/a`,
		`call ead_file`,
	}
	for _, prompt := range prompts {
		t.Run(prompt, func(t *testing.T) {
			t.Parallel()
			first := outcome(t, prompt)
			for range 50 {
				if got := outcome(t, prompt); got != first {
					t.Fatalf("got %s, want %s as the first time", got, first)
				}
			}
		})
	}
}

func outcome(t *testing.T, prompt string) string {
	t.Helper()
	plan, err := planner.NewRules().Plan(context.Background(), prompt, catalog)
	if err != nil {
		return "error: " + err.Error()
	}
	return marshal(t, plan)
}

// marshal is v as JSON, without HTML escaping, so <&> in arguments show as written.
func marshal(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestRulesNameAndContext(t *testing.T) {
	t.Parallel()
	r := planner.NewRules()
	if got := r.Name(); got != "rules" {
		t.Errorf("got name %q, want rules", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Plan(ctx, "fs__read_file", catalog); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// Every step's arguments are a JSON object, never null, and the plan round-trips.
func TestRulesArgumentsAreObjects(t *testing.T) {
	t.Parallel()
	plan, err := planner.NewRules().Plan(context.Background(), "fs__read_file; fs__read_file {} ; file_operations.x", catalog)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range plan.Steps {
		var m map[string]any
		if err := json.Unmarshal(s.Arguments, &m); err != nil || m == nil {
			t.Errorf("step %d: got arguments %s, want a JSON object", i, s.Arguments)
		}
	}
}

// The examples in the package documentation plan.
func TestRulesDocExamples(t *testing.T) {
	t.Parallel()
	tools := []planner.Tool{{Name: "fs__write_file"}, {Name: "fs__read_file"}, {Name: "fs__delete_file"}}
	for _, prompt := range []string{
		`call fs__write_file path=/tmp/x content="hi"`,
		`call write_file path=/tmp/x content='it\'s' then read_file path=/tmp/x`,
		`fs__write_file {"path":"/tmp/x","content":"hi"}; fs__read_file path=/tmp/x`,
		"call fs__write_file path=/tmp/x content=\"a\\nb\"\n    and then call fs__read_file path=/tmp/x limit=10",
		`call fs__write_file path=/tmp/x content=hi rollback: call fs__delete_file path=/tmp/x`,
	} {
		if _, err := planner.NewRules().Plan(context.Background(), prompt, tools); err != nil {
			t.Errorf("got %v for %q, want a plan", err, prompt)
		}
	}
}
