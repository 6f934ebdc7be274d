package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/template"
	"github.com/toolwarden/toolwarden/services/toolstate"
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

// NewTool is a tool a discovery found for the first time; it is stored as discovered
// and validated at once.
type NewTool struct {
	ID   string
	Name string
	Definition
}

// Relisted is a known tool a discovery listed again after it changed or went missing.
type Relisted struct {
	ID   string
	Name string
	// Definition is the new definition, with its version and state; nil when the tool
	// is listed again unchanged after being missing (it becomes available again).
	Definition   *Definition
	VersionMajor int
	VersionMinor int
	Status       string
	// Was is the state the discovery read, before the definition changed
	// (toolstate.Pending.Was); the tool is updated only while it is still in it.
	Was string
	// WasHash is the definition hash the discovery read (the definition replaced).
	WasHash string
	// Unavailable: the tool was unavailable (not listed) until this discovery.
	Unavailable bool
}

// HistoryRow is a tool_state_history row a discovery writes for its own transitions
// (a new tool → discovered, a changed one → updating). From "" is NULL.
type HistoryRow struct {
	ToolID   string
	From     string
	To       string
	Reason   string
	Actor    string
	Metadata json.RawMessage
}

// Gone is a stored tool a discovery takes out of the listing: no longer listed, or
// listed with different definitions. It is unavailable from now on, its state kept.
type Gone struct {
	ID     string
	Name   string
	Status string // its state as the discovery read it
	Why    string // what the tool's audit entry gives as the reason, when it was enabled
}

// DiscoveryWrite is what one discovery changes in a server's tools.
type DiscoveryWrite struct {
	New      []NewTool
	Relisted []Relisted // in the order the server listed them
	Gone     []Gone     // tools no longer listed: unavailable from now on
	Seen     []string   // names of tools listed unchanged: seen now
	History  []HistoryRow
	// Waiting are the server's other tools whose definition awaits validation
	// (discovered or updating) that New and Relisted do not cover.
	Waiting []toolstate.Pending
	Actor   string // who validates: "system" or the user's name
	Server  string // the server's name, for the tools' qualified names in audit entries
}

// StoreDiscovery writes w for server serverID in tx (the discovery's transaction) and
// validates every tool whose definition is new (Validate's automatic path discovered |
// updating → validating → validated | invalid, then auto-enable), with as few round
// trips and row writes as the change needs. The result is what storing the tools
// and then calling Validate on the server's discovered and updating tools (by name)
// stores: the same rows, history and events. But the definitions are validated first,
// on every CPU, so each new tool is inserted once with its final state (one COPY) and
// each changed one updated once, instead of being written again for its findings and
// for each move: PostgreSQL checks a row updated in the transaction that inserted it
// against its server's foreign key again, and every index of mcp_tools takes each new
// version of a row.
func StoreDiscovery(ctx context.Context, tx pgx.Tx, serverID string, w DiscoveryWrite) ([]toolstate.Outcome, error) {
	pending := make([]toolstate.Pending, 0, len(w.New)+len(w.Relisted)+len(w.Waiting))
	for _, t := range w.New {
		pending = append(pending, toolstate.Pending{ID: t.ID, Status: toolstate.Discovered, Hash: t.Hash, Def: t.tool(t.Name)})
	}
	for _, r := range w.Relisted {
		if r.Definition != nil {
			pending = append(pending, toolstate.Pending{ID: r.ID, Status: r.Status, Was: r.Was, Hash: r.Definition.Hash, Def: r.Definition.tool(r.Name)})
		}
	}
	pending = append(pending, w.Waiting...)
	if err := sortByName(ctx, tx, pending); err != nil {
		return nil, err
	}
	// Validation runs on every CPU meanwhile; the new tools first, in the order the
	// COPY below sends them, each as soon as its state is known.
	at := make(map[string]int, len(pending))
	for i, p := range pending {
		at[p.ID] = i
	}
	first := make([]int, len(w.New))
	for k, t := range w.New {
		first[k] = at[t.ID]
	}
	jg := startJudging(pending, first)
	// On an error the workers stop and are gone when this returns (the discovery may be
	// retried at once); after result, stop finds every tool judged and does nothing.
	defer jg.stop()

	if len(w.New) > 0 {
		src := &newTools{serverID: uuidArg(serverID), tools: w.New, at: at, judging: jg, i: -1}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"mcp_tools"}, []string{"id", "server_id", "name", "title",
			"description", "input_schema", "output_schema", "annotations", "definition", "definition_hash",
			"status", "validation_worst"}, src); err != nil {
			return nil, fmt.Errorf("insert tools: %w", err)
		}
	}
	batch := &pgx.Batch{}
	var changed changedTools
	for _, r := range w.Relisted {
		if r.Definition == nil {
			batch.Queue(`/* tools.StoreDiscovery.restore */ UPDATE mcp_tools SET available = true, last_seen = now(), updated_at = now() WHERE id = $1`, r.ID)
			continue
		}
		status, worst := jg.verdict(at[r.ID])
		changed.add(r, status, worst)
	}
	if len(changed.ids) > 0 {
		// One statement for every changed tool: a statement per tool costs its own
		// round of parse, plan and execute in PostgreSQL, thousands of them seconds.
		// Each row changes only from the state the discovery read (Was): a person who
		// disabled the tool meanwhile is not undone, nor the tool enabled again by policy.
		// A risk override below what the new annotations give, when they give more than the
		// old ones did, goes: it was chosen for the old definition, as an approval pinned
		// to its hash was (o is the row as it was). "More" is compared on what the
		// annotations claim, before an untrusted server's floor: there a read-only tool
		// that became a writing one rates medium both times, yet the low it was given
		// rested on the read-only claim it no longer makes. A mere rewording keeps it, and so do
		// the built-in tools (their operations rate themselves once the level goes). So does
		// a template tool whose behaviour changed (its spec hash, template.SpecMeta: a GET
		// made a DELETE), though its annotations did not.
		// Clearing it is a new configuration version, so a settings form opened before
		// (which sends its level again) is refused as stale instead of restoring it.
		dropRisk := `u.reassess AND ` + riskRank("t.risk_override") + ` < ` + riskRank("u.derived")
		spec := `->'_meta'->>'` + template.SpecMeta + `'`
		batch.Queue(`/* tools.StoreDiscovery.update */
				UPDATE mcp_tools t SET title = u.title, description = u.description, input_schema = u.input_schema::jsonb,
					output_schema = u.output_schema::jsonb, annotations = u.annotations::jsonb, definition = u.definition::jsonb,
					definition_hash = u.hash, version_major = u.major, version_minor = u.minor, status = u.status,
					validation_worst = u.worst, enable_override = NULL, available = true, last_seen = now(), updated_at = now(),
					risk_override = CASE WHEN `+dropRisk+` THEN NULL ELSE t.risk_override END,
					configuration_version = CASE WHEN `+dropRisk+` THEN t.configuration_version + 1 ELSE t.configuration_version END
				FROM (SELECT u.*, o.risk_override AS old_risk, `+risk.SQL("NULL::text", "u.annotations::jsonb", "s.trusted")+` AS derived,
						s.server_type <> 'builtin' AND `+riskRank(risk.SQL("NULL::text", "u.annotations::jsonb", "true"))+`
							> `+riskRank(risk.SQL("NULL::text", "o.annotations", "true"))+`
						OR (o.definition`+spec+`) IS NOT NULL AND (o.definition`+spec+`) IS DISTINCT FROM (u.definition::jsonb`+spec+`) AS reassess
					FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
						$9::int[], $10::int[], $11::text[], $12::text[], $13::text[])
						AS u(id, title, description, input_schema, output_schema, annotations, definition, hash, major, minor, status, worst, from_status)
					JOIN mcp_tools o ON o.id = u.id JOIN mcp_servers s ON s.id = o.server_id) u
				WHERE t.id = u.id AND t.status = u.from_status
				RETURNING t.id::text, CASE WHEN u.reassess AND t.risk_override IS NULL AND `+riskRank("u.old_risk")+` < `+riskRank("u.derived")+`
					THEN u.old_risk END, u.derived`, changed.ids, changed.titles, changed.descriptions, changed.inputs, changed.outputs,
			changed.annotations, changed.raws, changed.hashes, changed.majors, changed.minors, changed.statuses, changed.worsts,
			changed.froms)
	}
	if len(w.Gone) > 0 {
		ids := make([]string, len(w.Gone))
		for i, g := range w.Gone {
			ids[i] = g.ID
		}
		batch.Queue(`/* tools.StoreDiscovery.unavailable */ UPDATE mcp_tools SET available = false, updated_at = now() WHERE id = ANY($1)`, ids)
	}
	if len(w.Seen) > 0 {
		batch.Queue(`/* tools.StoreDiscovery.seen */ UPDATE mcp_tools SET last_seen = now() WHERE server_id = $1 AND name = ANY($2)`, serverID, w.Seen)
	}
	var dropped map[string]droppedRisk
	if batch.Len() > 0 {
		var err error
		if dropped, err = storeBatch(ctx, tx, batch, changed, w.Relisted); err != nil {
			return nil, err
		}
		if err := recordDroppedRisks(ctx, tx, w.Actor, dropped); err != nil {
			return nil, err
		}
	}
	if len(w.Waiting) > 0 {
		// Tools this discovery did not write move as ApplyMoves moves them: only from
		// the state they were read in.
		ids, froms, tos, worsts := make([]string, len(w.Waiting)), make([]string, len(w.Waiting)),
			make([]string, len(w.Waiting)), make([]*string, len(w.Waiting))
		for i, p := range w.Waiting {
			status, worst := jg.verdict(at[p.ID])
			ids[i], froms[i], tos[i], worsts[i] = p.ID, p.Status, status, worst
		}
		rows, err := tx.Query(ctx, `/* tools.StoreDiscovery.waiting */
			UPDATE mcp_tools t SET status = u.to_status, validation_worst = u.worst, updated_at = now()
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS u(id, from_status, to_status, worst)
			WHERE t.id = u.id AND t.status = u.from_status
			RETURNING t.id::text`, ids, froms, tos, worsts)
		if err != nil {
			return nil, fmt.Errorf("toolstate: update: %w", err)
		}
		done, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("toolstate: update: %w", err)
		}
		if len(done) != len(ids) {
			first := make(map[string]toolstate.Move, len(w.Waiting))
			for _, p := range w.Waiting {
				first[p.ID] = toolstate.Move{ToolID: p.ID, From: p.Status}
			}
			return nil, conflict(ctx, tx, ids, first, done)
		}
	}
	if len(pending) == 0 {
		if len(w.History) > 0 {
			if err := recordMoves(ctx, tx, historyRows(w.History), nil, chained{}); err != nil {
				return nil, err
			}
		}
		return nil, auditTakenOff(ctx, tx, w, nil)
	}
	j, err := jg.result(w.Actor)
	if err != nil {
		return nil, err
	}
	if err := copyValidations(ctx, tx, j.rows); err != nil {
		return nil, err
	}
	noteDroppedRisks(j.moves, dropped)
	c, err := chainMoves(j.moves)
	if err != nil {
		return nil, err
	}
	c.startFrom(w.History)
	if err := recordMoves(ctx, tx, historyRows(w.History), j.moves, c); err != nil {
		return nil, err
	}
	if err := autoEnable(ctx, tx, j.out, j.validated); err != nil {
		return nil, err
	}
	return j.out, auditTakenOff(ctx, tx, w, j.out)
}

// auditTakenOff appends an entry by the system for each enabled tool the discovery took
// out of service or gave back: tool.disable for one whose changed definition took it
// out (no policy enabled it again), tool.unavailable for one no longer listed (or listed
// with different definitions), tool.available for one listed again unchanged. The
// moves are only in tool_state_history (not hash-chained) or in the availability flag,
// and the discovery's one entry names at most 50 tools, so without them an auditor
// following the tool never sees when it could not be called. One AppendBatch: a single
// insert however many tools changed.
func auditTakenOff(ctx context.Context, tx pgx.Tx, w DiscoveryWrite, out []toolstate.Outcome) error {
	final := make(map[string]string, len(out))
	for _, o := range out {
		final[o.ID] = o.Status
	}
	var entries []audit.Entry
	for _, r := range w.Relisted {
		if r.Definition == nil && r.Was == toolstate.Enabled {
			entries = append(entries, audit.Entry{Actor: audit.System, Action: "tool.available", TargetType: "tool", TargetID: r.ID,
				TargetName: toolname.Join(w.Server, r.Name), Payload: map[string]any{"state": r.Was, "reason": "listed again"}})
			continue
		}
		to, ok := final[r.ID]
		if r.Definition != nil && r.Was == toolstate.Enabled && ok && to == toolstate.Enabled && r.Unavailable {
			// Back with a new definition a policy enabled again at once: callable again.
			entries = append(entries, audit.Entry{Actor: audit.System, Action: "tool.available", TargetType: "tool", TargetID: r.ID,
				TargetName: toolname.Join(w.Server, r.Name), Payload: map[string]any{"state": to,
					"reason": "listed again with a changed definition, enabled again by policy", "from_hash": r.WasHash, "to_hash": r.Definition.Hash}})
			continue
		}
		if r.Definition == nil || r.Was != toolstate.Enabled || !ok || to == toolstate.Enabled {
			continue
		}
		entries = append(entries, audit.Entry{Actor: audit.System, Action: "tool.disable", TargetType: "tool", TargetID: r.ID,
			TargetName: toolname.Join(w.Server, r.Name), Payload: map[string]any{"from": r.Was, "to": to,
				"reason": "definition changed", "from_hash": r.WasHash, "to_hash": r.Definition.Hash,
				"version": fmt.Sprintf("%d.%d", r.VersionMajor, r.VersionMinor)}})
	}
	for _, g := range w.Gone {
		if g.Status == toolstate.Enabled {
			entries = append(entries, audit.Entry{Actor: audit.System, Action: "tool.unavailable", TargetType: "tool", TargetID: g.ID,
				TargetName: toolname.Join(w.Server, g.Name), Payload: map[string]any{"state": g.Status, "reason": g.Why}})
		}
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := audit.AppendBatch(ctx, tx, entries); err != nil {
		return fmt.Errorf("tools: audit tools taken out of service: %w", err)
	}
	return nil
}

// droppedRisk is a risk override a changed definition removed, and the level now.
type droppedRisk struct{ was, now string }

// riskRank orders a risk level as SQL: 1 low … 3 high; NULL for none.
func riskRank(expr string) string {
	return "array_position(ARRAY['low', 'medium', 'high'], " + expr + ")"
}

// recordDroppedRisks writes the configuration version that clearing each dropped risk
// override made, as Service.update writes the versions of saved settings. A stray row
// already at that version is left as it is: the record must not fail a discovery. Each
// clearing is audited too, by the system (the definition's change made it, not a person).
func recordDroppedRisks(ctx context.Context, tx pgx.Tx, actor string, dropped map[string]droppedRisk) error {
	entries := make([]audit.Entry, 0, len(dropped))
	for _, id := range slices.Sorted(maps.Keys(dropped)) {
		it, err := getItem(ctx, tx, id, false)
		if err != nil {
			return fmt.Errorf("tools: dropped risk: %w", err)
		}
		var raw []byte
		if err := tx.QueryRow(ctx, `/* tools.StoreDiscovery.configuration */ SELECT configuration FROM mcp_tools WHERE id = $1`, id).Scan(&raw); err != nil {
			return fmt.Errorf("tools: dropped risk: %w", err)
		}
		cfg := parseConfiguration(raw)
		after := snapshotOf(it, cfg)
		snap, _ := json.Marshal(after)
		reason := fmt.Sprintf("risk level %s cleared: the changed definition's annotations give %s", dropped[id].was, dropped[id].now)
		if _, err := tx.Exec(ctx, `/* tools.StoreDiscovery.version */ INSERT INTO tool_configurations (tool_id, version, configuration, actor, reason)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tool_id, version) DO NOTHING`, id, it.ConfigVersion, snap, actor, reason); err != nil {
			return fmt.Errorf("tools: dropped risk: version: %w", err)
		}
		was, level := it, dropped[id].was
		was.RiskOverride = &level
		before := snapshotOf(was, cfg)
		entries = append(entries, audit.Entry{Actor: audit.System, Action: "tool.configure", TargetType: "tool", TargetID: id,
			TargetName: it.QualifiedName(), Payload: map[string]any{"version": it.ConfigVersion, "changed": []string{"risk"},
				"before": before.masked(it.InputSchema), "after": after.masked(it.InputSchema), "reason": reason}})
	}
	if _, err := audit.AppendBatch(ctx, tx, entries); err != nil {
		return fmt.Errorf("tools: dropped risk: audit: %w", err)
	}
	return nil
}

// noteDroppedRisks records in the history row of each changed tool's validation the
// risk override its new definition removed.
func noteDroppedRisks(moves []toolstate.Move, dropped map[string]droppedRisk) {
	for i, m := range moves {
		d, ok := dropped[m.ToolID]
		if !ok || m.To != toolstate.Validating {
			continue
		}
		if m.Metadata == nil {
			moves[i].Metadata = map[string]any{}
		}
		moves[i].Metadata["risk_override_cleared"], moves[i].Metadata["risk"] = d.was, d.now
	}
}

// storeBatch sends a discovery's updates and checks that every changed tool was still
// in the state the discovery read: a short count is a conflict naming the first that
// was not (the whole discovery fails, and the next one starts from what is stored). It
// returns the risk overrides the changed definitions removed, by tool id.
func storeBatch(ctx context.Context, tx pgx.Tx, batch *pgx.Batch, changed changedTools, relisted []Relisted) (map[string]droppedRisk, error) {
	br := tx.SendBatch(ctx, batch)
	var done []string
	var dropped map[string]droppedRisk
	err := func() error {
		for _, r := range relisted {
			if r.Definition == nil {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
		}
		if len(changed.ids) == 0 {
			return nil
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var id, now string
		var was *string
		_, err = pgx.ForEachRow(rows, []any{&id, &was, &now}, func() error {
			done = append(done, id)
			if was != nil {
				if dropped == nil {
					dropped = map[string]droppedRisk{}
				}
				dropped[id] = droppedRisk{was: *was, now: now}
			}
			return nil
		})
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("update tools: %w", err)
	}
	if len(done) != len(changed.ids) {
		first := make(map[string]toolstate.Move, len(changed.ids))
		for i, id := range changed.ids {
			first[id] = toolstate.Move{ToolID: id, From: changed.froms[i]}
		}
		return nil, conflict(ctx, tx, changed.ids, first, done)
	}
	return dropped, nil
}

// changedTools are the columns of the changed tools' update, one array each.
type changedTools struct {
	ids, titles, descriptions, hashes, statuses, froms []string
	inputs, outputs, annotations, raws, worsts         []*string
	majors, minors                                     []int32
}

func (c *changedTools) add(r Relisted, status string, worst *string) {
	d := r.Definition
	// As the columns took these values as parameters: output schema and annotations
	// through nullJSON, the others as they are (nil is NULL).
	text := func(raw json.RawMessage) *string {
		if raw == nil {
			return nil
		}
		s := string(raw)
		return &s
	}
	nullText := func(raw json.RawMessage) *string {
		if v, ok := nullJSON(raw).(json.RawMessage); ok {
			return text(v)
		}
		return nil
	}
	c.ids = append(c.ids, r.ID)
	c.titles = append(c.titles, d.Title)
	c.descriptions = append(c.descriptions, d.Description)
	c.inputs = append(c.inputs, text(d.InputSchema))
	c.outputs = append(c.outputs, nullText(d.OutputSchema))
	c.annotations = append(c.annotations, nullText(d.Annotations))
	c.raws = append(c.raws, text(d.Raw))
	c.hashes = append(c.hashes, d.Hash)
	c.majors = append(c.majors, int32(r.VersionMajor))
	c.minors = append(c.minors, int32(r.VersionMinor))
	c.statuses = append(c.statuses, status)
	c.worsts = append(c.worsts, worst)
	c.froms = append(c.froms, r.Was)
}

// newTools is the COPY source of a discovery's new tools: each row goes as soon as the
// tool's validation has decided its state.
type newTools struct {
	serverID any
	tools    []NewTool
	at       map[string]int // tool id → index in judging
	judging  *judging
	i        int
}

func (s *newTools) Next() bool { s.i++; return s.i < len(s.tools) }
func (s *newTools) Err() error { return nil }
func (s *newTools) Values() ([]any, error) {
	t := s.tools[s.i]
	status, worst := s.judging.verdict(s.at[t.ID])
	return []any{uuidArg(t.ID), s.serverID, t.Name, t.Title, t.Description, t.InputSchema,
		nullJSON(t.OutputSchema), nullJSON(t.Annotations), t.Raw, t.Hash, status, worst}, nil
}

func (d Definition) tool(name string) schema.Tool {
	return schema.Tool{Name: name, Title: d.Title, Description: d.Description, InputSchema: d.InputSchema,
		OutputSchema: d.OutputSchema, Annotations: d.Annotations}
}

func historyRows(h []HistoryRow) [][]any {
	rows := make([][]any, len(h))
	for i, r := range h {
		var from any
		if r.From != "" {
			from = r.From
		}
		meta := r.Metadata
		if meta == nil {
			meta = json.RawMessage(`{}`)
		}
		rows[i] = []any{uuidArg(r.ToolID), from, r.To, r.Reason, r.Actor, meta}
	}
	return rows
}

// sortByName orders tools by name as the database orders names (ORDER BY name): by
// their bytes under the C collation the embedded cluster uses, else by asking it.
func sortByName(ctx context.Context, tx pgx.Tx, ts []toolstate.Pending) error {
	if len(ts) < 2 {
		return nil
	}
	var collate string
	if err := tx.QueryRow(ctx, `/* tools.sortByName.collation */
		SELECT datcollate FROM pg_database WHERE datname = current_database()`).Scan(&collate); err != nil {
		return fmt.Errorf("tools: collation: %w", err)
	}
	if collate == "C" || collate == "POSIX" {
		slices.SortStableFunc(ts, func(a, b toolstate.Pending) int { return strings.Compare(a.Def.Name, b.Def.Name) })
		return nil
	}
	return sortByNameInDB(ctx, tx, ts)
}

// sortByNameInDB orders tools by name as the database's collation orders them.
func sortByNameInDB(ctx context.Context, tx pgx.Tx, ts []toolstate.Pending) error {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Def.Name
	}
	rows, err := tx.Query(ctx, `/* tools.sortByName */ SELECT n FROM unnest($1::text[]) n ORDER BY n`, names)
	if err != nil {
		return fmt.Errorf("tools: sort names: %w", err)
	}
	sorted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("tools: sort names: %w", err)
	}
	rank := make(map[string]int, len(sorted))
	for i, n := range sorted {
		if _, ok := rank[n]; !ok {
			rank[n] = i
		}
	}
	slices.SortStableFunc(ts, func(a, b toolstate.Pending) int { return rank[a.Def.Name] - rank[b.Def.Name] })
	return nil
}

func nullJSON(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return raw
}
