package builtin

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/services/risk"
)

// ArgumentRisk is the risk a built-in tool's call carries by its arguments (tool is
// the bare name): terminal_operations' run_command command by CommandRisk, send_input's
// input by InputRisk, file_operations' writes by fileWriteRisk, memory_operations' delete
// by memoryRisk. The router raises the tool's risk to it, never lowers it. send_input is
// rated alone here, where neither the caller nor (on another replica) the terminal is
// known; the terminal rates it again with the unfinished line it joins (Terminal.Input,
// joinedRisk).
func ArgumentRisk(tool string, args json.RawMessage) (risk.Level, string, bool) {
	switch tool {
	case "file_operations":
		return fileWriteRisk(args)
	case "memory_operations":
		return memoryRisk(args)
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
// list_dir, file_search, grep_search, get_file_info) and memory_operations' (search,
// search_memory, list, todo_list, manage_todos read) are low, as reading needs no one's
// say-so (the path guard still bounds the files they reach; the notes and the todo list
// are the caller's own). The router puts it in place of a level derived from the
// annotations, never of an administrator's.
func OperationRisk(tool string, args json.RawMessage) (risk.Level, string, bool) {
	switch tool {
	case "file_operations":
		if op := operationOf(args); slices.Contains(readOperations, op) {
			return risk.Low, "It only reads files (" + op + "), inside what the path guard lets this conversation reach.", true
		}
	case "memory_operations":
		if op := memoryRead(args); op != "" {
			return risk.Low, "It only reads the caller's own notes or this conversation's todo list (" + op + ").", true
		}
	}
	return "", "", false
}

// readOperations are file_operations' reads, low on their own (OperationRisk).
var readOperations = []string{"read_file", "list_dir", "file_search", "grep_search", "get_file_info"}

// memoryReadOperations are memory_operations' reads, low on their own (OperationRisk);
// manage_todos is one too when its action is read (memoryRead).
var memoryReadOperations = []string{"search", "search_memory", "list", "todo_list"}

// memoryRead names the memory_operations read a call makes ("" for a change).
func memoryRead(args json.RawMessage) string {
	var a struct {
		Operation string `json:"operation"`
		Action    string `json:"action"`
	}
	_ = json.Unmarshal(args, &a)
	switch {
	case slices.Contains(memoryReadOperations, a.Operation):
		return a.Operation
	case a.Operation == "manage_todos" && a.Action == "read":
		return "manage_todos read"
	}
	return ""
}

// OperationRiskNote says, for a tool's page, which of the built-in tool's operations
// have a level of their own (OperationRisk, ArgumentRisk); "" when none do.
func OperationRiskNote(tool string) string {
	switch tool {
	case "file_operations":
		return "reads (" + strings.Join(readOperations, ", ") + ") are low risk on their own and run without asking; " +
			"its writes take the level above, at least medium, and a delete, a move, a restore or an overwrite of an existing file is high whatever the level."
	case "memory_operations":
		return "reads (" + strings.Join(memoryReadOperations, ", ") + ", manage_todos read) are low risk on their own and run without asking; " +
			"its changes take the level above, and delete, which forgets a note for good, is high whatever the level."
	}
	return ""
}

// fileWriteRisk rates file_operations by what the call does, for ArgumentRisk: reads
// add nothing to the tool's level (OperationRisk makes them low unless an administrator
// set the tool's level); a write is at least medium, and one that destroys what a file
// holds high: deleting or moving a file, a restore, and a create or copy with overwrite,
// which replaces an existing file's content wholesale as a delete would. Left as
// discovered (destructive, so high), every write asks for the typed phrase; set low, a
// write asks for a confirm, and a delete or an overwrite for the phrase.
func fileWriteRisk(args json.RawMessage) (risk.Level, string, bool) {
	switch op := operationOf(args); op {
	case "create_file", "copy_file":
		if overwrites(args) {
			return risk.High, "It may replace an existing file's content (" + op + " with overwrite).", true
		}
		return risk.Medium, "It writes files (" + op + ").", true
	case "replace_string", "multi_replace", "insert_edit", "create_directory":
		// An edit removes at most the text its arguments name (oldString, found exactly
		// once) and keeps the file; it never discards a file's content it does not name.
		return risk.Medium, "It writes files (" + op + ").", true
	case "delete_file", "rename_file", "restore_snapshot":
		// A restore deletes what a write created and moves renamed files back.
		return risk.High, "It deletes or moves files (" + op + ").", true
	}
	return "", "", false
}

// overwrites reports whether a call's overwrite may replace an existing file: anything
// but absent, null or false counts (the input schema takes only a boolean; a value it
// let through otherwise is rated as the worse case).
func overwrites(args json.RawMessage) bool {
	var a struct {
		Overwrite json.RawMessage `json:"overwrite"`
	}
	if json.Unmarshal(args, &a) != nil {
		return true
	}
	v := strings.TrimSpace(string(a.Overwrite))
	return v != "" && v != "null" && v != "false"
}

// memoryRisk rates memory_operations for ArgumentRisk: delete is high, as it forgets a
// note kept across all of the person's conversations, and nothing keeps a copy to put
// back. Other changes (store, the todo list's) take the tool's level.
func memoryRisk(args json.RawMessage) (risk.Level, string, bool) {
	if operationOf(args) == "delete" {
		return risk.High, "It forgets a note for good (delete): the person's notes are kept across their conversations, and no snapshot restores one.", true
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
