package executions_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// The state machine has exactly the transitions of docs/architecture.md, State machines (plus cancel between steps).
func TestLegal(t *testing.T) {
	t.Parallel()
	type edge struct{ from, to executions.Status }
	want := map[edge]bool{
		{executions.Planning, executions.AwaitingApproval}:  true,
		{executions.AwaitingApproval, executions.Executing}: true,
		{executions.AwaitingApproval, executions.Cancelled}: true,
		{executions.AwaitingApproval, executions.Expired}:   true,
		{executions.Executing, executions.Success}:          true,
		{executions.Executing, executions.Failed}:           true,
		{executions.Executing, executions.Cancelled}:        true,
		{executions.Failed, executions.RollingBack}:         true,
		{executions.RollingBack, executions.RolledBack}:     true,
		{executions.RollingBack, executions.RollbackFailed}: true,
	}
	if len(executions.Statuses) != 10 {
		t.Fatalf("states: got %d, want 10", len(executions.Statuses))
	}
	legal := 0
	for _, from := range executions.Statuses {
		for _, to := range executions.Statuses {
			got := executions.Legal(from, to)
			if got != want[edge{from, to}] {
				t.Errorf("Legal(%s, %s): got %v, want %v", from, to, got, want[edge{from, to}])
			}
			if got {
				legal++
			}
		}
		if executions.Legal(from, "nonsense") || executions.Legal("nonsense", from) {
			t.Errorf("Legal accepts an unknown state next to %s", from)
		}
	}
	if legal != len(want) {
		t.Errorf("legal transitions: got %d, want %d", legal, len(want))
	}
	for _, s := range executions.Statuses {
		wantFinal := slices.Contains([]executions.Status{executions.Success, executions.RolledBack, executions.RollbackFailed,
			executions.Cancelled, executions.Expired}, s)
		if got := executions.Final(s); got != wantFinal {
			t.Errorf("Final(%s): got %v, want %v", s, got, wantFinal)
		}
	}
}

// Through the service, every decision from a state that does not allow it is a
// *ConflictError naming the state, and changes nothing.
func TestServiceRefusesIllegal(t *testing.T) {
	t.Parallel()
	type state struct {
		name   string
		status executions.Status
		id     string
	}
	var states []state

	// Without a runner: waiting, cancelled, rejected, expired and executing ones.
	e := start(t)
	e.server("mt", true, "echo", "add")
	e.setRisk("mt__add", risk.Medium)
	medium := func() string { return e.create(e.admin, step("mt__add", `{"a":1,"b":2}`)).ID }
	old := medium()
	e.clock.Advance(executions.DefaultApprovalTTL + time.Minute)
	if n, err := e.svc.ExpireDue(e.ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue: got %d, %v, want 1", n, err)
	}
	states = append(states, state{"expired", executions.Expired, old})
	cancelled := medium()
	if _, err := e.svc.Cancel(e.ctx, e.admin, cancelled, "not now"); err != nil {
		t.Fatal(err)
	}
	states = append(states, state{"cancelled", executions.Cancelled, cancelled})
	rejected := medium()
	if _, err := e.svc.Reject(e.ctx, e.admin, rejected, "no"); err != nil {
		t.Fatal(err)
	}
	states = append(states, state{"rejected", executions.Cancelled, rejected})
	executing := medium()
	if _, err := e.svc.Confirm(e.ctx, e.admin, executing, "", ""); err != nil {
		t.Fatal(err)
	}
	states = append(states, state{"executing", executions.Executing, executing})

	// With a runner: finished ones.
	f := start(t)
	f.server("mt", true, "echo", "fail")
	f.setRisk("mt__fail", risk.Low)
	f.run(nil)
	ok := f.create(f.admin, step("mt__echo", `{"message":"x"}`)).ID
	bad := f.create(f.admin, step("mt__fail", `{}`)).ID
	f.waitStatus(ok, executions.Success, 20*time.Second)
	f.waitStatus(bad, executions.Failed, 20*time.Second)

	type op struct {
		name string
		do   func(env *env, id string) error
	}
	ops := []op{
		{"confirm", func(env *env, id string) error { _, err := env.svc.Confirm(env.ctx, env.admin, id, "", ""); return err }},
		{"reject", func(env *env, id string) error { _, err := env.svc.Reject(env.ctx, env.admin, id, "no"); return err }},
		{"cancel", func(env *env, id string) error { _, err := env.svc.Cancel(env.ctx, env.admin, id, "stop"); return err }},
		{"roll back", func(env *env, id string) error {
			_, err := env.svc.Rollback(env.ctx, env.admin, id, executions.RollbackDecision{Confirmed: true})
			return err
		}},
	}
	type tc struct {
		env *env
		state
	}
	var cases []tc
	for _, s := range states {
		cases = append(cases, tc{e, s})
	}
	cases = append(cases, tc{f, state{"succeeded", executions.Success, ok}}, tc{f, state{"failed", executions.Failed, bad}})
	for _, c := range cases {
		for _, o := range ops {
			if c.status == executions.Executing && o.name == "cancel" {
				continue // legal: cancel between steps (TestCancelBetweenSteps)
			}
			if c.status == executions.Failed && o.name == "roll back" {
				continue // legal (TestRollback)
			}
			t.Run(fmt.Sprintf("%s %s", o.name, c.name), func(t *testing.T) {
				before := c.env.count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, c.id)
				err := o.do(c.env, c.id)
				conflictIn(t, err, c.status)
				if got := c.env.get(c.id).Status; got != c.status {
					t.Errorf("status: got %s, want %s", got, c.status)
				}
				if after := c.env.count(`SELECT count(*) FROM audit_log WHERE target_id = $1`, c.id); after != before {
					t.Errorf("audit rows: got %d, want %d (nothing happened)", after, before)
				}
			})
		}
	}
}

// Many random decisions, concurrent and serial, with a moving clock: whatever
// happens, no execution reaches executing without a valid approval for its exact
// plan, every recorded path follows the state machine, and every transition has its
// audit row and its events.
func TestRandomizedInvariant(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "add", "write-note")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	bob := e.user("bob", auth.RoleToolUser)
	guest := e.user("gus", auth.RoleGuest)
	if err := e.svc.SetSettings(e.ctx, admin, executions.Settings{ApprovalTTL: time.Minute, HighSeparation: decide.SeparationAlways}); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 6))
	var rmu sync.Mutex
	intn := func(n int) int { rmu.Lock(); defer rmu.Unlock(); return rng.IntN(n) }

	plans := [][]executions.RequestStep{
		{step("mt__echo", `{"message":"low"}`)},
		{step("mt__echo", `{"message":"m"}`), step("mt__add", `{"a":1,"b":2}`)},
		{step("mt__add", `{"a":2,"b":2}`), step("mt__write-note", `{"text":"high"}`)},
	}
	requesters := []executions.Caller{alice, bob}
	var ids []string
	create := func(i int) {
		ids = append(ids, e.create(requesters[i%2], plans[i%3]...).ID)
	}
	for i := range 18 {
		create(i)
	}
	callers := []executions.Caller{alice, bob, token(alice), guest, e.admin}
	phraseOf := map[string]string{}
	for _, id := range ids {
		phraseOf[id] = e.get(id).ConfirmationPhrase
	}
	var pmu sync.Mutex
	var tmu sync.Mutex
	wins := map[string]int{}
	tally := func(op string, err error) error {
		if err == nil {
			tmu.Lock()
			wins[op]++
			tmu.Unlock()
		}
		return err
	}
	expected := func(err error) bool {
		return err == nil || isConflict(err) || isForbidden(err) || isCode(err, executions.CodeWrongPhrase)
	}
	// One random operation; ok says whether its error is one the rules allow.
	do := func() error {
		pmu.Lock()
		id := ids[intn(len(ids))]
		phrase := phraseOf[id]
		pmu.Unlock()
		c := callers[intn(len(callers))]
		switch intn(10) {
		case 0, 1, 2, 3:
			if intn(3) == 0 {
				phrase = "wrong " + phrase
			}
			_, err := e.svc.Confirm(e.ctx, c, id, phrase, "")
			return tally("confirm", err)
		case 4:
			_, err := e.svc.Reject(e.ctx, c, id, "random no")
			return tally("reject", err)
		case 5:
			_, err := e.svc.Cancel(e.ctx, c, id, "random stop")
			return tally("cancel", err)
		case 6:
			n, err := e.svc.ExpireDue(e.ctx)
			tmu.Lock()
			wins["expire"] += n
			tmu.Unlock()
			return err
		case 7, 8:
			e.clock.Advance(time.Duration(intn(20)) * time.Second)
			return nil
		default:
			_, err := e.svc.Confirm(e.ctx, c, id, phrase, fmt.Sprintf("%x", intn(1<<20))) // a hash nobody saw
			return err
		}
	}
	// Rounds of concurrent operations, with new plans between them.
	for round := range 4 {
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if err := do(); !expected(err) {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: unexpected error %v (%T)", round, err, err)
		}
		pmu.Lock()
		for i := range 3 {
			create(round*3 + i)
			phraseOf[ids[len(ids)-1]] = e.get(ids[len(ids)-1]).ConfirmationPhrase
		}
		pmu.Unlock()
	}
	// And some serial ones.
	for range 60 {
		if err := do(); !expected(err) {
			t.Errorf("serial: unexpected error %v (%T)", err, err)
		}
	}

	seen := map[executions.Status]int{}
	for _, id := range ids {
		checkInvariant(t, e, id, true)
		seen[e.get(id).Status]++
	}
	t.Logf("final states: %v; decisions that won: %v", seen, wins)
}

// checkInvariant checks execution id's row and audit log; separated: HIGH plans
// needed another approver than their requester.
func checkInvariant(t *testing.T, e *env, id string, separated ...bool) {
	t.Helper()
	ex := e.get(id)
	var approvedHash []byte
	if err := e.pool.QueryRow(e.ctx, `SELECT approved_hash FROM executions WHERE id = $1`, id).Scan(&approvedHash); err != nil {
		t.Fatal(err)
	}
	where := fmt.Sprintf("execution %s (%s, %s)", id[:8], ex.Risk, ex.Status)
	approved := ex.Approval != ""
	switch ex.Status {
	case executions.AwaitingApproval, executions.Expired:
		if approved {
			t.Errorf("%s: has approval %q", where, ex.Approval)
		}
	case executions.Executing, executions.Success, executions.Failed:
		if !approved {
			t.Errorf("%s: no approval recorded", where)
		}
	}
	if approved {
		wantHow := map[string]string{"low": "policy", "medium": "confirm", "high": "phrase"}[ex.Risk]
		if ex.Approval != wantHow {
			t.Errorf("%s: approval %q, want %q", where, ex.Approval, wantHow)
		}
		if string(approvedHash) != string(ex.PlanHash) || len(ex.PlanHash) != 32 {
			t.Errorf("%s: approved hash %x, want the plan hash %x", where, approvedHash, ex.PlanHash)
		}
		if ex.ApprovedAt == nil || ex.ExpiresAt == nil || !ex.ApprovedAt.Before(*ex.ExpiresAt) {
			t.Errorf("%s: approved at %v, want before it expired at %v", where, ex.ApprovedAt, ex.ExpiresAt)
		}
		switch ex.Approval {
		case "policy":
			if ex.ApprovedBy != nil || ex.ApproverName != "policy" {
				t.Errorf("%s: policy approval by %v (%q), want nobody (policy)", where, ex.ApprovedBy, ex.ApproverName)
			}
		default:
			if ex.ApprovedBy == nil {
				t.Errorf("%s: %s approval by nobody", where, ex.Approval)
			} else if len(separated) > 0 && separated[0] && ex.Approval == "phrase" && ex.RequestedBy != nil && *ex.ApprovedBy == *ex.RequestedBy {
				t.Errorf("%s: the requester approved their own HIGH plan with separation of duties on", where)
			}
		}
	} else if approvedHash != nil || ex.ApprovedBy != nil || ex.ApprovedAt != nil {
		t.Errorf("%s: approval columns set without an approval", where)
	}
	if (ex.Risk == "high") != (ex.ConfirmationPhrase != "") {
		t.Errorf("%s: phrase %q", where, ex.ConfirmationPhrase)
	}

	// The audit log: every transition in order, each legal, ending where the row is.
	type row struct {
		Action    string          `db:"action"`
		ActorKind string          `db:"actor_kind"`
		ActorID   *string         `db:"actor_id"`
		Payload   json.RawMessage `db:"payload"`
	}
	rows, err := e.pool.Query(e.ctx, `SELECT action, actor_kind, actor_id, payload FROM audit_log
		WHERE target_type = 'execution' AND target_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	var audits []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.Action, &r.ActorKind, &r.ActorID, &r.Payload); err != nil {
			t.Fatal(err)
		}
		audits = append(audits, r)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	cur := executions.Planning
	transitions := 0
	for _, a := range audits {
		if a.Action == "execution.approve.refused" {
			continue
		}
		var p struct {
			Status   executions.Status   `json:"status"`
			From     []executions.Status `json:"from"`
			Approval string              `json:"approval"`
			PlanHash string              `json:"plan_hash"`
		}
		if err := json.Unmarshal(a.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if !executions.Legal(cur, p.Status) || !slices.Contains(p.From, cur) {
			t.Errorf("%s: audit %s moves %s → %s (from %v)", where, a.Action, cur, p.Status, p.From)
		}
		if p.Status == executions.Executing {
			if a.Action != "execution.approve" || p.Approval != ex.Approval || p.PlanHash != ex.Hash() {
				t.Errorf("%s: reached executing by %s (approval %q, hash %s), want execution.approve (%q, %s)", where,
					a.Action, p.Approval, p.PlanHash, ex.Approval, ex.Hash())
			}
			if a.ActorKind == "token" {
				t.Errorf("%s: a token approved it", where)
			}
			if ex.Approval != "policy" && (a.ActorID == nil || ex.ApprovedBy == nil || *a.ActorID != *ex.ApprovedBy) {
				t.Errorf("%s: approved in the audit log by %v, in the row by %v", where, a.ActorID, ex.ApprovedBy)
			}
		}
		cur = p.Status
		transitions++
	}
	if cur != ex.Status {
		t.Errorf("%s: the audit log ends at %s", where, cur)
	}
	// Each transition has its event on both topics (plus approval.requested for a plan
	// that waits for a person).
	want := transitions
	if ex.Risk != "low" {
		want++
	}
	for _, topic := range []string{executions.Topic, executions.TopicOf(id)} {
		if n := e.count(`SELECT count(*) FROM events WHERE topic = $1 AND payload->>'execution_id' = $2`, topic, id); n != want {
			t.Errorf("%s: events on %s: got %d, want %d", where, topic, n, want)
		}
	}
}
