package tools

import (
	"encoding/json"
	"fmt"

	"github.com/toolwarden/toolwarden/internal/toolname"
)

// Row is one mcp_tools row with its server's name and trust: the tool and its pinned
// definition, as every package that reads tools scans it. Item (lists, the API, the
// router's Target) and the registry's Tool add their own columns to it.
type Row struct {
	ID             string          `db:"id" json:"id"`
	ServerID       string          `db:"server_id" json:"server_id"`
	Server         string          `db:"server_name" json:"server"`
	ServerTrusted  bool            `db:"server_trusted" json:"server_trusted"`
	Name           string          `db:"name" json:"name"`
	Title          string          `db:"title" json:"title,omitempty"`
	Description    string          `db:"description" json:"description"`
	Status         string          `db:"status" json:"status"`
	Available      bool            `db:"available" json:"available"`
	InputSchema    json.RawMessage `db:"input_schema" json:"input_schema"`
	OutputSchema   json.RawMessage `db:"output_schema" json:"output_schema,omitempty"`
	Annotations    json.RawMessage `db:"annotations" json:"annotations"`
	DefinitionHash string          `db:"definition_hash" json:"definition_hash"`
	VersionMajor   int             `db:"version_major" json:"-"`
	VersionMinor   int             `db:"version_minor" json:"-"`
}

// RowColumns select a Row from mcp_tools t joined to its server s (RowFrom).
const RowColumns = `t.id, t.server_id, s.name AS server_name, s.trusted AS server_trusted, t.name, t.title,
	t.description, t.status, t.available, t.input_schema, t.output_schema, t.annotations, t.definition_hash,
	t.version_major, t.version_minor`

// RowFrom is the FROM clause RowColumns read.
const RowFrom = ` FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id`

// QualifiedName is the name the API, plans and the gateway use (docs/api.md).
func (t Row) QualifiedName() string { return toolname.Join(t.Server, t.Name) }

// Version is the tool's version as people read it ("2.1").
func (t Row) Version() string { return fmt.Sprintf("%d.%d", t.VersionMajor, t.VersionMinor) }
