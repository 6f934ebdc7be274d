package executions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Request is a plan as an agent, the API or a planner gives it.
type Request struct {
	Steps []RequestStep `json:"steps"`
	// Rollback undoes completed steps after a failure: by default rollback[i] undoes
	// steps[i]; Undoes names another step. A step without one falls back to the
	// compensation an administrator configured for its tool.
	Rollback []RequestStep `json:"rollback,omitempty"`
}

// RequestStep is one tool call of a Request.
type RequestStep struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Undoes    *int            `json:"undoes,omitempty"` // rollback steps only
}

// Plan is a prepared request: every step resolved, checked and pinned by the router.
type Plan struct {
	Steps    []PlannedStep `json:"steps"`
	Rollback []PlannedStep `json:"rollback,omitempty"`
}

// PlannedStep is one prepared step.
type PlannedStep struct {
	router.Prepared
	Undoes *int `json:"undoes,omitempty"`
	// Preview is what the step will change, shown before approval (a file's diff).
	Preview *StepPreview `json:"preview,omitempty"`
	// Display says what the step does in a short line ("Creating file notes.txt"), for
	// approval cards; derived from the tool and arguments, so not part of the hash.
	Display string `json:"display,omitempty"`
	// SecretArgs are where its tool's schema marks arguments secret (tools.SecretArgNames),
	// masked to all but the plan's deciders: the phrase leaves them out. Derived from the
	// pinned definition, so, as Display, not part of the hash.
	SecretArgs []string `json:"secret_arguments,omitempty"`
}

// MaxSteps bounds a plan.
const MaxSteps = 50

// prepare checks every step of req for actor through the router (names, enabled,
// permissions, configured values, arguments, and what would refuse a step in
// conversation whatever the approval: Call.Preflight) and reports every problem at once, each
// under the step's JSON pointer ("/steps/1/arguments/path").
func (s *Service) prepare(ctx context.Context, actor audit.Actor, role auth.Role, conversation string, req Request) (Plan, error) {
	e := &verr.Error{}
	if len(req.Steps) == 0 {
		e.Add("/steps", "a plan needs at least one step")
	}
	if len(req.Steps) > MaxSteps {
		e.Add("/steps", fmt.Sprintf("a plan has at most %d steps; this one has %d", MaxSteps, len(req.Steps)))
	}
	if len(req.Rollback) > len(req.Steps) {
		e.Add("/rollback", fmt.Sprintf("a plan has at most one undo step per step (%d), not %d", len(req.Steps), len(req.Rollback)))
	}
	if err := e.Err(); err != nil {
		return Plan{}, err
	}
	var plan Plan
	var failed error // not about the plan: the database, say
	one := func(field string, st RequestStep) (PlannedStep, bool) {
		if strings.TrimSpace(st.Tool) == "" {
			e.Add(field+"/tool", "name the tool (\"server__tool\")")
			return PlannedStep{}, false
		}
		if why := textcheck.Bad(st.Tool); why != "" {
			e.Add(field+"/tool", why)
			return PlannedStep{}, false
		}
		if !checkArguments(e, field+"/arguments", st.Arguments) {
			return PlannedStep{}, false
		}
		p, err := s.router.Prepare(ctx, router.Call{Tool: st.Tool, Arguments: st.Arguments, Actor: actor, Role: role,
			Source: router.SourceExecution, ConversationID: conversation, Preflight: true})
		if err != nil {
			if err := addRouterError(e, field, err); err != nil && failed == nil {
				failed = err
			}
			return PlannedStep{}, false
		}
		secret, err := s.secretArgs(ctx, p.ToolID)
		if err != nil {
			if failed == nil {
				failed = err
			}
			return PlannedStep{}, false
		}
		return PlannedStep{Prepared: *p, SecretArgs: secret}, true
	}
	for i, st := range req.Steps {
		if st.Undoes != nil {
			e.Add(fmt.Sprintf("/steps/%d/undoes", i), "only rollback steps undo something")
		}
		if p, ok := one(fmt.Sprintf("/steps/%d", i), st); ok {
			plan.Steps = append(plan.Steps, p)
		}
	}
	seen := map[int]bool{}
	for i, st := range req.Rollback {
		undoes := i
		if st.Undoes != nil {
			undoes = *st.Undoes
		}
		field := fmt.Sprintf("/rollback/%d", i)
		switch {
		case undoes < 0 || undoes >= len(req.Steps):
			e.Add(field+"/undoes", fmt.Sprintf("must name a step, 0 to %d", len(req.Steps)-1))
			continue
		case seen[undoes]:
			e.Add(field+"/undoes", fmt.Sprintf("step %d already has an undo step", undoes))
			continue
		}
		seen[undoes] = true
		if p, ok := one(field, st); ok {
			p.Undoes = &undoes
			plan.Rollback = append(plan.Rollback, p)
		}
	}
	if failed != nil {
		return Plan{}, failed
	}
	return plan, e.Err()
}

// secretArgs are the secret arguments of tool toolID (tools.SecretArgNames); none when
// it is gone meanwhile (its step is then stale).
func (s *Service) secretArgs(ctx context.Context, toolID string) ([]string, error) {
	t, err := s.tools.Target(ctx, toolID)
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	return tools.SecretArgNames(t.InputSchema), nil
}

// maxStoredNumber bounds, in characters, a number of a step's arguments as PostgreSQL
// writes it out (jsonb keeps numbers as numeric, exponent expanded): 1e100000 is eight
// bytes given and 100,001 digits stored and shown.
const maxStoredNumber = 100

// maxNumberText bounds a number of a step's arguments as given, in characters (numeric
// holds at most 16,383 decimals: a 17,000-digit fraction failed at the INSERT).
const maxNumberText = 1000

// checkArguments refuses, under field, step arguments that could not be stored as
// given: text PostgreSQL does not keep (a NUL, a lone surrogate), a key given twice, and
// a number that expands to more than maxStoredNumber digits. Every plan passes here,
// a planner's too, so none reaches the INSERT to fail there. False when it added an error.
func checkArguments(e *verr.Error, field string, raw json.RawMessage) bool {
	if ptr, why, bad := textcheck.JSON(raw); bad {
		e.Add(field+ptr, why)
		return false
	}
	if ptr, dup := textcheck.DuplicateKey(raw); dup {
		e.Add(field+ptr, textcheck.WhyDuplicate)
		return false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		if dec.PeekKind() != '0' {
			if _, err := dec.ReadToken(); err != nil {
				return true // the end, or not JSON: the router says what is wrong with that
			}
			continue
		}
		num, err := dec.ReadValue()
		if err != nil {
			return true
		}
		if n := storedLen(string(num)); n > max(maxStoredNumber, int64(len(num))) || len(num) > maxNumberText {
			e.Add(field+string(dec.StackPointer()), fmt.Sprintf("is a number of more than %d digits as given, or of more than %d "+
				"as stored (PostgreSQL writes its exponent out in full); give it with fewer digits or a smaller exponent", maxNumberText, maxStoredNumber))
			return false
		}
	}
}

// storedLen is about how many characters PostgreSQL's numeric writes the JSON number
// num as: its significant digits, with as many zeros and decimals as its exponent asks
// for (1e-7 is 0.0000001, 1e3 is 1000, -0.0 is 0.0).
func storedLen(num string) int64 {
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(num, "-")), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	var e int64
	if exp != "" {
		neg := strings.HasPrefix(exp, "-")
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(exp) > 9 {
			return math.MaxInt32 // beyond what numeric holds at all
		}
		e, _ = strconv.ParseInt("0"+exp, 10, 64)
		if neg {
			e = -e
		}
	}
	digits := int64(len(strings.TrimLeft(whole+frac, "0")))
	scale := int64(len(frac)) - e // decimals shown
	if scale <= 0 {
		return max(1, digits-scale)
	}
	return max(1, digits-scale) + 1 + scale
}

// asStored is plan as PostgreSQL gives it back once stored as jsonb (numbers as numeric
// writes them: 1e-7 as 0.0000001, -0 as 0), so that its hash is the one a check of the
// stored plan and its stored steps computes; hashed as given, such a plan would look
// altered after approval and never run.
func (s *Service) asStored(ctx context.Context, plan Plan) (Plan, error) {
	var out Plan
	if err := s.pool.QueryRow(ctx, `/* executions.asStored */ SELECT $1::jsonb`, plan).Scan(&out); err != nil {
		return Plan{}, fmt.Errorf("executions: plan as stored: %w", err)
	}
	return out, nil
}

// addRouterError files a router refusal under the step it belongs to. Any other error
// (the database failing) is returned: it says nothing about the plan.
func addRouterError(e *verr.Error, field string, err error) error {
	var re *router.Error
	if !errors.As(err, &re) {
		return err
	}
	var fields []verr.Field
	if fs, ok := re.Details.([]verr.Field); ok {
		fields = fs
	}
	if re.Code == router.CodeInvalidArguments && len(fields) > 0 {
		for _, f := range fields {
			f.Field = field + "/arguments" + f.Field // what a grant would allow stays with it
			e.Fields = append(e.Fields, f)
		}
		return nil
	}
	e.Add(field+"/tool", re.Message)
	return nil
}

// Risk is the plan's risk: its riskiest step's (docs/architecture.md, The path of a tool call), with why.
func (p Plan) Risk() (risk.Level, string) {
	level, why := risk.Low, "every step is low risk"
	for _, st := range p.Steps {
		if rank(st.Risk.Level) > rank(level) {
			level, why = st.Risk.Level, fmt.Sprintf("%s is %s risk: %s", st.Tool, st.Risk.Level, st.Risk.Why)
		}
	}
	return level, why
}

// rank orders the levels; a level that is none of them (a stored plan's, which no hash
// covers, written over in the database) ranks below them all, so that the level the
// router gives the step now is a rise, and the plan is stale (pinChange).
func rank(l risk.Level) int {
	switch l {
	case risk.Low:
		return 0
	case risk.Medium:
		return 1
	case risk.High:
		return 2
	}
	return -1
}

// targetKeys are argument names that say what a tool acts on, for the phrase; the first
// given wins. filePath and snapshotId are the built-in file tool's (a restore's rollback).
var targetKeys = []string{"path", "filePath", "file", "filename", "target", "snapshotId", "url", "uri", "name", "id", "command", "table", "database"}

// destinationKeys name a second place a step acts on, shown after its target: where a
// rename or copy writes (the built-in file tool's newPath), which it may overwrite.
var destinationKeys = []string{"newPath"}

// Phrase is what a person types to approve a HIGH plan: its first HIGH step's tool, its
// operation when the arguments name one, and what it acts on when they say: every target
// argument given, up to maxPhraseTargets, in targetKeys' order, then a destination
// ("fs__delete_file /tmp/x", "builtin__file_operations rename_file a.txt b.txt"). Every
// target, not the first: an argument the tool ignores ("name") would otherwise stand in
// for the one it acts on ("table").
// Empty below HIGH. An argument the tool's schema marks secret (SecretArgs: writeOnly,
// format password; send_input's input, a password at a prompt) is left out: it is
// masked to all but the plan's deciders.
func (p Plan) Phrase() string {
	for _, st := range p.Steps {
		if st.Risk.Level != risk.High {
			continue
		}
		var args map[string]any
		_ = json.Unmarshal(st.Arguments, &args)
		for k := range args {
			// A top-level name, or "/~*": every member of an object schema's additionalProperties.
			if slices.Contains(st.SecretArgs, k) || slices.Contains(st.SecretArgs, "/~*") {
				delete(args, k)
			}
		}
		parts := []string{st.Tool}
		if v, ok := phrasePart(args["operation"]); ok {
			parts = append(parts, v)
		}
		targets := 0
		for _, k := range targetKeys {
			if v, ok := phrasePart(args[k]); ok && targets < maxPhraseTargets && !slices.Contains(parts[1:], v) {
				parts = append(parts, v)
				targets++
			}
		}
		for _, k := range destinationKeys {
			if v, ok := phrasePart(args[k]); ok {
				parts = append(parts, v)
				break
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// maxPhraseTargets is how many target arguments a phrase names.
const maxPhraseTargets = 3

// phrasePart is an argument's value as the phrase shows it (typeable, at most 60
// characters: its start and its end, "..." between, so a path's tail is typed too), or
// false when it is not one line of text. A value with a credential in
// it (a database URL's password) is not shown to everyone who reads the plan, nor
// typed: the next target, or the tool alone.
func phrasePart(a any) (string, bool) {
	v, ok := a.(string)
	if !ok || strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\n\r") || usage.RedactText(v) != v {
		return "", false
	}
	v = typeable(v)
	if r := []rune(v); len(r) > 60 {
		v = strings.TrimSpace(string(r[:28])) + "..." + strings.TrimSpace(string(r[len(r)-29:]))
	}
	return v, v != ""
}

// typeable is v as a person can read and type it back: invisible and control
// characters (a tab, a zero-width space, a direction mark) dropped, and each run of
// spaces one space, as a page shows it.
func typeable(v string) string {
	v = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || unicode.IsSpace(r):
			return ' '
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, v)
	return strings.Join(strings.Fields(v), " ")
}

// Hash is the SHA-256 of the plan's canonical form: for each step, run and rollback, the
// tool (id, name, definition hash, configuration version), its server's connection
// identity (command, environment, URL, credentials), the arguments as given and as the
// server gets them (configured values merged; secret ones masked, which the given
// arguments and the configuration version cover), each with keys sorted, and what it
// undoes. An approval is bound to it.
func (p Plan) Hash() ([]byte, error) {
	type canon struct {
		ToolID, Tool, DefinitionHash string
		ConfigVersion                int
		ServerIdentity               string
		Given, Effective             json.RawMessage
		Undoes                       *int
		Preview                      *StepPreview `json:"Preview,omitempty"`
	}
	conv := func(sts []PlannedStep) ([]canon, error) {
		out := make([]canon, len(sts))
		for i, st := range sts {
			given, err := canonicalJSON(st.Arguments)
			if err != nil {
				return nil, fmt.Errorf("executions: step %d arguments: %w", i, err)
			}
			effective, err := canonicalJSON(st.Effective)
			if err != nil {
				return nil, fmt.Errorf("executions: step %d arguments: %w", i, err)
			}
			out[i] = canon{st.ToolID, st.Tool, st.DefinitionHash, st.ConfigVersion, st.ServerIdentity, given, effective, st.Undoes, st.Preview}
		}
		return out, nil
	}
	steps, err := conv(p.Steps)
	if err != nil {
		return nil, err
	}
	rollback, err := conv(p.Rollback)
	if err != nil {
		return nil, err
	}
	raw, err := canonjson.Marshal(struct{ Steps, Rollback []canon }{steps, rollback})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	return sum[:], nil
}

// canonicalJSON re-encodes raw with object keys sorted and numbers as written
// (internal/canonjson); no arguments at all are {}.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	return canonjson.Canonical(raw)
}
