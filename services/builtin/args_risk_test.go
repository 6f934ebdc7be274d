package builtin

import (
	"encoding/json"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// The level each built-in file and memory operation carries by its arguments
// (ArgumentRisk, which only raises) and on its own (OperationRisk, in place of the
// annotations' level): whatever destroys what is there now (a delete, a move, a restore,
// a create or copy that overwrites, forgetting a note) is high, so it asks for the typed
// phrase even when an administrator set the tool low; other writes are medium; reads
// carry nothing and are low on their own.
func TestOperationLevels(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tool, args string
		argument   risk.Level // "" when ArgumentRisk leaves the level alone
		operation  risk.Level // "" when OperationRisk gives none
	}{
		{"file_operations", `{"operation":"read_file","filePath":"main.go"}`, "", risk.Low},
		{"file_operations", `{"operation":"list_dir"}`, "", risk.Low},
		{"file_operations", `{"operation":"create_file","filePath":"main.go","content":"x"}`, risk.Medium, ""},
		{"file_operations", `{"operation":"create_file","filePath":"main.go","content":"x","overwrite":false}`, risk.Medium, ""},
		{"file_operations", `{"operation":"create_file","filePath":"main.go","content":"x","overwrite":null}`, risk.Medium, ""},
		// Replacing a file wholesale (here with nothing) destroys its content as a delete does.
		{"file_operations", `{"operation":"create_file","filePath":"main.go","content":"","overwrite":true}`, risk.High, ""},
		{"file_operations", `{"operation":"create_file","filePath":"main.go","content":"","Overwrite":true}`, risk.High, ""},
		{"file_operations", `{"operation":"copy_file","filePath":"a.txt","newPath":"b.txt"}`, risk.Medium, ""},
		{"file_operations", `{"operation":"copy_file","filePath":"empty.txt","newPath":"main.go","overwrite":true}`, risk.High, ""},
		{"file_operations", `{"operation":"rename_file","filePath":"a","newPath":"b"}`, risk.High, ""},
		{"file_operations", `{"operation":"rename_file","filePath":"a","newPath":"main.go","overwrite":true}`, risk.High, ""},
		{"file_operations", `{"operation":"delete_file","filePath":"main.go"}`, risk.High, ""},
		{"file_operations", `{"operation":"restore_snapshot","snapshotId":"s1"}`, risk.High, ""},
		{"file_operations", `{"operation":"replace_string","filePath":"main.go","oldString":"a","newString":""}`, risk.Medium, ""},
		{"file_operations", `{"operation":"multi_replace","filePath":"main.go","replacements":[]}`, risk.Medium, ""},
		{"file_operations", `{"operation":"insert_edit","filePath":"main.go","line":0,"content":"x"}`, risk.Medium, ""},
		{"file_operations", `{"operation":"create_directory","filePath":"d"}`, risk.Medium, ""},

		{"memory_operations", `{"operation":"search","query":"x"}`, "", risk.Low},
		{"memory_operations", `{"operation":"search_memory","query":"x"}`, "", risk.Low},
		{"memory_operations", `{"operation":"list"}`, "", risk.Low},
		{"memory_operations", `{"operation":"todo_list"}`, "", risk.Low},
		{"memory_operations", `{"operation":"manage_todos","action":"read"}`, "", risk.Low},
		// A forgotten note is gone from all of the person's conversations; nothing restores it.
		{"memory_operations", `{"operation":"delete","id":"42"}`, risk.High, ""},
		{"memory_operations", `{"operation":"store","content":"x"}`, "", ""},
		{"memory_operations", `{"operation":"todo_add","title":"x"}`, "", ""},
		{"memory_operations", `{"operation":"todo_complete","id":"1"}`, "", ""},
		// Replacing the conversation's own todo list is routine working state: the tool's level.
		{"memory_operations", `{"operation":"manage_todos","action":"write","todos":[]}`, "", ""},
		{"memory_operations", `{"operation":"manage_todos","action":"update","todos":[]}`, "", ""},

		// Another tool's operation of the same name is not these tools'.
		{"think", `{"operation":"delete","id":"42"}`, "", ""},
		{"think", `{"operation":"list"}`, "", ""},
	} {
		l, why, ok := ArgumentRisk(c.tool, json.RawMessage(c.args))
		if l != c.argument || ok != (c.argument != "") || ok && why == "" {
			t.Errorf("ArgumentRisk %s %s: %q %q %v, want %q", c.tool, c.args, l, why, ok, c.argument)
		}
		l, why, ok = OperationRisk(c.tool, json.RawMessage(c.args))
		if l != c.operation || ok != (c.operation != "") || ok && why == "" {
			t.Errorf("OperationRisk %s %s: %q %q %v, want %q", c.tool, c.args, l, why, ok, c.operation)
		}
	}
	for _, tool := range []string{"file_operations", "memory_operations"} {
		if OperationRiskNote(tool) == "" {
			t.Errorf("no note on %s's own levels", tool)
		}
	}
}
