package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// SealNowSecret encrypts, in tx (the discovery's), the settings of tools ids stored in
// clear under a parameter their new definition marks secret (SecretIn: writeOnly or
// format password, nested too): in the current configuration and in every past version,
// each audited by the system. They were masked wherever they left the server already;
// this takes them out of the database (and its backups) in clear. A discovery calls it
// for the tools whose definition it changed; most have no setting in clear, and only
// those that do are read.
func SealNowSecret(ctx context.Context, tx pgx.Tx, keys *secrets.Keyring, ids []string) error {
	if keys == nil || len(ids) == 0 {
		return nil
	}
	// A setting in clear in the current configuration or in a past version (one cleared
	// or encrypted by a save since, its history kept in clear).
	const clear = `EXISTS (SELECT 1 FROM jsonb_each(CASE WHEN jsonb_typeof(c->'params') = 'object' THEN c->'params' END) p
		WHERE NOT p.value ? 'secret')`
	rows, err := tx.Query(ctx, `/* tools.SealNowSecret */ SELECT t.id::text, s.name AS server, t.name, t.configuration, t.input_schema
		FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
		WHERE t.id = ANY($1::uuid[]) AND (`+strings.ReplaceAll(clear, "c->", "t.configuration->")+`
			OR EXISTS (SELECT 1 FROM tool_configurations v WHERE v.tool_id = t.id AND `+strings.ReplaceAll(clear, "c->", "v.configuration->")+`))
		ORDER BY t.id FOR UPDATE OF t`, ids)
	if err != nil {
		return fmt.Errorf("tools: seal settings: %w", err)
	}
	type clearTool struct {
		ID     string          `db:"id"`
		Server string          `db:"server"`
		Name   string          `db:"name"`
		Config []byte          `db:"configuration"`
		Input  json.RawMessage `db:"input_schema"`
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByName[clearTool])
	if err != nil {
		return fmt.Errorf("tools: seal settings: %w", err)
	}
	var entries []audit.Entry
	for _, t := range found {
		// By the schema alone (an empty configuration holds nothing encrypted).
		secret := Configuration{}.SecretIn(t.Input)
		sealed := map[string]bool{}
		next, err := sealParams(keys, t.ID, t.Config, secret, sealed)
		if err != nil {
			return err
		}
		if next != nil {
			if _, err := tx.Exec(ctx, `/* tools.SealNowSecret.current */ UPDATE mcp_tools SET configuration = $2 WHERE id = $1::uuid`, t.ID, next); err != nil {
				return fmt.Errorf("tools: seal settings: %w", err)
			}
		}
		vrows, err := tx.Query(ctx, `/* tools.SealNowSecret.versions */ SELECT id, configuration FROM tool_configurations WHERE tool_id = $1::uuid`, t.ID)
		if err != nil {
			return fmt.Errorf("tools: seal settings: %w", err)
		}
		vs, err := pgx.CollectRows(vrows, pgx.RowToStructByName[storedVersion])
		if err != nil {
			return fmt.Errorf("tools: seal settings: %w", err)
		}
		for _, v := range vs {
			next, err := sealParams(keys, t.ID, v.Configuration, secret, sealed)
			if err != nil {
				return err
			}
			if next == nil {
				continue
			}
			if _, err := tx.Exec(ctx, `/* tools.SealNowSecret.version */ UPDATE tool_configurations SET configuration = $2 WHERE id = $1`, v.ID, next); err != nil {
				return fmt.Errorf("tools: seal settings: %w", err)
			}
		}
		if len(sealed) == 0 {
			continue
		}
		entries = append(entries, audit.Entry{Actor: audit.System, Action: "tool.configure", TargetType: "tool", TargetID: t.ID,
			TargetName: Row{Server: t.Server, Name: t.Name}.QualifiedName(), Payload: map[string]any{"sealed": slices.Sorted(maps.Keys(sealed)),
				"reason": "the tool's new definition marks these parameters secret: their values, stored in clear until now, " +
					"are stored encrypted (in past versions too)"}})
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := audit.AppendBatch(ctx, tx, entries); err != nil {
		return fmt.Errorf("tools: seal settings: audit: %w", err)
	}
	return nil
}

// storedVersion is a tool_configurations row's id and configuration.
type storedVersion struct {
	ID            int64  `db:"id"`
	Configuration []byte `db:"configuration"`
}

// sealParams is raw (a stored configuration of tool id) with the values it holds in
// clear of the parameters secret names encrypted, each name added to sealed; nil when
// it holds none.
func sealParams(keys *secrets.Keyring, id string, raw []byte, secret func(name string) bool, sealed map[string]bool) ([]byte, error) {
	c := parseConfiguration(raw)
	n := 0
	for name, st := range c.Params {
		if st.Secret != "" || st.Value == nil || !secret(name) {
			continue
		}
		enc, err := keys.Encrypt(st.Value, configAAD(id, name))
		if err != nil {
			return nil, fmt.Errorf("tools: seal settings: tool %s, parameter %s: %w", id, name, err)
		}
		c.Params[name] = Setting{Mode: st.Mode, Secret: enc}
		sealed[name] = true
		n++
	}
	if n == 0 {
		return nil, nil
	}
	return withParams(raw, c.Params)
}

// withParams is raw, a stored configuration, with its params replaced by params; what
// else it holds (a version's risk, timeout, category, tags) is kept as it was.
func withParams(raw []byte, params map[string]Setting) ([]byte, error) {
	var whole map[string]json.RawMessage
	if err := json.Unmarshal(raw, &whole); err != nil || whole == nil {
		whole = map[string]json.RawMessage{}
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	whole["params"] = p
	return json.Marshal(whole)
}
