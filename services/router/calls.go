package router

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
)

// callRecord writes what happens to one call: its audit row and events, its usage row
// and its runtime state.
type callRecord struct {
	r        *Router
	c        Call
	id       string
	e        *entry
	args     json.RawMessage // the caller's arguments, before configured values (which may be secret)
	start    time.Time
	attempts int
	running  bool
	redacted json.RawMessage // args with secrets masked, made once for the audit and usage rows
	argsCut  int             // the masked args' size when redacted is cut from them, else 0
	// selfApproved: a high-risk call approved by its own requester, nobody else could.
	selfApproved bool
	// vetting: a test run of a tool never enabled (Router.vetting).
	vetting bool
	// auditRefusal: the refusal is audited whatever its code (a risky call the check
	// before approval turned away: Options.Preflight).
	auditRefusal bool
	// charged: the call already spent one of its user's calls (it asked for approval),
	// so its refusal spends none.
	charged bool
	// withheldBefore counts the refusals of the caller held back (not recorded) since
	// its last recorded one; the records of this one say so.
	withheldBefore int64
	display        *string // displayLine's, made once

	pmu          sync.Mutex
	lastProgress time.Time
	finalSent    bool // a progress notification saying the work is done was let through
}

// refusedAudited are the refusals worth an audit row: someone tried to do what they may not.
var refusedAudited = map[string]bool{CodeForbidden: true, CodeToolDisabled: true, CodeApprovalRequired: true}

// base is what every event of the call says about it.
func (cr *callRecord) base() events.Call {
	return events.Call{CallID: cr.id, ToolID: cr.e.t.ID, Tool: cr.e.t.QualifiedName(), Source: cr.c.Source,
		Actor: cr.c.Actor.Name, Risk: string(cr.e.risk.Level), ConversationID: cr.c.ConversationID, Display: cr.displayLine()}
}

// displayLine is what the call does in a short line (Options.Display), or "".
func (cr *callRecord) displayLine() string {
	if cr.display != nil {
		return *cr.display
	}
	line := ""
	if cr.r != nil && cr.r.opts.Display != nil {
		name := cr.e.t.QualifiedName()
		if op, ok := strings.CutPrefix(cr.c.Tool, name+"."); ok {
			name += "." + op
		}
		line = cr.r.opts.Display(name, cr.args)
	}
	cr.display = &line
	return line
}

// drafts are an event of the call on Topic and on the call's own topic, if it has one.
func drafts[P any](cr *callRecord, kind events.Kind[P], payload P) []events.Draft {
	ds := []events.Draft{kind.Draft(Topic, payload)}
	if cr.c.Topic != "" && cr.c.Topic != Topic {
		ds = append(ds, kind.Draft(cr.c.Topic, payload))
	}
	return ds
}

func (cr *callRecord) entry(action string, extra map[string]any) audit.Entry {
	p := map[string]any{"call_id": cr.id, "source": cr.c.Source, "risk": cr.e.risk.Level}
	if cr.c.ConversationID != "" {
		p["conversation_id"] = cr.c.ConversationID
	}
	if cr.c.Client != "" {
		p["client"] = cr.c.Client
	}
	p["arguments"] = cr.redactedArgs()
	if d := cr.displayLine(); d != "" {
		p["display"] = d
	}
	if len(cr.e.configured) > 0 {
		p["configured"] = cr.e.configured
	}
	for k, v := range extra {
		p[k] = v
	}
	return audit.Entry{Actor: cr.c.Actor, Action: action, TargetType: "tool", TargetID: cr.e.t.ID,
		TargetName: cr.e.t.QualifiedName(), Payload: p}
}

// redactedArgs are the caller's arguments as the records keep them: secrets masked,
// the parameters the tool's schema marks secret too, large ones cut keeping their
// structure (usage.ForLog: cut as text, they would be shown as one long string).
func (cr *callRecord) redactedArgs() json.RawMessage {
	if cr.redacted == nil {
		cr.redacted = json.RawMessage("{}")
		if len(cr.args) > 0 {
			args := tools.MaskArgs(cr.args, cr.e.secretArgs)
			if len(args) <= usage.MaxJSONBytes {
				cr.redacted = usage.Redact(args)
			} else {
				out, cut := usage.ForLog(args) // (masked by ForLog, cut or not)
				cr.redacted = out
				if cut {
					cr.argsCut = len(args)
				}
			}
		}
	}
	return cr.redacted
}

// usageEntry is the call's usage row; responseCut is the response's size when it was
// cut (usage.ForLog), else 0.
func (cr *callRecord) usageEntry(success bool, code string, response, errJSON json.RawMessage, responseCut int, ran bool) usage.Entry {
	u := usage.Entry{ToolID: cr.e.t.ID, UserID: cr.c.Actor.ID, Actor: cr.c.Actor.Name, Source: cr.c.Source,
		UsedAt: cr.start, Success: success, ErrorCode: code, Request: cr.redactedArgs(), Response: response, Error: errJSON}
	if ran {
		d := ms(time.Since(cr.start))
		u.DurationMS = &d
	}
	meta := map[string]any{"call_id": cr.id}
	if cr.withheldBefore > 0 {
		meta["withheld_before"] = cr.withheldBefore
	}
	if cr.attempts > 1 {
		meta["attempts"] = cr.attempts
	}
	if cr.c.ConversationID != "" {
		meta["conversation_id"] = cr.c.ConversationID
	}
	if cr.c.Client != "" {
		meta["client"] = cr.c.Client
	}
	if cr.argsCut > 0 {
		meta[usage.MetaRequestBytes] = cr.argsCut
	}
	if responseCut > 0 {
		meta[usage.MetaResponseBytes] = responseCut
	}
	u.Metadata, _ = json.Marshal(meta)
	return u
}

// approvalOf is what let call c of e through, as approve and consent decide it: a
// step's execution, the policy for LOW, a confirm for MEDIUM, the phrase for HIGH.
// Read from the level, not from what c carries: a MEDIUM call that also carries a
// phrase (the test panel keeps one typed for another operation) ran on its confirm.
func approvalOf(c Call, e *entry) string {
	switch {
	case c.Approval.Execution != "" && c.Source == SourceExecution:
		return "execution:" + c.Approval.Execution
	case e.risk.Level == risk.Low:
		return "policy"
	case e.risk.Level == risk.Medium:
		return "confirmed"
	}
	return "phrase"
}

// commit is how the call's records may commit: asynchronously for a LOW call, whose
// records a crash of the database host in the fraction of a second after the commit
// may lose (docs/security.md, Durability of records); synchronously for MEDIUM and
// HIGH calls, whose records stand beside an approval.
func (cr *callRecord) commit() db.Commit {
	if cr.e.risk.Level == risk.Low {
		return db.Asynchronous
	}
	return db.Synchronous
}

// refused records a call the router turned away and returns err carrying the call id.
func (cr *callRecord) refused(ctx context.Context, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	e.CallID = cr.id
	if e.Code == CodeRateLimited {
		cr.observe(e.Code, false, 0)
		return err // a flood of refusals must not become a flood of writes
	}
	if rl := cr.charge(e); rl != nil {
		cr.observe(rl.Code, false, 0)
		return rl
	}
	cr.observe(e.Code, false, 0)
	errJSON, _ := json.Marshal(map[string]any{"code": e.Code, "message": e.Message, "details": e.Details})
	j := &job{usage: []usage.Entry{cr.usageEntry(false, e.Code, nil, errJSON, 0, false)}, commit: cr.commit()}
	if refusedAudited[e.Code] || cr.auditRefusal {
		// A refusal in the audit log is someone trying what they may not: kept synchronously.
		j.commit = db.Synchronous
		extra := map[string]any{"code": e.Code, "reason": usage.RedactText(e.Message)}
		if cr.withheldBefore > 0 {
			extra["withheld_before"] = cr.withheldBefore // refusals of this caller not recorded one by one
		}
		refusal := cr.entry("tool.call.refused", extra)
		refusal.Result = audit.ResultDenied
		j.audits = []audit.Entry{refusal}
	}
	// Recorded whether or not the caller is still there: one who hangs up at once must
	// not leave half their refused attempts unrecorded.
	cr.submitted(cr.r.rec.submit(context.WithoutCancel(ctx), j, false), "refused")
	return err
}

// charge spends one of the caller's calls on refusal e, as a call would: a caller
// looping on a call it may not make is slowed like one making calls, and past its
// limit its refusals are answered rate_limited and not recorded one by one (they are
// counted: the caller's next recorded refusal says how many were held back, and Run
// logs the total). It returns that rate_limited answer, or nil when e is recorded.
func (cr *callRecord) charge(e *Error) *Error {
	r := cr.r
	u := r.users.entry(userKey(cr.c.Actor))
	if u == nil || cr.charged {
		return nil
	}
	wait, which := take(u.lim)
	if which < 0 {
		cr.withheldBefore = u.withheld.Swap(0)
		return nil
	}
	if u.withheld.Add(1) == 1 {
		r.log.Warn("router: refused calls of one caller are no longer each recorded (rate limit)",
			"actor", userKey(cr.c.Actor), "tool", cr.e.t.QualifiedName(), "code", e.Code)
	}
	r.withheld.Add(1)
	rl := fail(CodeRateLimited, "you have made too many calls that were refused; try again in %s (this one: %s)",
		wait.Round(time.Millisecond), e.Message)
	rl.RetryAfter, rl.CallID = wait, cr.id
	return rl
}

// observe tells the router's observer how the call ended (ObserveCalls).
func (cr *callRecord) observe(outcome string, ran bool, seconds float64) {
	if fn := cr.r.observer.Load(); fn != nil {
		(*fn)(CallObservation{Server: cr.e.t.Server, Outcome: outcome, Ran: ran, Seconds: seconds})
	}
}

// submitted logs a record of the call that could not be queued: the router had
// stopped (a call that outlived the wait for calls in flight), or the caller gave up.
func (cr *callRecord) submitted(err error, outcome string) {
	switch {
	case err == nil:
	case errors.Is(err, errStopped):
		cr.r.log.Warn("router: a call's record was not written: the router had stopped",
			"tool", cr.e.t.QualifiedName(), "call_id", cr.id, "outcome", outcome)
	default: // the caller of a refused call gave up before its record was queued
		cr.r.log.Debug("router: a call's record was not written", "tool", cr.e.t.QualifiedName(), "call_id", cr.id,
			"outcome", outcome, "err", err)
	}
}

// started makes the call's audit row durable and announces it; only then may it run.
func (cr *callRecord) started(ctx context.Context) error {
	rt := cr.r.setRuntime(cr.e.t.ID, StateExecuting, 1, "", 0)
	extra := map[string]any{"approval": approvalOf(cr.c, cr.e)}
	if cr.selfApproved {
		extra["self_approved"] = true
	}
	if cr.vetting {
		extra["vetting"] = true // a test run of a tool never enabled
	}
	j := &job{audits: []audit.Entry{cr.entry("tool.call", extra)},
		drafts: drafts(cr, events.ToolStarted, events.CallStarted{Call: cr.base(), Runtime: rt}), commit: cr.commit()}
	if err := cr.r.rec.submit(ctx, j, true); err != nil {
		cr.r.setRuntime(cr.e.t.ID, StateError, -1, "could not be recorded", 0)
		if ctx.Err() != nil {
			return errorOf(CodeCancelled, "the caller cancelled the call").call(cr.id)
		}
		cr.r.log.Error("router: audit row not written; call refused", "tool", cr.e.t.QualifiedName(), "err", err)
		return errorOf(CodeUnavailable, "the call was not run because its audit record could not be written; try again shortly").call(cr.id)
	}
	cr.running = true
	return nil
}

// progress announces a progress notification: at most ten a second per call, plus the
// first that says the work is done (the server sets both numbers, so "done" cannot let
// every one through); dropped, not waited for, when the recorder is full.
func (cr *callRecord) progress(p Progress) {
	cr.pmu.Lock()
	now := time.Now()
	final := p.Total > 0 && p.Progress >= p.Total && !cr.finalSent
	if !final && now.Sub(cr.lastProgress) < 100*time.Millisecond {
		cr.pmu.Unlock()
		return
	}
	cr.lastProgress = now
	cr.finalSent = cr.finalSent || final
	cr.pmu.Unlock()
	if p.Message != "" {
		p.Message = usage.RedactText(p.Message) // every viewer of its execution reads it
	}
	payload := events.CallOutput{Call: cr.base(), Progress: p}
	cr.r.rec.offer(&job{drafts: drafts(cr, events.ToolOutput, payload), commit: cr.commit()})
}

func (cr *callRecord) touch() []string {
	r := cr.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.touched[cr.e.t.ID]) < time.Minute {
		return nil
	}
	r.touched[cr.e.t.ID] = time.Now()
	return []string{cr.e.t.ID}
}

// failed records a call that ran (or tried to) and did not complete.
func (cr *callRecord) failed(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		e = errorOf(CodeUpstream, registry.ClipError(err.Error())).ran()
	}
	e.CallID = cr.id
	elapsed := time.Since(cr.start)
	cr.observe(e.Code, e.Ran, elapsed.Seconds())
	d := ms(elapsed)
	// Shown to others (the execution's log, the tool's last error): what looks like a
	// credential is masked, as in the audit row; the caller gets e as it is.
	shown := usage.RedactText(e.Message)
	rt := cr.r.setRuntime(cr.e.t.ID, StateError, -1, shown, d)
	p := events.CallFailed{Call: cr.base(), Code: e.Code, Message: shown, DurationMS: d, Runtime: rt}
	errJSON, _ := json.Marshal(map[string]any{"code": e.Code, "message": e.Message, "details": e.Details})
	// A call that never reached the server (its circuit open, the server not connected,
	// its approval stale) has no duration: the statistics count calls the tool saw.
	cr.submitted(cr.r.rec.submit(context.Background(), &job{usage: []usage.Entry{cr.usageEntry(false, e.Code, nil, errJSON, 0, e.Ran)},
		audits: []audit.Entry{cr.failure(e.Code, e.Message, d)},
		drafts: drafts(cr, events.ToolFailed, p), touch: cr.touch(), at: time.Now(), commit: cr.commit()}, false), "failed")
	return e
}

// maxAuditMessage caps the message of a failed call's audit row, in characters.
const maxAuditMessage = 500

// failure is the audit row of a call that ran and did not succeed (the router failed it,
// or the tool answered with an error). The call's tool.call row is written before the
// call and cannot say how it ended; this one does, as result failure, so the audit
// log's failure filter finds failed calls. message has configured secrets masked
// already; credential-shaped words (a key the caller passed, echoed by the server) are
// masked here, as the usage log masks them, and it is capped.
func (cr *callRecord) failure(code, message string, durationMS float64) audit.Entry {
	message = usage.RedactText(message)
	if r := []rune(message); len(r) > maxAuditMessage {
		message = string(r[:maxAuditMessage]) + "…"
	}
	p := map[string]any{"call_id": cr.id, "source": cr.c.Source, "code": code, "message": message, "duration_ms": durationMS}
	if cr.attempts > 1 {
		p["attempts"] = cr.attempts
	}
	if cr.c.ConversationID != "" {
		p["conversation_id"] = cr.c.ConversationID
	}
	return audit.Entry{Actor: cr.c.Actor, Action: "tool.call.failed", TargetType: "tool", TargetID: cr.e.t.ID,
		TargetName: cr.e.t.QualifiedName(), Payload: p, Result: audit.ResultFailure}
}

// completed records a call that returned a result (an error result too).
func (cr *callRecord) completed(res *Result) {
	state := StateCompleted
	if res.IsError {
		state = StateError
	}
	// Joined once and clipped: the runtime's last error is shown and broadcast, and a
	// result may be megabytes.
	text := TextOfMax(res.Content, maxRuntimeText)
	if res.IsError {
		text = usage.RedactText(text) // as a failure's message is
	}
	rt := cr.r.setRuntime(cr.e.t.ID, state, -1, text, res.DurationMS)
	p := events.CallCompleted{Call: cr.base(), IsError: res.IsError, DurationMS: res.DurationMS, Runtime: rt, Attempts: res.Attempts}
	if s := text; s != "" {
		if !res.IsError { // (an error's text is masked above)
			// Every viewer of its execution reads it in the log: a key the tool created
			// is masked, as the step's result is for all but its requester. Before the
			// cut: JSON cut short is no longer read as JSON.
			s = usage.RedactText(s)
		}
		if r := []rune(s); len(r) > 200 {
			s = string(r[:200])
			// Not the word cut in two: a credential cut short may not look like one.
			if i := strings.LastIndexAny(s, " \t\r\n"); i > 0 {
				s = s[:i]
			}
			s += "…"
		}
		p.Summary = s
	}
	resp, respCut := responseForLog(res)
	code := ""
	var audits []audit.Entry
	if res.IsError {
		code = "tool_error"
		audits = []audit.Entry{cr.failure(code, p.Summary, res.DurationMS)}
	}
	cr.observe(cmp.Or(code, "success"), true, res.DurationMS/1000)
	cr.submitted(cr.r.rec.submit(context.Background(), &job{usage: []usage.Entry{cr.usageEntry(!res.IsError, code, resp, nil, respCut, true)},
		audits: audits, drafts: drafts(cr, events.ToolCompleted, p), touch: cr.touch(), at: time.Now(), commit: cr.commit()}, false), "completed")
}

// responseForLog is res as its usage row keeps it (usage.ForLog of its content and
// structured content as JSON) and, when that was cut, the JSON's length. A large result
// is cut without being encoded whole and decoded again: a 12 MiB text cost 80 MiB more
// of allocations that way.
func responseForLog(res *Result) (json.RawMessage, int) {
	form, size, ok := logForm(res)
	if !ok || size <= usage.MaxJSONBytes {
		// Small (stored as it is, masked when read), or not as logForm can build it.
		resp, _ := json.Marshal(map[string]any{"content": res.Content, "structured_content": res.StructuredContent})
		if len(resp) <= usage.MaxJSONBytes {
			return resp, 0
		}
		size = len(resp)
		resp, cut := usage.ForLog(resp)
		if !cut {
			return resp, 0
		}
		return resp, size
	}
	resp, cut := usage.ForLogValue(form)
	if !cut {
		return resp, 0
	}
	return resp, size
}

// logForm is what decoding the JSON of res's content and structured content gives
// (usage.ForLogValue), built from res with its strings shared, and that JSON's length;
// ok is false for a string that is not valid UTF-8 (its JSON would not decode to it).
func logForm(res *Result) (form any, size int, ok bool) {
	var content any
	if res.Content != nil {
		items := make([]any, len(res.Content))
		for i, c := range res.Content {
			if items[i], ok = contentForm(c); !ok {
				return nil, 0, false
			}
		}
		content = items
	}
	m := map[string]any{"content": content, "structured_content": nil}
	size = usage.JSONLen(m)
	if len(res.StructuredContent) > 0 {
		// Its length as json.Marshal writes it (compact, escaped for HTML).
		sc, err := json.Marshal(res.StructuredContent)
		v, decoded := usage.Decode(sc)
		if err != nil || !decoded {
			return nil, 0, false
		}
		m["structured_content"], size = v, size-len("null")+len(sc)
	}
	return m, size, true
}

// contentForm is c as decoding its JSON gives it (logForm).
func contentForm(c Content) (map[string]any, bool) {
	m := map[string]any{"type": c.Type}
	valid := utf8.ValidString(c.Type)
	put := func(m map[string]any, k, v string) {
		if v != "" {
			m[k] = v
			valid = valid && utf8.ValidString(v)
		}
	}
	put(m, "text", c.Text)
	put(m, "data", c.Data)
	put(m, "mimeType", c.MIMEType)
	put(m, "uri", c.URI)
	put(m, "name", c.Name)
	put(m, "title", c.Title)
	put(m, "description", c.Description)
	if c.Size != nil {
		m["size"] = json.Number(strconv.FormatInt(*c.Size, 10))
	}
	if r := c.Resource; r != nil {
		rm := map[string]any{"uri": r.URI}
		valid = valid && utf8.ValidString(r.URI)
		put(rm, "mimeType", r.MIMEType)
		put(rm, "text", r.Text)
		put(rm, "blob", r.Blob)
		m["resource"] = rm
	}
	return m, valid
}
