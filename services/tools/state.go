package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolwarden/toolwarden/internal/toolname"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// The writes of services/toolstate's state machine: moves with their history rows, and
// validation with its findings, both in the caller's transaction.

// ApplyMoves performs moves (services/toolstate) in tx: it checks each, updates the statuses (each conditional on
// its From), writes one tool_state_history row per move and one "tool.state" event. A
// tool may appear several times (discovered → validating, then validating → validated):
// moves apply in order. Any failure fails the whole call (and so the transaction).
func ApplyMoves(ctx context.Context, tx pgx.Tx, moves []toolstate.Move) error {
	if len(moves) == 0 {
		return nil
	}
	c, err := chainMoves(moves)
	if err != nil {
		return err
	}
	ids, froms, tos := make([]string, len(c.order)), make([]string, len(c.order)), make([]string, len(c.order))
	for i, id := range c.order {
		ids[i], froms[i], tos[i] = id, c.first[id].From, c.last[id]
	}
	rows, err := tx.Query(ctx, `/* tools.ApplyMoves */
		UPDATE mcp_tools t SET status = u.to_status, updated_at = now()
		FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u(id, from_status, to_status)
		WHERE t.id = u.id AND t.status = u.from_status
		RETURNING t.id::text`, ids, froms, tos)
	if err != nil {
		return fmt.Errorf("toolstate: update: %w", err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("toolstate: update: %w", err)
	}
	if len(done) != len(c.order) {
		return conflict(ctx, tx, c.order, c.first, done)
	}
	return recordMoves(ctx, tx, nil, moves, c)
}

// chained is a checked list of moves: each tool's first move and final state, in the
// order the tools first appear.
type chained struct {
	order []string
	first map[string]toolstate.Move
	last  map[string]string
}

// chainMoves checks each move and that a tool's moves chain (each From is the previous
// To); the first one is checked against the row by the caller, the rest follow from it.
func chainMoves(moves []toolstate.Move) (chained, error) {
	for _, m := range moves {
		if err := m.Check(); err != nil {
			return chained{}, err
		}
	}
	c := chained{first: map[string]toolstate.Move{}, last: map[string]string{}}
	for _, m := range moves {
		if prev, ok := c.last[m.ToolID]; ok {
			if prev != m.From {
				return chained{}, fmt.Errorf("toolstate: moves of tool %s do not chain: %s, then %s → %s", m.ToolID, prev, m.From, m.To)
			}
		} else {
			c.first[m.ToolID] = m
			c.order = append(c.order, m.ToolID)
		}
		c.last[m.ToolID] = m.To
	}
	return c, nil
}

// startFrom makes the event of c start each tool from the state a history row written
// before its moves left (a discovery's: enabled → updating), so that it says where a
// changed tool started, not the state the same transaction passed through first. The
// moves' own check is not affected: c.first is read only for the event after this.
func (c chained) startFrom(before []HistoryRow) {
	for _, h := range before {
		if m, ok := c.first[h.ToolID]; ok && h.From != "" && m.From == h.To {
			m.From = h.From
			c.first[h.ToolID] = m
		}
	}
}

// historyColumns are the columns of the tool_state_history rows a COPY writes.
var historyColumns = []string{"tool_id", "from_status", "to_status", "reason", "actor", "metadata"}

// recordMoves writes the history of moves whose statuses are already stored: the rows
// before (a discovery's own, written first), then one per move, in one COPY, and the
// "tool.state" event of c.
func recordMoves(ctx context.Context, tx pgx.Tx, before [][]any, moves []toolstate.Move, c chained) error {
	history := make([][]any, 0, len(before)+len(moves))
	history = append(history, before...)
	for _, m := range moves {
		meta := m.Metadata
		if m.Override {
			meta = withOverride(meta)
		}
		if meta == nil {
			meta = map[string]any{}
		}
		history = append(history, []any{uuidArg(m.ToolID), m.From, m.To, m.Reason, m.Actor, meta})
	}
	if len(history) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tool_state_history"}, historyColumns, pgx.CopyFromRows(history)); err != nil {
			return fmt.Errorf("toolstate: history: %w", err)
		}
	}
	if len(c.order) == 0 {
		return nil
	}
	payload := events.ToolStates{Count: len(c.order)}
	if len(c.order) <= 100 {
		payload.Changes = make([]events.ToolState, len(c.order))
		for i, id := range c.order {
			payload.Changes[i] = events.ToolState{ID: id, From: c.first[id].From, To: c.last[id]}
		}
	}
	if _, err := events.ToolStateChanged.Publish(ctx, tx, toolstate.Topic, payload); err != nil {
		return err
	}
	return nil
}

// uuidArg is a tool id as pgx encodes a uuid column without a detour: a COPY given the
// text form tries the binary encoding first, fails, and parses it again, for every value.
func uuidArg(id string) any {
	u, err := uuid.Parse(id)
	if err != nil {
		return id // let PostgreSQL name what is wrong with it
	}
	return pgtype.UUID{Bytes: u, Valid: true}
}

func withOverride(meta map[string]any) map[string]any {
	out := map[string]any{"override": true}
	for k, v := range meta {
		out[k] = v
	}
	return out
}

// conflict names the first tool whose state was not what its move expected.
func conflict(ctx context.Context, tx pgx.Tx, order []string, first map[string]toolstate.Move, done []string) error {
	for _, id := range order {
		if slices.Contains(done, id) {
			continue
		}
		var actual string
		err := tx.QueryRow(ctx, `/* tools.ApplyMoves.conflict */ SELECT status FROM mcp_tools WHERE id = $1`, id).Scan(&actual)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("toolstate: %w", err)
		}
		return toolstate.Moved(id, first[id].From, actual)
	}
	return errors.New("toolstate: update count mismatch")
}

// Validate checks each tool's definition (services/schema) in tx and stores the result
// in tool_validations and mcp_tools.validation_worst. A discovered, updating, validated
// or invalid tool moves through validating to validated, or to invalid when a finding is
// critical or an error; a validated tool whose server or category has auto-enable on is
// then enabled by policy. Tools in other states (configured, enabled, ...) keep their
// state: the new findings are recorded and shown, and they block a later enable.
func Validate(ctx context.Context, tx pgx.Tx, tools []toolstate.Pending, actor string) ([]toolstate.Outcome, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	j, err := judge(tools, actor)
	if err != nil {
		return nil, err
	}
	if err := copyValidations(ctx, tx, j.rows); err != nil {
		return nil, err
	}
	ids, worsts := make([]string, len(tools)), make([]*string, len(tools))
	for i, t := range tools {
		ids[i], worsts[i] = t.ID, j.worst[i] // as copyValidations completed them
	}
	if _, err := tx.Exec(ctx, `/* tools.Validate.worst */
		UPDATE mcp_tools t SET validation_worst = u.worst
		FROM unnest($1::uuid[], $2::text[]) AS u(id, worst) WHERE t.id = u.id`, ids, worsts); err != nil {
		return nil, fmt.Errorf("toolstate: store validations: %w", err)
	}
	if err := ApplyMoves(ctx, tx, j.moves); err != nil {
		return nil, err
	}
	return j.out, autoEnable(ctx, tx, j.out, j.validated)
}

// judgement is what validating tools found, before anything is stored.
type judgement struct {
	out       []toolstate.Outcome
	worst     []*string    // per tool: its worst finding, nil when clean
	rows      *validations // tool_validations rows, completed and written by copyValidations
	moves     []toolstate.Move
	validated []int // indexes of the tools that end validated
}

// validations are a judgement's tool_validations rows with what completing them needs.
// A fixed setting whose parameter the definition dropped is a finding too, but the
// configurations are read only in the transaction that writes the rows: a discovery
// validates before it reads anything. The slices are the judgement's, so what
// copyValidations adds shows in its outcomes, history and worst findings as well.
type validations struct {
	rows     [][]any
	tools    []toolstate.Pending
	findings [][]schema.Finding
	out      []toolstate.Outcome
	worst    []*string
	moves    []toolstate.Move
	final    []int // per tool: its move out of validating in moves, or -1
}

// judge validates tools (services/schema) on every CPU. Results are in the order of tools.
func judge(tools []toolstate.Pending, actor string) (judgement, error) {
	return startJudging(tools, nil).result(actor)
}

// judging is a validation of many tools under way: the checks are pure and a large
// discovery brings thousands, so they run on every CPU while the caller writes what
// it can (StoreDiscovery streams each new tool to PostgreSQL as soon as its state is known).
type judging struct {
	tools    []toolstate.Pending
	findings [][]schema.Finding
	encoded  []json.RawMessage
	errs     []error
	done     []chan struct{}
	wg       sync.WaitGroup
	// stopped ends the workers at their next tool: a discovery that failed must not
	// go on validating thousands of definitions beside the one that retries it.
	stopped atomic.Bool
}

// startJudging starts validating tools: those at the indexes first first, in that order,
// then the rest.
func startJudging(tools []toolstate.Pending, first []int) *judging {
	n := len(tools)
	j := &judging{tools: tools, findings: make([][]schema.Finding, n), encoded: make([]json.RawMessage, n),
		errs: make([]error, n), done: make([]chan struct{}, n)}
	for i := range j.done {
		j.done[i] = make(chan struct{})
	}
	order := make([]int, 0, n)
	queued := make([]bool, n)
	for _, i := range first {
		if !queued[i] {
			queued[i] = true
			order = append(order, i)
		}
	}
	for i := range n {
		if !queued[i] {
			order = append(order, i)
		}
	}
	var next atomic.Int64
	for range max(1, min(runtime.GOMAXPROCS(0), (n+63)/64)) {
		j.wg.Go(func() {
			for !j.stopped.Load() {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				j.judge(order[k])
			}
		})
	}
	return j
}

// judge validates tool i. A definition that makes the validator panic (a hostile
// server's schema) fails its discovery instead of the process: this runs on a goroutine
// of its own, where no recovery of the caller reaches.
func (j *judging) judge(i int) {
	defer close(j.done[i])
	defer func() {
		if p := recover(); p != nil {
			j.errs[i] = fmt.Errorf("tools: validating %s failed: %v", j.tools[i].Def.Name, p)
		}
	}()
	j.findings[i] = schema.ValidateTool(j.tools[i].Def)
	j.encoded[i], j.errs[i] = json.Marshal(j.findings[i])
}

// errStopped is the error of a tool whose validation stop cancelled.
var errStopped = errors.New("validation stopped")

// stop ends the validation and waits for its workers: a tool not judged yet is left
// unjudged, with errStopped, and its done channel closed, so that nothing waits for
// it forever. After result it changes nothing: every tool was judged.
func (j *judging) stop() {
	j.stopped.Store(true)
	j.wg.Wait()
	for i, d := range j.done {
		select {
		case <-d:
		default:
			j.errs[i] = errStopped
			close(d)
		}
	}
}

// verdict waits for tool i and returns the state validation leaves it in and its worst
// finding (nil: clean).
func (j *judging) verdict(i int) (string, *string) {
	<-j.done[i]
	fs := j.findings[i]
	var w *string
	if worst := schema.Worst(fs); worst != "" {
		s := string(worst)
		w = &s
	}
	switch t := j.tools[i]; t.Status {
	case toolstate.Discovered, toolstate.Updating, toolstate.Validated, toolstate.Invalid:
		if schema.Blocking(fs) {
			return toolstate.Invalid, w
		}
		return toolstate.Validated, w
	default:
		return t.Status, w
	}
}

// result waits for every tool and returns the judgement.
func (j *judging) result(actor string) (judgement, error) {
	j.wg.Wait()
	tools := j.tools
	r := judgement{out: make([]toolstate.Outcome, len(tools)), worst: make([]*string, len(tools))}
	v := &validations{rows: make([][]any, len(tools)), tools: tools, findings: j.findings, final: make([]int, len(tools))}
	for i, t := range tools {
		if j.errs[i] != nil {
			return judgement{}, fmt.Errorf("toolstate: findings: %w", j.errs[i])
		}
		fs := j.findings[i]
		worst := schema.Worst(fs)
		blocking := schema.Blocking(fs)
		o := toolstate.Outcome{ID: t.ID, Status: t.Status, Worst: worst, Findings: fs}
		_, w := j.verdict(i)
		v.rows[i] = []any{uuidArg(t.ID), t.Hash, "schema", !blocking, w, j.encoded[i], actor}
		r.worst[i] = w
		v.final[i] = -1
		switch t.Status {
		case toolstate.Discovered, toolstate.Updating, toolstate.Validated, toolstate.Invalid:
			to, reason := toolstate.Validated, summary(fs)
			if blocking {
				to = toolstate.Invalid
			}
			v.final[i] = len(r.moves) + 1
			r.moves = append(r.moves,
				toolstate.Move{ToolID: t.ID, From: t.Status, To: toolstate.Validating, Reason: "validating definition " + short(t.Hash), Actor: actor},
				toolstate.Move{ToolID: t.ID, From: toolstate.Validating, To: to, Reason: reason, Actor: actor,
					Metadata: map[string]any{"definition_hash": t.Hash, "worst": worst}})
			o.Status = to
			if to == toolstate.Validated && (t.Status == toolstate.Discovered || t.Status == toolstate.Updating && t.Was == toolstate.Enabled) {
				// New tools, and enabled ones whose definition changed: a tool a person
				// disabled, or whose tests failed, stays off whatever the policies say.
				r.validated = append(r.validated, i)
			}
		}
		r.out[i] = o
	}
	v.out, v.worst, v.moves = r.out, r.worst, r.moves
	r.rows = v
	return r, nil
}

// copyValidations completes v with the findings of the tools' configurations
// (droppedFixedFinding) and writes its rows.
func copyValidations(ctx context.Context, tx pgx.Tx, v *validations) error {
	if err := v.addConfigFindings(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tool_validations"},
		[]string{"tool_id", "definition_hash", "validation_type", "success", "worst", "findings", "validated_by"},
		pgx.CopyFromRows(v.rows)); err != nil {
		return fmt.Errorf("toolstate: store validations: %w", err)
	}
	return nil
}

// addConfigFindings adds to each tool whose configuration fixes parameters its definition
// no longer has the finding that says so, and stores the tool's worst finding again
// where that made it worse (a discovery stored it already).
func (v *validations) addConfigFindings(ctx context.Context, tx pgx.Tx) error {
	at := map[string]int{}
	var ids []string
	for i, t := range v.tools {
		if t.Status != toolstate.Discovered { // a new tool has no settings yet
			at[t.ID] = i
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `/* tools.copyValidations.configuration */ SELECT id::text, configuration FROM mcp_tools
		WHERE id = ANY($1) AND jsonb_path_exists(configuration, '$.params.* ? (@.mode == "fixed")')`, ids)
	if err != nil {
		return fmt.Errorf("toolstate: configurations: %w", err)
	}
	configs := map[string][]byte{}
	var id string
	var raw []byte
	if _, err := pgx.ForEachRow(rows, []any{&id, &raw}, func() error { configs[id] = raw; return nil }); err != nil {
		return fmt.Errorf("toolstate: configurations: %w", err)
	}
	var worseIDs, worseHashes, worse []string
	for _, id := range slices.Sorted(maps.Keys(configs)) {
		i := at[id]
		cfg := parseConfiguration(configs[id])
		dropped := cfg.droppedFixed(v.tools[i].Def.InputSchema)
		if len(dropped) == 0 {
			continue
		}
		fs := append(slices.Clone(v.findings[i]), droppedFixedFinding(cfg, dropped))
		schema.SortFindings(fs)
		encoded, err := json.Marshal(fs)
		if err != nil {
			return fmt.Errorf("toolstate: findings: %w", err)
		}
		worst := schema.Worst(fs)
		w := string(worst)
		if v.worst[i] == nil || *v.worst[i] != w {
			worseIDs, worseHashes, worse = append(worseIDs, id), append(worseHashes, v.tools[i].Hash), append(worse, w)
		}
		v.findings[i], v.worst[i] = fs, &w
		v.rows[i][4], v.rows[i][5] = &w, json.RawMessage(encoded)
		v.out[i].Findings, v.out[i].Worst = fs, worst
		if k := v.final[i]; k >= 0 {
			v.moves[k].Reason = summary(fs)
			v.moves[k].Metadata["worst"] = worst
		}
	}
	if len(worse) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `/* tools.copyValidations.worst */
		UPDATE mcp_tools t SET validation_worst = u.worst
		FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u(id, hash, worst) WHERE t.id = u.id AND t.definition_hash = u.hash`,
		worseIDs, worseHashes, worse); err != nil {
		return fmt.Errorf("toolstate: store validations: %w", err)
	}
	return nil
}

// autoEnable enables the validated tools whose server or category has auto-enable on
// (validated lists new tools only, see judging.result). Only available ones: a tool
// still awaiting validation that its server no longer lists is validated by the
// discovery that marks it unavailable, and must not be enabled (and audited so) while
// nobody can see or call it. A tool whose configuration fixes
// parameters the definition dropped waits for a person: the restriction someone chose
// is gone, which is what vetting a new definition is for.
func autoEnable(ctx context.Context, tx pgx.Tx, out []toolstate.Outcome, validated []int) error {
	validated = slices.DeleteFunc(slices.Clone(validated), func(i int) bool {
		return slices.ContainsFunc(out[i].Findings, func(f schema.Finding) bool { return f.Code == CodeFixedParamDropped })
	})
	if len(validated) == 0 {
		return nil
	}
	// Most installations have no policy at all: then no tool can match, and the query
	// below (a regular expression per tool and preference) is not worth its time.
	var anyPolicy bool
	if err := tx.QueryRow(ctx, `/* tools.autoEnable.any */ SELECT EXISTS (SELECT 1 FROM mcp_servers WHERE auto_enable)
		OR EXISTS (SELECT 1 FROM tool_categories WHERE auto_enable)
		OR EXISTS (SELECT 1 FROM tool_auto_enable_preferences)`).Scan(&anyPolicy); err != nil {
		return fmt.Errorf("toolstate: auto-enable policy: %w", err)
	}
	if !anyPolicy {
		return nil
	}
	ids := make([]string, len(validated))
	for i, idx := range validated {
		ids[i] = out[idx].ID
	}
	// A person's preference matches when each of its words starts a word of the tool's
	// name, category or tags; it acts while its owner may enable tools. Never the title
	// or description: the upstream server writes those, and could say "weather" in any.
	rows, err := tx.Query(ctx, `/* tools.autoEnable */
		SELECT t.id::text, s.name, t.name,
			CASE WHEN s.auto_enable THEN 'server' WHEN coalesce(c.auto_enable, false) THEN 'category' ELSE 'preference' END,
			CASE WHEN s.auto_enable THEN s.name WHEN coalesce(c.auto_enable, false) THEN c.name ELSE p.username END,
			coalesce(p.sentence, '')
		FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
		LEFT JOIN tool_categories c ON c.id = t.category_id
		LEFT JOIN LATERAL (SELECT string_agg(tag, ' ') AS tags FROM tool_tags WHERE tool_id = t.id) g ON true
		LEFT JOIN LATERAL (
			SELECT u.username, ap.sentence FROM tool_auto_enable_preferences ap JOIN users u ON u.id = ap.user_id
			WHERE u.disabled_at IS NULL AND u.role = ANY($2)
				AND NOT EXISTS (SELECT 1 FROM unnest(string_to_array(ap.words, ' ')) w
					WHERE lower(t.name || ' ' || coalesce(c.name, '') || ' ' || coalesce(g.tags, ''))
						!~ ('(^|[^a-z0-9])' || w))
			ORDER BY ap.created_at LIMIT 1) p ON true
		WHERE t.id = ANY($1) AND t.available AND (s.auto_enable OR coalesce(c.auto_enable, false) OR p.username IS NOT NULL)`,
		ids, enablingRoles())
	if err != nil {
		return fmt.Errorf("toolstate: auto-enable policy: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (policy, error) {
		var p policy
		var server, name string
		err := r.Scan(&p.toolID, &server, &name, &p.kind, &p.name, &p.sentence)
		p.tool = toolname.Join(server, name)
		return p, err
	})
	if err != nil {
		return fmt.Errorf("toolstate: auto-enable policy: %w", err)
	}
	if err := enableByPolicy(ctx, tx, list); err != nil {
		return err
	}
	enabled := make(map[string]bool, len(list))
	for _, p := range list {
		enabled[p.toolID] = true
	}
	for i := range out {
		if enabled[out[i].ID] {
			out[i].Status = toolstate.Enabled
		}
	}
	return nil
}

// policy is the auto-enable policy that enables a validated tool.
type policy struct {
	toolID, tool string // the tool's id and qualified name
	kind         string // "server", "category" or "preference"
	name         string // the server's or category's name, or the preference's owner
	sentence     string // a preference's words as its owner said them
}

// by names the policy in the tool's history ("server ev", "category reading", ...).
func (p policy) by() string {
	if p.kind == "preference" {
		return "the preference of " + p.name + ` ("` + p.sentence + `")`
	}
	return p.kind + " " + p.name
}

// enableByPolicy moves validated tools to enabled as the system, with one history row
// and one tool.enable audit entry each naming the policy: nobody clicked, so the audit
// trail is the only place that says why the tool is on.
func enableByPolicy(ctx context.Context, tx pgx.Tx, list []policy) error {
	if len(list) == 0 {
		return nil
	}
	moves := make([]toolstate.Move, len(list))
	entries := make([]audit.Entry, len(list))
	for i, p := range list {
		reason := "enabled by the auto-enable policy of " + p.by() + " (testing skipped)"
		moves[i] = toolstate.Move{ToolID: p.toolID, From: toolstate.Validated, To: toolstate.Enabled, Actor: "system",
			Reason: reason, Metadata: map[string]any{"policy": p.by(), "skipped_testing": true}}
		payload := map[string]any{"from": toolstate.Validated, "to": toolstate.Enabled, "testing_skipped": true,
			"reason": reason, "policy": p.kind}
		if p.kind == "preference" {
			payload["owner"], payload["preference"] = p.name, p.sentence
		} else {
			payload[p.kind] = p.name
		}
		entries[i] = audit.Entry{Actor: audit.System, Action: "tool.enable", TargetType: "tool", TargetID: p.toolID,
			TargetName: p.tool, Payload: payload}
	}
	if err := ApplyMoves(ctx, tx, moves); err != nil {
		return err
	}
	_, err := audit.AppendBatch(ctx, tx, entries)
	return err
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
