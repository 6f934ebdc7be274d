package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// What a test case expects of a run.
const (
	ExpectSuccess = "success" // a result that is not an error
	ExpectError   = "error"   // an error result or a refused call
)

// TestCase is a saved test of one tool (the test panel).
type TestCase struct {
	ID             string          `db:"id" json:"id"`
	ToolID         string          `db:"tool_id" json:"tool_id"`
	Name           string          `db:"name" json:"name"`
	Arguments      json.RawMessage `db:"arguments" json:"arguments"`
	Expect         string          `db:"expect" json:"expect"`
	ExpectText     string          `db:"expect_text" json:"expect_text"`
	CreatedBy      string          `db:"created_by" json:"created_by"`
	UpdatedAt      time.Time       `db:"updated_at" json:"updated_at"`
	LastRunAt      *time.Time      `db:"last_run_at" json:"last_run_at"`
	LastPassed     *bool           `db:"last_passed" json:"last_passed"`
	LastDurationMS *float32        `db:"last_duration_ms" json:"last_duration_ms"`
	LastMessage    string          `db:"last_message" json:"last_message"`
}

// Passes reports whether a run's outcome meets the case: ok is whether the call gave a
// result that is not an error, text its text output.
func (tc TestCase) Passes(ok bool, text string) (bool, string) {
	switch {
	case tc.Expect == ExpectSuccess && !ok:
		return false, "expected success, got an error"
	case tc.Expect == ExpectError && ok:
		return false, "expected an error, got success"
	case tc.ExpectText != "" && !strings.Contains(text, tc.ExpectText):
		return false, fmt.Sprintf("the output does not contain %q", tc.ExpectText)
	}
	return true, "passed"
}

// Bounds on saved cases: every view of a tool's test panel loads all its cases, and Run
// all runs each of them.
const (
	MaxTestCases     = 100      // cases per tool
	MaxCaseArguments = 64 << 10 // bytes of a case's arguments
	MaxCaseMessage   = 1000     // bytes of an outcome's message kept (ClipCaseMessage)
)

// ClipCaseMessage is an outcome's message cut to MaxCaseMessage bytes: a failed case's
// message carries the server's error text, which may be as long as it likes.
func ClipCaseMessage(msg string) string {
	const mark = "…"
	return textcheck.Clip(msg, MaxCaseMessage-len(mark), mark)
}

const testCaseColumns = `id, tool_id, name, arguments, expect, expect_text, created_by, updated_at, last_run_at,
	last_passed, last_duration_ms, last_message`

// TestCases lists tool id's saved cases by name.
func (s *Service) TestCases(ctx context.Context, id string) ([]TestCase, error) {
	id, ok := normalID(id)
	if !ok {
		return nil, ErrNotFound
	}
	return db.All[TestCase](ctx, s.pool, "tools: test cases", `/* tools.TestCases */
		SELECT `+testCaseColumns+` FROM tool_test_cases WHERE tool_id = $1 ORDER BY name`, id)
}

// TestCase returns one case of tool id: ErrTestCaseNotFound when it has none with that
// id (or when the tool is gone: the callers read the tool first).
func (s *Service) TestCase(ctx context.Context, id, caseID string) (TestCase, error) {
	id, ok := normalID(id)
	if !ok {
		return TestCase{}, ErrNotFound
	}
	caseID, ok = normalID(caseID)
	if !ok {
		return TestCase{}, ErrTestCaseNotFound
	}
	cs, err := db.All[TestCase](ctx, s.pool, "tools: test case", `/* tools.TestCase */
		SELECT `+testCaseColumns+` FROM tool_test_cases WHERE tool_id = $1 AND id = $2`, id, caseID)
	if err != nil {
		return TestCase{}, err
	}
	if len(cs) == 0 {
		return TestCase{}, ErrTestCaseNotFound
	}
	return cs[0], nil
}

// SaveTestCase stores a case under its name (replacing one of the same name); audited.
func (s *Service) SaveTestCase(ctx context.Context, actor audit.Actor, id string, tc TestCase) (TestCase, error) {
	t, err := s.Get(ctx, id)
	if err != nil {
		return TestCase{}, err
	}
	if err := checkTestCase(&tc); err != nil {
		return TestCase{}, err
	}
	var out TestCase
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		out, err = saveTestCaseTx(ctx, tx, actor, t, tc)
		return err
	})
	return out, err
}

// SaveTestCaseTx is SaveTestCase in the caller's transaction.
func (s *Service) SaveTestCaseTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id string, tc TestCase) (TestCase, error) {
	t, err := getItem(ctx, tx, id, false)
	if err != nil {
		return TestCase{}, err
	}
	if err := checkTestCase(&tc); err != nil {
		return TestCase{}, err
	}
	return saveTestCaseTx(ctx, tx, actor, t, tc)
}

// CheckTestCase reports what is wrong with a case before it is saved (a configuration
// file is checked whole before anything is applied); it fills in defaults.
func CheckTestCase(tc *TestCase) error { return checkTestCase(tc) }

func checkTestCase(tc *TestCase) error {
	e := &verr.Error{}
	tc.Name = strings.TrimSpace(tc.Name)
	if tc.Name == "" {
		e.Add("case_name", "is required: name the case so you can find it again")
	} else if len([]rune(tc.Name)) > 120 {
		e.Add("case_name", "is too long (at most 120 characters)")
	} else if why := textcheck.Bad(tc.Name); why != "" {
		e.Add("case_name", why)
	}
	if tc.Expect == "" {
		tc.Expect = ExpectSuccess
	}
	if tc.Expect != ExpectSuccess && tc.Expect != ExpectError {
		e.Add("expect", "must be success or error")
	}
	if utf8.RuneCountInString(tc.ExpectText) > 1000 { // characters, as the form's maxlength counts them
		e.Add("expect_text", "is too long (at most 1,000 characters)")
	} else if why := textcheck.Bad(tc.ExpectText); why != "" {
		e.Add("expect_text", why)
	}
	var obj map[string]json.RawMessage
	if len(tc.Arguments) == 0 {
		tc.Arguments = json.RawMessage("{}")
	} else if len(tc.Arguments) > MaxCaseArguments {
		e.Add("arguments", fmt.Sprintf("are too large (%d KiB; a case keeps at most %d KiB)", (len(tc.Arguments)+1023)>>10, MaxCaseArguments>>10))
	} else if json.Unmarshal(tc.Arguments, &obj) != nil || obj == nil {
		e.Add("arguments", "must be a JSON object")
	} else if ptr, why, bad := textcheck.JSON(tc.Arguments); bad {
		e.Add("arguments", ptr+" "+why)
	}
	return e.Err()
}

func saveTestCaseTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, t Item, tc TestCase) (TestCase, error) {
	if err := LockShared(ctx, tx, t.ID); err != nil {
		return TestCase{}, err
	}
	if msg := SecretsHeld(t.InputSchema, tc.Arguments); msg != "" {
		return TestCase{}, verr.New("arguments", msg)
	}
	// The row lock is shared: saves of one tool's cases take turns here, so two of them
	// cannot both find room for one more.
	if _, err := tx.Exec(ctx, `/* tools.SaveTestCase.lock */ SELECT pg_advisory_xact_lock(hashtextextended('tools.test_cases:' || $1, 0))`,
		t.ID); err != nil {
		return TestCase{}, fmt.Errorf("tools: lock test cases: %w", err)
	}
	var n int
	var replaces bool
	if err := tx.QueryRow(ctx, `/* tools.SaveTestCase.count */
		SELECT count(*), coalesce(bool_or(name = $2), false) FROM tool_test_cases WHERE tool_id = $1`, t.ID, tc.Name).Scan(&n, &replaces); err != nil {
		return TestCase{}, fmt.Errorf("tools: count test cases: %w", err)
	}
	if n >= MaxTestCases && !replaces {
		return TestCase{}, verr.New("case_name", fmt.Sprintf("cannot be added: the tool already has %d test cases, the most it keeps; "+
			"delete one, or save under the name of one to replace it", n))
	}
	var out TestCase
	err := func() error {
		cs, err := db.All[TestCase](ctx, tx, "tools: save test case", `/* tools.SaveTestCase */
			INSERT INTO tool_test_cases (tool_id, name, arguments, expect, expect_text, created_by)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (tool_id, name) DO UPDATE SET arguments = EXCLUDED.arguments, expect = EXCLUDED.expect,
				expect_text = EXCLUDED.expect_text, updated_at = now()
			RETURNING `+testCaseColumns, t.ID, tc.Name, string(tc.Arguments), tc.Expect, tc.ExpectText, actor.Name)
		if err != nil {
			return err
		}
		out = cs[0]
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "tool.testcase.save", TargetType: "tool", TargetID: t.ID,
			TargetName: t.QualifiedName(), Payload: map[string]any{"case": tc.Name, "expect": tc.Expect}})
		return err
	}()
	return out, err
}

// DeleteTestCase removes a case; audited.
func (s *Service) DeleteTestCase(ctx context.Context, actor audit.Actor, id, caseID string) error {
	// The tool first: a case of a tool that is gone is the tool's not-found, not the case's.
	t, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	tc, err := s.TestCase(ctx, t.ID, caseID)
	if err != nil {
		return err
	}
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		return deleteTestCaseTx(ctx, tx, actor, t, tc)
	})
}

// DeleteTestCaseTx removes tool id's case named name in the caller's transaction;
// audited. A case that is not there is not an error.
func (s *Service) DeleteTestCaseTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id, name string) error {
	t, err := getItem(ctx, tx, id, false)
	if err != nil {
		return err
	}
	cs, err := db.All[TestCase](ctx, tx, "tools: test case", `/* tools.DeleteTestCaseTx */
		SELECT `+testCaseColumns+` FROM tool_test_cases WHERE tool_id = $1 AND name = $2`, t.ID, name)
	if err != nil || len(cs) == 0 {
		return err
	}
	return deleteTestCaseTx(ctx, tx, actor, t, cs[0])
}

func deleteTestCaseTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, t Item, tc TestCase) error {
	if err := LockShared(ctx, tx, t.ID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `/* tools.DeleteTestCase */ DELETE FROM tool_test_cases WHERE id = $1`, tc.ID); err != nil {
		return fmt.Errorf("tools: delete test case: %w", err)
	}
	_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "tool.testcase.delete", TargetType: "tool", TargetID: t.ID,
		TargetName: t.QualifiedName(), Payload: map[string]any{"case": tc.Name}})
	return err
}

// CaseResult is one case's outcome in a test run.
type CaseResult struct {
	CaseID     string  `json:"case_id"`
	Name       string  `json:"name"`
	Passed     bool    `json:"passed"`
	DurationMS float64 `json:"duration_ms"`
	Message    string  `json:"message"`
	// Saved is the case's updated_at as it ran (zero: not known): a case saved again
	// meanwhile is not marked with an outcome of arguments it no longer has.
	Saved time.Time `json:"-"`
}

// TestRunRecord is what RecordTestRun did.
type TestRunRecord struct {
	Status string // the tool's status afterwards
	// DefinitionChanged is set when the tool's definition is no longer the one the run
	// started against: the outcomes are recorded, but they verify nothing.
	DefinitionChanged bool
	// CasesChanged is set when the tool's cases are no longer those that ran (one saved
	// again, added or deleted meanwhile): the run verifies nothing either.
	CasesChanged bool
	// OverrideNeeded says why a passing run left a failed tool failed (the cases it failed
	// on changed since, so verifying it is an administrator's override); "" otherwise.
	OverrideNeeded string
}

// caseSetKey is the history metadata of a move to failed that pins the cases the tool
// failed on: case id → updated_at (Unix µs; every save sets it).
const caseSetKey = "case_set"

// RecordTestRun records a run of tool id's cases, begun against the definition with
// hash: when the tool's definition has changed since (discovery may do that while the
// cases run), the outcomes are recorded and audited but the tool's state is left as it
// is, as they say nothing of the definition it has now (a hash of "" is not checked).
// So is a run whose cases changed meanwhile (CaseResult.Saved: one saved again, whose
// outcome is then not recorded, or one added). With verify, the run moves the tool's state. Without override (tool.override), a
// passing run verifies a failed tool only when every case the tool failed on is still
// there, unsaved since, and passed in the run: deleting or weakening the failing case
// and running the rest would otherwise enable it without an override.
func (s *Service) RecordTestRun(ctx context.Context, actor audit.Actor, id, hash string, results []CaseResult, verify, override bool) (TestRunRecord, error) {
	var status, overrideNeeded string
	defChanged, casesChanged := false, false
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		t, err := getItem(ctx, tx, id, true)
		if err != nil {
			return err
		}
		status = t.Status
		passed := len(results) > 0
		results = slices.Clone(results) // the caller's are left as they are
		for i, r := range results {
			r.Message = ClipCaseMessage(textcheck.Storable(r.Message)) // PostgreSQL stores no NUL
			results[i] = r
			passed = passed && r.Passed
			if r.CaseID == "" {
				continue // a run of arguments not saved as a case
			}
			var saved *time.Time
			if !r.Saved.IsZero() {
				saved = &r.Saved
			}
			tag, err := tx.Exec(ctx, `/* tools.RecordTestRun.case */
				UPDATE tool_test_cases SET last_run_at = now(), last_passed = $3, last_duration_ms = $4, last_message = $5
				WHERE tool_id = $1 AND id = $2 AND ($6::timestamptz IS NULL OR updated_at = $6)`,
				t.ID, r.CaseID, r.Passed, r.DurationMS, r.Message, saved)
			if err != nil {
				return fmt.Errorf("tools: record test case: %w", err)
			}
			casesChanged = casesChanged || tag.RowsAffected() == 0
		}
		payload := map[string]any{"cases": len(results), "passed": passed, "results": results}
		defChanged = hash != "" && hash != t.DefinitionHash
		if verify && !defChanged && !casesChanged && passed && !override && t.Status == toolstate.Failed {
			// A failed tool's cases have their own rule first, which says what to do.
			if overrideNeeded, err = failedCasesChanged(ctx, tx, t.ID, results); err != nil {
				return err
			}
			if overrideNeeded != "" {
				payload["override_needed"] = true
				payload["note"] = "the tool stays failed: " + overrideNeeded
			}
		}
		if verify && !defChanged && !casesChanged && overrideNeeded == "" {
			// Every case there now must be one that ran (a case added meanwhile did not).
			if casesChanged, err = casesAddedSince(ctx, tx, t.ID, results); err != nil {
				return err
			}
		}
		switch {
		case defChanged:
			payload["definition_changed"] = true
			payload["note"] = "the tool's definition changed while the cases ran, so the run does not change its state"
		case casesChanged:
			payload["cases_changed"] = true
			payload["note"] = "the tool's cases changed while they ran (one saved again, added or deleted), so the run does not change its state"
		}
		stale := defChanged || casesChanged
		if verify && !stale && overrideNeeded == "" && toolstate.Allowed(t.Status, toolstate.Testing) && len(results) > 0 {
			to := toolstate.Failed
			reason := "a test case failed"
			if passed {
				to, reason = toolstate.Verified, fmt.Sprintf("all %d test cases passed", len(results))
			}
			meta := map[string]any{"cases": len(results), "passed": passed}
			failMeta := meta
			if !passed {
				set, err := failedCaseSet(ctx, tx, t)
				if err != nil {
					return err
				}
				failMeta = map[string]any{"cases": len(results), "passed": passed, caseSetKey: set}
			}
			if err := ApplyMoves(ctx, tx, []toolstate.Move{
				{ToolID: t.ID, From: t.Status, To: toolstate.Testing, Reason: "test run started", Actor: actor.Name, Metadata: meta},
				{ToolID: t.ID, From: toolstate.Testing, To: to, Reason: reason, Actor: actor.Name, Metadata: failMeta},
			}); err != nil {
				return err
			}
			payload["from"], payload["to"] = t.Status, to
			status = to
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "tool.test", TargetType: "tool", TargetID: t.ID,
			TargetName: t.QualifiedName(), Payload: payload})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return TestRunRecord{}, ErrNotFound
	}
	return TestRunRecord{Status: status, DefinitionChanged: defChanged, CasesChanged: casesChanged && !defChanged, OverrideNeeded: overrideNeeded}, err
}

// casesAddedSince reports whether tool id has a case that is not among results (added
// while they ran).
func casesAddedSince(ctx context.Context, tx pgx.Tx, id string, results []CaseResult) (bool, error) {
	now, err := currentCaseSet(ctx, tx, id)
	if err != nil {
		return false, err
	}
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.CaseID] = true
	}
	for cid := range now {
		if !ran[cid] {
			return true, nil
		}
	}
	return false, nil
}

// pinnedCaseSet is the case set of tool id's latest move to failed; ok is false when
// that move recorded none (the tool failed before case sets were recorded).
func pinnedCaseSet(ctx context.Context, tx pgx.Tx, id string) (set map[string]int64, ok bool, err error) {
	var raw []byte
	err = tx.QueryRow(ctx, `/* tools.RecordTestRun.pinned */
		SELECT metadata->'`+caseSetKey+`' FROM tool_state_history WHERE tool_id = $1 AND to_status = 'failed'
		ORDER BY id DESC LIMIT 1`, id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && (len(raw) == 0 || string(raw) == "null") {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("tools: read the failed run's cases: %w", err)
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, false, fmt.Errorf("tools: read the failed run's cases: %w", err)
	}
	return set, true, nil
}

// currentCaseSet is tool id's cases now, as a case set.
func currentCaseSet(ctx context.Context, tx pgx.Tx, id string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, `/* tools.RecordTestRun.cases */ SELECT id::text, updated_at FROM tool_test_cases WHERE tool_id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("tools: read test cases: %w", err)
	}
	set := map[string]int64{}
	var cid string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&cid, &at}, func() error {
		set[cid] = at.UnixMicro()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tools: read test cases: %w", err)
	}
	return set, nil
}

// failedCaseSet is the case set a move of t to failed records: the one pinned when it
// first failed if it is failed already (a failing rerun of fewer or weaker cases must
// not lower the bar), else its cases now.
func failedCaseSet(ctx context.Context, tx pgx.Tx, t Item) (map[string]int64, error) {
	if t.Status == toolstate.Failed {
		if set, ok, err := pinnedCaseSet(ctx, tx, t.ID); err != nil || ok {
			return set, err
		}
	}
	return currentCaseSet(ctx, tx, t.ID)
}

// failedCasesChanged says why a passing run of failed tool id does not verify it without
// an override, "" when it does: every case pinned when it failed must still be there,
// unsaved since, and have passed in this run.
func failedCasesChanged(ctx context.Context, tx pgx.Tx, id string, results []CaseResult) (string, error) {
	const need = "an administrator's override is needed: "
	pinned, ok, err := pinnedCaseSet(ctx, tx, id)
	if err != nil {
		return "", err
	}
	if !ok {
		return need + "the tool failed before the cases it failed on were recorded", nil
	}
	now, err := currentCaseSet(ctx, tx, id)
	if err != nil {
		return "", err
	}
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.CaseID] = ran[r.CaseID] || r.Passed
	}
	for cid, at := range pinned {
		if got, ok := now[cid]; !ok || got != at {
			return need + "the cases changed since the tool failed (one was deleted or saved again)", nil
		}
		if !ran[cid] {
			return need + "the run did not include every case the tool failed on; run them all", nil
		}
	}
	return "", nil
}

// SecretsHeld says which arguments of a case hold a secret value, "" when none does:
// a case is shown to everyone who may see its tool, and exported, so it keeps none. A
// secret value is a credential by its look (secrets.LooksSecretValue: ghp_…, sk-…), a
// value the tool's schema marks secret (format password, writeOnly, at any depth),
// or a value under a name the test form masks (secrets.LooksSecretName: password,
// github_token, api_key…, at any depth), but for a bare "key" or a session id, which
// name plain values as often (a Jira issue's key, a terminal's session).
func SecretsHeld(inputSchema, args json.RawMessage) string {
	var top map[string]any
	if json.Unmarshal(args, &top) != nil {
		return ""
	}
	var out []string
	// marked: at or under a place the schema marks secret (secretPlaces: also inside
	// anyOf, nested objects, items, $refs), where every value is secret; a
	// secret-looking name (auth) marks its own value, not what an object of it holds.
	var walk func(ptr string, v any, secret, marked bool, at []*argTrie)
	walk = func(ptr string, v any, secret, marked bool, at []*argTrie) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				next := argStep(at, escapeToken(k))
				m := marked || anySecret(next)
				walk(ptr+"/"+k, x, m || secrets.LooksSecretParam(k), m, next)
			}
		case []any:
			for i, x := range v {
				next := argStep(at, strconv.Itoa(i))
				m := marked || anySecret(next)
				walk(fmt.Sprintf("%s/%d", ptr, i), x, secret || m, m, next)
			}
		case string:
			if secret && v != "" || secrets.LooksSecretValue(v) {
				out = append(out, ptr)
			}
		case nil, bool:
		default:
			if secret {
				out = append(out, ptr)
			}
		}
	}
	walk("", top, false, false, []*argTrie{newArgTrie(secretPlaces(inputSchema, false))})
	if len(out) == 0 {
		return ""
	}
	slices.Sort(out)
	return strings.Join(out, ", ") + " holds a secret, which a saved case does not keep (everyone who may see the tool would read it): " +
		"leave it empty, or give it a fixed value in the tool's configuration, which is stored encrypted"
}
