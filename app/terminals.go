package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/usage"
)

// Bounds of one input's terminal.input entry: a paste of thousands of lines writes
// one entry of its first lines, and counts the rest (the audit log is append-only).
const (
	maxAuditedLines     = 64
	maxAuditedLineBytes = 16 << 10
)

// auditTerminalInput records the lines typed into a terminal by one input
// (terminal.input, one entry: its first maxAuditedLines lines, up to
// maxAuditedLineBytes, joined with newlines, and how many lines and bytes were left
// out), each "[hidden input]" when it may be a password (builtin.TypedLine.Hidden: the
// terminal had echo off, or the line followed another of the same input, "su -c id"
// then its password, whether it showed unknown), unless the line is one the terminal
// rules rate by what it does (rm -rf, curl | sh: no password looks like that; not by $
// or wildcards, which passwords hold: builtin.HiddenLineRisk), so that turning echo off
// (stty -echo) or typing after another line does not hide those. Other lines stay
// hidden however many come in a row: a refused new password is asked again without a
// visible line between. Rated lines past the bounds are kept too (input holds at most
// 100,000 characters), so that a long paste does not hide them. An error keeps the keys
// from the shell (Terminal.Input).
func (a *App) auditTerminalInput(t *builtin.Terminal, who builtin.TerminalCaller, lines []builtin.TypedLine) error {
	if a.Pool == nil || len(lines) == 0 {
		return nil
	}
	actor := audit.Caller(who.ActorKind, who.UserID, who.UserName, who.TokenID)
	if who.UserID == "" && who.UserName == "" {
		actor = audit.System
	}
	var kept, rated, ratedWhy []string
	size, omitted, omittedBytes, echoOff, unknown := 0, 0, 0, false, 0
	for _, l := range lines {
		line, hidden := l.Text, l.Hidden()
		echoOff = echoOff || l.EchoOff
		if l.AfterLine && !l.EchoOff {
			unknown++
		}
		within := len(kept) < maxAuditedLines && (len(kept) == 0 || size+len(line) <= maxAuditedLineBytes)
		why, risky := "", false
		switch {
		case hidden:
			why, risky = builtin.HiddenLineRisk(line)
		case !within:
			_, why, risky = builtin.CommandRisk(line)
		}
		if !within && !risky {
			omitted++
			omittedBytes += len(line)
			continue
		}
		// Line by line: a typed "export GH_TOKEN=…" keeps its credential out of the
		// append-only log, and a key pasted beside a command does not mask the command.
		text := usage.RedactText(line)
		if hidden {
			if risky {
				ratedWhy = append(ratedWhy, why)
			} else {
				text = "[hidden input]"
			}
		}
		if within {
			kept = append(kept, text)
			size += len(line)
		} else {
			rated = append(rated, text)
		}
	}
	payload := map[string]any{"hidden": echoOff, "source": who.Source, "kind": t.Kind, "input": strings.Join(kept, "\n")}
	if len(lines) > 1 {
		payload["lines"] = len(lines)
	}
	if unknown > 0 {
		// Lines after the first of the input, hidden (or left out past the bounds): the
		// first may have started a program that read them with echo off.
		payload["echo_unknown_lines"] = unknown
	}
	if len(ratedWhy) > 0 {
		how := "typed with echo off"
		if !echoOff {
			how = "typed after another line of the same input (whether it showed is unknown)"
		}
		payload["shown"] = how + ", and rated: " + strings.Join(ratedWhy, "; ")
	}
	if len(rated) > 0 {
		payload["rated_input"] = strings.Join(rated, "\n")
	}
	if omitted > 0 {
		payload["omitted_lines"], payload["omitted_bytes"] = omitted, omittedBytes
	}
	entries := []audit.Entry{{Actor: actor, Action: "terminal.input", TargetType: "terminal", TargetID: t.ID,
		TargetName: t.ConversationID, Payload: payload}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := db.WithTx(ctx, a.Local, func(tx pgx.Tx) error {
		_, err := audit.AppendBatch(ctx, tx, entries)
		return err
	})
	if err != nil {
		a.log.Warn("audit terminal input", "terminal", t.ID, "err", err)
	}
	return err
}

// announceTerminal publishes a terminal's change on everyone's terminals topic and its
// owner's, so /terminals shows it live. Terminals live in this process; the event
// carries the row, so a page served by any process can show it.
func (a *App) announceTerminal(t *builtin.Terminal, change builtin.TerminalChange) {
	if a.Pool == nil {
		return
	}
	cols, rows := t.Size()
	ev := events.Terminal{ID: t.ID, Kind: t.Kind, ConversationID: t.ConversationID, OwnerID: t.OwnerID, OwnerName: t.OwnerName,
		Dir: t.Dir, Command: t.Command, Started: t.Started, Exited: t.Exited(), Cols: int(cols), Rows: int(rows), Replica: a.Replicas.Name()}
	kind := map[builtin.TerminalChange]events.Kind[events.Terminal]{builtin.TerminalOpened: events.TerminalOpened,
		builtin.TerminalExited: events.TerminalExited, builtin.TerminalClosed: events.TerminalClosed}[change]
	if err := a.publishTerminal(kind, ev); err != nil {
		// Stopping: the pool may be closed before the last terminals are.
		a.log.Debug("announce a terminal", "terminal", t.ID, "err", err)
	}
}

func (a *App) publishTerminal(kind events.Kind[events.Terminal], ev events.Terminal) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.WithTx(ctx, a.Local, func(tx pgx.Tx) error {
		if _, err := kind.Publish(ctx, tx, builtin.TerminalsTopic, ev); err != nil {
			return err
		}
		if ev.OwnerID == "" {
			return nil
		}
		_, err := kind.Publish(ctx, tx, builtin.OwnerTopic(ev.OwnerID), ev)
		return err
	})
}

// sweepTerminals ends, every few seconds, the records of the terminals of replicas not
// seen for replicas' DeadAfter (their processes died with them: children in sessions of
// their own, killed as their parent dies or by the orphan cleanup of its next start),
// and tells the /terminals pages. Each replica sweeps; each record is ended once.
func (a *App) sweepTerminals(ctx context.Context) error {
	dead := a.Replicas.DeadAfter()
	store := a.Terminals.Store()
	t := time.NewTicker(a.Replicas.Every())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// Every terminal this replica holds, ended ones too: a record whose write failed,
		// or that another replica ended as orphaned while this one was not seen, is put
		// right here, where the terminal's state is known.
		fixed, err := store.Reconcile(ctx, a.Terminals.List())
		if err != nil && ctx.Err() == nil {
			a.log.Warn("terminals: put right the records of this replica's terminals", "err", err)
		}
		for _, r := range fixed {
			t := a.Terminals.Get(r.ID)
			if t == nil {
				continue
			}
			if r.Ended() {
				a.log.Info("the record of a terminal of this replica was put right: it ended", "terminal", r.ID, "reason", r.EndedReason)
				a.announceTerminal(t, builtin.TerminalExited)
				continue
			}
			a.log.Warn("a terminal of this replica had no record, or had been taken for stopped while the replica was not seen; it runs", "terminal", r.ID)
			// Pages were told it ended, or nothing: tell them it runs.
			a.announceTerminal(t, builtin.TerminalOpened)
		}
		if !a.Replicas.Steady() {
			continue // just back from a database outage, every replica looks stopped
		}
		ended, err := store.EndOrphaned(ctx, dead)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("terminals: end those of stopped replicas", "err", err)
		}
		for _, r := range ended {
			a.log.Info("terminal ended with its replica", "terminal", r.ID, "replica", r.Replica)
			ev := events.Terminal{ID: r.ID, Kind: r.Kind, ConversationID: r.ConversationID, OwnerID: r.OwnerID, OwnerName: r.OwnerName,
				Dir: r.Dir, Command: r.Command, Started: r.StartedAt, Exited: true, Cols: r.Cols, Rows: r.Rows, Replica: r.Replica,
				ReplicaStopped: true}
			if err := a.publishTerminal(events.TerminalExited, ev); err != nil {
				a.log.Warn("announce a terminal", "terminal", r.ID, "err", err)
			}
		}
	}
}

// endDisabled ends what the people whose account is disabled left running: their
// terminals of this replica (each replica ends its own processes), and the questions
// waiting for their answer (every replica tries; each question is cancelled once). It
// follows user.changed on the sessions topic and asks auth whether the account is
// disabled now: the event only says whom it is about. It also ends the terminals of
// this replica whose owner, still enabled, may no longer call terminal_operations
// (endRevoked): on user.changed (a role changed) for that person, and on every change the
// router follows (the tool or its server disabled, a per-user permission) for everyone.
func (a *App) endDisabled(ctx context.Context) error {
	var mu sync.Mutex
	due := map[string]bool{}
	// everyone: look at every owner's terminals; again: look once more after
	// revokeRecheck, for a terminal whose call the router let through just before
	// the change and that started after the first look.
	everyone, again := false, false
	kick := make(chan struct{}, 1)
	wake := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	// The watch runs with the bus locked: it only notes whom to look at.
	sub := a.Bus.Watch(func(ev events.Event) {
		var s events.Session
		if ev.Kind != string(events.UserChanged) || ev.Decode(&s) != nil || s.UserID == "" {
			return
		}
		mu.Lock()
		due[s.UserID] = true
		mu.Unlock()
		wake()
	}, auth.SessionsTopic)
	defer sub.Close()
	if a.Terminals != nil && a.Router != nil {
		// Called once the router forgot what it knew, so Admits answers with the change.
		defer a.Router.OnChange(func() {
			mu.Lock()
			everyone, again = true, true
			mu.Unlock()
			wake()
		})()
	}
	retry := func(id string) {
		mu.Lock()
		if id == "" {
			everyone = true
		} else {
			due[id] = true
		}
		mu.Unlock()
		time.AfterFunc(5*time.Second, wake)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		}
		mu.Lock()
		ids := slices.Collect(maps.Keys(due))
		clear(due)
		all, twice := everyone, again
		everyone, again = false, false
		mu.Unlock()
		for _, id := range ids {
			if err := a.endFor(ctx, id); err != nil && ctx.Err() == nil {
				// The database is away: look again in a while, so a disable is not missed.
				a.log.Warn("end what a disabled person left running; trying again", "user", id, "err", err)
				retry(id)
			}
		}
		if !all {
			continue
		}
		if err := a.endRevoked(ctx, ""); err != nil && ctx.Err() == nil {
			a.log.Warn("end the terminals of people who may no longer use them; trying again", "err", err)
			retry("")
		}
		if twice {
			time.AfterFunc(revokeRecheck, func() {
				mu.Lock()
				everyone = true
				mu.Unlock()
				wake()
			})
		}
	}
}

// revokeRecheck is how long after a change of who may use terminal_operations the
// terminals are looked at once more: a call the router admitted just before it may
// start its terminal after the first look (a create_session waits for its old session
// to close, up to seconds).
const revokeRecheck = 5 * time.Second

// endFor ends user id's terminals of this replica and cancels their pending questions
// when their account is disabled; enabled, it lets them start terminals again (ending
// them bars new ones: Terminals.EndOwnedBy), and ends those they may no longer use (their
// role changed: endRevoked).
func (a *App) endFor(ctx context.Context, id string) error {
	u, err := a.Auth.GetUser(ctx, id)
	if errors.Is(err, auth.ErrNotFound) {
		return nil // deleted: nothing of theirs is left to end
	}
	if err != nil {
		return err
	}
	if !u.Disabled() {
		if a.Terminals != nil {
			a.Terminals.Readmit(u.ID)
		}
		return a.endRevoked(ctx, u.ID)
	}
	if a.Terminals != nil {
		for _, t := range a.Terminals.EndOwnedBy(u.ID) {
			a.log.Info("terminal ended: its owner's account was disabled", "terminal", t.ID, "user", u.Username)
		}
	}
	cancelled, err := a.Grants.CancelAsked(ctx, u.ID)
	for _, c := range cancelled {
		a.log.Info("question cancelled: the person asked was disabled", "collaboration", c.ID, "user", u.Username)
	}
	return err
}

// endRevoked ends the running terminals of this replica whose owner (only that person
// when only is set) may no longer call terminal_operations, as the router would refuse
// their call now (router.Admits: the tool or its server disabled, their role without
// tool.use, the tool refused to them): what they left running must not outlive their
// access, and a busy session never reaches its idle timeout. The system's terminals,
// and those of people deleted or disabled (endFor's), are left alone. An error (the
// database did not answer) ends nothing: the caller looks again.
func (a *App) endRevoked(ctx context.Context, only string) error {
	if a.Terminals == nil || a.Router == nil {
		return nil
	}
	owners := map[string]bool{}
	for _, t := range a.Terminals.List() {
		if t.OwnerID != "" && !t.Exited() && (only == "" || t.OwnerID == only) {
			owners[t.OwnerID] = true
		}
	}
	var errs []error
	for id := range owners {
		u, err := a.Auth.GetUser(ctx, id)
		if errors.Is(err, auth.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if u.Disabled() {
			continue // endFor ends them, and bars new ones
		}
		err = a.Router.Admits(ctx, audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}, u.Role, builtin.TerminalToolName)
		var refused *router.Error
		if err == nil {
			continue
		}
		if !errors.As(err, &refused) || !slices.Contains([]string{router.CodeToolDisabled, router.CodeForbidden,
			router.CodeToolNotFound}, refused.Code) {
			errs = append(errs, err) // not known to be refused (the database away, say): not ended
			continue
		}
		for _, t := range a.Terminals.EndRevoked(u.ID) {
			a.log.Info("terminal ended: its owner may no longer use terminal_operations", "terminal", t.ID, "user", u.Username,
				"why", refused.Message)
		}
	}
	return errors.Join(errs...)
}

// terminalClient sends terminal operations to the replicas that run the terminals
// (replicahop.Transport: bounded waits, no proxy).
var terminalClient = &http.Client{Timeout: 30 * time.Second, Transport: replicahop.Transport}

// maxTerminalAnswer bounds the answer of the replica that runs a terminal. The most
// output an answer carries is a terminal's buffer (builtin.TerminalOptions.BufferBytes,
// left at its 1 MiB default, and run_command's largest maxOutput), sent twice (the text
// and structuredContent.output), each byte up to six in JSON (\ufffd for one that is not
// UTF-8, \u0000 for a control byte); the rest is a few fields.
const maxTerminalAnswer = 2*6*(1<<20) + 64<<10

// forwardTerminalOp runs a terminal_operations operation on the replica that runs the
// terminal (POST /internal/v1/terminals/:id/op, signed as a replica hop): the router
// of this replica already checked, rated, approved and audits the call; only the
// operation on the process moves. Why the owner did not answer is logged here: the
// agent is only told that it did not (its address and refusal are no business of it).
func (a *App) forwardTerminalOp(ctx context.Context, rec builtin.TerminalRecord, op string, c builtin.Call, args json.RawMessage) (*mcp.CallToolResult, error) {
	res, err := a.sendTerminalOp(ctx, rec, op, c, args)
	if errors.Is(err, builtin.ErrReplicaGone) && !a.Replicas.Steady() {
		// Just after this replica's own heartbeats were interrupted every replica
		// looks stopped: not gone yet.
		err = fmt.Errorf("replica %s was not seen lately, and this replica cannot tell yet whether it stopped", rec.Replica)
	}
	if err != nil && !errors.Is(err, builtin.ErrReplicaGone) {
		a.log.Warn("forward a terminal operation to the replica that runs it", "terminal", rec.ID, "replica", rec.Replica, "op", op, "err", err)
	}
	return res, err
}

func (a *App) sendTerminalOp(ctx context.Context, rec builtin.TerminalRecord, op string, c builtin.Call, args json.RawMessage) (*mcp.CallToolResult, error) {
	who := c.UserID
	if who == "" {
		who = "name:" + c.UserName
	}
	if !a.terminalOpHops.Allow(who) {
		// Not sent: the agent may simply try again in a moment.
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"sessionId: session %s runs on replica %s, and too many operations on sessions of other replicas came from you just now; "+
				"nothing was sent: wait a moment and try again", rec.ID, rec.Replica)}}}, nil
	}
	owner, err := a.Terminals.Store().Owner(ctx, rec)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(builtin.TerminalOpRequest{Operation: op, Arguments: args, Call: c.Meta})
	if err != nil {
		return nil, err
	}
	// The router of this replica already recorded the call with its caller; the owner
	// only runs the operation.
	req, err := a.replicaRequest(ctx, owner, http.MethodPost, "/internal/v1/terminals/"+url.PathEscape(rec.ID)+"/op", body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := terminalClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxTerminalAnswer+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxTerminalAnswer {
		return nil, fmt.Errorf("replica %s's answer is over %d bytes, more than any of its terminals' output makes", owner.Name, maxTerminalAnswer)
	}
	if res.StatusCode == http.StatusMisdirectedRequest {
		return nil, fmt.Errorf("%w: %s (address %s)", builtin.ErrNotRun, replicahop.MisdirectedText(owner.Name, "terminal "+rec.ID), owner.Address)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		// The owner's own answer that it does not hold the terminal; not a proxy's 404,
		// nor that of an owner without the route (an earlier release, mid-upgrade),
		// whose session may well run. An owner of an earlier release that has the route
		// says not_found with the message of its terminal check.
		if res.StatusCode == http.StatusNotFound && (e.Error.Code == builtin.TerminalNotHereCode ||
			e.Error.Code == "not_found" && e.Error.Message == "terminal not found") {
			return nil, builtin.ErrOwnerForgot
		}
		if e.Error.Message == "" {
			e.Error.Message = strings.TrimSpace(string(raw))
		}
		err := fmt.Errorf("replica %s answered %d: %s", owner.Name, res.StatusCode, e.Error.Message)
		switch res.StatusCode {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable:
			// Refused before the operation ran (the request, the hop, the owner busy).
			err = fmt.Errorf("%w: %w", builtin.ErrNotRun, err)
		}
		return nil, err
	}
	var out mcp.CallToolResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("replica %s's answer: %w", owner.Name, err)
	}
	return &out, nil
}

// replicaRequest is a request of method for path at replica owner, with body, signed as
// a hop from this replica (internal/replicahop): the other replica's internal routes
// take nothing else.
func (a *App) replicaRequest(ctx context.Context, owner replicas.Replica, method, path string, body []byte) (*http.Request, error) {
	if owner.Address == "" {
		return nil, fmt.Errorf("replica %s has no address other replicas reach it at (--advertise-url)", owner.Name)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(owner.Address, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	replicahop.SignRequest(a.Keys, replicahop.Hop{From: a.Replicas.Name(), To: owner.ID}, req, body, a.Replicas.Now())
	return req, nil
}
