package audit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
)

// VerifyOptions tune VerifyWith. The zero value checks the chain alone with one
// worker per CPU.
type VerifyOptions struct {
	// Progress, when set, is told how many entries have been checked out of about how
	// many there are (the newest id): from one goroutine, about ten times a second, and
	// once more when the walk ends.
	Progress func(checked, total int64)
	// Checkpoint, when set, is a signed statement of an earlier chain head (already
	// checked by Checkpoint.Verify): the chain must still reach it, with the same hash at
	// its id.
	Checkpoint *Checkpoint
	// Older are earlier checkpoints (OlderCheckpoints), their signatures not yet
	// checked: when the chain no longer has Checkpoint's hash at its id, the newest of
	// them signed by Checkpoint's key whose hash still matches is where the chain is
	// known good, so the rewrite lies after it.
	Older []Checkpoint
	// Workers is how many ranges of ids are read and hashed at once, each on its own
	// connection; 0 means GOMAXPROCS. It is capped below the pool's size.
	Workers int

	chunk int64 // ids a range holds (tests set it small to have many seams)
}

// Gap is a run of missing ids, From through To. Ids are handed out one after the
// other under the journal lock (a rolled-back append leaves no hole: the next append
// takes the same id), so a gap only comes from deleted rows.
type Gap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Problem is one entry that does not verify, and why.
type Problem struct {
	ID     int64  `json:"id"`
	Reason string `json:"reason"`
}

// ErrMalformedLog means an entry could not be read at all as the log writes it (its id
// is not a bigint, or a column the check reads is gone): the table's definition was
// altered, which only its owner or a superuser can do. It is tampering, not a check that
// could not run: verify exits 1 on it, and the page records it as a failed check. A
// database with no Toolwarden schema at all would read the same (no audit_log): callers
// refuse one first (the command line's openForAudit, the server's migrations).
var ErrMalformedLog = errors.New("audit: the audit_log table was altered")

// MaxReported bounds the problems and gaps a VerifyResult lists (all are counted).
const MaxReported = 100

// VerifyResult is the outcome of walking the chain.
type VerifyResult struct {
	Checked int64 `json:"checked"` // entries read and checked
	// BadID is the first entry that does not verify (0 when all is well): its hash or its
	// link to the entry before does not match, it is the first id of a run of missing
	// ids, or it is the first of the entries a checkpoint signed that are missing or
	// whose hash differs.
	BadID  int64  `json:"bad_id,omitempty"`
	Reason string `json:"reason,omitempty"`
	// VerifiedThrough is the last entry of the part of the chain that verifies from the
	// start: the newest entry when all is well. When the checkpoint's hash differs, only
	// what an older checkpoint still vouches for (RewrittenAfter) verifies.
	VerifiedThrough int64 `json:"verified_through"`
	// Head is the chain's newest entry as found (ID 0 when the log is empty).
	Head Head `json:"-"`
	// Problems are the entries that do not verify, in id order (the first MaxReported;
	// ProblemCount counts all). The walk goes on past a broken entry, taking its stored
	// hash as the link for the next, so each tampered place is reported once.
	Problems     []Problem `json:"problems,omitempty"`
	ProblemCount int64     `json:"problem_count"`
	// Gaps are the runs of missing ids (the first MaxReported); Missing counts every
	// missing id.
	Gaps    []Gap `json:"gaps,omitempty"`
	Missing int64 `json:"missing"`
	// Checkpoint is the checkpoint the chain was checked against (nil: none).
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// RewrittenAfter, when the checkpoint's hash differs, is the id of the newest older
	// checkpoint that still matches (0: none does): the rewrite lies after it, up to the
	// checkpoint's entry.
	RewrittenAfter int64         `json:"rewritten_after,omitempty"`
	Took           time.Duration `json:"-"`
}

// OK reports whether the whole chain verified (and reaches the checkpoint, if one was given).
// An entry written by hand with id 0 is a BadID of 0 too: Reason says so. A missing id
// is never OK: ids are consecutive, so it is a deleted entry, even when the chain after
// it was recomputed to link across the hole.
func (v VerifyResult) OK() bool { return v.BadID == 0 && v.Reason == "" }

// GapList is the runs of missing ids as verify prints them ("10-11, 20"), the first
// MaxReported of them.
func GapList(gaps []Gap) string {
	var b strings.Builder
	for i, g := range gaps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(g.From, 10))
		if g.To != g.From {
			b.WriteString("-" + strconv.FormatInt(g.To, 10))
		}
	}
	return b.String()
}

// Verify walks the whole chain, recomputing every hash and link, and reports the first
// entry that does not match. q is a pool (then it is VerifyWith with the default
// options) or a connection or transaction (then one worker reads on it).
func Verify(ctx context.Context, q db.Querier) (res VerifyResult, err error) {
	defer func() { res = notOKOnError(res, err) }()
	switch c := q.(type) {
	case *pgxpool.Pool:
		return VerifyWith(ctx, c, VerifyOptions{})
	case interface{ Conn() *pgx.Conn }:
		return verifyOnConn(ctx, c.Conn(), VerifyOptions{})
	}
	return VerifyResult{}, fmt.Errorf("audit: verify: need a pool, a connection or a transaction, got %T", q)
}

// VerifyWith walks the whole chain like Verify, splitting it into ranges of ids that
// opt.Workers connections read (binary COPY, one consistent snapshot for all) and hash
// at once; the links between ranges are checked at the seams. With opt.Checkpoint it
// also checks that the chain still reaches that signed head.
func VerifyWith(ctx context.Context, q *pgxpool.Pool, opt VerifyOptions) (res VerifyResult, err error) {
	defer func() { res = notOKOnError(res, err) }()
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Leave the rest of the pool to the server that runs this.
	if limit := int(q.Config().MaxConns) / 2; workers > limit {
		workers = max(1, limit)
	}
	opt.Workers = workers
	conn, err := q.Acquire(ctx)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("audit: verify: %w", err)
	}
	defer conn.Release()
	return verify(ctx, conn.Conn(), q, opt)
}

// notOKOnError is res, or, when the check failed with err, a result that is not OK and
// says why: a caller that looks at the result alone must not take a check that did not
// finish for one that passed.
func notOKOnError(res VerifyResult, err error) VerifyResult {
	if err == nil {
		return res
	}
	return VerifyResult{Reason: "the check could not finish: " + err.Error()}
}

func verifyOnConn(ctx context.Context, conn *pgx.Conn, opt VerifyOptions) (VerifyResult, error) {
	opt.Workers = 1
	return verify(ctx, conn, nil, opt)
}

// minChunk is the fewest ids a range holds, so a short chain is one COPY; maxChunk the
// most, so the workers share a long chain evenly.
const (
	minChunk = 20_000
	maxChunk = 250_000
)

func verify(ctx context.Context, conn *pgx.Conn, pool *pgxpool.Pool, opt VerifyOptions) (res VerifyResult, err error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One snapshot for every reader: rows appended meanwhile are not seen by any, so the
	// ranges meet exactly. Inside a caller's transaction, that transaction's view.
	own := conn.PgConn().TxStatus() == 'I'
	if own {
		if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "+readPlan); err != nil {
			return res, fmt.Errorf("audit: verify: %w", err)
		}
		defer func() {
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil && err == nil {
				err = fmt.Errorf("audit: verify: %w", rerr)
			}
		}()
	}
	var minID, maxID, below int64
	var estimate float64
	if err := conn.QueryRow(ctx, `/* audit.Verify.extent */ SELECT coalesce(min(id), 1), coalesce(max(id), 0),
		(SELECT count(*) FROM audit_log WHERE id < 1), (SELECT reltuples FROM pg_class WHERE oid = 'audit_log'::regclass)
		FROM audit_log`).Scan(&minID, &maxID, &below, &estimate); err != nil {
		return res, fmt.Errorf("audit: verify: %w", altered(err))
	}
	workers := opt.Workers
	if pool == nil || !own {
		workers = 1
	}
	size := min(max(minChunk, (maxID+int64(workers)-1)/int64(workers)), maxChunk)
	if opt.chunk > 0 {
		size = opt.chunk
	}
	var chunks []*chunk
	if maxID > 4*int64(max(estimate, 0))+4*maxChunk {
		// Far more ids than rows: not what appends make (someone wrote a huge id), so
		// ranges are cut where the rows are, not every size ids.
		if chunks, err = sparseChunks(ctx, conn, size, maxID); err != nil {
			return res, err
		}
	} else {
		for lo := int64(1); lo <= maxID; lo += size {
			chunks = append(chunks, &chunk{lo: lo, hi: min(lo+size-1, maxID)})
		}
	}
	workers = max(1, min(workers, len(chunks)))
	var snapshot string
	if workers > 1 {
		if err := conn.QueryRow(ctx, `SELECT pg_export_snapshot()`).Scan(&snapshot); err != nil {
			return res, fmt.Errorf("audit: verify: export snapshot: %w", err)
		}
	}
	// The ids whose hashes a checkpoint signed: the newest one's, and the older ones'
	// that may bound a rewrite.
	var marks []int64
	if opt.Checkpoint != nil {
		marks = append(marks, opt.Checkpoint.ID)
		for _, o := range opt.Older {
			if o.ID > 0 && o.ID < opt.Checkpoint.ID {
				marks = append(marks, o.ID)
			}
		}
		slices.Sort(marks)
		marks = slices.Compact(marks)
	}

	var checked atomic.Int64
	done := make(chan struct{})
	var progress sync.WaitGroup
	if opt.Progress != nil {
		progress.Add(1)
		go func() {
			defer progress.Done()
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					opt.Progress(checked.Load(), maxID)
				}
			}
		}()
	}

	next := make(chan *chunk, len(chunks))
	for _, c := range chunks {
		next <- c
	}
	close(next)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := conn
			if w > 0 {
				pc, err := pool.Acquire(ctx)
				if err != nil {
					fail(fmt.Errorf("audit: verify: %w", err))
					return
				}
				defer pc.Release()
				c = pc.Conn()
				// The pool must not get the connection back mid-transaction.
				defer func() {
					if _, err := c.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
						_ = c.Close(context.WithoutCancel(ctx))
					}
				}()
				if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "+readPlan); err != nil {
					fail(fmt.Errorf("audit: verify: %w", err))
					return
				}
				if _, err := c.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot)); err != nil {
					fail(fmt.Errorf("audit: verify: import snapshot: %w", err))
					return
				}
			}
			r := &reader{marks: marks, checked: &checked}
			for ch := range next {
				if ctx.Err() != nil {
					return
				}
				if err := r.read(ctx, c, ch); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	progress.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res = assemble(chunks, genesis, opt.Checkpoint, opt.Older)
	if below > 0 {
		// Appends number from 1: these rows were written by hand, outside the chain.
		res.ProblemCount += below
		p := Problem{ID: minID, Reason: fmt.Sprintf("%d entries have ids below 1, which are never handed out: they were inserted by hand, outside the chain", below)}
		res.Problems = append([]Problem{p}, res.Problems...)[:min(len(res.Problems)+1, MaxReported)]
		res.BadID, res.Reason = p.ID, p.Reason
	}
	res.Took = time.Since(start)
	if opt.Progress != nil {
		opt.Progress(res.Checked, maxID)
	}
	return res, nil
}

// sparseChunks cuts [1, maxID] into ranges of about size rows each, found by walking
// the primary key.
func sparseChunks(ctx context.Context, conn *pgx.Conn, size, maxID int64) ([]*chunk, error) {
	var chunks []*chunk
	lo := int64(1)
	for lo <= maxID {
		var hi int64
		err := conn.QueryRow(ctx, `/* audit.Verify.ranges */ SELECT id FROM audit_log WHERE id >= $1 ORDER BY id OFFSET $2 LIMIT 1`, lo, size-1).Scan(&hi)
		if errors.Is(err, pgx.ErrNoRows) {
			hi = maxID
		} else if err != nil {
			return nil, fmt.Errorf("audit: verify: ranges: %w", err)
		}
		chunks = append(chunks, &chunk{lo: lo, hi: hi})
		if hi == math.MaxInt64 {
			break // hi + 1 would wrap around
		}
		lo = hi + 1
	}
	return chunks, nil
}

// readPlan makes each range a walk of the primary key: rows come in id order as they
// lie on disk (the table is append-only), where a large range could otherwise be
// sorted, spilling to disk.
const readPlan = "SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off"

func quoteLiteral(s string) string {
	return "'" + string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte("''"))) + "'"
}

// chunk is one range of ids and what reading it found.
type chunk struct {
	lo, hi int64

	n               int64 // rows read
	firstID, lastID int64
	firstPrev       []byte // the first row's prev_hash: its link is checked at the seam
	firstHashBad    bool   // the first row's own hash does not match
	firstReason     string // the first row is malformed (rowProblem.reason)
	lastHash        []byte
	problems        []rowProblem // rows after the first that do not verify (first MaxReported)
	problemCount    int64
	gaps            []Gap // the first MaxReported runs of missing ids in [lo, hi]
	tailGap         *Gap  // the run of missing ids that ends at hi, if any
	missing         int64
	marked          []mark // the entries of this range a checkpoint signed, as found
}

// mark is the hash found at an id a checkpoint signed.
type mark struct {
	id   int64
	hash []byte
}

type rowProblem struct {
	id         int64
	link, hash bool
	reason     string // the row is malformed (a NULL, a value of another type): why
}

func (c *chunk) gap(from, to int64) {
	c.missing += to - from + 1
	g := Gap{From: from, To: to}
	if len(c.gaps) < MaxReported {
		c.gaps = append(c.gaps, g)
	}
	if to == c.hi {
		c.tailGap = &g
	}
}

// reader reads ranges on one connection, reusing its buffers.
type reader struct {
	marks   []int64 // the ids checkpoints signed, ascending
	mark    int     // the next of marks this range may hold
	checked *atomic.Int64
	buf     []byte
	parser  copyParser
	ch      *chunk
	prev    []byte // hash of the row before (in this range)
	prevBuf [32]byte
	expect  int64 // the next id
	pending int64 // rows not yet added to checked
	uuid    [36]byte
}

const columns = 15

func (r *reader) read(ctx context.Context, conn *pgx.Conn, ch *chunk) error {
	r.ch, r.prev, r.expect = ch, nil, ch.lo
	r.mark, _ = slices.BinarySearch(r.marks, ch.lo)
	r.parser = copyParser{row: r.row, buf: r.parser.buf[:0]}
	if _, err := conn.PgConn().CopyTo(ctx, &r.parser, chunkCopy(ch.lo, ch.hi)); err != nil {
		return fmt.Errorf("audit: verify ids %d to %d: %w", ch.lo, ch.hi, altered(err))
	}
	if !r.parser.ended {
		return fmt.Errorf("audit: verify ids %d to %d: the copy ended early", ch.lo, ch.hi)
	}
	if r.expect <= ch.hi {
		ch.gap(r.expect, ch.hi)
	}
	if ch.n > 0 {
		ch.lastHash = bytes.Clone(r.prev)
	}
	r.checked.Add(r.pending)
	r.pending = 0
	return nil
}

// chunkCopy is the COPY that reads the entries with ids lo through hi, in id order.
func chunkCopy(lo, hi int64) string {
	return `COPY (SELECT id, at, actor_kind, actor_id, actor_name, action, target_type, target_id, target_name, ip,
		request_id, payload, result, prev_hash, hash FROM audit_log WHERE id BETWEEN ` +
		strconv.FormatInt(lo, 10) + ` AND ` + strconv.FormatInt(hi, 10) + ` ORDER BY id) TO STDOUT (FORMAT binary)`
}

// altered is err, marked ErrMalformedLog when it says the log's table or a column the
// check reads is gone (dropped or renamed by its owner or a superuser).
func altered(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" /* undefined_table */ || pe.Code == "42703" /* undefined_column */) {
		return fmt.Errorf("%w: %w", ErrMalformedLog, err)
	}
	return err
}

// columnNames name chunkCopy's columns in what verify says.
var columnNames = [columns]string{"id", "at", "actor_kind", "actor_id", "actor_name", "action", "target_type", "target_id",
	"target_name", "ip", "request_id", "payload", "result", "prev_hash", "hash"}

// pgEpochMicros is 2000-01-01, PostgreSQL's epoch, in Unix microseconds.
const pgEpochMicros = 946_684_800_000_000

func (r *reader) row(f *[columns][]byte) error {
	// Without its id the entry cannot be named: the check stops, as tampering.
	if len(f[0]) != 8 {
		where := "the first entry read"
		if r.expect > 1 {
			where = fmt.Sprintf("the entry after entry %d", r.expect-1)
		}
		return fmt.Errorf("%w: %s has an id that is NULL or not a bigint", ErrMalformedLog, where)
	}
	ch := r.ch
	id := int64(binary.BigEndian.Uint64(f[0]))
	// A column the log never leaves NULL, or one of another type, is a problem of this
	// entry (the table's definition was altered, and the entry with it), and the walk goes
	// on: it must name the entry, not stop the check.
	var malformed string
	for i, v := range f {
		if v == nil && i != 3 {
			malformed = fmt.Sprintf("its %s is NULL, which the log never writes: the table's definition and the entry were altered", columnNames[i])
			break
		}
	}
	var at int64
	switch {
	case len(f[1]) == 8:
		at = int64(binary.BigEndian.Uint64(f[1])) + pgEpochMicros
	case malformed == "":
		malformed = "its time is not a timestamptz: the table's definition and the entry were altered"
	}
	var actorID []byte
	if f[3] != nil {
		if len(f[3]) == 16 {
			actorID = formatUUID(&r.uuid, f[3])
		} else if malformed == "" {
			malformed = "its actor_id is not a uuid: the table's definition and the entry were altered"
		}
	}
	// The hash leaves out a result of success (and so an empty one): one outside the
	// three the log writes would keep a valid hash, so it is checked here.
	if res := string(f[12]); malformed == "" && res != ResultSuccess && res != ResultFailure && res != ResultDenied {
		malformed = fmt.Sprintf("its result is %q, none of success, failure or denied: the entry was altered (the hash does not cover an empty result)", clip(res, 40))
	}
	fields := [9][]byte{f[2], actorID, f[4], f[5], f[6], f[7], f[8], f[9], f[10]}
	r.buf = appendHashInput(r.buf[:0], f[13], id, at, &fields, f[11], f[12])
	sum := sumHash(r.buf)
	hashOK := bytes.Equal(sum[:], f[14])

	if id > r.expect {
		ch.gap(r.expect, id-1)
	}
	r.expect = id + 1
	if ch.n == 0 {
		ch.firstID, ch.firstPrev, ch.firstHashBad, ch.firstReason = id, bytes.Clone(f[13]), !hashOK, malformed
	} else if linkOK := bytes.Equal(f[13], r.prev); !linkOK || !hashOK || malformed != "" {
		ch.problemCount++
		if len(ch.problems) < MaxReported {
			ch.problems = append(ch.problems, rowProblem{id: id, link: !linkOK, hash: !hashOK, reason: malformed})
		}
	}
	// The next link is checked against the hash as stored, so one tampered entry is
	// reported once, not once per entry after it.
	r.prev = append(r.prevBuf[:0], f[14]...)
	ch.n++
	ch.lastID = id
	for r.mark < len(r.marks) && r.marks[r.mark] < id {
		r.mark++ // missing
	}
	if r.mark < len(r.marks) && r.marks[r.mark] == id {
		ch.marked = append(ch.marked, mark{id: id, hash: bytes.Clone(f[14])})
		r.mark++
	}
	if r.pending++; r.pending == 8192 {
		r.checked.Add(r.pending)
		r.pending = 0
	}
	return nil
}

// assemble joins the ranges in order: merges their gaps, checks the links at the seams
// (the first entry's to prev) and the checkpoint, and orders the problems.
func assemble(chunks []*chunk, prev []byte, cp *Checkpoint, older []Checkpoint) VerifyResult {
	var res VerifyResult
	res.Checkpoint = cp
	var gaps []Gap
	addGap := func(g Gap) {
		if n := len(gaps); n > 0 && gaps[n-1].To+1 == g.From {
			gaps[n-1].To = g.To
			return
		}
		gaps = append(gaps, g)
	}
	for _, c := range chunks {
		res.Missing += c.missing
		for _, g := range c.gaps {
			addGap(g)
		}
		if c.tailGap != nil && (len(c.gaps) == 0 || c.gaps[len(c.gaps)-1] != *c.tailGap) {
			addGap(*c.tailGap)
		}
	}
	gapBefore := func(id int64) *Gap {
		i := sort.Search(len(gaps), func(i int) bool { return gaps[i].To >= id-1 })
		if i < len(gaps) && gaps[i].To == id-1 {
			return &gaps[i]
		}
		return nil
	}
	var problems []Problem
	add := func(p rowProblem) {
		res.ProblemCount++
		if len(problems) >= MaxReported {
			return
		}
		reason := "its contents do not match its hash (the entry was altered)"
		if p.link {
			switch g := gapBefore(p.id); {
			case g != nil && g.From == g.To:
				reason = fmt.Sprintf("entry %d before it is missing: it was removed (its prev_hash does not match the hash of entry %d)", g.From, g.From-1)
			case g != nil:
				reason = fmt.Sprintf("entries %d to %d before it are missing: they were removed (its prev_hash does not match the hash of entry %d)", g.From, g.To, g.From-1)
			default:
				reason = "its prev_hash does not match the hash of the entry before it (an entry was removed, inserted or reordered)"
			}
			if g := gapBefore(p.id); g != nil && g.From == 1 {
				reason = fmt.Sprintf("entries 1 to %d before it are missing: they were removed (its prev_hash is not the start of the chain)", g.To)
			}
		}
		switch {
		case p.reason != "" && !p.link && !p.hash:
			reason = p.reason
		case p.reason != "":
			reason = p.reason + "; " + reason
		}
		problems = append(problems, Problem{ID: p.id, Reason: reason})
	}
	found := map[int64][]byte{} // the hashes at the ids checkpoints signed
	for _, c := range chunks {
		res.Checked += c.n
		for _, m := range c.marked {
			found[m.id] = m.hash
		}
		if c.n == 0 {
			continue
		}
		linkOK := bytes.Equal(c.firstPrev, prev)
		if !linkOK || c.firstHashBad || c.firstReason != "" {
			add(rowProblem{id: c.firstID, link: !linkOK, hash: c.firstHashBad, reason: c.firstReason})
		}
		for _, p := range c.problems {
			add(p)
		}
		// Problems past the ones kept are counted only.
		res.ProblemCount += c.problemCount - int64(len(c.problems))
		prev = c.lastHash
		res.Head = Head{ID: c.lastID, Hash: c.lastHash}
	}
	if res.Head.ID == 0 {
		res.Head.Hash = genesis
	}
	rewritten := false
	if cp != nil && cp.ID > 0 {
		var p *Problem
		cpHash, cpFound := found[cp.ID]
		switch {
		case res.Head.ID == 0:
			p = &Problem{ID: 1, Reason: fmt.Sprintf("the log is empty, but the checkpoint of %s signed %d entries (the table was emptied)", cp.At.Format(time.RFC3339), cp.ID)}
		case cp.ID > res.Head.ID:
			p = &Problem{ID: res.Head.ID + 1, Reason: fmt.Sprintf("entries %d to %d are missing: the chain ends at entry %d, but the checkpoint of %s signed entry %d (the end of the log was deleted)",
				res.Head.ID+1, cp.ID, res.Head.ID, cp.At.Format(time.RFC3339), cp.ID)}
		case !cpFound:
			p = &Problem{ID: cp.ID, Reason: fmt.Sprintf("it is missing, but the checkpoint of %s signed it", cp.At.Format(time.RFC3339))}
		case hex.EncodeToString(cpHash) != cp.Hash:
			// The differing hash proves only that something in 1..cp.ID was rewritten:
			// the newest older checkpoint that still matches says from where.
			rewritten = true
			span := fmt.Sprintf("entries 1 to %d (no older checkpoint still matches)", cp.ID)
			if good := stillMatching(cp, older, found); good != nil {
				res.RewrittenAfter = good.ID
				span = fmt.Sprintf("entries %d to %d (the checkpoint of %s still matches at entry %d)", good.ID+1, cp.ID, good.At.Format(time.RFC3339), good.ID)
			}
			p = &Problem{ID: cp.ID, Reason: fmt.Sprintf("its hash differs from the one the checkpoint of %s signed: the log was rewritten somewhere in %s",
				cp.At.Format(time.RFC3339), span)}
		}
		if p != nil {
			res.ProblemCount++
			i := sort.Search(len(problems), func(i int) bool { return problems[i].ID >= p.ID })
			problems = append(problems[:i], append([]Problem{*p}, problems[i:]...)...)
			if len(problems) > MaxReported {
				problems = problems[:MaxReported]
			}
		}
	}
	res.Problems = problems
	if len(gaps) > MaxReported {
		gaps = gaps[:MaxReported]
	}
	res.Gaps = gaps
	res.VerifiedThrough = res.Head.ID
	// Ids are consecutive, so a missing one is a deleted entry, even when the chain after
	// it was recomputed and links across the hole: the first gap breaks the chain unless
	// a problem comes before it.
	switch {
	case len(gaps) > 0 && (len(problems) == 0 || gaps[0].From < problems[0].ID):
		g := gaps[0]
		res.BadID, res.Reason = g.From, fmt.Sprintf("entries %d to %d are missing: ids are handed out one after the other, so they were deleted", g.From, g.To)
		if g.From == g.To {
			res.BadID, res.Reason = g.From, "it is missing: ids are handed out one after the other, so it was deleted"
		}
	case len(problems) > 0:
		res.BadID, res.Reason = problems[0].ID, problems[0].Reason
	}
	if res.BadID != 0 {
		res.VerifiedThrough = res.BadID - 1
		if g := gapBefore(res.BadID); g != nil {
			res.VerifiedThrough = g.From - 1
		}
		res.VerifiedThrough = min(res.VerifiedThrough, res.Head.ID)
	}
	if rewritten {
		res.VerifiedThrough = min(res.VerifiedThrough, res.RewrittenAfter)
	}
	return res
}

// stillMatching is the newest of older (before cp) signed by cp's key whose hash the
// chain still has at its id, nil when none is.
func stillMatching(cp *Checkpoint, older []Checkpoint, found map[int64][]byte) *Checkpoint {
	pub, err := base64.StdEncoding.DecodeString(cp.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil
	}
	var matching []*Checkpoint
	for i := range older {
		o := &older[i]
		if h, ok := found[o.ID]; ok && o.ID > 0 && o.ID < cp.ID && hex.EncodeToString(h) == o.Hash {
			matching = append(matching, o)
		}
	}
	slices.SortFunc(matching, func(a, b *Checkpoint) int { return cmp.Compare(b.ID, a.ID) })
	for _, o := range matching {
		// Signatures are checked only here, newest first: one not signed by cp's key
		// (forged by whoever rewrote the chain) must not vouch for it.
		if o.Verify(ed25519.PublicKey(pub)) == nil {
			return o
		}
	}
	return nil
}

func formatUUID(dst *[36]byte, u []byte) []byte {
	hex.Encode(dst[0:8], u[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], u[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], u[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], u[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], u[10:16])
	return dst[:]
}

// copyParser reads PostgreSQL's binary COPY format as it streams in, handing each row's
// fields (NULL as nil) to row; the slices are valid only during the call.
type copyParser struct {
	row    func(*[columns][]byte) error
	buf    []byte // an incomplete row carried to the next write
	header bool
	ended  bool
	fields [columns][]byte
}

var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

func (p *copyParser) Write(b []byte) (int, error) {
	n := len(b)
	data := b
	if len(p.buf) > 0 {
		p.buf = append(p.buf, b...)
		data = p.buf
	}
	rest, err := p.parse(data)
	if err != nil {
		return 0, err
	}
	if len(p.buf) > 0 {
		p.buf = p.buf[:copy(p.buf, rest)]
	} else {
		p.buf = append(p.buf, rest...)
	}
	return n, nil
}

// parse consumes every complete part of b and returns what is left.
func (p *copyParser) parse(b []byte) ([]byte, error) {
	if !p.header {
		if len(b) < 19 {
			return b, nil
		}
		if !bytes.Equal(b[:11], copySignature) {
			return nil, errors.New("audit: verify: not a binary COPY stream")
		}
		ext := int(binary.BigEndian.Uint32(b[15:19]))
		if len(b) < 19+ext {
			return b, nil
		}
		b, p.header = b[19+ext:], true
	}
	for len(b) >= 2 {
		if p.ended {
			return nil, errors.New("audit: verify: data after the end of the COPY stream")
		}
		count := int16(binary.BigEndian.Uint16(b))
		if count == -1 {
			p.ended = true
			b = b[2:]
			continue
		}
		if int(count) != columns {
			return nil, fmt.Errorf("audit: verify: got %d columns, want %d", count, columns)
		}
		pos := 2
		complete := true
		for i := range columns {
			if len(b) < pos+4 {
				complete = false
				break
			}
			l := int32(binary.BigEndian.Uint32(b[pos:]))
			pos += 4
			if l < 0 {
				p.fields[i] = nil
				continue
			}
			if len(b) < pos+int(l) {
				complete = false
				break
			}
			p.fields[i] = b[pos : pos+int(l) : pos+int(l)]
			pos += int(l)
		}
		if !complete {
			return b, nil
		}
		if err := p.row(&p.fields); err != nil {
			return nil, err
		}
		b = b[pos:]
	}
	return b, nil
}
