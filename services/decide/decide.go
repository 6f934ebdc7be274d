// Package decide is the one answer to "who may decide" (docs/security.md, Who decides): approving or
// rejecting a plan, confirming a risky call in the test panel, rolling an execution
// back. Decisions belong to people: only a person's browser session decides, never an
// API token, and only with a role that may approve executions. A high-risk decision
// needs someone other than the person who asked for it whenever another active
// person could make it, so a single-person installation still works (its
// self-approvals are marked as such), and the separation setting can make the rule
// stricter (always) or turn it off.
package decide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
)

// Separation is when a high-risk decision needs someone other than its requester.
type Separation string

// The separation settings.
const (
	// SeparationAuto: whenever another active person could decide (the default).
	SeparationAuto Separation = "auto"
	// SeparationAlways: always; a single-person installation cannot approve HIGH.
	SeparationAlways Separation = "always"
	// SeparationOff: never; the requester may approve their own high-risk plan.
	SeparationOff Separation = "off"
)

// Valid reports whether s is a known setting.
func (s Separation) Valid() bool {
	return s == SeparationAuto || s == SeparationAlways || s == SeparationOff
}

// SettingKey is the settings row that holds the separation (the settings table is
// shared with the execution settings, saved together on one page).
const SettingKey = "approvals.high_separation"

// Decision is one decision someone is about to make.
type Decision struct {
	// Actor is who decides; Role the role they act with now.
	Actor audit.Actor
	Role  auth.Role
	// Requester is the user id of whoever asked for what is decided ("" for nobody,
	// e.g. a system request).
	Requester string
	// Level is the risk decided on: HIGH brings separation of duties. Leave it empty
	// for decisions that run nothing (a rejection).
	Level risk.Level
	// Verb says what is decided, for messages ("approve executions").
	Verb string
	// Vetting: a test run of a tool nobody can use yet (not enabled), by someone who
	// may enable tools. Running it is how a tool is vetted, and nobody else can call
	// it until it is enabled, so separation of duties does not apply (unless it is set
	// to always); a high-risk run is still marked self-approved.
	Vetting bool
}

// Verdict is a decision allowed.
type Verdict struct {
	// SelfApproved: the requester decided on their own high-risk request, because
	// nobody else could (or the setting is off); the audit row says so.
	SelfApproved bool
}

// CodeNeedsOther is the code of a decision the actor could make, but not on their own
// request: someone else must (the caller can offer to ask for that approval).
const CodeNeedsOther = "needs_other_approver"

// forbidden is a decision this actor may not make; its message says why.
func forbidden(msg string) *fault.Error { return fault.Forbidden(msg).About("decision") }

// needsOther is a decision someone other than the requester must make.
func needsOther(msg string) *fault.Error {
	return fault.New(fault.KindForbidden, CodeNeedsOther, msg).About("decision")
}

// NeedsOther reports whether err refuses a decision that someone else may make.
func NeedsOther(err error) bool {
	f, ok := fault.As(err)
	return ok && f.Code == CodeNeedsOther
}

// Service decides who may decide.
type Service struct {
	pool *pgxpool.Pool
	auth *auth.Service
}

// New returns the service.
func New(pool *pgxpool.Pool, a *auth.Service) *Service {
	return &Service{pool: pool, auth: a}
}

// Check allows d or returns a forbidden fault saying why it is not allowed.
func (s *Service) Check(ctx context.Context, d Decision) (Verdict, error) {
	verb := d.Verb
	if verb == "" {
		verb = "decide"
	}
	if err := Person(d.Actor, verb); err != nil {
		return Verdict{}, err
	}
	if !d.Role.Can(auth.PermExecutionApprove) {
		return Verdict{}, forbidden("your role may not " + verb)
	}
	if d.Level != risk.High || d.Requester == "" || d.Requester != d.Actor.ID {
		return Verdict{}, nil
	}
	sep, err := s.Separation(ctx, s.pool)
	if err != nil {
		return Verdict{}, err
	}
	switch {
	case sep == SeparationAlways && d.Vetting:
		// "Always" admits no exception: a tool not enabled yet can act on real systems
		// with real credentials when it is tested.
		return Verdict{}, needsOther("a high-risk run needs a different person to approve it than the one who asks for it, " +
			"even a test of a tool not enabled yet (separation of duties is set to always): enable the tool, then use Ask for approval")
	case sep == SeparationAlways:
		return Verdict{}, needsOther("a high-risk request needs a different person to approve it than the one who asked for it (separation of duties is set to always)")
	case sep == SeparationOff || d.Vetting:
		return Verdict{SelfApproved: true}, nil
	}
	n, err := s.auth.OtherApprovers(ctx, d.Requester)
	if err != nil {
		return Verdict{}, err
	}
	if n > 0 {
		who := "another person who may approve"
		if n > 1 {
			who = fmt.Sprintf("one of the %d other people who may approve", n)
		}
		return Verdict{}, needsOther("a high-risk request needs a different person to approve it than the one who asked for it: ask " + who)
	}
	return Verdict{SelfApproved: true}, nil
}

// Person refuses anything but a person's browser session: API tokens never approve,
// reject, roll back or answer for a person, however they are sent.
func Person(a audit.Actor, verb string) error {
	if a.Kind == audit.ActorUser {
		return nil
	}
	if a.Kind == audit.ActorToken {
		return forbidden("API tokens cannot " + verb + ": a person must, signed in to Toolwarden in the browser")
	}
	return forbidden("only a signed-in person may " + verb)
}

// Separation reads the setting (SeparationAuto when nobody set one).
func (s *Service) Separation(ctx context.Context, q db.Querier) (Separation, error) {
	return ReadSeparation(ctx, q)
}

// ReadSeparation reads the setting through q (SeparationAuto when nobody set one). A
// stored value that does not read as a known setting (written by hand, or by a later
// release) is taken as SeparationAlways, the strictest, and logged: guessing the
// default could let a requester approve their own high-risk plan where that was meant
// to be refused. Saving the settings again stores a known one.
func ReadSeparation(ctx context.Context, q db.Querier) (Separation, error) {
	var raw json.RawMessage
	err := q.QueryRow(ctx, `/* decide.Separation */ SELECT value FROM settings WHERE key = $1`, SettingKey).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return SeparationAuto, nil
	}
	if err != nil {
		return "", fmt.Errorf("decide: separation: %w", err)
	}
	var sep Separation
	if err := json.Unmarshal(raw, &sep); err != nil || !sep.Valid() {
		slog.Default().WarnContext(ctx, "the stored separation of duties setting is not one Toolwarden knows: high-risk decisions "+
			"need a different person than the requester (always) until the settings are saved again",
			"setting", SettingKey, "value", textcheck.Clip(string(raw), 100, "…"))
		return SeparationAlways, nil
	}
	return sep, nil
}

// SetSeparation stores the setting in tx (the caller audits it with the rest of the
// settings it saves).
func SetSeparation(ctx context.Context, tx pgx.Tx, sep Separation, by string) error {
	if !sep.Valid() {
		return fmt.Errorf("decide: unknown separation %q", sep)
	}
	raw, _ := json.Marshal(sep)
	if _, err := tx.Exec(ctx, `/* decide.SetSeparation */
		INSERT INTO settings (key, value, updated_by) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = now()`,
		SettingKey, raw, by); err != nil {
		return fmt.Errorf("decide: set separation: %w", err)
	}
	return nil
}
