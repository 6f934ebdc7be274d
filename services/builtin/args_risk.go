package builtin

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/services/risk"
)

// ArgumentRisk is the risk a built-in tool's call carries by its arguments (tool is
// the bare name): terminal_operations' run_command command by CommandRisk, send_input's
// input by InputRisk, file_operations' writes by fileWriteRisk. The router raises the tool's
// risk to it, never lowers it. send_input is rated alone here, where neither the caller
// nor (on another replica) the terminal is known; the terminal rates it again with the
// unfinished line it joins (Terminal.Input, joinedRisk).
func ArgumentRisk(tool string, args json.RawMessage) (risk.Level, string, bool) {
	if tool == "file_operations" {
		return fileWriteRisk(args)
	}
	if tool != terminalTool {
		return "", "", false
	}
	var a struct {
		Operation string `json:"operation"`
		Command   string `json:"command"`
		Input     string `json:"input"`
	}
	if json.Unmarshal(args, &a) != nil {
		return "", "", false
	}
	switch a.Operation {
	case "run_command":
		return CommandRisk(a.Command)
	case "send_input":
		return InputRisk(a.Input)
	}
	return "", "", false
}

// OperationRisk is the level of what a call of a built-in tool (its bare name) does,
// where the tool's annotations overstate it: file_operations' reads (read_file,
// list_dir, file_search, grep_search, get_file_info) are low, as reading needs no one's
// say-so (the path guard still bounds what they reach). The router puts it in place of
// a level derived from the annotations, never of an administrator's.
func OperationRisk(tool string, args json.RawMessage) (risk.Level, string, bool) {
	if tool != "file_operations" {
		return "", "", false
	}
	if op := operationOf(args); slices.Contains(readOperations, op) {
		return risk.Low, "It only reads files (" + op + "), inside what the path guard lets this conversation reach.", true
	}
	return "", "", false
}

// readOperations are file_operations' reads, low on their own (OperationRisk).
var readOperations = []string{"read_file", "list_dir", "file_search", "grep_search", "get_file_info"}

// OperationRiskNote says, for a tool's page, which of the built-in tool's operations
// have a level of their own (OperationRisk); "" when none do.
func OperationRiskNote(tool string) string {
	if tool != "file_operations" {
		return ""
	}
	return "reads (" + strings.Join(readOperations, ", ") + ") are low risk on their own and run without asking; its writes take the level above."
}

// fileWriteRisk rates file_operations by what the call does, for ArgumentRisk: reads
// add nothing to the tool's level (OperationRisk makes them low unless an administrator
// set the tool's level); a write is at least medium, and deleting or moving a file
// (restore_snapshot too) high. Left as discovered (destructive, so high), every write asks for the typed
// phrase; set low, a write asks for a confirm and a delete for the phrase.
func fileWriteRisk(args json.RawMessage) (risk.Level, string, bool) {
	switch op := operationOf(args); op {
	case "create_file", "replace_string", "multi_replace", "insert_edit", "copy_file", "create_directory":
		return risk.Medium, "It writes files (" + op + ").", true
	case "delete_file", "rename_file", "restore_snapshot":
		// A restore deletes what a write created and moves renamed files back.
		return risk.High, "It deletes or moves files (" + op + ").", true
	}
	return "", "", false
}

// operationOf is the operation a consolidated tool's call names ("" when the arguments
// name none or are not an object).
func operationOf(args json.RawMessage) string {
	var a struct {
		Operation string `json:"operation"`
	}
	_ = json.Unmarshal(args, &a)
	return a.Operation
}
