package toolstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/schema"
)

// Pending is a tool whose current definition is to be validated.
type Pending struct {
	ID     string
	Status string // its state now
	Hash   string // the definition hash being validated
	Def    schema.Tool
}

// Outcome is what validating one tool found and where it left the tool.
type Outcome struct {
	ID       string
	Status   string
	Worst    schema.Severity
	Findings []schema.Finding
}

// Validate checks each tool's definition (services/schema) in tx and stores the result
// in tool_validations and mcp_tools.validation_worst. A discovered, updating, validated
// or invalid tool moves through validating to validated, or to invalid when a finding is
// critical or an error; a validated tool whose server or category has auto-enable on is
// then enabled by policy. Tools in other states (configured, enabled, ...) keep their
// state: the new findings are recorded and shown, and they block a later enable.
func Validate(ctx context.Context, tx pgx.Tx, tools []Pending, actor string) ([]Outcome, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := make([]Outcome, len(tools))
	var moves []Move
	rows := make([][]any, len(tools))
	ids, worsts := make([]string, len(tools)), make([]*string, len(tools))
	var validated []int
	for i, t := range tools {
		fs := schema.ValidateTool(t.Def)
		worst := schema.Worst(fs)
		blocking := schema.Blocking(fs)
		o := Outcome{ID: t.ID, Status: t.Status, Worst: worst, Findings: fs}
		var w *string
		if worst != "" {
			s := string(worst)
			w = &s
		}
		findings, err := json.Marshal(fs)
		if err != nil {
			return nil, fmt.Errorf("toolstate: findings: %w", err)
		}
		rows[i] = []any{t.ID, t.Hash, "schema", !blocking, w, json.RawMessage(findings), actor}
		ids[i], worsts[i] = t.ID, w
		switch t.Status {
		case Discovered, Updating, Validated, Invalid:
			to, reason := Validated, summary(fs)
			if blocking {
				to = Invalid
			}
			moves = append(moves,
				Move{ToolID: t.ID, From: t.Status, To: Validating, Reason: "validating definition " + short(t.Hash), Actor: actor},
				Move{ToolID: t.ID, From: Validating, To: to, Reason: reason, Actor: actor,
					Metadata: map[string]any{"definition_hash": t.Hash, "worst": worst}})
			o.Status = to
			if to == Validated {
				validated = append(validated, i)
			}
		}
		out[i] = o
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tool_validations"},
		[]string{"tool_id", "definition_hash", "validation_type", "success", "worst", "findings", "validated_by"},
		pgx.CopyFromRows(rows)); err != nil {
		return nil, fmt.Errorf("toolstate: store validations: %w", err)
	}
	if _, err := tx.Exec(ctx, `/* toolstate.Validate.worst */
		UPDATE mcp_tools t SET validation_worst = u.worst
		FROM unnest($1::uuid[], $2::text[]) AS u(id, worst) WHERE t.id = u.id`, ids, worsts); err != nil {
		return nil, fmt.Errorf("toolstate: store validations: %w", err)
	}
	if err := Apply(ctx, tx, moves); err != nil {
		return nil, err
	}
	return out, autoEnable(ctx, tx, out, validated)
}

// autoEnable enables the validated tools whose server or category has auto-enable on.
func autoEnable(ctx context.Context, tx pgx.Tx, out []Outcome, validated []int) error {
	if len(validated) == 0 {
		return nil
	}
	ids := make([]string, len(validated))
	for i, idx := range validated {
		ids[i] = out[idx].ID
	}
	rows, err := tx.Query(ctx, `/* toolstate.autoEnable */
		SELECT t.id::text, CASE WHEN s.auto_enable THEN 'server ' || s.name ELSE 'category ' || c.name END
		FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
		LEFT JOIN tool_categories c ON c.id = t.category_id
		WHERE t.id = ANY($1) AND (s.auto_enable OR coalesce(c.auto_enable, false))`, ids)
	if err != nil {
		return fmt.Errorf("toolstate: auto-enable policy: %w", err)
	}
	type policy struct{ id, by string }
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (policy, error) {
		var p policy
		return p, r.Scan(&p.id, &p.by)
	})
	if err != nil {
		return fmt.Errorf("toolstate: auto-enable policy: %w", err)
	}
	moves := make([]Move, 0, len(list))
	for _, p := range list {
		moves = append(moves, Move{ToolID: p.id, From: Validated, To: Enabled, Actor: "system",
			Reason:   "enabled by the auto-enable policy of " + p.by + " (testing skipped)",
			Metadata: map[string]any{"policy": p.by, "skipped_testing": true}})
	}
	if err := Apply(ctx, tx, moves); err != nil {
		return err
	}
	enabled := make(map[string]bool, len(list))
	for _, p := range list {
		enabled[p.id] = true
	}
	for i := range out {
		if enabled[out[i].ID] {
			out[i].Status = Enabled
		}
	}
	return nil
}

// summary is the history reason of a validation: what it found.
func summary(fs []schema.Finding) string {
	if len(fs) == 0 {
		return "definition valid, no findings"
	}
	counts := map[schema.Severity]int{}
	for _, f := range fs {
		counts[f.Severity]++
	}
	s := ""
	for _, sev := range []schema.Severity{schema.SeverityCritical, schema.SeverityError, schema.SeverityWarning, schema.SeverityInfo} {
		if n := counts[sev]; n > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%d %s", n, sev)
		}
	}
	first := fs[0]
	return fmt.Sprintf("%s; first: %s at %s: %s", s, first.Code, first.Path, first.Message)
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
