package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Verification is one check of the chain run from the page or the API, or the one
// running now.
type Verification struct {
	Running    bool      `json:"running"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	StartedBy  string    `json:"started_by"`
	// Checked of Total entries so far (Total is the count when the check began).
	Checked int64 `json:"checked"`
	Total   int64 `json:"total"`
	OK      bool  `json:"ok"`
	// VerifiedThrough is the last entry of the unbroken chain from the first one.
	VerifiedThrough int64  `json:"verified_through"`
	BadID           int64  `json:"bad_id,omitempty"`
	Reason          string `json:"reason,omitempty"`
	// Missing counts the missing ids the check found (each a deleted entry) and Gaps are
	// their runs (the first MaxReported). A recorded check keeps them in its Reason
	// only: audit_verifications has no column for them.
	Missing int64  `json:"missing"`
	Gaps    []Gap  `json:"gaps,omitempty"`
	Err     string `json:"error,omitempty"`
	// Checkpoint says which signed checkpoint the chain had to reach, or that there was
	// none (LoadCheckpoint's note); CheckpointID is its entry (0: none).
	Checkpoint   string `json:"checkpoint,omitempty"`
	CheckpointID int64  `json:"checkpoint_id,omitempty"`
}

// ErrCheckpointUnusable means the newest checkpoint could not be read or its signature
// does not verify: the chain cannot be checked against it.
var ErrCheckpointUnusable = errors.New("audit: the newest checkpoint cannot be used")

// Verify checks the whole chain against the newest checkpoint (UseCheckpoints), calling
// progress (when not nil) with how many entries are checked of how many there are, and
// says which checkpoint it was. It is the one way the pages and the API check the
// chain: the CLI's check (LoadCheckpoint, then VerifyWith) behind it, its progress
// passed on. A checkpoint that cannot be read or whose signature does not verify is an
// error: the check could not be made.
func (l *Log) Verify(ctx context.Context, progress func(checked, total int64)) (VerifyResult, string, error) {
	select {
	case l.checking <- struct{}{}:
		defer func() { <-l.checking }()
	case <-ctx.Done():
		return VerifyResult{}, "", ctx.Err()
	}
	var cp *Checkpoint
	var older []Checkpoint
	note := "no checkpoint directory configured"
	if l.checkpoints != nil {
		var err error
		if cp, note, err = LoadCheckpoint(*l.checkpoints); err != nil {
			return VerifyResult{}, "", fmt.Errorf("%w: %w", ErrCheckpointUnusable, err)
		}
		if cp == nil {
			note = "no checkpoint yet in the server's checkpoint directory" // not its path
		}
		older = OlderCheckpoints(*l.checkpoints, cp)
	}
	res, err := VerifyWith(ctx, l.pool, VerifyOptions{Progress: progress, Checkpoint: cp, Older: older})
	return res, note, err
}

// refused is a check that could not be made because the newest checkpoint is unusable:
// not OK, its reason recorded.
func refused(v Verification, err error) Verification {
	v.Running, v.FinishedAt, v.OK, v.Err = false, time.Now().UTC(), false, err.Error()
	v.Reason = "the check could not be made: " + err.Error()
	return v
}

// through is the last entry of the unbroken chain from the start.
func through(res VerifyResult) int64 { return res.VerifiedThrough }

// VerifyNow checks the chain and records the outcome (the API's GET /api/v1/audit/verify).
// Callers share checks: a check running when one asks began too early to answer it (what
// was written since may not be in it), so it waits for that one to end, then joins the
// check begun after it, starting it if no one has. However many ask at once, at most one
// check runs after the running one. The check is the page's background one (StartVerify):
// the page shows it, Close ends it, and a caller that gives up does not stop it.
func (l *Log) VerifyNow(ctx context.Context, by string) (Verification, error) {
	l.mu.Lock()
	if l.run != nil && l.run.Running {
		_, end := l.startVerify(by) // the one running
		l.mu.Unlock()
		select {
		case <-end.done:
		case <-ctx.Done():
			return Verification{}, ctx.Err()
		}
		l.mu.Lock()
	}
	run, end := l.startVerify(by)
	l.mu.Unlock()
	select {
	case <-end.done:
	case <-ctx.Done():
		return Verification{}, ctx.Err()
	}
	if end.err != nil {
		return Verification{}, end.err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return *run, nil
}

func finish(v Verification, res VerifyResult, note string) Verification {
	v.Running, v.FinishedAt = false, time.Now().UTC()
	v.Checked, v.OK, v.VerifiedThrough, v.BadID, v.Reason = res.Checked, res.OK(), through(res), res.BadID, res.Reason
	v.Missing, v.Gaps = res.Missing, res.Gaps
	// The record has no column for the missing ids: its reason lists them, unless it
	// names the only run already.
	if res.Missing > 0 && (len(res.Gaps) != 1 || res.BadID != res.Gaps[0].From) {
		v.Reason += fmt.Sprintf("; missing ids (%d; ids are consecutive, so each was deleted): %s", res.Missing, GapList(res.Gaps))
		listed := int64(0)
		for _, g := range res.Gaps {
			listed += g.To - g.From + 1
		}
		if listed < res.Missing {
			v.Reason += ", …"
		}
	}
	v.Checkpoint = note
	if res.Checkpoint != nil {
		v.CheckpointID = res.Checkpoint.ID
	}
	return v
}

func (l *Log) record(ctx context.Context, v Verification) error {
	_, err := l.pool.Exec(ctx, `/* audit.recordVerification */ INSERT INTO audit_verifications
		(started_at, finished_at, started_by, ok, checked, verified_through, bad_id, reason, checkpoint, checkpoint_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		v.StartedAt, v.FinishedAt, v.StartedBy, v.OK, v.Checked, v.VerifiedThrough, v.BadID, v.Reason, v.Checkpoint, v.CheckpointID)
	if err != nil {
		return fmt.Errorf("audit: record verification: %w", err)
	}
	return nil
}

// StartVerify starts a check in the background unless one runs in this process
// already, and returns the running check. A check that ended without a record (it could
// not be made) is replaced.
func (l *Log) StartVerify(by string) Verification {
	l.mu.Lock()
	defer l.mu.Unlock()
	run, _ := l.startVerify(by)
	return *run
}

// runEnd tells who waits for a background check that it ended. When done is closed, the
// check's Verification holds how it ended, and err says why it could not be made or
// recorded.
type runEnd struct {
	done chan struct{}
	err  error
}

// startVerify is StartVerify with l.mu held: the running check and its end.
func (l *Log) startVerify(by string) (*Verification, *runEnd) {
	if l.run != nil && l.run.Running {
		return l.run, l.runEnd
	}
	run := &Verification{Running: true, StartedAt: time.Now().UTC().Truncate(time.Microsecond), StartedBy: by}
	end := &runEnd{done: make(chan struct{})}
	l.run, l.runEnd = run, end
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := l.check(run)
		end.err = err
		close(end.done)
	}()
	return run, end
}

// check runs the background check run and leaves how it ended in *run.
func (l *Log) check(run *Verification) error {
	ctx, cancel := context.WithTimeout(l.stop, time.Hour)
	defer cancel()
	res, note, err := l.Verify(ctx, func(checked, total int64) {
		l.mu.Lock()
		run.Checked, run.Total = checked, total
		l.mu.Unlock()
	})
	l.mu.Lock()
	v := *run
	l.mu.Unlock()
	switch {
	case errors.Is(err, ErrCheckpointUnusable):
		// Recorded as a failed check: a planted checkpoint must not leave the page
		// showing the last check that passed.
		v = refused(v, err)
		err = l.record(ctx, v)
	case err == nil:
		v = finish(v, res, note)
		err = l.record(ctx, v)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		*run = v
		if l.run == run {
			l.run = nil // the record says how it ended
		}
		return nil
	}
	// The check could not be made or not recorded (the database, the hour's limit):
	// kept until the next check, so the page says so.
	v.Running, v.OK, v.FinishedAt = false, false, time.Now().UTC()
	if v.Err == "" {
		v.Err = err.Error()
	}
	*run = v
	return err
}

// WaitVerify waits for the background check of this process to end (tests, shutdown).
func (l *Log) WaitVerify() { l.wg.Wait() }

// VerifyStatus is the check running in this process (or the last started here, when it
// could not be made), else the last one recorded (nil when the chain was never checked
// from the page or the API).
func (l *Log) VerifyStatus(ctx context.Context) (*Verification, error) {
	l.mu.Lock()
	run := l.run
	var v Verification
	if run != nil {
		v = *run
	}
	l.mu.Unlock()
	if run != nil && v.Running {
		return &v, nil
	}
	rec, err := l.lastRecorded(ctx)
	if run != nil && (err != nil || rec == nil || !rec.StartedAt.After(v.StartedAt)) {
		return &v, nil // the check that could not be made is the newest
	}
	if run != nil {
		l.mu.Lock()
		if l.run == run {
			l.run = nil // a newer check was recorded (the API's, another replica's)
		}
		l.mu.Unlock()
	}
	return rec, err
}

// lastRecorded is the newest check recorded, nil when none.
func (l *Log) lastRecorded(ctx context.Context) (*Verification, error) {
	var v Verification
	err := l.pool.QueryRow(ctx, `/* audit.VerifyStatus */ SELECT started_at, finished_at, started_by, ok, checked, verified_through,
		bad_id, reason, checkpoint, checkpoint_id FROM audit_verifications ORDER BY id DESC LIMIT 1`).Scan(&v.StartedAt, &v.FinishedAt,
		&v.StartedBy, &v.OK, &v.Checked, &v.VerifiedThrough, &v.BadID, &v.Reason, &v.Checkpoint, &v.CheckpointID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: verification status: %w", err)
	}
	v.Total = v.Checked
	return &v, nil
}
