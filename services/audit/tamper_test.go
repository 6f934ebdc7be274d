package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// chainOf appends n entries the way the application does (ids 1..n).
func chainOf(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	var entries []Entry
	for i := range n {
		e := Entry{Actor: Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-0000000000a1", Name: "alice", IP: "127.0.0.1", RequestID: fmt.Sprint("r", i)},
			Action: "test.action", TargetType: "thing", TargetID: fmt.Sprint(i), Payload: map[string]any{"i": i, "note": "ünïcode \" \\"}}
		if i%4 == 1 {
			e.Actor = System
			e.Result = ResultDenied
		}
		entries = append(entries, e)
	}
	err := db.WithTx(context.Background(), pool, func(tx pgx.Tx) error {
		// In a few transactions, as the chain grows in use.
		for len(entries) > 0 {
			k := min(len(entries), 7)
			if _, err := AppendBatch(context.Background(), tx, entries[:k]); err != nil {
				return err
			}
			entries = entries[k:]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// asSuperuser runs stmts with the append-only triggers disabled, as a database
// superuser (or the table's owner) can: what the chain and the checkpoint must catch.
func asSuperuser(t *testing.T, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "ALTER TABLE audit_log DISABLE TRIGGER USER"); err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		_, err := tx.Exec(ctx, "ALTER TABLE audit_log ENABLE TRIGGER USER")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rewriteFrom changes entry id's actor name and recomputes every hash from it on, as a
// superuser who knows the hash function would: the chain alone still verifies.
func rewriteFrom(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT `+recordColumns+` FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Record])
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	prev := genesis
	for _, r := range recs {
		if r.ID >= id {
			if r.ID == id {
				r.ActorName = "mallory"
			}
			r.PrevHash = prev
			r.Hash = r.computeHash()
			stmts = append(stmts, fmt.Sprintf(`UPDATE audit_log SET actor_name = '%s', prev_hash = '\x%x', hash = '\x%x' WHERE id = %d`, r.ActorName, r.PrevHash, r.Hash, r.ID))
		}
		prev = r.Hash
	}
	asSuperuser(t, pool, stmts...)
}

func TestTamperingAsSuperuser(t *testing.T) {
	t.Parallel()
	const n = 30
	swap := `WITH a AS (SELECT * FROM audit_log WHERE id = 15), b AS (SELECT * FROM audit_log WHERE id = 16)
		UPDATE audit_log l SET at = s.at, actor_kind = s.actor_kind, actor_id = s.actor_id, actor_name = s.actor_name,
			action = s.action, target_type = s.target_type, target_id = s.target_id, target_name = s.target_name, ip = s.ip,
			request_id = s.request_id, payload = s.payload, result = s.result, prev_hash = s.prev_hash, hash = s.hash
		FROM (SELECT 15 AS dst, b.* FROM b UNION ALL SELECT 16, a.* FROM a) s WHERE l.id = s.dst`
	cases := []struct {
		name   string
		tamper func(t *testing.T, pool *pgxpool.Pool)
		// Without a checkpoint, and with one of the head before tampering.
		wantBad, wantBadCP int64
		reason, reasonCP   string
		gaps               []Gap
	}{
		{name: "edit", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `UPDATE audit_log SET payload = '{"i":99}' WHERE id = 10`)
		}, wantBad: 10, wantBadCP: 10, reason: "altered", reasonCP: "altered"},
		{name: "edit result", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `UPDATE audit_log SET result = 'success' WHERE id = 2`)
		}, wantBad: 2, wantBadCP: 2, reason: "altered", reasonCP: "altered"},
		{name: "delete middle", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `DELETE FROM audit_log WHERE id = 12`)
		}, wantBad: 12, wantBadCP: 12, reason: "it is missing", reasonCP: "so it was deleted", gaps: []Gap{{12, 12}}},
		{name: "delete run", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `DELETE FROM audit_log WHERE id BETWEEN 6 AND 9`)
		}, wantBad: 6, wantBadCP: 6, reason: "entries 6 to 9 are missing", reasonCP: "so they were deleted", gaps: []Gap{{6, 9}}},
		{name: "delete first", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `DELETE FROM audit_log WHERE id <= 2`)
		}, wantBad: 1, wantBadCP: 1, reason: "entries 1 to 2 are missing", reasonCP: "entries 1 to 2", gaps: []Gap{{1, 2}}},
		{name: "reorder", tamper: func(t *testing.T, p *pgxpool.Pool) { asSuperuser(t, p, swap) },
			wantBad: 15, wantBadCP: 15, reason: "reordered", reasonCP: "reordered"},
		{name: "truncate tail", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `DELETE FROM audit_log WHERE id > 25`)
		}, wantBad: 0, wantBadCP: 26, reasonCP: "the end of the log was deleted"},
		{name: "rewrite whole table", tamper: func(t *testing.T, p *pgxpool.Pool) { rewriteFrom(t, p, 1) },
			wantBad: 0, wantBadCP: n, reasonCP: "rewritten"},
		{name: "rewrite and go on", tamper: func(t *testing.T, p *pgxpool.Pool) {
			rewriteFrom(t, p, 20)
			chainOf(t, p, 5) // the application appends after the forged head
		}, wantBad: 0, wantBadCP: n, reasonCP: "rewritten"},
		{name: "empty", tamper: func(t *testing.T, p *pgxpool.Pool) { asSuperuser(t, p, `TRUNCATE audit_log`) },
			wantBad: 0, wantBadCP: 1, reasonCP: "the table was emptied"},
		// The table's definition altered too: a NULL where the log never writes one is this
		// entry's problem, and the walk goes on (it once stopped the check unnamed).
		{name: "NULL column", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `ALTER TABLE audit_log ALTER COLUMN ip DROP NOT NULL`, `UPDATE audit_log SET ip = NULL WHERE id = 5`)
		}, wantBad: 5, wantBadCP: 5, reason: "its ip is NULL", reasonCP: "its ip is NULL"},
		// An empty result hashes as a success does (entries before results were recorded):
		// entry 5 is a success, so its hash still holds, and the value alone gives it away.
		{name: "empty result", tamper: func(t *testing.T, p *pgxpool.Pool) {
			asSuperuser(t, p, `ALTER TABLE audit_log DROP CONSTRAINT audit_log_result_check`, `UPDATE audit_log SET result = '' WHERE id = 5`)
		}, wantBad: 5, wantBadCP: 5, reason: `its result is ""`, reasonCP: `its result is ""`},
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer := NewSigner(key)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.New(t)
			chainOf(t, pool, n)
			cp, err := MakeCheckpoint(ctx, pool, signer)
			if err != nil {
				t.Fatal(err)
			}
			if err := cp.Verify(pub); err != nil || cp.ID != n {
				t.Fatalf("checkpoint: got id %d, %v; want %d, verified", cp.ID, err, n)
			}
			tc.tamper(t, pool)
			// One worker, and several over ranges of 4 ids, so seams fall everywhere.
			for _, opt := range []VerifyOptions{{Workers: 1}, {Workers: 3, chunk: 4}} {
				res, err := VerifyWith(ctx, pool, opt)
				if err != nil {
					t.Fatal(err)
				}
				if res.BadID != tc.wantBad || !strings.Contains(res.Reason, tc.reason) {
					t.Errorf("workers %d, no checkpoint: got bad entry %d (%q), want %d (%q)", opt.Workers, res.BadID, res.Reason, tc.wantBad, tc.reason)
				}
				if fmt.Sprint(res.Gaps) != fmt.Sprint(tc.gaps) {
					t.Errorf("workers %d: got gaps %v, want %v", opt.Workers, res.Gaps, tc.gaps)
				}
				opt.Checkpoint = &cp
				res, err = VerifyWith(ctx, pool, opt)
				if err != nil {
					t.Fatal(err)
				}
				if res.OK() || res.BadID != tc.wantBadCP || !strings.Contains(res.Reason, tc.reasonCP) {
					t.Errorf("workers %d, checkpoint: got bad entry %d (%q), want %d (%q)", opt.Workers, res.BadID, res.Reason, tc.wantBadCP, tc.reasonCP)
				}
				if res.VerifiedThrough >= tc.wantBadCP {
					t.Errorf("workers %d: verified through %d, at or past the bad entry %d", opt.Workers, res.VerifiedThrough, tc.wantBadCP)
				}
			}
		})
	}
}

// Deleted entries with the chain after them recomputed (as a superuser who knows the
// hash function would) link across the hole, but their ids are missing: ids are
// consecutive, so verify fails at the first, and the check the page and the API run
// says which.
func TestVerifyGapAloneFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 80)
	asSuperuser(t, pool, `DELETE FROM audit_log WHERE id BETWEEN 50 AND 60 OR id = 70`)
	rewriteFrom(t, pool, 61)
	for _, opt := range []VerifyOptions{{Workers: 1}, {Workers: 3, chunk: 4}} {
		res, err := VerifyWith(ctx, pool, opt)
		if err != nil {
			t.Fatal(err)
		}
		if res.OK() || res.BadID != 50 || !strings.Contains(res.Reason, "entries 50 to 60 are missing") || res.VerifiedThrough != 49 {
			t.Errorf("workers %d: ok %v, bad %d (%q), through %d; want broken at 50, entries 50 to 60 missing, through 49",
				opt.Workers, res.OK(), res.BadID, res.Reason, res.VerifiedThrough)
		}
		if fmt.Sprint(res.Gaps) != "[{50 60} {70 70}]" || res.Missing != 12 || res.ProblemCount != 0 || res.Head.ID != 80 {
			t.Errorf("workers %d: gaps %v, missing %d, problems %d, head %d; want [{50 60} {70 70}], 12, none, 80",
				opt.Workers, res.Gaps, res.Missing, res.ProblemCount, res.Head.ID)
		}
	}
	l := NewLog(pool)
	t.Cleanup(l.Close)
	v, err := l.VerifyNow(ctx, "api")
	if err != nil || v.OK || v.BadID != 50 || v.VerifiedThrough != 49 || v.Missing != 12 || fmt.Sprint(v.Gaps) != "[{50 60} {70 70}]" {
		t.Fatalf("API check: %+v, %v; want not OK at 50, through 49, 12 missing in 50-60 and 70", v, err)
	}
	// Recorded without the gaps' own fields: its reason lists them.
	st, err := l.VerifyStatus(ctx)
	if err != nil || st == nil || st.OK || st.BadID != 50 || !strings.Contains(st.Reason, "missing ids (12; ids are consecutive, so each was deleted): 50-60, 70") {
		t.Fatalf("recorded check: %+v, %v; want not OK, its reason listing 50-60, 70", st, err)
	}
}

// A checkpoint whose hash differs says only that something up to its entry was
// rewritten: the newest older checkpoint (signed by the same key) that still matches
// is how far the chain verifies, and the rewrite lies between the two.
func TestVerifyNarrowsARewrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dir := t.TempDir()
	s, err := OpenSigner(filepath.Join(dir, "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	var signed []Checkpoint
	for range 3 {
		chainOf(t, pool, 10)
		cp, err := MakeCheckpoint(ctx, pool, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := WriteCheckpoint(cps, cp); err != nil {
			t.Fatal(err)
		}
		signed = append(signed, cp)
	}
	newest := signed[2]
	src := CheckpointSource{Dir: cps, KeyFile: filepath.Join(dir, "checkpoint.key")}
	if older := OlderCheckpoints(src, &newest); len(older) != 2 {
		t.Fatalf("older checkpoints: got %d, want the 2 before entry 30", len(older))
	}
	l := NewLog(pool)
	t.Cleanup(l.Close)
	l.UseCheckpoints(src)
	check := func(name string, older []Checkpoint, through int64, span string) {
		t.Helper()
		for _, opt := range []VerifyOptions{{Workers: 1}, {Workers: 3, chunk: 4}} {
			opt.Checkpoint, opt.Older = &newest, older
			res, err := VerifyWith(ctx, pool, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() || res.BadID != 30 || res.VerifiedThrough != through || res.RewrittenAfter != through || !strings.Contains(res.Reason, span) {
				t.Errorf("%s, workers %d: bad %d (%q), through %d, after %d; want 30, %q, through %d",
					name, opt.Workers, res.BadID, res.Reason, res.VerifiedThrough, res.RewrittenAfter, span, through)
			}
		}
		// The server's check finds the older ones in its directory.
		res, _, err := l.Verify(ctx, nil)
		if err != nil || res.VerifiedThrough != through || !strings.Contains(res.Reason, span) {
			t.Errorf("%s, the server's check: %+v, %v; want through %d, %q", name, res, err, through, span)
		}
	}
	rewriteFrom(t, pool, 25)
	check("rewritten from 25", signed[:2], 20, "rewritten somewhere in entries 21 to 30")
	// A checkpoint of the forged chain signed by another key vouches for nothing
	// (dated before the newest, so it is not taken for the newest).
	var h28 []byte
	if err := pool.QueryRow(ctx, `SELECT hash FROM audit_log WHERE id = 28`).Scan(&h28); err != nil {
		t.Fatal(err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	forged := NewSigner(other).Sign(Head{ID: 28, Hash: h28}, newest.EntryAt, newest.At.Add(-time.Microsecond))
	if _, err := WriteCheckpoint(cps, forged); err != nil {
		t.Fatal(err)
	}
	check("with a forged older checkpoint", []Checkpoint{forged, signed[1], signed[0]}, 20, "entries 21 to 30")
	rewriteFrom(t, pool, 15)
	check("rewritten from 15", signed[:2], 10, "entries 11 to 30 (the checkpoint of")
	rewriteFrom(t, pool, 1)
	check("rewritten from 1", signed[:2], 0, "entries 1 to 30 (no older checkpoint still matches)")
	check("no older checkpoint given", nil, 0, "entries 1 to 30")
}

// Every entry is checked however the ids are split among workers, and a good chain
// reaches its checkpoint and goes on past it.
func TestVerifyRangesAndProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 50)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	cp, err := MakeCheckpoint(ctx, pool, NewSigner(key))
	if err != nil {
		t.Fatal(err)
	}
	chainOf(t, pool, 13)
	for _, opt := range []VerifyOptions{{}, {Workers: 1}, {Workers: 2, chunk: 1}, {Workers: 4, chunk: 9}, {Workers: 3, chunk: 63}, {Workers: 3, chunk: 1000}} {
		var last, total int64
		opt.Progress = func(c, tot int64) { last, total = c, tot }
		opt.Checkpoint = &cp
		res, err := VerifyWith(ctx, pool, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK() || res.Checked != 63 || res.VerifiedThrough != 63 || res.Head.ID != 63 || len(res.Problems) != 0 || len(res.Gaps) != 0 {
			t.Errorf("%+v: got %+v, want OK with 63 checked", opt, res)
		}
		if last != 63 || total != 63 {
			t.Errorf("%+v: last progress %d of %d, want 63 of 63", opt, last, total)
		}
	}
	// Verify inside a transaction reads on it.
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		res, err := Verify(ctx, tx)
		if err == nil && (!res.OK() || res.Checked != 63) {
			err = fmt.Errorf("got %+v, want OK with 63 checked", res)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each tampered place is reported once, however many there are, and gaps are listed.
func TestVerifyReportsEveryProblem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 40)
	asSuperuser(t, pool,
		`UPDATE audit_log SET actor_name = 'x' WHERE id IN (3, 30)`,
		`DELETE FROM audit_log WHERE id IN (10, 11, 20, 40)`)
	for _, opt := range []VerifyOptions{{Workers: 1}, {Workers: 2, chunk: 5}} {
		res, err := VerifyWith(ctx, pool, opt)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, p := range res.Problems {
			ids = append(ids, p.ID)
		}
		if fmt.Sprint(ids) != "[3 12 21 30]" || res.ProblemCount != 4 || res.BadID != 3 || res.VerifiedThrough != 2 {
			t.Errorf("workers %d: got problems %v (count %d, first %d, through %d), want [3 12 21 30], first 3, through 2",
				opt.Workers, res.Problems, res.ProblemCount, res.BadID, res.VerifiedThrough)
		}
		// The deleted last entry is not a gap: nothing says it existed (a checkpoint would).
		if fmt.Sprint(res.Gaps) != "[{10 11} {20 20}]" || res.Missing != 3 || res.Checked != 36 || res.Head.ID != 39 {
			t.Errorf("workers %d: got gaps %v, missing %d, checked %d, head %d; want [{10 11} {20 20}], 3, 36, 39",
				opt.Workers, res.Gaps, res.Missing, res.Checked, res.Head.ID)
		}
	}
}

func TestCheckpointSignature(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	s, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	again, err := OpenSigner(keyPath)
	if err != nil || !again.Public().Equal(s.Public()) {
		t.Fatalf("reopen: got %v, want the same key", err)
	}
	pub, err := ReadPublicKey(PublicKeyPath(keyPath))
	if err != nil || !pub.Equal(s.Public()) {
		t.Fatalf("public key file: got %v, want the signer's key", err)
	}
	cp := s.Sign(Head{ID: 7, Hash: make([]byte, 32)}, time.Now(), time.Now())
	path, err := WriteCheckpoint(filepath.Join(dir, "checkpoints"), cp)
	if err != nil {
		t.Fatal(err)
	}
	if latest, err := LatestCheckpoint(filepath.Join(dir, "checkpoints")); err != nil || latest != path {
		t.Fatalf("latest: got %q, %v; want %q", latest, err, path)
	}
	read, err := ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := read.Verify(pub); err != nil {
		t.Fatalf("verify: %v", err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	forged := NewSigner(other).Sign(Head{ID: 7, Hash: make([]byte, 32)}, time.Now(), time.Now())
	for name, c := range map[string]Checkpoint{
		"other id":   func() Checkpoint { c := read; c.ID = 6; return c }(),
		"other hash": func() Checkpoint { c := read; c.Hash = strings.Repeat("ab", 32); return c }(),
		"other time": func() Checkpoint { c := read; c.At = c.At.Add(time.Hour); return c }(),
		"other key":  forged,
	} {
		if err := c.Verify(pub); err == nil {
			t.Errorf("%s: got nil, want a signature error", name)
		}
	}
	// Without a trusted key, a checkpoint is checked against the key it names.
	if err := forged.Verify(nil); err != nil {
		t.Errorf("self-signed: got %v, want nil", err)
	}
}

// LoadCheckpoint, as the server and the CLI find the newest checkpoint: an older one
// renamed to look newer is refused, a file that is no regular file does not hang the
// reader, and with the .pub copy gone the signing key itself is the trusted one.
func TestLoadCheckpointRefusesPlants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	s, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	src := CheckpointSource{Dir: cps, KeyFile: keyPath}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	old := s.Sign(Head{ID: 5, Hash: make([]byte, 32)}, at, at)
	oldPath, err := WriteCheckpoint(cps, old)
	if err != nil {
		t.Fatal(err)
	}
	newer := s.Sign(Head{ID: 9, Hash: make([]byte, 32)}, at.Add(time.Hour), at.Add(time.Hour))
	if _, err := WriteCheckpoint(cps, newer); err != nil {
		t.Fatal(err)
	}
	if cp, note, err := LoadCheckpoint(src); err != nil || cp.ID != 9 || !strings.Contains(note, "trusted key") {
		t.Fatalf("the newest: got %v, %q, %v; want entry 9 signed by the trusted key", cp, note, err)
	}

	// The old one copied under a name newer than any.
	planted := filepath.Join(cps, "checkpoint-29991231T000000.000000Z-5.json")
	data, err := os.ReadFile(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCheckpoint(src); err == nil || !strings.Contains(err.Error(), "does not match its content") {
		t.Fatalf("an old checkpoint under a newer name: got %v, want it refused", err)
	}
	// A FIFO in its place: refused at once, not read.
	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(planted, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCheckpoint(src); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO: got %v, want it refused", err)
	}
	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}

	// The .pub copy gone: the key file still decides, and another key's checkpoint fails.
	if err := os.Remove(PublicKeyPath(keyPath)); err != nil {
		t.Fatal(err)
	}
	if cp, note, err := LoadCheckpoint(src); err != nil || cp.ID != 9 || !strings.Contains(note, "trusted key") {
		t.Fatalf("without the .pub: got %v, %q, %v; want entry 9 signed by the trusted key", cp, note, err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := WriteCheckpoint(cps, NewSigner(other).Sign(Head{ID: 12, Hash: make([]byte, 32)}, at.Add(2*time.Hour), at.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCheckpoint(src); err == nil {
		t.Fatal("a checkpoint signed by another key passed without the .pub copy")
	}
}

// The server's checkpointer signs a head only once, and refuses to sign a chain that
// no longer reaches its previous checkpoint.
func TestCheckpointer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dir := t.TempDir()
	s, err := OpenSigner(filepath.Join(dir, "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	w := NewCheckpointer(pool, s, cps)
	first, err := w.Write(ctx) // an empty log is a head too
	if err != nil || first == "" {
		t.Fatalf("first: got %q, %v; want a file", first, err)
	}
	chainOf(t, pool, 5)
	second, err := w.Write(ctx)
	if err != nil || second == "" || second == first {
		t.Fatalf("after appends: got %q, %v; want a new file", second, err)
	}
	if again, err := w.Write(ctx); err != nil || again != "" {
		t.Fatalf("unchanged head: got %q, %v; want nothing written", again, err)
	}
	// A new process on the same directory continues the series.
	w = NewCheckpointer(pool, s, cps)
	if again, err := w.Write(ctx); err != nil || again != "" {
		t.Fatalf("unchanged head, new process: got %q, %v; want nothing written", again, err)
	}
	asSuperuser(t, pool, `DELETE FROM audit_log WHERE id = 5`)
	chainOf(t, pool, 2) // the application appends after the cut: ids 5 and 6 again
	if got, err := w.Write(ctx); !errors.Is(err, ErrChainRewound) || got != "" {
		t.Fatalf("after the tail was cut and refilled: got %q, %v; want ErrChainRewound and nothing written", got, err)
	}
	if latest, _ := LatestCheckpoint(cps); latest != second {
		t.Fatalf("newest checkpoint: got %q, want still %q", latest, second)
	}
	cp, err := ReadCheckpoint(second)
	if err != nil {
		t.Fatal(err)
	}
	res, err := VerifyWith(ctx, pool, VerifyOptions{Checkpoint: &cp})
	if err != nil || res.BadID != 5 || !strings.Contains(res.Reason, "rewritten") {
		t.Fatalf("verify: got %+v, %v; want entry 5 rewritten", res, err)
	}
}

// Before signing a new head the checkpointer checks every entry since its last
// checkpoint, as verify does: an entry altered, or entries deleted with the chain after
// them recomputed, is refused, not blessed by a checkpoint that verify would then
// accept.
func TestCheckpointerVerifiesSinceLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dir := t.TempDir()
	s, err := OpenSigner(filepath.Join(dir, "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	w := NewCheckpointer(pool, s, cps)
	chainOf(t, pool, 10)
	first, err := w.Write(ctx)
	if err != nil || first == "" {
		t.Fatalf("first: got %q, %v", first, err)
	}
	chainOf(t, pool, 10)
	refused := func(want string) {
		t.Helper()
		got, err := w.Write(ctx)
		if !errors.Is(err, ErrChainRewound) || got != "" || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %q, %v; want ErrChainRewound saying %q and nothing written", got, err, want)
		}
		if latest, _ := LatestCheckpoint(cps); latest != first {
			t.Fatalf("newest checkpoint: got %q, want still %q", latest, first)
		}
	}
	// The first entry after the checkpoint's, then one further on: each named.
	for _, id := range []int{11, 17} {
		asSuperuser(t, pool, fmt.Sprintf(`UPDATE audit_log SET actor_name = 'x' || actor_name WHERE id = %d`, id))
		refused(fmt.Sprintf("entry %d: its contents do not match its hash", id))
		asSuperuser(t, pool, fmt.Sprintf(`UPDATE audit_log SET actor_name = substr(actor_name, 2) WHERE id = %d`, id))
	}
	asSuperuser(t, pool, `DELETE FROM audit_log WHERE id BETWEEN 13 AND 14`)
	rewriteFrom(t, pool, 15)
	refused("entry 13: entries 13 to 14 are missing")
	if _, _, err := NewCheckpointer(pool, s, cps).Make(ctx); !errors.Is(err, ErrChainRewound) {
		t.Fatalf("a new process's checkpointer: got %v, want it refused too", err)
	}
}

// The COPY parser takes the stream in pieces of any size: a row split across writes,
// many rows in one.
func TestCopyParserPieces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 9)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var stream bytes.Buffer
	if _, err := conn.Conn().PgConn().CopyTo(ctx, &stream, `COPY (SELECT id, at, actor_kind, actor_id, actor_name, action, target_type,
		target_id, target_name, ip, request_id, payload, result, prev_hash, hash FROM audit_log ORDER BY id) TO STDOUT (FORMAT binary)`); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 2, 3, 7, 19, 64, 1000, stream.Len()} {
		var ids []int64
		p := copyParser{row: func(f *[columns][]byte) error {
			ids = append(ids, int64(binary.BigEndian.Uint64(f[0])))
			return nil
		}}
		b := stream.Bytes()
		for len(b) > 0 {
			n := min(size, len(b))
			piece := bytes.Clone(b[:n]) // the caller reuses its buffer
			if _, err := p.Write(piece); err != nil {
				t.Fatalf("pieces of %d: %v", size, err)
			}
			clear(piece)
			b = b[n:]
		}
		if fmt.Sprint(ids) != "[1 2 3 4 5 6 7 8 9]" || !p.ended {
			t.Errorf("pieces of %d: got ids %v (ended %v), want 1 to 9 and the end", size, ids, p.ended)
		}
	}
}

// copyOfEntry is the statement that writes entry from again by hand, as entry id.
func copyOfEntry(from, id int64) string {
	return fmt.Sprintf(`INSERT INTO audit_log (id, at, actor_kind, action, prev_hash, hash)
		SELECT %d, at, actor_kind, action, prev_hash, hash FROM audit_log WHERE id = %d`, id, from)
}

func problemIDs(res VerifyResult) []int64 {
	var ids []int64
	for _, p := range res.Problems {
		ids = append(ids, p.ID)
	}
	return ids
}

// Rows written by hand with ids appends never make are reported, and a huge id does not
// make verify walk every id up to it.
func TestVerifyHandWrittenIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 10)
	asSuperuser(t, pool, copyOfEntry(10, 1_000_000_000_000), copyOfEntry(10, -3))
	for _, opt := range []VerifyOptions{{Workers: 1}, {Workers: 2}} {
		// Walking every id would be four million ranges: the test would not end.
		res, err := VerifyWith(ctx, pool, opt)
		if err != nil {
			t.Fatal(err)
		}
		ids := problemIDs(res)
		if res.BadID != -3 || !strings.Contains(res.Reason, "by hand") || fmt.Sprint(ids) != "[-3 1000000000000]" {
			t.Errorf("workers %d: got first %d (%q), problems %v; want -3 by hand, then 1000000000000", opt.Workers, res.BadID, res.Reason, ids)
		}
		if fmt.Sprint(res.Gaps) != "[{11 999999999999}]" || res.Checked != 11 || res.VerifiedThrough != 10 {
			t.Errorf("workers %d: got gaps %v, checked %d, through %d; want [{11 999999999999}], 11, 10", opt.Workers, res.Gaps, res.Checked, res.VerifiedThrough)
		}
	}
}

// An entry written by hand with id 0 breaks the chain as any other id below 1 does
// (0 is also "no bad entry"), and one with the largest id there is ends the walk.
func TestVerifyIDZeroAndTheLargestID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 3)
	asSuperuser(t, pool, copyOfEntry(3, 0), copyOfEntry(3, math.MaxInt64))
	for _, opt := range []VerifyOptions{{Workers: 1}, {Workers: 2}} {
		res, err := VerifyWith(ctx, pool, opt)
		if err != nil {
			t.Fatal(err)
		}
		ids := problemIDs(res)
		if res.OK() || res.BadID != 0 || !strings.Contains(res.Reason, "by hand") || fmt.Sprint(ids) != fmt.Sprint([]int64{0, math.MaxInt64}) {
			t.Errorf("workers %d: ok %v, first %d (%q), problems %v; want broken at 0 by hand, then the largest id", opt.Workers, res.OK(), res.BadID, res.Reason, ids)
		}
	}
}

// A checkpoint signs only what is on disk: the head a LOW call's append committed
// without waiting for the disk is flushed before it is signed.
func TestCheckpointMakesTheHeadDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var a Appender
	if _, err := a.Append(ctx, pool, []Entry{{Actor: System, Action: "tool.call"}}, db.Asynchronous); err != nil {
		t.Fatal(err)
	}
	var written string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&written); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(nil)
	if _, err := MakeCheckpoint(ctx, pool, NewSigner(key)); err != nil {
		t.Fatal(err)
	}
	var flushed bool
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, written).Scan(&flushed); err != nil || !flushed {
		t.Fatalf("the signed head's commit is not flushed yet (%v)", err)
	}
}

// The user agent an entry records is bounded and valid UTF-8, whoever sent it (a
// refused anonymous request records its caller too).
func TestUserAgentBounded(t *testing.T) {
	t.Parallel()
	ua := strings.Repeat("é", 5000) + "\xff"
	b, err := NewBatch([]Entry{{Actor: Actor{Kind: ActorAnonymous, UserAgent: ua}, Action: "request.denied"}})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		UserAgent string `json:"user_agent"`
	}
	if err := json.Unmarshal(b.recs[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.UserAgent) > maxUserAgent+len("…") || !utf8.ValidString(p.UserAgent) || !strings.HasPrefix(ua, strings.TrimSuffix(p.UserAgent, "…")) {
		t.Fatalf("recorded user agent of %d bytes: %.40q…", len(p.UserAgent), p.UserAgent)
	}
}

// A map payload gets the actor's keys in one marshal; any other payload through
// withActor. Both give the same bytes, which the hash covers.
func TestActorKeysSameEitherWay(t *testing.T) {
	t.Parallel()
	a := Actor{Kind: ActorToken, TokenID: "t1", TokenName: "ci <bot>", UserAgent: "agent/1 & co", Said: "do it"}
	m := map[string]any{"arguments": map[string]any{"q": "<b>x</b>", "n": 2.5}, "user_agent": "own", "said": "old", "list": []any{1, "a"}}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBatch([]Entry{{Actor: a, Action: "tool.call", Payload: m}, {Actor: a, Action: "tool.call", Payload: json.RawMessage(raw)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b.recs[0].Payload), string(b.recs[1].Payload); got != want {
		t.Fatalf("map payload:\n%s\nraw payload:\n%s", got, want)
	}
	var p map[string]any
	if err := json.Unmarshal(b.recs[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p["said"] != "do it" || p["user_agent"] != "own" || p["token_name"] != "ci <bot>" || p["token_id"] != "t1" {
		t.Fatalf("payload %v: want said replaced, the payload's user_agent kept, the token added", p)
	}
	if _, ok := m["token_id"]; ok {
		t.Fatal("the caller's map was changed")
	}
}
