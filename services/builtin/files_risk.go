package builtin

import (
	"encoding/json"

	"github.com/toolwarden/toolwarden/services/risk"
)

// fileWriteRisk rates file_operations by what the call does, for ArgumentRisk: reads
// add nothing to the tool's level; a write is at least medium, and deleting or moving
// a file high. So an administrator who sets file_operations low lets reads run without
// asking while every write still asks; left as discovered (destructive, so high),
// everything asks.
func fileWriteRisk(args json.RawMessage) (risk.Level, string, bool) {
	var a struct {
		Operation string `json:"operation"`
	}
	if json.Unmarshal(args, &a) != nil {
		return "", "", false
	}
	switch a.Operation {
	case "create_file", "replace_string", "multi_replace", "insert_edit", "copy_file", "create_directory", "restore_snapshot":
		return risk.Medium, "It writes files (" + a.Operation + ").", true
	case "delete_file", "rename_file":
		return risk.High, "It deletes or moves a file (" + a.Operation + ").", true
	}
	return "", "", false
}
