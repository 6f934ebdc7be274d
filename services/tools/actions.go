package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// sortedIDs puts ids in canonical form, sorted and without repeats, so bulk actions lock
// rows in one order whatever the caller sent (ids that are not UUIDs stay, to be
// reported as unknown).
func sortedIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		if n, ok := normalID(id); ok {
			out[i] = n
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// MaxReason bounds a reason (an override's, a configuration version's).
const MaxReason = 2000

// Outcome is what an action did to one tool.
type Outcome struct {
	ID    string `json:"id"`
	Name  string `json:"qualified_name"`
	From  string `json:"from"`
	To    string `json:"to"`
	Error string `json:"error,omitempty"` // why this tool was not changed
	// Code is the refusal's stable code where a client acts on it (CodeStaleDefinition:
	// fetch the tool, review its definition, send its new hash).
	Code string `json:"code,omitempty"`
	err  error
}

// Err is why the tool was not changed (nil when it was, or already was).
func (o Outcome) Err() error { return o.err }

// SetEnabled enables or disables tools. Each tool moves on its own terms: one that may
// not be enabled (not validated yet, or invalid without an override) is reported and
// left alone while the others move. Every move writes history and an audit row in the
// one transaction. An override (enabling an invalid or failed tool) needs a reason.
func (s *Service) SetEnabled(ctx context.Context, actor audit.Actor, ids []string, enable bool, reason string, override bool) ([]Outcome, error) {
	return s.setEnabled(ctx, actor, ids, enable, reason, override, nil)
}

// CodeStaleDefinition is the code of an enable refused because the tool's definition
// changed since the person (or client) looked at it.
const CodeStaleDefinition = "stale_definition"

// SeenPrefix is the shortest start of a definition hash that stands for the whole hash
// where a seen definition is checked (32 hex characters, 128 bits): the list page sends
// that much per card to stay within its size budget.
const SeenPrefix = 32

// seenIs reports whether h, the hash a caller saw, is current: the whole hash, or its
// start of at least SeenPrefix characters.
func seenIs(h, current string) bool {
	return h == current || len(h) >= SeenPrefix && strings.HasPrefix(current, h)
}

// StaleDefinition is the details of a CodeStaleDefinition fault.
type StaleDefinition struct {
	Current string `json:"current_definition_hash"`
}

// SetEnabledSeen is SetEnabled for one tool as the caller saw it: seenHash, when not "",
// is the definition hash the page or client showed. An enable of a tool whose definition
// changed since is refused in the outcome (a CodeStaleDefinition fault), so nobody
// enables a definition they never saw; a disable is never refused for it.
func (s *Service) SetEnabledSeen(ctx context.Context, actor audit.Actor, id string, enable bool, reason string, override bool, seenHash string) ([]Outcome, error) {
	return s.SetEnabledSeenEach(ctx, actor, []string{id}, enable, reason, override, map[string]string{id: seenHash})
}

// SetEnabledSeenEach is SetEnabled for several tools as the caller saw them: seen maps a
// tool id to the definition hash the page or client showed (a tool it does not name, or
// names with "", is not checked). Each enable of a tool whose definition changed since is
// refused in its outcome, as SetEnabledSeen refuses it; the other tools move.
func (s *Service) SetEnabledSeenEach(ctx context.Context, actor audit.Actor, ids []string, enable bool, reason string, override bool, seen map[string]string) ([]Outcome, error) {
	return s.setEnabled(ctx, actor, ids, enable, reason, override, seenHashes(seen))
}

// seenHashes is seen keyed as sortedIDs keys the ids (a UUID in its canonical form),
// without the empty hashes, which pin nothing.
func seenHashes(seen map[string]string) map[string]string {
	var out map[string]string
	for id, h := range seen {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if n, ok := normalID(id); ok {
			id = n
		}
		if out == nil {
			out = make(map[string]string, len(seen))
		}
		out[id] = h
	}
	return out
}

func (s *Service) setEnabled(ctx context.Context, actor audit.Actor, ids []string, enable bool, reason string, override bool, seen map[string]string) ([]Outcome, error) {
	ids = sortedIDs(ids)
	if len(ids) == 0 {
		return nil, verr.New("ids", "choose at least one tool")
	}
	if len(ids) > MaxLimit {
		return nil, verr.New("ids", fmt.Sprintf("at most %d tools at a time", MaxLimit))
	}
	reason = strings.TrimSpace(reason)
	// Characters, as the form's maxlength counts them: a reason in a non-Latin script
	// takes two to four bytes a character.
	if utf8.RuneCountInString(reason) > MaxReason {
		return nil, verr.New("reason", fmt.Sprintf("is too long (at most %d characters)", MaxReason))
	}
	if override && reason == "" {
		return nil, verr.New("reason", "an override needs a reason: say why the tool may be used despite its findings")
	}
	var out []Outcome
	// Discovery on several replicas at once updates the same tools in its own order:
	// a deadlock's victim here runs again rather than failing the person's click.
	err := db.WithTxRetry(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		out, err = setEnabledTx(ctx, tx, actor, ids, enable, reason, override, seen)
		return err
	})
	return out, err
}

// SetEnabledTx is SetEnabled in the caller's transaction (configuration import, which
// applies many changes at once), without SetEnabled's checks of the input: ids are tool
// ids, reason is short, an override has a reason.
func (s *Service) SetEnabledTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, ids []string, enable bool, reason string, override bool) ([]Outcome, error) {
	return setEnabledTx(ctx, tx, actor, sortedIDs(ids), enable, strings.TrimSpace(reason), override, nil)
}

// setEnabledTx moves the tools; seen (by canonical id, nil for none) is the definition
// hash an enable of each tool was based on, checked under the tool's row lock so a
// rediscovery cannot slip in between the check and the move.
func setEnabledTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, ids []string, enable bool, reason string, override bool, seen map[string]string) ([]Outcome, error) {
	var out []Outcome
	err := func() error {
		var moves []toolstate.Move
		var moved []Item
		for _, id := range ids { // sorted: concurrent bulk actions lock in one order
			t, err := getItem(ctx, tx, id, true)
			if errors.Is(err, ErrNotFound) {
				out = append(out, Outcome{ID: id, Error: "no such tool", err: ErrNotFound})
				continue
			}
			if err != nil {
				return err
			}
			o := Outcome{ID: id, Name: t.QualifiedName(), From: t.Status, To: t.Status}
			if h, pinned := seen[id]; enable && pinned && !seenIs(h, t.DefinitionHash) {
				f := fault.Stale(CodeStaleDefinition, fmt.Sprintf("the definition of %s changed since you opened it (now version %s): review the new definition, then enable it",
					t.QualifiedName(), t.Version())).About("tool").WithDetails(StaleDefinition{Current: t.DefinitionHash})
				o.Error, o.Code, o.err = f.Error(), CodeStaleDefinition, f
				out = append(out, o)
				continue
			}
			m := toolstate.Move{ToolID: id, From: t.Status, Actor: actor.Name, Reason: reason, Override: override}
			switch {
			case enable && t.Status == toolstate.Enabled, !enable && t.Status == toolstate.Disabled:
				out = append(out, o)
				continue
			case enable:
				m.To = toolstate.Enabled
				if t.Status == toolstate.Validated || t.Status == toolstate.Configured {
					m.Metadata = map[string]any{"testing_skipped": true}
				}
			default:
				m.To = toolstate.Disabled
			}
			// Critical or error findings of the current definition block an enable in any
			// state (a tool revalidated while configured, verified or disabled keeps its
			// state but gets the findings): only an override with a reason gets past them.
			blocked := enable && t.ValidationWorst != nil &&
				(*t.ValidationWorst == "critical" || *t.ValidationWorst == "error")
			if !toolstate.Allowed(m.From, m.To) || !toolstate.NeedsOverride(m.From, m.To) && !blocked {
				m.Override = false // an override is recorded only where one was needed
			}
			err = m.Check()
			if err == nil && blocked && !m.Override {
				err = toolstate.Override(m.From, m.To, "its definition has "+*t.ValidationWorst+" findings")
			}
			if err != nil {
				o.Error, o.err = explain(t, m, err), err
				out = append(out, o)
				continue
			}
			o.To = m.To
			out = append(out, o)
			moves = append(moves, m)
			moved = append(moved, t)
		}
		if len(moves) == 0 {
			return nil
		}
		if err := ApplyMoves(ctx, tx, moves); err != nil {
			return err
		}
		for i, m := range moves {
			var note *string
			if m.Override {
				note = &m.Reason
			}
			if _, err := tx.Exec(ctx, `/* tools.SetEnabled.override */ UPDATE mcp_tools SET enable_override = $2 WHERE id = $1`,
				m.ToolID, note); err != nil {
				return fmt.Errorf("tools: override: %w", err)
			}
			action := "tool.disable"
			if enable {
				action = "tool.enable"
			}
			payload := map[string]any{"from": m.From, "to": m.To}
			if m.Reason != "" {
				payload["reason"] = m.Reason
			}
			if m.Override {
				payload["override"] = true
				payload["validation_worst"] = moved[i].ValidationWorst
			}
			if m.Metadata["testing_skipped"] == true {
				payload["testing_skipped"] = true
			}
			if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: "tool",
				TargetID: m.ToolID, TargetName: moved[i].QualifiedName(), Payload: payload}); err != nil {
				return err
			}
		}
		return nil
	}()
	return out, err
}

// explain says in a person's words why a tool cannot move.
func explain(t Item, m toolstate.Move, err error) string {
	if errors.Is(err, toolstate.ErrOverrideRequired) {
		return err.Error()
	}
	switch t.Status {
	case toolstate.Discovered, toolstate.Validating:
		return fmt.Sprintf("%s is %s: it can be enabled once it is validated", t.QualifiedName(), t.Status)
	case toolstate.Updating:
		return fmt.Sprintf("%s is updating: its new definition is being validated", t.QualifiedName())
	case toolstate.Testing:
		return fmt.Sprintf("%s is being tested; wait for the result", t.QualifiedName())
	}
	if m.To == toolstate.Disabled {
		return fmt.Sprintf("%s is %s, not enabled, so there is nothing to disable", t.QualifiedName(), t.Status)
	}
	return err.Error()
}

// Tag adds tags to (or, with remove, removes them from) several tools: each tool gets a
// new configuration version and an audit row, all in one transaction.
func (s *Service) Tag(ctx context.Context, actor audit.Actor, ids, tags []string, remove bool) (int, error) {
	tags, err := NormalizeTags(tags)
	if err != nil {
		return 0, err
	}
	if len(tags) == 0 {
		return 0, verr.New("tags", "name at least one tag")
	}
	ids = sortedIDs(ids)
	if len(ids) == 0 {
		return 0, verr.New("ids", "choose at least one tool")
	}
	if len(ids) > MaxLimit {
		return 0, verr.New("ids", fmt.Sprintf("at most %d tools at a time", MaxLimit))
	}
	// Every row is locked before the first audit row takes the journal lock: locking them
	// one by one between audit rows deadlocks with a single-tool change (which holds its
	// row and then waits for the journal lock).
	lock := make([]string, 0, len(ids))
	for _, id := range ids {
		if u, err := uuid.Parse(id); err == nil {
			lock = append(lock, u.String())
		}
	}
	n := 0
	// Retried: discovery locks the same rows in its own order (see Update).
	err = db.WithTxRetry(ctx, s.begin, func(tx pgx.Tx) error {
		n = 0
		if _, err := tx.Exec(ctx, `/* tools.Tag.lock */ SELECT 1 FROM mcp_tools WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`, lock); err != nil {
			return fmt.Errorf("tools: lock: %w", err)
		}
		for _, id := range ids {
			t, err := getItem(ctx, tx, id, true)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			next := slices.Clone(t.Tags)
			if remove {
				next = slices.DeleteFunc(next, func(x string) bool { return slices.Contains(tags, x) })
			} else {
				next = append(next, tags...)
			}
			verb := "add"
			if remove {
				verb = "remove"
			}
			after, err := s.update(ctx, tx, actor, id, Patch{Tags: next, SetTags: true,
				Reason: verb + " tags " + strings.Join(tags, ", ")}, "tool.configure")
			var ve *verr.Error
			if errors.As(err, &ve) {
				return verr.New("tags", t.QualifiedName()+": "+ve.Fields[0].Message)
			}
			if err != nil {
				return err
			}
			if !slices.Equal(after.Tags, t.Tags) {
				n++
			}
		}
		return nil
	})
	return n, err
}

// Revalidate validates a tool's current definition again (validated or invalid tools
// move through validating; others keep their state and get the new findings), audited.
func (s *Service) Revalidate(ctx context.Context, actor audit.Actor, id string) (Item, error) {
	var out Item
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		t, err := getItem(ctx, tx, id, true)
		if err != nil {
			return err
		}
		def := schema.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
			OutputSchema: t.OutputSchema, Annotations: t.Annotations}
		res, err := Validate(ctx, tx, []toolstate.Pending{{ID: id, Status: t.Status, Hash: t.DefinitionHash, Def: def}}, actor.Name)
		if err != nil {
			return err
		}
		worst, findings := "", 0
		if len(res) == 1 {
			worst, findings = string(res[0].Worst), len(res[0].Findings)
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "tool.validate", TargetType: "tool",
			TargetID: id, TargetName: t.QualifiedName(), Payload: map[string]any{"from": t.Status,
				"definition_hash": t.DefinitionHash, "worst": worst, "findings": findings}}); err != nil {
			return err
		}
		out, err = getItem(ctx, tx, id, false)
		return err
	})
	return out, err
}
