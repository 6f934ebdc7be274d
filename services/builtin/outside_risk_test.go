package builtin

import (
	"encoding/json"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// A write whose path leaves the conversation's workspace (absolute, or up by ..) is
// high risk (DESIGN §5: file writes outside the workspace raise risk); the same write
// in the workspace keeps its level, and a copy's source, only read, does not count.
func TestFileWriteOutsideWorkspaceIsHigh(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args string
		want risk.Level
	}{
		{`{"operation":"create_file","filePath":"notes/a.txt","content":"x"}`, risk.Medium},
		{`{"operation":"create_file","filePath":"./a..b.txt","content":"x"}`, risk.Medium},
		{`{"operation":"create_file","filePath":"notes/../a.txt","content":"x"}`, risk.Medium},
		{`{"operation":"create_file","filePath":"/srv/root/other/a.txt","content":"x"}`, risk.High},
		{`{"operation":"create_file","filePath":"../other/a.txt","content":"x"}`, risk.High},
		{`{"operation":"replace_string","filePath":"notes/../../other/a.txt","oldString":"a","newString":"b"}`, risk.High},
		{`{"operation":"multi_replace","filePath":"..","replacements":[]}`, risk.High},
		{`{"operation":"insert_edit","filePath":"/tmp/a.txt","line":0,"content":"x"}`, risk.High},
		{`{"operation":"create_directory","filePath":"../d"}`, risk.High},
		{`{"operation":"copy_file","filePath":"a.txt","newPath":"b.txt"}`, risk.Medium},
		{`{"operation":"copy_file","filePath":"../other/a.txt","newPath":"b.txt"}`, risk.Medium},
		{`{"operation":"copy_file","filePath":"a.txt","newPath":"../other/b.txt"}`, risk.High},
		{`{"operation":"rename_file","filePath":"a.txt","newPath":"b.txt"}`, risk.High},
	} {
		level, why, ok := ArgumentRisk("file_operations", json.RawMessage(c.args))
		if !ok || level != c.want {
			t.Errorf("%s: %q %q %v; want %q", c.args, level, why, ok, c.want)
		}
	}
}
