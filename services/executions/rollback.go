package executions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Compensation is how to undo a tool: call another tool with arguments mapped from
// the undone step's ("undo tool X with tool Y, mapping arguments").
type Compensation struct {
	ToolID     string `db:"tool_id" json:"tool_id"`
	UndoToolID string `db:"undo_tool_id" json:"undo_tool_id"`
	// ArgumentMap: undo argument → {"from": JSON pointer into the step's arguments}
	// or {"value": a fixed value}.
	ArgumentMap map[string]MappedArgument `db:"argument_map" json:"argument_map"`
	UpdatedBy   string                    `db:"updated_by" json:"updated_by"`
}

// MappedArgument is one argument of a compensation: taken from the undone step's
// arguments (From, a JSON pointer) or fixed (Value).
type MappedArgument struct {
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// SetCompensation configures (or with undoTool "" removes) how tool toolID is undone;
// audited. undoTool is a tool id or qualified name ("server__tool").
func (s *Service) SetCompensation(ctx context.Context, actor audit.Actor, toolID, undoTool string, m map[string]MappedArgument) error {
	self, err := s.tools.Target(ctx, toolID)
	if err != nil {
		return err // tools.ErrNotFound: no such tool
	}
	toolID = self.ID
	e := &verr.Error{}
	undoToolID := ""
	if strings.TrimSpace(undoTool) != "" {
		t, err := s.tools.Target(ctx, strings.TrimSpace(undoTool))
		switch {
		case errors.Is(err, tools.ErrNotFound):
			e.Add("undo_tool", fmt.Sprintf("no tool %q; give a tool id or a qualified name like server__tool", undoTool))
		case err != nil:
			return err
		case t.ID == toolID:
			e.Add("undo_tool", "a tool cannot undo itself; pick the tool that reverses it")
		default:
			undoToolID = t.ID
			checkMapNames(m, self.InputSchema, t.InputSchema, t.QualifiedName(), e)
			checkMapSecrets(m, t.InputSchema, t.QualifiedName(), e)
		}
	} else if len(m) > 0 {
		e.Add("undo_tool", "pick the tool that undoes this one, or remove the argument mapping")
	}
	var ve *verr.Error
	if errors.As(CheckArgumentMap(m), &ve) {
		e.Fields = append(e.Fields, ve.Fields...)
	}
	if err := e.Err(); err != nil {
		return err
	}
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		return StoreCompensation(ctx, tx, actor, toolID, self.QualifiedName(), undoToolID, m)
	})
}

// checkMapNames names the mapped arguments the undo tool does not take, and the "from"
// pointers that start at an argument the undone tool does not take: mistakes that
// would otherwise show only in a rollback. A schema that lists no properties (it
// takes anything) is not checked against. It also names the pointers that copy a
// secret argument into one the undo tool does not hold as secret (secretSource).
func checkMapNames(m map[string]MappedArgument, selfSchema, undoSchema json.RawMessage, undoName string, e *verr.Error) {
	// Names a variant declares count (schema.ArgumentNames): a tool's operations can
	// take different arguments.
	undoArgs, selfArgs := schema.ArgumentNames(undoSchema), schema.ArgumentNames(selfSchema)
	undoSecret, selfSecret := tools.SecretArgNames(undoSchema), tools.SecretArgNames(selfSchema)
	for _, name := range slices.Sorted(maps.Keys(m)) {
		field := "/argument_map/" + name
		if undoArgs != nil && !slices.Contains(undoArgs, name) {
			e.Add(field, fmt.Sprintf("%s takes no argument %q (it takes %s)", undoName, name, listOrNone(undoArgs)))
			continue
		}
		from := m[name].From
		if from == "" {
			continue
		}
		if selfArgs != nil && !slices.Contains(selfArgs, firstToken(from)) {
			e.Add(field, fmt.Sprintf("%q points at no argument of the undone step (its arguments: %s)", from, listOrNone(selfArgs)))
			continue
		}
		if secret := secretSource(name, m[name], selfSecret, undoSecret); secret != "" {
			e.Add(field, fmt.Sprintf("%q reads the undone step's secret argument %q (writeOnly, a password or a credential), "+
				"but %s does not hold %q as secret, so a rollback would show it in plain text and send it to %s's call records: "+
				"map it only to an argument %s's schema marks secret (writeOnly or format password), or leave it out of the mapping",
				from, secret, undoName, name, undoName, undoName))
		}
	}
}

// firstToken is the argument a "from" pointer starts at, unescaped ("/a~1b/c": "a/b").
func firstToken(from string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(from, "/"), "/")
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(first)
}

// secretSource is the secret argument of the undone step (selfSecret, tools.SecretArgNames
// of its schema: top-level names and JSON pointers, "~*" for any element or member)
// that mapped argument a reads into undo argument name, when the undo tool does not hold
// what it receives as secret (undoSecret); else "". The rollback's preview and the undo
// call's records mask by the undo tool's schema and names only, so the secret would be
// shown there in plain text. A "from" at or under a secret place reads it; one above a
// secret place copies it along, unless the undo tool marks that place secret too.
func secretSource(name string, a MappedArgument, selfSecret, undoSecret []string) string {
	if a.From == "" || secrets.LooksSecretName(name) { // masked by its name wherever shown (usage.Redact)
		return ""
	}
	from := pointerTokens(a.From)
	if secrets.LooksSecretName(from[0]) { // masked by its name where the step is shown (usage.Redact)
		return from[0]
	}
	undo := make([][]string, len(undoSecret))
	for i, u := range undoSecret {
		undo[i] = pointerTokens(u)
	}
	for _, s := range selfSecret {
		place := pointerTokens(s)
		n := min(len(place), len(from))
		if !tokensMatch(place[:n], from[:n]) {
			continue
		}
		if len(place) <= len(from) {
			// The value read is secret, or inside one: only an undo argument secret as a
			// whole hides it.
			if !slices.ContainsFunc(undo, func(u []string) bool { return len(u) == 1 && tokensMatch(u, []string{name}) }) {
				return from[0]
			}
			continue
		}
		// The value read holds the secret at rest: the undo tool must mark it there (or the
		// whole argument).
		at := append([]string{name}, place[len(from):]...)
		if !slices.ContainsFunc(undo, func(u []string) bool { return len(u) <= len(at) && tokensMatch(u, at[:len(u)]) }) {
			return from[0]
		}
	}
	return ""
}

// pointerTokens is a name or JSON pointer as its unescaped tokens ("a", "/a/b~1c": a, b/c).
func pointerTokens(p string) []string {
	if !strings.HasPrefix(p, "/") {
		return []string{p}
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if t != "~*" {
			toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		}
	}
	return toks
}

// tokensMatch reports whether two token paths of one length name the same place, "~*"
// (any element or member) matching any token.
func tokensMatch(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] && a[i] != "~*" && b[i] != "~*" {
			return false
		}
	}
	return true
}

// CheckMapNames is checkMapNames for another caller (configuration import): nil, or a
// *verr.Error with a field "/argument_map/<name>" for each mistake.
func CheckMapNames(m map[string]MappedArgument, selfSchema, undoSchema json.RawMessage, undoName string) error {
	e := &verr.Error{}
	checkMapNames(m, selfSchema, undoSchema, undoName, e)
	return e.Err()
}

// checkMapSecrets names the fixed values that hold a credential (tools.SecretsHeld, as
// for a saved test case: by the undo tool's schema, the argument's name or the value's
// look): a compensation is stored, audited and exported in plain text.
func checkMapSecrets(m map[string]MappedArgument, undoSchema json.RawMessage, undoName string, e *verr.Error) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name].Value
		if len(v) == 0 {
			continue
		}
		args, err := json.Marshal(map[string]json.RawMessage{name: v})
		if err != nil || tools.SecretsHeld(undoSchema, args) == "" {
			continue
		}
		e.Add("/argument_map/"+name, fmt.Sprintf("holds a credential, which cannot be a fixed value of a compensation "+
			"(it would be stored, shown and exported in plain text): set %q as a fixed parameter in %s's configuration, "+
			"which is stored encrypted and given to every call of it, and leave it out of the mapping", name, undoName))
	}
}

// CheckMapSecrets is checkMapSecrets for another caller (configuration import): nil, or
// a *verr.Error with a field "/argument_map/<name>" for each fixed value that holds a
// credential.
func CheckMapSecrets(m map[string]MappedArgument, undoSchema json.RawMessage, undoName string) error {
	e := &verr.Error{}
	checkMapSecrets(m, undoSchema, undoName, e)
	return e.Err()
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// CheckArgumentMap names what is wrong with a compensation's argument mapping.
func CheckArgumentMap(m map[string]MappedArgument) error {
	e := &verr.Error{}
	for name, a := range m {
		switch {
		case strings.TrimSpace(name) == "":
			e.Add("/argument_map", "every mapped argument needs a name")
		case a.From != "" && len(a.Value) > 0:
			e.Add("/argument_map/"+name, "take the value from the step or fix it, not both")
		case a.From == "" && len(a.Value) == 0:
			e.Add("/argument_map/"+name, `say where the value comes from ("from": "/path") or give it ("value": ...)`)
		case a.From != "" && !strings.HasPrefix(a.From, "/"):
			e.Add("/argument_map/"+name, `"from" is a JSON pointer into the step's arguments, like "/path"`)
		}
	}
	return e.Err()
}

// StoreCompensation writes tool toolID's compensation (undoToolID "" removes it) in the
// caller's transaction, audited; the ids are checked by the caller (SetCompensation,
// configuration import) and m by CheckArgumentMap.
func StoreCompensation(ctx context.Context, tx pgx.Tx, actor audit.Actor, toolID, toolName, undoToolID string, m map[string]MappedArgument) error {
	if err := tools.LockShared(ctx, tx, toolID); err != nil {
		return err
	}
	var err error
	if undoToolID == "" {
		_, err = tx.Exec(ctx, `/* executions.SetCompensation.delete */ DELETE FROM tool_compensations WHERE tool_id = $1`, toolID)
	} else {
		_, err = tx.Exec(ctx, `/* executions.SetCompensation */
			INSERT INTO tool_compensations (tool_id, undo_tool_id, argument_map, updated_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tool_id) DO UPDATE SET undo_tool_id = EXCLUDED.undo_tool_id, argument_map = EXCLUDED.argument_map,
				updated_by = EXCLUDED.updated_by, updated_at = now()`, toolID, undoToolID, m, actor.Name)
	}
	if err != nil {
		return fmt.Errorf("executions: compensation: %w", err)
	}
	_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "tool.compensation", TargetType: "tool", TargetID: toolID,
		TargetName: toolName, Payload: map[string]any{"undo_tool_id": undoToolID, "argument_map": m}})
	return err
}

// CompensationOf is the compensation configured for tool toolID, or nil when none is.
func (s *Service) CompensationOf(ctx context.Context, toolID string) (*Compensation, error) {
	t, err := s.tools.Target(ctx, toolID)
	if err != nil {
		return nil, err
	}
	toolID = t.ID
	cs, err := s.compensations(ctx, []string{toolID})
	if err != nil {
		return nil, err
	}
	if c, ok := cs[toolID]; ok {
		return &c, nil
	}
	return nil, nil
}

// compensations are the configured undo tools of the given tools.
func (s *Service) compensations(ctx context.Context, toolIDs []string) (map[string]Compensation, error) {
	cs, err := db.All[Compensation](ctx, s.pool, "executions: compensations", `/* executions.compensations */
		SELECT tool_id, undo_tool_id, argument_map, updated_by FROM tool_compensations WHERE tool_id = ANY($1)`, toolIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Compensation, len(cs))
	for _, c := range cs {
		out[c.ToolID] = c
	}
	return out, nil
}

// secretLeak is a mapping of a compensation that copies a secret argument of the undone
// tool into an argument the undo tool does not hold as secret (secretSource).
type secretLeak struct{ secret, into, undoTool string }

// leakedSecret is the first secretLeak of tool toolID's compensation c, by the tools'
// schemas now; nil when it has none (or a tool is gone: Prepare says so).
func (s *Service) leakedSecret(ctx context.Context, toolID string, c Compensation) (*secretLeak, error) {
	self, err := s.tools.Target(ctx, toolID)
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	undo, err := s.tools.Target(ctx, c.UndoToolID)
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	selfSecret, undoSecret := tools.SecretArgNames(self.InputSchema), tools.SecretArgNames(undo.InputSchema)
	for _, name := range slices.Sorted(maps.Keys(c.ArgumentMap)) {
		if secret := secretSource(name, c.ArgumentMap[name], selfSecret, undoSecret); secret != "" {
			return &secretLeak{secret: secret, into: name, undoTool: undo.QualifiedName()}, nil
		}
	}
	return nil, nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, tools.ErrNotFound) {
		return nil
	}
	return err
}

// RollbackPlan is what a rollback of a failed execution would run: for each completed
// step, last first, the plan's undo step or its tool's compensation, prepared and
// pinned now (and the restore of the snapshot a built-in write that failed part way
// names); and the completed steps nothing can undo.
type RollbackPlan struct {
	Steps []PlannedStep
	// Missing are the steps nothing undoes, which stay as they are: "step 2
	// (fs__write_file)", completed with no undo; "step 2 (builtin__file_operations), its
	// snapshot … is no longer in the snapshot store (…): nothing undoes it", a built-in write whose snapshot is
	// gone (builtin.SnapshotRetention); "step 3 (…), interrupted: it may have taken
	// effect", which no undo is run for (it may not have), and likewise "step 3 (…),
	// failed after its server got the call: …" (a timeout, say) and "step 3 (…), failed
	// with the tool's own error: …" (an isError result).
	Missing  []string
	Risk     risk.Level
	RiskWhy  string
	Phrase   string // HIGH only
	Problems error  // a *verr.Error when an undo step cannot be prepared
	// Hash is the hash of the rollback's steps (hex): a person rolls back what they
	// were shown (RollbackDecision.Hash), not what a changed compensation makes of it.
	Hash string
}

// builtinFiles is the built-in tool whose writes undo themselves.
const builtinFiles = registry.BuiltinName + "__file_operations"

// builtinUndo is the automatic compensation of a built-in file write (services/builtin):
// its result names the snapshot it took of what it changed, and restore_snapshot puts
// that back. nil for any other step.
func builtinUndo(st Step) *RequestStep {
	if !isBuiltinFiles(st.Tool) {
		return nil
	}
	if st.SnapshotID == "" {
		return nil
	}
	args, _ := json.Marshal(map[string]string{"operation": "restore_snapshot", "snapshotId": st.SnapshotID})
	return &RequestStep{Tool: builtinFiles, Arguments: args}
}

// snapshotGone says why the snapshot undo step p (prepared for a rollback of ex) would
// restore is gone, or "" when p is no built-in restore_snapshot or its snapshot is there.
// When the check itself fails the step is planned: its restore says what is wrong.
func (s *Service) snapshotGone(ctx context.Context, ex *Execution, p *router.Prepared) string {
	if s.opts.Previewer == nil || !isBuiltinFiles(p.Tool) {
		return ""
	}
	args := p.Effective
	if len(args) == 0 || string(args) == "null" {
		args = p.Arguments
	}
	var a struct {
		Operation  string `json:"operation"`
		SnapshotID string `json:"snapshotId"`
	}
	if json.Unmarshal(args, &a) != nil || a.SnapshotID == "" ||
		(a.Operation != "restore_snapshot" && p.Tool != builtinFiles+".restore_snapshot") {
		return ""
	}
	gone, err := s.opts.Previewer.SnapshotGone(ctx, ex.conversation(), a.SnapshotID)
	if err != nil {
		s.log.Warn("executions: could not tell whether a rollback's snapshot is still kept", "execution", ex.ID,
			"snapshot", a.SnapshotID, "err", err)
		return ""
	}
	return gone
}

// isBuiltinFiles reports whether tool (a step's tool name) is the built-in file tool
// or one of its operations.
func isBuiltinFiles(tool string) bool { return isTool(tool, builtinFiles) }

// isTool reports whether tool (a step's tool name) is base or one of its operations.
func isTool(tool, base string) bool {
	return tool == base || strings.HasPrefix(tool, base+".")
}

// unchangedOnError reports whether st's tool's own error result means it changed
// nothing: a question asked of a person that was cancelled or expired, a memory
// operation (one transaction; but manage_todos, whose update is written before the list
// is read back). A command's or another server's tool may have done part of its work.
func unchangedOnError(st Step) bool {
	if isTool(st.Tool, registry.BuiltinName+"__user_collaboration") {
		return true
	}
	t := registry.BuiltinName + "__memory_operations"
	if !isTool(st.Tool, t) {
		return false
	}
	var args struct {
		Operation string `json:"operation"`
	}
	_ = json.Unmarshal(st.Arguments, &args)
	return st.Tool != t+".manage_todos" && args.Operation != "manage_todos"
}

// RollbackDecision is what a person agreed to when rolling back.
type RollbackDecision struct {
	Confirmed bool   // a MEDIUM rollback was confirmed
	Phrase    string // the phrase typed for a HIGH one
	// Hash is the rollback's hash as it was shown (RollbackPlan.Hash); when given, a
	// rollback that no longer has it is refused.
	Hash string
}

// sealRefusal is why ex's rollback does not run when its record is not the one sealed
// (the seal a rollback makes would otherwise cover an altered one), and "" when it is:
// altered, or sealed (or not) by an earlier release.
func (s *Service) sealRefusal(ex *Execution) string {
	switch s.sealStateOf(ex) {
	case sealIntact:
		return ""
	case sealNone:
		return "it was planned by an earlier version of Toolwarden, whose records were not sealed, so its rollback does not run"
	case sealEarlier:
		return earlierSeal + ", so its rollback does not run"
	}
	return "the execution's " + strings.TrimPrefix(sealMismatch, "its ") + ", so its rollback does not run"
}

// PlanRollback works out the rollback of failed execution id without starting it. Its
// steps are prepared as they would run: as the requester, with the role they have now.
func (s *Service) PlanRollback(ctx context.Context, id string) (*Execution, *RollbackPlan, error) {
	ex, err := s.get(ctx, s.pool, id)
	if err != nil {
		return nil, nil, err
	}
	if ex.Status != Failed {
		return ex, nil, conflict(id, ex.Status, "rolled back (only a failed execution can be)")
	}
	// One whose record is not the one sealed is refused whoever asks (Rollback): said
	// here, its page offers no rollback that cannot run.
	if msg := s.sealRefusal(ex); msg != "" {
		return ex, &RollbackPlan{Problems: verr.New("/rollback", msg)}, nil
	}
	c := ex.Requester()
	if ex.RequestedBy == nil && ex.personal() {
		return ex, &RollbackPlan{Problems: verr.New("/rollback", fmt.Sprintf("its steps would run as %s, whose account is gone", ex.RequesterName))}, nil
	}
	if ex.RequestedBy != nil {
		role, err := s.auth.RequesterRole(ctx, *ex.RequestedBy, c.Actor.TokenID)
		if errors.Is(err, auth.ErrRequesterGone) {
			return ex, &RollbackPlan{Problems: verr.New("/rollback", fmt.Sprintf("its steps would run as %s, who can no longer act (%s)",
				ex.RequesterName, strings.TrimPrefix(err.Error(), auth.ErrRequesterGone.Error()+": ")))}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		c.Role = role
	}
	// Their results are not needed (a built-in step's snapshot is read apart): the page
	// of a failed execution works its rollback out on every event.
	steps, err := s.StepsBrief(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var done []Step
	var ids []string
	var uncertain []string
	for _, st := range steps {
		if st.Phase != PhaseRun {
			continue
		}
		// A built-in write that failed part way names the snapshot of what it changed:
		// restoring it undoes exactly that, and it is undone like a completed step.
		if st.Status == StepFailed && isBuiltinFiles(st.Tool) && st.SnapshotID != "" {
			done = append(done, st)
			continue
		}
		// Its replica died during the call, or its server got the call and then it failed
		// (a timeout, or the tool's own error result): an undo of something that never
		// happened could undo something else, so it is named, never undone.
		if st.Status == StepInterrupted {
			uncertain = append(uncertain, fmt.Sprintf("step %d (%s), interrupted: it may have taken effect", st.Position+1, st.Tool))
		}
		if mayHaveRun(st) {
			uncertain = append(uncertain, fmt.Sprintf("step %d (%s), failed after its server got the call: it may have taken effect", st.Position+1, st.Tool))
		}
		// A built-in write's own error that names no snapshot changed nothing, unless it
		// says it changed something it could not keep a snapshot of.
		if st.Status == StepFailed && isBuiltinFiles(st.Tool) && st.Changed {
			uncertain = append(uncertain, fmt.Sprintf("step %d (%s), failed after changing files it could not keep a snapshot of: it took effect, and nothing undoes it", st.Position+1, st.Tool))
		}
		if toolFailed(st) && !isBuiltinFiles(st.Tool) && !unchangedOnError(st) {
			uncertain = append(uncertain, fmt.Sprintf("step %d (%s), failed with the tool's own error: it may have taken effect", st.Position+1, st.Tool))
		}
		if st.Status == StepSucceeded {
			done = append(done, st)
			if st.ToolID != nil {
				ids = append(ids, *st.ToolID)
			}
		}
	}
	slices.Reverse(done)
	comps, err := s.compensations(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	rp := &RollbackPlan{}
	e := &verr.Error{}
	for _, st := range done {
		pos := st.Position
		// A failed step is undone by its snapshot alone: the plan's undo step and a
		// compensation undo what a completed step did.
		completed := st.Status == StepSucceeded
		var req *RequestStep
		var sealedSecret []string // the plan's own undo step's, as sealed at approval
		for _, u := range ex.Plan.Rollback {
			if completed && u.Undoes != nil && *u.Undoes == pos {
				req = &RequestStep{Tool: u.ToolID, Arguments: u.Arguments}
				sealedSecret = u.SecretArgs
			}
		}
		if req == nil && completed && st.ToolID != nil {
			if comp, ok := comps[*st.ToolID]; ok {
				// One stored before secretSource was checked (or by an import before it)
				// is not run: the preview would show the secret, and the undo tool get it.
				leak, err := s.leakedSecret(ctx, *st.ToolID, comp)
				if err != nil {
					return nil, nil, err
				}
				if leak != nil {
					e.Add(fmt.Sprintf("/steps/%d", pos), fmt.Sprintf("the compensation of %s copies its secret argument %q into %s's %q, "+
						"which %s does not hold as secret, so it is not run (it would show and send the secret in plain text): "+
						"set the compensation again, mapping the secret only to an argument %s marks secret, or without it",
						st.Tool, leak.secret, leak.undoTool, leak.into, leak.undoTool, leak.undoTool))
					continue
				}
				args, err := mapArguments(comp.ArgumentMap, st.Arguments)
				if err != nil {
					e.Add(fmt.Sprintf("/steps/%d", pos), fmt.Sprintf("the compensation of %s: %v", st.Tool, err))
					continue
				}
				req = &RequestStep{Tool: comp.UndoToolID, Arguments: args}
			}
		}
		if req == nil {
			req = builtinUndo(st)
		}
		if req == nil {
			rp.Missing = append(rp.Missing, fmt.Sprintf("step %d (%s)", pos+1, st.Tool))
			continue
		}
		p, err := s.router.Prepare(ctx, router.Call{Tool: req.Tool, Arguments: req.Arguments, Actor: c.Actor, Role: c.Role,
			Source: router.SourceExecution})
		if err != nil {
			if err := addRouterError(e, fmt.Sprintf("/steps/%d/undo", pos), err); err != nil {
				return nil, nil, err
			}
			continue
		}
		// A restore whose snapshot was pruned would fail when it runs and end the rollback,
		// skipping the undo steps after it: the step is named as not undone instead, so the
		// person sees it before approving and the other undo steps still run.
		if gone := s.snapshotGone(ctx, ex, p); gone != "" {
			rp.Missing = append(rp.Missing, fmt.Sprintf("step %d (%s), %s: nothing undoes it", pos+1, st.Tool, gone))
			continue
		}
		secret, err := s.secretArgs(ctx, p.ToolID)
		if err != nil {
			return nil, nil, err
		}
		// A value typed into a field that was secret when the plan was approved stays
		// secret, whatever the tool's definition says now (it may have dropped writeOnly).
		for _, name := range sealedSecret {
			if !slices.Contains(secret, name) {
				secret = append(secret, name)
			}
		}
		undoes := pos
		rp.Steps = append(rp.Steps, PlannedStep{Prepared: *p, Undoes: &undoes, SecretArgs: secret})
	}
	rp.Missing = append(rp.Missing, uncertain...)
	rp.Problems = e.Err()
	// What each undo step will change, as a plan's steps show it: a built-in write's
	// restore shows what it puts back. In the hash, so a rollback decided with its hash
	// (as the page does) is the one shown; not checked as the steps run (plannedOf).
	// Best effort: a preview that fails leaves the rollback as it was without one.
	plan := Plan{Steps: rp.Steps}
	if slices.ContainsFunc(rp.Steps, func(st PlannedStep) bool { return isBuiltinFiles(st.Tool) }) {
		requester := ""
		if ex.RequestedBy != nil {
			requester = *ex.RequestedBy
		}
		if err := s.preview(ctx, ex.conversation(), requester, &plan); err != nil {
			if ctx.Err() != nil {
				return nil, nil, err
			}
			s.log.Warn("executions: preview a rollback's undo steps", "execution", ex.ID, "err", err)
			for i := range plan.Steps {
				plan.Steps[i].Preview = nil
			}
		}
	}
	rp.Risk, rp.RiskWhy = plan.Risk()
	rp.Phrase = plan.Phrase()
	h, err := plan.Hash()
	if err != nil {
		return nil, nil, err
	}
	rp.Hash = fmt.Sprintf("%x", h)
	return ex, rp, nil
}

// Rollback starts the rollback of failed execution id: its undo steps run in reverse
// order of the completed steps, gated by their own risk (MEDIUM needs confirm, HIGH
// the rollback's phrase), each through the router.
func (s *Service) Rollback(ctx context.Context, c Caller, id string, d RollbackDecision) (*Execution, error) {
	const verb = "roll executions back"
	if err := s.mayDecide(c, verb); err != nil {
		return nil, err
	}
	ex, rp, err := s.PlanRollback(ctx, id)
	if err != nil {
		return nil, err
	}
	// The record must be the one sealed (the seal below would otherwise cover an altered
	// one): refused, and the refusal recorded, before anything else is said of it.
	if msg := s.sealRefusal(ex); msg != "" {
		s.refusal(ctx, c, ex, msg)
		return nil, stale(msg)
	}
	if d.Hash != "" && !strings.EqualFold(d.Hash, rp.Hash) {
		return nil, conflict(id, ex.Status, "rolled back as shown (the rollback is not the one you saw: a compensation or a tool changed; reload it)")
	}
	if rp.Problems != nil {
		return nil, rp.Problems
	}
	if len(rp.Steps) == 0 {
		return nil, verr.New("/rollback", "nothing to roll back: "+nothingToUndo(rp))
	}
	switch rp.Risk {
	case risk.High:
		if d.Phrase != rp.Phrase {
			s.refusal(ctx, c, ex, "wrong phrase for the rollback") // as a confirm's wrong phrase is
			return nil, wrongPhraseFault(rp.Phrase)
		}
	case risk.Medium:
		if !d.Confirmed {
			return nil, verr.New("/confirm", "the rollback runs medium-risk tools ("+rp.RiskWhy+"); confirm it")
		}
	}
	verdict, err := s.mayDecideOn(ctx, c, ex, rp.Risk, verb)
	if err != nil {
		return nil, err
	}
	// The plan's own undo steps, from the stored plan, must be the ones approved.
	if h, err := ex.Plan.Hash(); err != nil || !bytes.Equal(h, ex.ApprovedHash) {
		const msg = "the stored plan is not the one that was approved (it was altered after approval), so its rollback does not run"
		s.refusal(ctx, c, ex, msg)
		return nil, stale(msg)
	}
	undo := Plan{Steps: rp.Steps}
	undoHash, err := undo.Hash() // rp.Hash, as bytes
	if err != nil {
		return nil, err
	}
	started := func(b events.Execution) events.RollbackPlanned {
		return events.RollbackPlanned{Execution: b, Steps: len(rp.Steps), NotUndone: rp.Missing, Risk: string(rp.Risk),
			SelfApproved: verdict.SelfApproved}
	}
	var out *Execution
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		for i, st := range rp.Steps {
			if _, err := tx.Exec(ctx, `/* executions.Rollback.step */
				INSERT INTO tool_calls (execution_id, phase, position, tool_id, tool_name, arguments, risk, undoes)
				VALUES ($1, 'rollback', $2, $3, $4, $5, $6, $7)
				ON CONFLICT (execution_id, phase, position) DO NOTHING`,
				id, i, st.ToolID, st.Tool, st.Arguments, string(st.Risk.Level), st.Undoes); err != nil {
				return fmt.Errorf("executions: rollback step %d: %w", i, err)
			}
		}
		var err error
		out, err = s.apply(ctx, tx, id, change{from: []Status{Failed}, to: RollingBack, want: "rolled back",
			set: map[string]any{"rollback_plan": undo, "rollback_hash": undoHash,
				"seal": s.sealOf(ex, ex.ApprovedHash, undoHash, &undo)},
			event: announce(started, events.RollbackStarted), actor: c.Actor, action: "execution.rollback"})
		if err != nil {
			return err
		}
		return s.queuePhase(ctx, tx, id, PhaseRollback) // the run phase's runner no longer works it
	})
	return out, err
}

func nothingToUndo(rp *RollbackPlan) string {
	if len(rp.Missing) == 0 {
		return "no step completed"
	}
	return "nothing undoes " + strings.Join(rp.Missing, "; ") + " (a completed step is undone by the plan's undo step or its tool's compensation)"
}

// mapArguments builds a compensation's arguments from the undone step's.
// Numbers are copied as written: as float64, an id such as 9007199254740993 would
// come back as ...992 and the compensation would act on another record.
func mapArguments(m map[string]MappedArgument, stepArgs json.RawMessage) (json.RawMessage, error) {
	var src any
	dec := json.NewDecoder(bytes.NewReader(stepArgs))
	dec.UseNumber()
	if err := dec.Decode(&src); err != nil {
		return nil, fmt.Errorf("the step's arguments: %w", err)
	}
	out := map[string]json.RawMessage{}
	for name, a := range m {
		if len(a.Value) > 0 {
			out[name] = a.Value
			continue
		}
		v, err := pointer(src, a.From)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[name] = raw
	}
	return json.Marshal(out)
}

// pointer resolves a JSON pointer (RFC 6901) in v.
func pointer(v any, p string) (any, error) {
	if p == "" {
		return v, nil
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, fmt.Errorf("the step has no %q", p)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("the step has no %q", p)
			}
			v = x[i]
		default:
			return nil, errors.New("the step has no " + strconv.Quote(p))
		}
	}
	return v, nil
}
