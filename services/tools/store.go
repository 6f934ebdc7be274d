package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// This package is the one writer of mcp_tools: discovery (services/registry) stores what
// it found through StoreDiscovery, state changes go through ApplyMoves and Validate, and
// settings, overrides and last use are written by the Service and Touch.

// Definition is a tool definition as a server listed it, pinned by its hash.
type Definition struct {
	Title        string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage // nil or null: none
	Annotations  json.RawMessage // nil or null: none
	Raw          json.RawMessage // the whole tool object as received
	Hash         string
}

// NewTool is a tool a discovery found for the first time; it is stored as discovered.
type NewTool struct {
	ID   string
	Name string
	Definition
}

// Relisted is a known tool a discovery listed again after it changed or went missing.
type Relisted struct {
	ID string
	// Definition is the new definition, with its version and state; nil when the tool
	// is listed again unchanged after being missing (it becomes available again).
	Definition   *Definition
	VersionMajor int
	VersionMinor int
	Status       string
}

// DiscoveryWrite is what one discovery changes in a server's tools.
type DiscoveryWrite struct {
	New      []NewTool
	Relisted []Relisted // in the order the server listed them
	Gone     []string   // ids of tools no longer listed: unavailable from now on
	Seen     []string   // names of tools listed unchanged: seen now
}

// StoreDiscovery writes w for server serverID in tx (the discovery's transaction) with as
// few round trips as the change needs: one COPY for the new tools, one batch for the rest.
func StoreDiscovery(ctx context.Context, tx pgx.Tx, serverID string, w DiscoveryWrite) error {
	batch := &pgx.Batch{}
	for _, r := range w.Relisted {
		if r.Definition == nil {
			batch.Queue(`/* tools.StoreDiscovery.restore */ UPDATE mcp_tools SET available = true, last_seen = now(), updated_at = now() WHERE id = $1`, r.ID)
			continue
		}
		d := r.Definition
		batch.Queue(`/* tools.StoreDiscovery.update */
				UPDATE mcp_tools SET title = $2, description = $3, input_schema = $4, output_schema = $5,
					annotations = $6, definition = $7, definition_hash = $8, version_major = $9, version_minor = $10,
					status = $11, available = true, last_seen = now(), updated_at = now()
				WHERE id = $1`, r.ID, d.Title, d.Description, d.InputSchema, nullJSON(d.OutputSchema),
			nullJSON(d.Annotations), d.Raw, d.Hash, r.VersionMajor, r.VersionMinor, r.Status)
	}
	if len(w.Gone) > 0 {
		batch.Queue(`/* tools.StoreDiscovery.unavailable */ UPDATE mcp_tools SET available = false, updated_at = now() WHERE id = ANY($1)`, w.Gone)
	}
	if len(w.Seen) > 0 {
		batch.Queue(`/* tools.StoreDiscovery.seen */ UPDATE mcp_tools SET last_seen = now() WHERE server_id = $1 AND name = ANY($2)`, serverID, w.Seen)
	}
	if len(w.New) > 0 {
		rows := make([][]any, len(w.New))
		for i, t := range w.New {
			rows[i] = []any{t.ID, serverID, t.Name, t.Title, t.Description, t.InputSchema,
				nullJSON(t.OutputSchema), nullJSON(t.Annotations), t.Raw, t.Hash}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"mcp_tools"}, []string{"id", "server_id", "name", "title",
			"description", "input_schema", "output_schema", "annotations", "definition", "definition_hash"},
			pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("insert tools: %w", err)
		}
	}
	if batch.Len() > 0 {
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("update tools: %w", err)
		}
	}
	return nil
}

func nullJSON(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return raw
}
