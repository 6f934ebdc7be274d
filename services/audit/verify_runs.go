package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

	row int64 // its audit_verifications row, once recorded as running
}

// A running check records how far it got every verifyBeat; one that has not for
// verifyAbandoned was left by a replica that stopped, and will not end.
const (
	verifyBeat      = 2 * time.Second
	verifyAbandoned = time.Minute
)

// ErrCheckpointUnusable means the newest checkpoint could not be read or its signature
// does not verify: the chain cannot be checked against it.
var ErrCheckpointUnusable = errors.New("audit: the newest checkpoint cannot be used")

// Verify checks the whole chain against the newest checkpoint (UseCheckpoints), calling
// progress (when not nil) with how many entries are checked of how many there are, and
// says which checkpoint it was. It is the one way the pages and the API check the
// chain: the CLI's check (LoadCheckpoint, then VerifyWith) behind it, its progress
// passed on. A checkpoint that cannot be read or whose signature does not verify is an
// error: the check could not be made.
func (l *Log) Verify(ctx context.Context, progress func(checked, total int64)) (res VerifyResult, note string, err error) {
	defer func() { res = notOKOnError(res, err) }()
	select {
	case l.checking <- struct{}{}:
		defer func() { <-l.checking }()
	case <-ctx.Done():
		return VerifyResult{}, "", ctx.Err()
	}
	var cp *Checkpoint
	var older []Checkpoint
	note = "no checkpoint directory configured"
	if l.checkpoints != nil {
		if cp, note, err = LoadCheckpoint(*l.checkpoints); err != nil {
			return VerifyResult{}, "", fmt.Errorf("%w: %w", ErrCheckpointUnusable, err)
		}
		if cp == nil && note != NoTrustedKeyNote {
			note = "no checkpoint yet in the server's checkpoint directory" // not its path
		}
		older = OlderCheckpoints(*l.checkpoints, cp)
	}
	res, err = VerifyWith(ctx, l.pool, VerifyOptions{Progress: progress, Checkpoint: cp, Older: older})
	return res, note, err
}

// refused is a check stopped by tampering: the newest checkpoint is unusable, or an
// entry cannot be read (ErrMalformedLog). Not OK, its reason recorded.
func refused(v Verification, err error) Verification {
	v.Running, v.FinishedAt, v.OK, v.Err = false, time.Now().UTC(), false, err.Error()
	v.Reason = "the check could not be made: " + err.Error()
	if errors.Is(err, ErrMalformedLog) {
		v.Reason = "the chain is broken: " + err.Error()
	}
	return v
}

// through is the last entry of the unbroken chain from the start.
func through(res VerifyResult) int64 { return res.VerifiedThrough }

// VerifyNow checks the chain and records the outcome (the API's GET /api/v1/audit/verify).
// Callers share checks: a check running when one asks began too early to answer it (what
// was written since may not be in it), so it waits for that one to end, then joins the
// check begun after it, starting it if no one has. However many ask at once, at most one
// check runs after the running one. The check is the page's background one (StartVerify):
// the page shows it, Close ends it, and a caller that gives up does not stop it. It does
// not wait for a check running on another replica.
func (l *Log) VerifyNow(ctx context.Context, by string) (Verification, error) {
	l.mu.Lock()
	asked := l.runs // the checks begun here before this one asked
	for {
		var run *Verification
		var end *runEnd
		switch e := l.runEnd; {
		case e != nil && e.seq > asked:
			// One begun since this asked, running or ended (a caller slow to wake may
			// find it over): its answer is this one's.
			run, end = e.run, e
		case l.run != nil && l.run.Running:
			// The one running began before: wait for it to end, then for the next.
			l.mu.Unlock()
			select {
			case <-e.done:
			case <-ctx.Done():
				return Verification{}, ctx.Err()
			}
			l.mu.Lock()
			continue
		default:
			run, end = l.startVerify(by, false)
		}
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
		if !end.deferred {
			defer l.mu.Unlock()
			return *run, nil
		}
		// A page's Verify begun in between left the check to another replica's: no
		// answer; the next check begun from now on gives it.
		asked = l.runs
	}
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

// record writes how the check v ended into its row.
func (l *Log) record(ctx context.Context, v Verification) error {
	args := []any{v.row, v.StartedAt, v.FinishedAt, v.StartedBy, v.OK, v.Checked, v.VerifiedThrough, v.BadID, v.Reason, v.Checkpoint, v.CheckpointID}
	tag, err := l.pool.Exec(ctx, `/* audit.recordVerification */ UPDATE audit_verifications SET finished_at = $3, ok = $5,
		checked = $6, total = $6, verified_through = $7, bad_id = $8, reason = $9, checkpoint = $10, checkpoint_id = $11,
		progress_at = $3 WHERE id = $1 AND started_at = $2 AND started_by = $4`, args...)
	if err == nil && tag.RowsAffected() == 0 {
		// Its row was taken for abandoned (this replica could not reach the database for
		// a minute) and removed: recorded anew.
		_, err = l.pool.Exec(ctx, `/* audit.recordVerification */ INSERT INTO audit_verifications
			(started_at, finished_at, started_by, ok, checked, total, verified_through, bad_id, reason, checkpoint, checkpoint_id, progress_at)
			VALUES ($2, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11, $3)`, args...)
	}
	if err != nil {
		return fmt.Errorf("audit: record verification: %w", err)
	}
	return nil
}

// verificationSelect reads checks recorded, $1 being verifyAbandoned in seconds; see
// scanVerification.
const verificationSelect = `SELECT started_at, finished_at, started_by, ok, checked, total, verified_through, bad_id, reason,
	checkpoint, checkpoint_id, progress_at,
	coalesce(finished_at IS NULL AND progress_at > now() - make_interval(secs => $1), false) FROM audit_verifications`

// scanVerification reads a row of verificationSelect: a check that ended, one running,
// or one whose replica stopped mid-check (an error: it will not end).
func scanVerification(row pgx.Row) (*Verification, error) {
	var v Verification
	var finished, heard *time.Time
	var alive bool
	if err := row.Scan(&v.StartedAt, &finished, &v.StartedBy, &v.OK, &v.Checked, &v.Total, &v.VerifiedThrough, &v.BadID,
		&v.Reason, &v.Checkpoint, &v.CheckpointID, &heard, &alive); err != nil {
		return nil, err
	}
	switch {
	case finished != nil:
		v.FinishedAt, v.Total = *finished, v.Checked
	case alive:
		v.Running = true
	default:
		v.Err = "abandoned: the server running it stopped before it ended"
		if heard != nil {
			v.FinishedAt = *heard
		}
	}
	return &v, nil
}

// claim records v as running, setting v.row and v.Total (the newest id now). A page's
// Verify (page) starts no second check while another replica's runs: that one is
// returned instead. Rows left running by replicas that stopped are removed.
func (l *Log) claim(ctx context.Context, v *Verification, page bool) (*Verification, error) {
	var other *Verification
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		// Claims take turns, so two replicas cannot both find none running.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('toolwarden.audit_verify', 0))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `/* audit.claimVerification */ DELETE FROM audit_verifications
			WHERE finished_at IS NULL AND NOT coalesce(progress_at > now() - make_interval(secs => $1), false)`, verifyAbandoned.Seconds()); err != nil {
			return err
		}
		if page {
			o, err := scanVerification(tx.QueryRow(ctx, `/* audit.claimVerification */ `+verificationSelect+`
				WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1`, verifyAbandoned.Seconds()))
			if err == nil {
				other = o
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		return tx.QueryRow(ctx, `/* audit.claimVerification */ INSERT INTO audit_verifications
			(started_at, started_by, ok, checked, total, verified_through, progress_at)
			VALUES ($1, $2, false, 0, (SELECT coalesce(max(id), 0) FROM audit_log), 0, now()) RETURNING id, total`,
			v.StartedAt, v.StartedBy).Scan(&v.row, &v.Total)
	})
	if err != nil {
		return nil, fmt.Errorf("audit: start verification: %w", err)
	}
	return other, nil
}

// beat records how far run got every verifyBeat, so other replicas show it and know its
// replica still runs, until the stop it returns is called.
func (l *Log) beat(ctx context.Context, run *Verification) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(verifyBeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			l.mu.Lock()
			row, checked, total := run.row, run.Checked, run.Total
			l.mu.Unlock()
			// A beat missed is no harm; a minute of them is taken for a stopped replica.
			_, _ = l.pool.Exec(ctx, `/* audit.verifyProgress */ UPDATE audit_verifications SET checked = $2, total = $3,
				progress_at = now() WHERE id = $1 AND finished_at IS NULL`, row, checked, total)
		}
	})
	return func() { close(done); wg.Wait() }
}

// StartVerify starts a check in the background unless one runs in this process or, as
// recorded, on another replica, and returns the running check (for a moment, until it
// finds another replica's, the one it was about to start). A check that ended without a
// record (it could not be made) is replaced.
func (l *Log) StartVerify(by string) Verification {
	l.mu.Lock()
	defer l.mu.Unlock()
	run, _ := l.startVerify(by, true)
	return *run
}

// runEnd tells who waits for a background check that it ended. When done is closed, the
// check's Verification holds how it ended, and err says why it could not be made or
// recorded; deferred: it was not made, another replica's check running (page starts).
type runEnd struct {
	done     chan struct{}
	err      error
	deferred bool
	// seq numbers the checks begun here (Log.runs when it began); run is its record.
	seq uint64
	run *Verification
}

// startVerify is StartVerify with l.mu held: the running check and its end. A page's
// start (page) defers to a check running on another replica; the API's does not.
func (l *Log) startVerify(by string, page bool) (*Verification, *runEnd) {
	if l.run != nil && l.run.Running {
		return l.run, l.runEnd
	}
	run := &Verification{Running: true, StartedAt: time.Now().UTC().Truncate(time.Microsecond), StartedBy: by}
	l.runs++
	end := &runEnd{done: make(chan struct{}), seq: l.runs, run: run}
	l.run, l.runEnd = run, end
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		end.deferred, end.err = l.check(run, page)
		close(end.done)
	}()
	return run, end
}

// check runs the background check run and leaves how it ended in *run; deferred: it
// was not made, run being the check another replica runs.
func (l *Log) check(run *Verification, page bool) (deferred bool, err error) {
	ctx, cancel := context.WithTimeout(l.stop, time.Hour)
	defer cancel()
	l.mu.Lock()
	v := *run
	l.mu.Unlock()
	other, err := l.claim(ctx, &v, page)
	if err == nil && other != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		*run = *other
		if l.run == run {
			l.run = nil // the other replica's row says how it goes
		}
		return true, nil
	}
	if err == nil {
		l.mu.Lock()
		run.row, run.Total = v.row, v.Total
		l.mu.Unlock()
		stop := l.beat(ctx, run)
		var res VerifyResult
		var note string
		res, note, err = l.Verify(ctx, func(checked, total int64) {
			l.mu.Lock()
			run.Checked, run.Total = checked, total
			l.mu.Unlock()
		})
		stop()
		l.mu.Lock()
		v = *run
		l.mu.Unlock()
		switch {
		case errors.Is(err, ErrCheckpointUnusable), errors.Is(err, ErrMalformedLog):
			// Recorded as a failed check: a planted checkpoint, or a table altered so that
			// an entry cannot be read, must not leave the page showing the last check that
			// passed.
			v = refused(v, err)
			err = l.record(ctx, v)
		case err == nil:
			v = finish(v, res, note)
			err = l.record(ctx, v)
		}
	}
	if err != nil && v.row != 0 {
		// Not made: its row goes, so other replicas show the last check recorded.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = l.pool.Exec(dctx, `/* audit.unclaimVerification */ DELETE FROM audit_verifications WHERE id = $1 AND finished_at IS NULL`, v.row)
		cancel()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		*run = v
		if l.run == run {
			l.run = nil // the record says how it ended
		}
		return false, nil
	}
	// The check could not be made or not recorded (the database, the hour's limit):
	// kept until the next check, so the page says so.
	v.Running, v.OK, v.FinishedAt = false, false, time.Now().UTC()
	if v.Err == "" {
		v.Err = err.Error()
	}
	*run = v
	return false, err
}

// WaitVerify waits for the background check of this process to end (tests, shutdown).
func (l *Log) WaitVerify() { l.wg.Wait() }

// VerifyStatus is the check running in this process (or the last started here, when it
// could not be made), else the newest one recorded, running on another replica or ended
// (nil when the chain was never checked from the page or the API).
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
	v, err := scanVerification(l.pool.QueryRow(ctx, `/* audit.VerifyStatus */ `+verificationSelect+` ORDER BY id DESC LIMIT 1`,
		verifyAbandoned.Seconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: verification status: %w", err)
	}
	return v, nil
}
