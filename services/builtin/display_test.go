package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
)

// Every operation of every built-in tool has its display line (seed 000 §6), exactly as
// live logs, approval cards and the audit view show it, whether the call names the
// operation in its arguments or in the dotted tool name. The operations are read from
// the tools the server lists, so an operation added without a line here fails.
func TestDisplayLines(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{Builtin: true})
	long := strings.Repeat("x", 70)
	clipped := strings.Repeat("x", 59) + "…"
	cases := []struct {
		tool, op, args, want string
	}{
		{"file_operations", "read_file", `{"filePath":"src/notes.txt"}`, "Reading notes.txt"},
		{"file_operations", "list_dir", `{}`, "Listing the workspace"},
		{"file_operations", "list_dir", `{"path":"docs/api"}`, "Listing api"},
		{"file_operations", "file_search", `{"pattern":"**/*.go"}`, "Finding files **/*.go"},
		{"file_operations", "grep_search", `{"pattern":"retry"}`, "Searching code: retry"},
		{"file_operations", "grep_search", `{"pattern":"` + long + `"}`, "Searching code: " + clipped},
		{"file_operations", "get_file_info", `{"filePath":"a/b.txt"}`, "Inspecting b.txt"},
		{"file_operations", "create_file", `{"filePath":"a/notes.txt","content":""}`, "Creating file notes.txt"},
		{"file_operations", "replace_string", `{"filePath":"notes.txt","oldString":"a","newString":"b"}`, "Editing notes.txt"},
		{"file_operations", "multi_replace", `{"filePath":"cfg/app.yaml","replacements":[]}`, "Editing app.yaml"},
		{"file_operations", "insert_edit", `{"filePath":"cmd/main.go","content":"x","line":1}`, "Inserting into main.go"},
		{"file_operations", "delete_file", `{"filePath":"old.txt"}`, "Deleting old.txt"},
		{"file_operations", "rename_file", `{"filePath":"a.txt","newPath":"b/c.txt"}`, "Renaming a.txt to c.txt"},
		{"file_operations", "copy_file", `{"filePath":"a.txt","newPath":"b.txt"}`, "Copying a.txt to b.txt"},
		{"file_operations", "create_directory", `{"filePath":"x/y/z"}`, "Creating directory z"},
		{"file_operations", "restore_snapshot", `{"snapshotId":"s1"}`, "Restoring snapshot s1"},

		{"terminal_operations", "run_command", `{"command":"npm test"}`, "Running: npm test"},
		{"terminal_operations", "run_command", `{"command":"` + long + `"}`, "Running: " + clipped},
		// A credential in a command or a note is masked: the line goes into audit rows.
		{"terminal_operations", "run_command", `{"command":"GH_TOKEN=ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt gh api user"}`, "Running: ******** gh api user"},
		{"terminal_operations", "create_session", `{}`, "Creating terminal session"},
		{"terminal_operations", "send_input", `{"sessionId":"t1","input":"ls -la\n"}`, "Sending to terminal: [input, 7 characters]"},
		{"terminal_operations", "get_output", `{"sessionId":"t1"}`, "Reading terminal output"},
		{"terminal_operations", "get_history", `{"sessionId":"t1"}`, "Reading terminal history"},
		{"terminal_operations", "resize_session", `{"sessionId":"t1","cols":80,"rows":24}`, "Resizing terminal to 80x24"},
		{"terminal_operations", "close_session", `{"sessionId":"t1"}`, "Closing terminal session"},
		{"terminal_operations", "list_sessions", `{}`, "Listing terminal sessions"},

		{"memory_operations", "store", `{"content":"db-2 is staging"}`, "Remembering: db-2 is staging"},
		// Every line is masked for credentials, as the arguments are: it is shown and audited.
		{"memory_operations", "store", `{"content":"key ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt"}`, "Remembering: key ********"},
		{"memory_operations", "store", `{"content":"the key is ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt"}`, "Remembering: the key is ********"},
		{"memory_operations", "search", `{"query":"staging"}`, "Searching memory: staging"},
		{"memory_operations", "search_memory", `{"query":"staging"}`, "Searching memory: staging"},
		{"memory_operations", "list", `{}`, "Listing memory"},
		{"memory_operations", "delete", `{"id":"42"}`, "Forgetting note 42"},
		{"memory_operations", "todo_add", `{"title":"check db-2"}`, "Adding todo: check db-2"},
		{"memory_operations", "todo_complete", `{"id":"7"}`, "Completing todo 7"},
		{"memory_operations", "todo_list", `{}`, "Reading todo list"},
		{"memory_operations", "manage_todos", `{"action":"read"}`, "Reading todo list"},
		{"memory_operations", "manage_todos", `{"action":"write","todos":[{"title":"a"},{"title":"b"}]}`, "Creating todo list: 2 tasks"},
		{"memory_operations", "manage_todos", `{"action":"update","todos":[{"id":"1","title":"a","status":"completed"}]}`, "Completed: a"},
		{"memory_operations", "manage_todos", `{"action":"update","todos":[{"id":"1","status":"in-progress"}]}`, "Starting: 1"},
		{"memory_operations", "manage_todos", `{"action":"update","todos":[{"id":"1"},{"id":"2"}]}`, "Updating 2 todos"},

		{"think", "", `{"thought":"first the tests"}`, "Thinking: first the tests"},
		{"think", "", `{"thought":"` + long + `"}`, "Thinking: " + clipped},

		{"user_collaboration", "", `{"prompt":"May I write /srv/app.conf?"}`, "Asking the user: May I write /srv/app.conf?"},
		{"user_collaboration", "", `{"prompt":"` + long + `"}`, "Asking the user: " + clipped},
	}

	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.tool+"."+c.op] = true
		qualified := "builtin__" + c.tool
		forms := map[string]string{qualified: c.args}
		if c.op != "" {
			// The operation in the arguments, and in the dotted name (as plans write it).
			var m map[string]any
			if err := json.Unmarshal([]byte(c.args), &m); err != nil {
				t.Fatalf("%s: %v", c.args, err)
			}
			m["operation"] = c.op
			withOp, _ := json.Marshal(m)
			forms = map[string]string{qualified: string(withOp), qualified + "." + c.op: c.args}
		}
		for name, args := range forms {
			if got := a.BuiltinDisplay(name, json.RawMessage(args)); got != c.want {
				t.Errorf("display of %s %s: %q, want %q", name, args, got, c.want)
			}
		}
	}

	// Every tool the server lists, and every operation of it, has a case above.
	res, err := connect(t, a.Builtin).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, tool := range res.Tools {
		var schema struct {
			Properties struct {
				Operation struct {
					Enum []string `json:"enum"`
				} `json:"operation"`
			} `json:"properties"`
		}
		raw, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		ops := schema.Properties.Operation.Enum
		if len(ops) == 0 {
			ops = []string{""} // a tool of one operation
		}
		for _, op := range ops {
			seen++
			if !covered[tool.Name+"."+op] {
				t.Errorf("no display case for %s %q", tool.Name, op)
			}
		}
	}
	if seen != len(covered) {
		t.Errorf("the server lists %d operations, the cases cover %d (a case for an operation it does not have?)", seen, len(covered))
	}
}
