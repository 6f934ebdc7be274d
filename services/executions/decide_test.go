package executions_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Of 50 concurrent decisions on one MEDIUM execution exactly one decides; the others
// get a *ConflictError, and exactly one event pair and audit row record it.
func TestConcurrentDecisions(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	const n = 50
	type kind int
	const (
		confirm kind = iota
		reject
		cancel
	)
	for _, tc := range []struct {
		name  string
		kinds []kind // cycled over the n calls
	}{
		{"confirms", []kind{confirm}},
		{"rejects", []kind{reject}},
		{"cancels", []kind{cancel}},
		{"confirms and rejects", []kind{confirm, reject}},
		{"confirms and cancels", []kind{confirm, cancel}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := e.create(e.admin, step("mt__add", `{"a":1,"b":1}`)).ID
			gate := make(chan struct{})
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					var err error
					switch tc.kinds[i%len(tc.kinds)] {
					case confirm:
						_, err = e.svc.Confirm(e.ctx, e.admin, id, "", "")
					case reject:
						_, err = e.svc.Reject(e.ctx, e.admin, id, "no thanks")
					case cancel:
						_, err = e.svc.Cancel(e.ctx, e.admin, id, "stop")
					}
					errs[i] = err
				}()
			}
			close(gate)
			wg.Wait()
			won := map[kind]int{}
			for i, err := range errs {
				switch {
				case err == nil:
					won[tc.kinds[i%len(tc.kinds)]]++
				case !isConflict(err):
					t.Errorf("call %d: got %v (%T), want nil or a *ConflictError", i, err, err)
				}
			}
			ex := e.get(id)
			switch {
			case tc.name == "confirms and cancels" && won[confirm] == 1:
				// The confirm decided; a cancel may then stop the approved run before its
				// first step (cancel works between steps): at most one does.
				want := executions.Executing
				if won[cancel] == 1 {
					want = executions.Cancelled
				}
				if won[cancel] > 1 || ex.Status != want {
					t.Fatalf("after the confirm won: %d cancels won, state %s; want at most one, state %s", won[cancel], ex.Status, want)
				}
			case won[confirm]+won[reject]+won[cancel] != 1:
				t.Fatalf("decisions that won: got %v, want exactly one", won)
			case won[confirm] == 1 && ex.Status != executions.Executing:
				t.Fatalf("state after the confirm won: got %s, want executing", ex.Status)
			case won[confirm] == 0 && ex.Status != executions.Cancelled:
				t.Fatalf("state after a reject or cancel won: got %s, want cancelled", ex.Status)
			}
			e.bothTopics(id, "approval.granted", won[confirm])
			e.bothTopics(id, "approval.rejected", won[reject])
			e.bothTopics(id, "execution.cancelled", won[cancel])
			for action, want := range map[string]int{"execution.approve": won[confirm], "execution.reject": won[reject],
				"execution.cancel": won[cancel]} {
				if got := e.audits(id, action); got != want {
					t.Errorf("%s audit rows: got %d, want %d", action, got, want)
				}
			}
			checkInvariant(t, e, id)
		})
	}
}

// A HIGH plan runs only with its exact phrase, derived from its riskiest tool and what
// it acts on; a wrong phrase is refused, audited and changes nothing.
func TestPhrase(t *testing.T) {
	t.Parallel()
	e := start(t)
	hs := e.server("mt", true, "echo")
	hs.Server().SetTool(mcptest.ToolSpec{Name: "delete-file", Description: "Deletes a file (pretend).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}})
	e.enable("mt__delete-file")
	ex := e.create(e.admin, step("mt__echo", `{"message":"first"}`), step("mt__delete-file", `{"path":"/srv/data"}`))
	const phrase = "mt__delete-file /srv/data"
	if ex.Risk != "high" || ex.ConfirmationPhrase != phrase || !strings.Contains(ex.RiskWhy, "mt__delete-file") {
		t.Fatalf("got risk %s (%s), phrase %q; want high because of mt__delete-file, phrase %q", ex.Risk, ex.RiskWhy,
			ex.ConfirmationPhrase, phrase)
	}
	e.bothTopics(ex.ID, "approval.requested", 1)
	for _, wrong := range []string{"", "mt__delete-file", phrase + " ", strings.ToUpper(phrase), "mt__echo /srv/data"} {
		_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, wrong, "")
		if got, ok := executions.WrongPhrase(err); !ok || !isCode(err, executions.CodeWrongPhrase) || got != phrase {
			t.Fatalf("phrase %q: got %v (%T), want a wrong_phrase asking for %q", wrong, err, err, phrase)
		}
	}
	e.wantAudits(ex.ID, map[string]int{"execution.approve.refused": 5})
	if got := e.get(ex.ID); got.Status != executions.AwaitingApproval || got.Approval != "" {
		t.Fatalf("after wrong phrases: got %s (approval %q), want awaiting_approval and no approval", got.Status, got.Approval)
	}
	e.bothTopics(ex.ID, "approval.granted", 0)
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, phrase, "0123"); !isConflict(err) {
		t.Fatalf("the right phrase for another plan hash: got %v, want a *ConflictError", err)
	}
	got, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, phrase, ex.Hash())
	if err != nil {
		t.Fatalf("the exact phrase: %v", err)
	}
	if got.Status != executions.Executing || got.Approval != "phrase" || got.ApprovedBy == nil || *got.ApprovedBy != e.admin.Actor.ID {
		t.Fatalf("got %s approved by %q (%v), want executing approved by phrase by the admin", got.Status, got.Approval, got.ApprovedBy)
	}
	e.bothTopics(ex.ID, "approval.granted", 1)
	checkInvariant(t, e, ex.ID)

	// A MEDIUM plan needs a confirm, no phrase.
	e.setRisk("mt__echo", risk.Medium)
	m := e.create(e.admin, step("mt__echo", `{"message":"m"}`))
	if m.Risk != "medium" || m.ConfirmationPhrase != "" {
		t.Fatalf("got %s with phrase %q, want medium without one", m.Risk, m.ConfirmationPhrase)
	}
	if got, err := e.svc.Confirm(e.ctx, e.admin, m.ID, "", ""); err != nil || got.Approval != "confirm" {
		t.Fatalf("confirm a MEDIUM plan: got %v, %v; want it approved by confirm", got, err)
	}
}

// The phrase a HIGH plan needs comes from its stored plan, which the seal vouches for,
// not from the risk and phrase columns, which it does not cover: lowering those in the
// database does not let a confirm without the phrase approve it.
func TestPhraseFromTheSealedPlan(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	e.setRisk("mt__echo", risk.High)
	ex := e.create(e.admin, step("mt__echo", `{"message":"sealed"}`))
	if ex.Risk != "high" || ex.ConfirmationPhrase != "mt__echo" {
		t.Fatalf("got risk %s, phrase %q; want high, mt__echo", ex.Risk, ex.ConfirmationPhrase)
	}
	testkit.Exec(t, e.pool, `UPDATE executions SET risk = 'medium', confirmation_phrase = '' WHERE id = $1`, ex.ID)
	// Shown as Confirm asks for it (a phrase stored by an older version may be worded
	// otherwise), not as the column says.
	if got := e.get(ex.ID).ConfirmationPhrase; got != "mt__echo" {
		t.Fatalf("the phrase shown after the column was emptied: %q, want the sealed plan's mt__echo", got)
	}
	if pg, err := e.svc.List(e.ctx, executions.Query{Status: []executions.Status{executions.AwaitingApproval}}); err != nil {
		t.Fatal(err)
	} else if i := slices.IndexFunc(pg.Items, func(x executions.Execution) bool { return x.ID == ex.ID }); i < 0 || pg.Items[i].ConfirmationPhrase != "mt__echo" {
		t.Fatalf("the list of plans awaiting approval shows the phrase %q (index %d), want the sealed plan's mt__echo", func() string {
			if i < 0 {
				return ""
			}
			return pg.Items[i].ConfirmationPhrase
		}(), i)
	}
	_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash())
	if got, ok := executions.WrongPhrase(err); !ok || got != "mt__echo" {
		t.Fatalf("a confirm without the phrase after the columns were lowered: got %v, want a wrong_phrase asking for mt__echo", err)
	}
	if got := e.get(ex.ID); got.Status != executions.AwaitingApproval {
		t.Fatalf("got %s, want it still awaiting approval", got.Status)
	}
	if got, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "mt__echo", ex.Hash()); err != nil || got.Approval != "phrase" {
		t.Fatalf("with the phrase: got %v, %v; want it approved by phrase", got, err)
	}
	// The step's level in the stored plan is covered by no hash: written over with a level
	// that is none (or any lower one), the plan is stale at confirm, never approved.
	for _, level := range []string{"x", "High", "medium"} {
		ex := e.create(e.admin, step("mt__echo", `{"message":"`+level+`"}`))
		testkit.Exec(t, e.pool, `UPDATE executions SET plan = jsonb_set(plan, '{steps,0,risk,level}', to_jsonb($2::text)) WHERE id = $1`,
			ex.ID, level)
		if got, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash()); err == nil {
			t.Errorf("level %q written into the plan: confirmed without the phrase (%s)", level, got.Status)
		}
		if got := e.get(ex.ID); got.Status == executions.Executing || got.Status == executions.Success {
			t.Errorf("level %q written into the plan: got %s, want it not approved", level, got.Status)
		}
	}
}

// Plan.Phrase names the first HIGH step's tool and, when its arguments say, its target.
func TestPlanPhrase(t *testing.T) {
	t.Parallel()
	st := func(tool string, level risk.Level, args string) executions.PlannedStep {
		return executions.PlannedStep{Prepared: router.Prepared{Tool: tool, Arguments: json.RawMessage(args),
			Risk: risk.Decision{Level: level}}}
	}
	long := strings.Repeat("é", 70)
	for _, tc := range []struct {
		name  string
		steps []executions.PlannedStep
		want  string
	}{
		{"no HIGH step", []executions.PlannedStep{st("a__low", risk.Low, `{"path":"/x"}`), st("a__m", risk.Medium, `{"path":"/y"}`)}, ""},
		{"path", []executions.PlannedStep{st("a__low", risk.Low, `{}`), st("fs__rm", risk.High, `{"path":"/tmp/x"}`)}, "fs__rm /tmp/x"},
		{"first HIGH step", []executions.PlannedStep{st("fs__rm", risk.High, `{"file":"a"}`), st("fs__rm2", risk.High, `{"file":"b"}`)}, "fs__rm a"},
		// Every target given, in targetKeys' order: a "name" the tool ignores does not
		// stand in for the "table" it drops.
		{"every target key", []executions.PlannedStep{st("db__drop", risk.High, `{"name":"n","table":"t","path":"p"}`)}, "db__drop p n t"},
		{"at most three targets", []executions.PlannedStep{st("db__drop", risk.High, `{"name":"n","table":"t","path":"p","url":"u","id":"i"}`)}, "db__drop p u n"},
		{"a value once", []executions.PlannedStep{st("db__drop", risk.High, `{"name":"t","table":"t"}`)}, "db__drop t"},
		{"url", []executions.PlannedStep{st("web__post", risk.High, `{"url":" https://x.test/ "}`)}, "web__post https://x.test/"},
		{"no target", []executions.PlannedStep{st("sh__run", risk.High, `{"text":"x"}`)}, "sh__run"},
		{"target not a string", []executions.PlannedStep{st("sh__run", risk.High, `{"id":7}`)}, "sh__run"},
		{"multi-line target", []executions.PlannedStep{st("sh__run", risk.High, `{"command":"a\nb"}`)}, "sh__run"},
		{"blank target", []executions.PlannedStep{st("sh__run", risk.High, `{"command":"  ","id":"k"}`)}, "sh__run k"},
		// Its start and its end: "/home/u/…/../../etc/x" shows where it goes.
		{"long target", []executions.PlannedStep{st("fs__rm", risk.High, `{"path":"`+long+`"}`)}, "fs__rm " + strings.Repeat("é", 28) + "..." + strings.Repeat("é", 29)},
		{"long path's tail", []executions.PlannedStep{st("fs__rm", risk.High, `{"path":"/home/u/proj/`+strings.Repeat("a", 60)+`/../../../etc/x"}`)}, "fs__rm /home/u/proj/aaaaaaaaaaaaaaa...aaaaaaaaaaaaaa/../../../etc/x"},
		// What a page shows and a person can type: spaces as one, tabs and invisible
		// characters (zero-width space, direction marks) gone.
		{"spaces and tabs", []executions.PlannedStep{st("sh__run", risk.High, `{"command":"grep -r  foo\t."}`)}, "sh__run grep -r foo ."},
		{"invisible characters", []executions.PlannedStep{st("fs__rm", risk.High, `{"path":"/srv/\u200bdata\u202e"}`)}, "fs__rm /srv/data"},
		// A target with a credential in it is shown to everyone who reads the plan: the
		// next target is typed, or the tool alone.
		{"url with a password", []executions.PlannedStep{st("db__execute", risk.High, `{"url":"postgres://app:Pr0dPass@db.internal/app","id":"prod"}`)}, "db__execute prod"},
		{"command with a token", []executions.PlannedStep{st("sh__run", risk.High, `{"command":"curl -H 'Authorization: Bearer ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789' x"}`)}, "sh__run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (executions.Plan{Steps: tc.steps}).Phrase(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Pending approvals expire at expires_at (Settings' TTL, 24 h by default), by ExpireDue,
// by the runner's periodic job, or when someone tries to confirm too late.
func TestExpiry(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	add := step("mt__add", `{"a":1,"b":1}`)
	st, err := e.svc.Settings(e.ctx)
	if err != nil || st.ApprovalTTL != 24*time.Hour || st.HighSeparation != decide.SeparationAuto {
		t.Fatalf("default settings: got %+v, %v; want 24h and auto separation", st, err)
	}
	day := e.create(e.admin, add)
	if got := day.ExpiresAt.Sub(day.CreatedAt); got != 24*time.Hour {
		t.Errorf("default expiry: got %s after creation, want 24h", got)
	}
	for _, bad := range []time.Duration{0, 30 * time.Second, 31 * 24 * time.Hour} {
		var ve *verr.Error
		if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: bad}); !errors.As(err, &ve) {
			t.Errorf("TTL %s: got %v, want a *verr.Error", bad, err)
		}
	}
	if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.svc.Settings(e.ctx); st.ApprovalTTL != 10*time.Minute {
		t.Fatalf("TTL: got %s, want 10m", st.ApprovalTTL)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'settings.executions'`); n != 1 {
		t.Errorf("settings audit rows: got %d, want 1", n)
	}
	short := e.create(e.admin, add)
	if got := short.ExpiresAt.Sub(short.CreatedAt); got != 10*time.Minute {
		t.Errorf("expiry: got %s after creation, want 10m", got)
	}

	e.clock.Advance(9 * time.Minute)
	if n, err := e.svc.ExpireDue(e.ctx); err != nil || n != 0 {
		t.Fatalf("ExpireDue before expiry: got %d, %v; want 0", n, err)
	}
	e.clock.Advance(2 * time.Minute)
	if n, err := e.svc.ExpireDue(e.ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue after expiry: got %d, %v; want 1", n, err)
	}
	got := e.get(short.ID)
	if got.Status != executions.Expired || got.FinishedAt == nil {
		t.Fatalf("got %s (finished %v), want expired and finished", got.Status, got.FinishedAt)
	}
	e.bothTopics(short.ID, "execution.expired", 1)
	if s := stepStatuses(e.steps(short.ID)); slices.Contains(s, "pending") {
		t.Errorf("steps of the expired plan: got %v, want none pending", s)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.expire' AND actor_kind = 'system'`, short.ID); n != 1 {
		t.Errorf("expiry audit rows by the system: got %d, want 1", n)
	}
	_, err = e.svc.Confirm(e.ctx, e.admin, short.ID, "", "")
	conflictIn(t, err, executions.Expired)
	if got := e.get(day.ID).Status; got != executions.AwaitingApproval {
		t.Errorf("the 24 h plan: got %s, want still awaiting_approval", got)
	}

	// A confirm that comes too late expires the plan itself.
	late := e.create(e.admin, add)
	e.clock.Advance(10 * time.Minute)
	_, err = e.svc.Confirm(e.ctx, e.admin, late.ID, "", "")
	conflictIn(t, err, executions.Expired)
	if got := e.get(late.ID); got.Status != executions.Expired || got.Approval != "" {
		t.Errorf("late confirm: got %s (approval %q), want expired without approval", got.Status, got.Approval)
	}
	e.bothTopics(late.ID, "execution.expired", 1)
	e.bothTopics(late.ID, "approval.granted", 0)

	// The runner expires what is due when it starts (and every minute).
	e.clock.Advance(24 * time.Hour)
	e.run(nil)
	e.waitStatus(day.ID, executions.Expired, 10*time.Second)
	e.bothTopics(day.ID, "execution.expired", 1)
	for _, id := range []string{day.ID, short.ID, late.ID} {
		checkInvariant(t, e, id)
	}
}

// A plan whose tool changed (configuration or definition) between planning and
// approval is not approved: the confirm is a *StaleError and the plan is cancelled.
func TestStaleAtConfirm(t *testing.T) {
	t.Parallel()
	e := start(t)
	hs := e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	noteSpec := mcptest.ToolSpec{Name: "note", Description: "Keeps a note.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false)}}
	hs.Server().SetTool(noteSpec)
	e.enable("mt__note")
	for _, tc := range []struct {
		name   string
		plan   executions.RequestStep
		change func()
		want   string
	}{
		{"configuration", step("mt__add", `{"a":1,"b":1}`), func() {
			ms := 5000
			e.update("mt__add", tools.Patch{TimeoutMS: &ms})
		}, "step 1: mt__add's configuration changed since the plan was made"},
		{"definition", step("mt__note", `{"path":"/n"}`), func() {
			before := e.tool("mt__note").DefinitionHash
			changed := noteSpec
			changed.Description = "Keeps a note, now differently."
			hs.Server().SetTool(changed)
			testkit.WaitFor(t, 20*time.Second, func() bool {
				tg, err := e.tools.Target(e.ctx, "mt__note")
				return err == nil && tg.DefinitionHash != before
			}, "the new definition of mt__note was never discovered")
		}, "step 1: mt__note changed its definition since the plan was made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := e.create(e.admin, tc.plan)
			if ex.Risk != "medium" {
				t.Fatalf("risk: got %s, want medium", ex.Risk)
			}
			tc.change()
			_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash())
			if se, _ := fault.As(err); !isCode(err, executions.CodeStale) || !strings.Contains(se.Message, tc.want) {
				t.Fatalf("got %v (%T), want a stale_plan saying %q", err, err, tc.want)
			}
			got := e.get(ex.ID)
			if got.Status != executions.Cancelled || got.Reason != tc.want || got.Approval != "" {
				t.Errorf("got %s (reason %q, approval %q), want cancelled because %q without approval", got.Status, got.Reason,
					got.Approval, tc.want)
			}
			e.bothTopics(ex.ID, "execution.cancelled", 1)
			e.bothTopics(ex.ID, "approval.granted", 0)
			e.wantAudits(ex.ID, map[string]int{"execution.stale": 1})
			checkInvariant(t, e, ex.ID)
		})
	}
}

// Separation of duties (issue #17, finding 2): by default (auto) the requester of a
// HIGH plan cannot approve it while another active person could, and someone else
// can; MEDIUM plans they may confirm. Off lets them, marked as a self-approval;
// always refuses them even when nobody else could.
func TestSeparationOfDuties(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "write-note", "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	bob := e.user("bob", auth.RoleToolUser)
	high := step("mt__write-note", `{"text":"x"}`)
	medium := step("mt__add", `{"a":1,"b":1}`)

	st, err := e.svc.Settings(e.ctx)
	if err != nil || st.HighSeparation != decide.SeparationAuto {
		t.Fatalf("default separation: got %q, %v; want auto", st.HighSeparation, err)
	}
	ex := e.create(alice, high)
	_, err = e.svc.Confirm(e.ctx, alice, ex.ID, ex.ConfirmationPhrase, "")
	if fe, _ := fault.As(err); !isForbidden(err) || !strings.Contains(err.Error(), "different person") ||
		fe == nil || fmt.Sprint(fe.Details) != "map[reason:"+decide.CodeNeedsOther+"]" {
		t.Fatalf("requester approves own HIGH plan: got %v (%T), want a *ForbiddenError asking for a different person (details.reason %s)", err, err, decide.CodeNeedsOther)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.approve.refused'
		AND actor_id = $2 AND payload->>'reason' LIKE '%different person%'`, ex.ID, alice.Actor.ID); n != 1 {
		t.Errorf("refusal audit rows: got %d, want 1", n)
	}
	if got := e.get(ex.ID).Status; got != executions.AwaitingApproval {
		t.Fatalf("after the refusal: got %s, want awaiting_approval", got)
	}
	got, err := e.svc.Confirm(e.ctx, bob, ex.ID, ex.ConfirmationPhrase, "")
	if err != nil {
		t.Fatalf("another approver: %v", err)
	}
	if got.ApprovedBy == nil || *got.ApprovedBy != bob.Actor.ID || got.ApproverName != "bob" || got.SelfApproved {
		t.Errorf("approved by %v (%q, self %v), want bob, not a self-approval", got.ApprovedBy, got.ApproverName, got.SelfApproved)
	}
	m := e.create(alice, medium)
	if _, err := e.svc.Confirm(e.ctx, alice, m.ID, "", ""); err != nil {
		t.Errorf("requester confirms own MEDIUM plan: %v", err)
	}

	if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: time.Hour, HighSeparation: decide.SeparationOff}); err != nil {
		t.Fatal(err)
	}
	own := e.create(alice, high)
	got, err = e.svc.Confirm(e.ctx, alice, own.ID, own.ConfirmationPhrase, "")
	if err != nil || got.Approval != "phrase" || !got.SelfApproved {
		t.Fatalf("setting off, own HIGH plan: got %+v, %v; want approved by phrase, marked self-approved", got, err)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.approve'
		AND payload->>'self_approved' = 'true'`, own.ID); n != 1 {
		t.Errorf("self-approval audit rows: got %d, want 1", n)
	}

	if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: time.Hour, HighSeparation: "sometimes"}); !isInvalid(err) {
		t.Errorf("an unknown separation: got %v, want a *verr.Error", err)
	}
	for _, id := range []string{own.ID, ex.ID, m.ID} {
		checkInvariant(t, e, id)
	}
}

// A single-person installation still works under auto (its self-approvals marked), but
// not under always; disabled users and roles that cannot approve do not count as
// someone else who could.
func TestSeparationAlone(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "write-note")
	high := step("mt__write-note", `{"text":"x"}`)
	e.user("audrey", auth.RoleAuditor)
	gone := e.user("gone", auth.RoleAdmin)
	e.disable(gone)

	ex := e.create(e.admin, high)
	got, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, ex.ConfirmationPhrase, "")
	if err != nil || !got.SelfApproved {
		t.Fatalf("the only approver approves their own HIGH plan: got %+v, %v; want approved, marked self-approved", got, err)
	}

	if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: time.Hour, HighSeparation: decide.SeparationAlways}); err != nil {
		t.Fatal(err)
	}
	always := e.create(e.admin, high)
	if _, err := e.svc.Confirm(e.ctx, e.admin, always.ID, always.ConfirmationPhrase, ""); !isForbidden(err) {
		t.Fatalf("always, alone: got %v, want a *ForbiddenError", err)
	}

	if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: time.Hour, HighSeparation: decide.SeparationAuto}); err != nil {
		t.Fatal(err)
	}
	e.user("carol", auth.RoleToolManager) // now someone else could approve
	later := e.create(e.admin, high)
	if _, err := e.svc.Confirm(e.ctx, e.admin, later.ID, later.ConfirmationPhrase, ""); !isForbidden(err) {
		t.Fatalf("auto, with another approver: got %v, want a *ForbiddenError", err)
	}
}

// An agent's token cannot approve or reject, nor can a role without
// execution.approve; cancelling is for the requester (or their token) and approvers
// signed in as people.
func TestWhoMayDecide(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	auditor := e.user("audrey", auth.RoleAuditor)
	ex := e.create(alice, step("mt__add", `{"a":1,"b":1}`))
	demoted := alice // made an auditor since she asked: auditors change nothing
	demoted.Role = auth.RoleAuditor
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"token confirms", func() error { _, err := e.svc.Confirm(e.ctx, token(e.admin), ex.ID, "", ""); return err }},
		{"requester's token confirms", func() error { _, err := e.svc.Confirm(e.ctx, token(alice), ex.ID, "", ""); return err }},
		{"token rejects", func() error { _, err := e.svc.Reject(e.ctx, token(e.admin), ex.ID, "no"); return err }},
		{"auditor confirms", func() error { _, err := e.svc.Confirm(e.ctx, auditor, ex.ID, "", ""); return err }},
		{"auditor rejects", func() error { _, err := e.svc.Reject(e.ctx, auditor, ex.ID, "no"); return err }},
		{"auditor cancels another's plan", func() error { _, err := e.svc.Cancel(e.ctx, auditor, ex.ID, ""); return err }},
		{"requester made an auditor cancels her plan", func() error { _, err := e.svc.Cancel(e.ctx, demoted, ex.ID, ""); return err }},
		{"her token then", func() error { _, err := e.svc.Cancel(e.ctx, token(demoted), ex.ID, ""); return err }},
		// Cancelling another's waiting plan turns it down as a rejection does: a person's.
		{"approver's token cancels another's plan", func() error { _, err := e.svc.Cancel(e.ctx, token(e.admin), ex.ID, ""); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !isForbidden(err) {
				t.Errorf("got %v (%T), want a *ForbiddenError", err, err)
			}
		})
	}
	if got := e.get(ex.ID); got.Status != executions.AwaitingApproval || got.Approval != "" {
		t.Fatalf("got %s (approval %q), want awaiting_approval untouched", got.Status, got.Approval)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, ex.ID); n != 1 {
		t.Errorf("audit rows: got %d, want only the creation", n)
	}

	// A rejection needs a reason and carries it.
	var ve *verr.Error
	if _, err := e.svc.Reject(e.ctx, e.admin, ex.ID, "  "); !errors.As(err, &ve) {
		t.Fatalf("reject without a reason: got %v, want a *verr.Error", err)
	}
	if _, err := e.svc.Reject(e.ctx, e.admin, ex.ID, strings.Repeat("x", executions.MaxReason+1)); !errors.As(err, &ve) {
		t.Fatalf("reject with a long reason: got %v, want a *verr.Error", err)
	}
	got, err := e.svc.Reject(e.ctx, e.admin, ex.ID, " the numbers are wrong ")
	if err != nil || got.Status != executions.Cancelled || got.Reason != "the numbers are wrong" {
		t.Fatalf("reject: got %v, %v; want cancelled with the reason", got, err)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE topic = $1 AND kind = 'approval.rejected'
		AND payload->>'reason' = 'the numbers are wrong' AND payload->>'by' = 'boss'`, executions.Topic); n != 1 {
		t.Errorf("rejection events with the reason: got %d, want 1", n)
	}

	// The requester may cancel their own plan (a tool user, not an approver of others').
	own := e.create(alice, step("mt__add", `{"a":2,"b":2}`))
	if _, err := e.svc.Cancel(e.ctx, alice, own.ID, "changed my mind"); err != nil {
		t.Fatalf("requester cancels: %v", err)
	}
	// And an agent may cancel the plan it submitted with its token.
	mine := e.create(token(alice), step("mt__add", `{"a":3,"b":3}`))
	if mine.RequesterKind != audit.ActorToken {
		t.Errorf("requester kind: got %q, want token", mine.RequesterKind)
	}
	if _, err := e.svc.Cancel(e.ctx, token(alice), mine.ID, "agent withdrew it"); err != nil {
		t.Fatalf("token cancels its own plan: %v", err)
	}
	for _, id := range []string{ex.ID, own.ID, mine.ID} {
		checkInvariant(t, e, id)
		// A plan turned down or withdrawn never runs: its steps say so.
		if s := stepStatuses(e.steps(id)); !slices.Equal(s, []string{"skipped"}) {
			t.Errorf("steps of %s: got %v, want skipped", e.get(id).Status, s)
		}
	}
}

// MaxWaiting caps a requester's executions awaiting approval, however many are asked
// for at once: the count and the creation are one step per requester.
func TestMaxWaitingHoldsAtOnce(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := e.svc.Create(e.ctx, alice, executions.Input{MaxWaiting: 2, Source: executions.SourceMCP,
				Plan: &executions.Request{Steps: []executions.RequestStep{step("mt__add", fmt.Sprintf(`{"a":%d,"b":1}`, i))}}})
			errs <- err
		}()
	}
	refused := 0
	for range 8 {
		err := <-errs
		var tw *executions.TooManyWaitingError
		switch {
		case errors.As(err, &tw):
			refused++
		case err != nil:
			t.Fatal(err)
		}
	}
	if n := e.count(`SELECT count(*) FROM executions WHERE requester_name = 'alice' AND status = 'awaiting_approval'`); n != 2 || refused != 6 {
		t.Fatalf("waiting %d, refused %d; want 2 and 6", n, refused)
	}
	// Plans of another source (a page's) do not count against calls, nor calls against them.
	if _, err := e.svc.Create(e.ctx, alice, executions.Input{MaxWaiting: 2,
		Plan: &executions.Request{Steps: []executions.RequestStep{step("mt__add", `{"a":9,"b":9}`)}}}); err != nil {
		t.Fatalf("a plan from a page beside two waiting calls: %v", err)
	}
	// Plans past their approval time count no more, whenever the expiry job gets to them.
	e.clock.Advance(25 * time.Hour)
	if _, err := e.svc.Create(e.ctx, alice, executions.Input{MaxWaiting: 2, Source: executions.SourceMCP,
		Plan: &executions.Request{Steps: []executions.RequestStep{step("mt__add", `{"a":10,"b":1}`)}}}); err != nil {
		t.Fatalf("a call beside two expired plans not yet marked expired: %v", err)
	}
}

// A person's plan whose requester row is gone (requested_by set to NULL by its foreign
// key) does not run as the role stored with it.
func TestRequesterRowGone(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	ex := e.create(e.admin, step("mt__add", `{"a":1,"b":1}`))
	if _, err := e.pool.Exec(e.ctx, `UPDATE executions SET requested_by = NULL WHERE id = $1`, ex.ID); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash())
	if se, _ := fault.As(err); !isCode(err, executions.CodeStale) || !strings.Contains(se.Message, "account is gone") {
		t.Fatalf("confirm of a plan whose requester is gone: got %v, want it refused, saying the account is gone", err)
	}
	if got := e.get(ex.ID); got.Status != executions.Cancelled {
		t.Fatalf("got %s, want cancelled", got.Status)
	}
}
