package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolwarden/toolwarden/internal/atomicfile"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
)

// checkpointKeyFlag registers --checkpoint-key-file, which serve and the audit commands take.
func checkpointKeyFlag(fs *flag.FlagSet) *string {
	return fs.String("checkpoint-key-file", envOr("TOOLWARDEN_CHECKPOINT_KEY_FILE", ""),
		"Ed25519 key that signs audit checkpoints; default <data-dir>/checkpoint.key, created 0600 on first use with its public key (.pub) beside it (env TOOLWARDEN_CHECKPOINT_KEY_FILE)")
}

func checkpointKeyPath(c config, flagValue string) string {
	return orDefault(flagValue, filepath.Join(c.DataDir, "checkpoint.key"))
}

func checkpointDir(c config) string { return filepath.Join(c.DataDir, "checkpoints") }

// openForAudit opens the database as its owner, read-only in spirit: an auditor's
// commands never migrate, and refuse a data dir without a cluster (a mistyped
// --data-dir, where opening would run initdb) and a database without Toolwarden's schema.
func openForAudit(ctx context.Context, c config, cmd string, stderr io.Writer) (*db.DB, error) {
	if err := clusterExists(c, cmd); err != nil {
		return nil, err
	}
	d, err := openDBAsOwner(ctx, c, stderr)
	if err != nil {
		return nil, err
	}
	if st, err := db.CurrentMigration(ctx, d.Pool); err != nil {
		d.Close()
		return nil, err
	} else if st.Version == 0 {
		d.Close()
		return nil, fmt.Errorf("toolwarden %s: this database has no Toolwarden schema yet: no audit log to read", cmd)
	}
	return d, nil
}

func cmdAuditCheckpoint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	fs := newFlagSet("audit checkpoint", stderr)
	commonFlags(fs, &c)
	keyFile := checkpointKeyFlag(fs)
	out := fs.String("out", "", `write the checkpoint to this file, which must not exist ("-": standard output); default a new file in <data-dir>/checkpoints`)
	if err := parse(fs, args); err != nil {
		return err
	}
	// A file there may be an older checkpoint kept as evidence: never replaced.
	if *out != "" && *out != "-" {
		if _, err := os.Lstat(*out); err == nil {
			return fmt.Errorf("toolwarden audit checkpoint: --out %s exists; it is not replaced (it may be an older checkpoint kept as evidence): name a new file", *out)
		}
	}
	d, err := openForAudit(ctx, c, "audit checkpoint", stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	// Only now: the key is created on first use, and must not be in a data dir that
	// holds no database.
	signer, err := audit.OpenSigner(checkpointKeyPath(c, *keyFile))
	if err != nil {
		return err
	}
	// As serve's schedule does: a chain cut back or rewritten since the newest checkpoint
	// in the directory is refused, not signed (which would hide the cut from verify).
	cp, _, err := audit.NewCheckpointer(d.Pool, signer, checkpointDir(c)).Make(ctx)
	if err != nil {
		return err
	}
	switch *out {
	case "-":
		_, err := stdout.Write(cp.Marshal())
		return err
	case "":
		path, err := audit.WriteCheckpoint(checkpointDir(c), cp)
		if err != nil {
			return err
		}
		*out = path
	default:
		// Whole or not at all, and still never over a file made meanwhile.
		if err := atomicfile.WriteNew(*out, cp.Marshal()); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("toolwarden audit checkpoint: --out %s exists; it is not replaced: name a new file", *out)
			}
			return fmt.Errorf("--out: %w", err)
		}
		// Readable as the checkpoints in <data-dir>/checkpoints are: a checkpoint is for
		// auditors, and holds no secret.
		if err := os.Chmod(*out, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	fmt.Fprintf(stdout, "checkpoint of entry %d (hash %s…) signed by %s written to %s\n", cp.ID, cp.Hash[:16], cp.KeyFingerprint, *out)
	return nil
}

// exitVerifyFailed and exitCouldNotVerify are audit verify's exit codes besides 0 and
// 2 (a wrong command line): the log does not verify (a broken chain, a checkpoint it no
// longer reaches, or a checkpoint altered: its signature does not hold, its file is no
// checkpoint, the newest renamed), or the check could not run (no database, no such
// checkpoint file, one that cannot be read): a script must not take the one for the
// other, as one that alerts on 1 and retries on 3 would retry on tampering.
const (
	exitVerifyFailed   = 1
	exitCouldNotVerify = 3
)

func cmdAuditVerify(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c config
	fs := newFlagSet("audit verify", stderr)
	commonFlags(fs, &c)
	keyFile := checkpointKeyFlag(fs)
	cpFlag := fs.String("checkpoint", "", `a checkpoint file the chain must still reach ("-": standard input); default the newest in <data-dir>/checkpoints; "none": check the chain alone`)
	pubFlag := fs.String("public-key", "", "the public key checkpoints must be signed with; default the .pub beside --checkpoint-key-file, when it exists")
	var workers int
	decimalVar(fs, &workers, "workers", 0, 0, "a whole number of ranges in decimal, such as 4, or 0 for one per CPU",
		"ranges read and hashed at once; 0: one per CPU")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolwarden audit verify [--checkpoint F] [--public-key P] [--workers N] [flags]\n\n"+
			"Checks the audit log's hash chain, and that it still reaches the newest signed checkpoint\n"+
			"in <data-dir>/checkpoints (or F). Exit status: 0 it verifies, 1 it does not (the entries\n"+
			"are named; or the checkpoint was altered: its signature does not hold, its file holds no\n"+
			"checkpoint, or the newest's name is not its content's), 2 a wrong command line, 3 the\n"+
			"check could not run (the database unreachable, a checkpoint file missing or unreadable).")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	res, cpNote, err := auditVerify(ctx, c, *cpFlag, *pubFlag, checkpointKeyPath(c, *keyFile), workers, stdin, stderr)
	if err != nil {
		var altered alteredCheckpoint
		// ErrMalformedLog: an entry cannot be read (the table was altered), tampering.
		if errors.Is(err, audit.ErrCheckpointSignature) || errors.As(err, &altered) || errors.Is(err, audit.ErrMalformedLog) {
			return codedError{exitVerifyFailed, err}
		}
		return codedError{exitCouldNotVerify, err}
	}
	printVerify(stdout, res, cpNote)
	if !res.OK() {
		return exitError{exitVerifyFailed}
	}
	return nil
}

// auditVerify loads the checkpoint and checks the chain against it.
func auditVerify(ctx context.Context, c config, cpFlag, pubFlag, keyPath string, workers int, stdin io.Reader, stderr io.Writer) (audit.VerifyResult, string, error) {
	cp, older, cpNote, err := loadCheckpoint(c, cpFlag, pubFlag, keyPath, stdin)
	if err != nil {
		return audit.VerifyResult{}, "", err
	}
	d, err := openForAudit(ctx, c, "audit verify", stderr)
	if err != nil {
		return audit.VerifyResult{}, "", err
	}
	defer d.Close()
	res, err := audit.VerifyWith(ctx, d.Pool, audit.VerifyOptions{Checkpoint: cp, Older: older, Workers: workers})
	return res, cpNote, err
}

// stdinCheckpoint is how --checkpoint - is named in what verify says.
const stdinCheckpoint = "(standard input)"

// loadCheckpoint is the checkpoint verify uses (nil when there is none, or with
// --checkpoint none), by the server's own rules (audit.LoadCheckpoint), the older ones
// beside it that narrow down a rewrite, and which one it is. "-" reads it from stdin,
// as audit checkpoint --out - writes it.
func loadCheckpoint(c config, flagValue, pubFlag, keyPath string, stdin io.Reader) (*audit.Checkpoint, []audit.Checkpoint, string, error) {
	if flagValue == "none" {
		return nil, nil, "no checkpoint (--checkpoint none)", nil
	}
	if flagValue == "-" {
		// LoadCheckpoint reads a file (a regular one only, so a pipe's path would be
		// refused): a copy in a folder of its own, named as standard input in what is said.
		tmp, err := os.MkdirTemp("", "toolwarden-checkpoint-")
		if err != nil {
			return nil, nil, "", err
		}
		defer os.RemoveAll(tmp)
		data, err := io.ReadAll(io.LimitReader(stdin, maxStdinCheckpoint+1))
		if err != nil {
			return nil, nil, "", fmt.Errorf("--checkpoint -: read standard input: %w", err)
		}
		switch {
		case len(data) == 0:
			return nil, nil, "", errors.New("--checkpoint -: standard input held nothing (toolwarden audit checkpoint --out - writes a checkpoint)")
		case len(data) > maxStdinCheckpoint:
			return nil, nil, "", fmt.Errorf("--checkpoint -: standard input holds more than %d bytes: not a checkpoint", maxStdinCheckpoint)
		}
		flagValue = filepath.Join(tmp, "checkpoint")
		if err := os.WriteFile(flagValue, data, 0o600); err != nil {
			return nil, nil, "", err
		}
		cp, older, note, err := loadCheckpointFile(c, flagValue, pubFlag, keyPath)
		if err != nil {
			return nil, nil, "", shownAs(err, flagValue, stdinCheckpoint)
		}
		return cp, older, strings.ReplaceAll(note, flagValue, stdinCheckpoint), nil
	}
	return loadCheckpointFile(c, flagValue, pubFlag, keyPath)
}

// maxStdinCheckpoint bounds what --checkpoint - reads (a checkpoint is under 1 KB; the
// files verify reads are bounded alike).
const maxStdinCheckpoint = 64 << 10

func loadCheckpointFile(c config, path, pubFlag, keyPath string) (*audit.Checkpoint, []audit.Checkpoint, string, error) {
	src := audit.CheckpointSource{Path: path, Dir: checkpointDir(c), PublicKey: pubFlag, KeyFile: keyPath}
	cp, note, err := audit.LoadCheckpoint(src)
	if err != nil {
		if !errors.Is(err, audit.ErrCheckpointSignature) && checkpointAltered(src) {
			err = alteredCheckpoint{err}
		}
		return nil, nil, "", err
	}
	return cp, audit.OlderCheckpoints(src, cp), note, nil
}

// alteredCheckpoint is LoadCheckpoint's error when the checkpoint file is itself what
// is wrong (checkpointAltered): verify exits 1 on it, as on a signature that does not
// hold, not 3.
type alteredCheckpoint struct{ err error }

func (e alteredCheckpoint) Error() string { return e.err.Error() }
func (e alteredCheckpoint) Unwrap() error { return e.err }

// checkpointAltered reports, after LoadCheckpoint failed on src, whether the checkpoint
// file is to blame: it exists and reads, but holds no checkpoint this Toolwarden wrote
// (not JSON, unknown fields, over 64 KB, a version below any written); or, in the
// directory, the newest (or one named later) is renamed, its name not its content's,
// or is no regular file, which LatestCheckpoint calls signs of tampering.
// LoadCheckpoint's errors carry no sentinel for these, so its steps on the checkpoint
// file are run again: when they pass, the failure was elsewhere (the key files, a newer
// format). An I/O error (a file missing or unreadable) is no sign of anything: the
// check could not run.
func checkpointAltered(src audit.CheckpointSource) bool {
	path := src.Path
	if path == "" {
		latest, err := audit.LatestCheckpoint(src.Dir)
		if err != nil {
			return !ioError(err)
		}
		if latest == "" {
			return false
		}
		path = latest
	} else if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		// A link or a device given as --checkpoint is refused, but was chosen, not altered.
		return false
	}
	cp, err := audit.ReadCheckpoint(path)
	if err != nil {
		return !ioError(err)
	}
	return cp.Version < audit.CheckpointVersion
}

// ioError reports whether err is the file system's (a file missing, unreadable).
func ioError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe)
}

// renamedError is err said with a path replaced, still wrapping it (errors.Is and As
// find audit.ErrCheckpointSignature and alteredCheckpoint through it).
type renamedError struct {
	msg string
	err error
}

func (e renamedError) Error() string { return e.msg }
func (e renamedError) Unwrap() error { return e.err }

func shownAs(err error, path, as string) error {
	return renamedError{msg: strings.ReplaceAll(err.Error(), path, as), err: err}
}

func printVerify(w io.Writer, res audit.VerifyResult, cpNote string) {
	if res.OK() {
		fmt.Fprintf(w, "audit chain OK: %d entries verified (through entry %d)\n", res.Checked, res.VerifiedThrough)
		if res.Checkpoint != nil {
			fmt.Fprintf(w, "reaches the %s\n", cpNote)
		} else {
			fmt.Fprintln(w, cpNote)
		}
		return
	}
	fmt.Fprintf(w, "audit chain BROKEN at entry %d: %s\n", res.BadID, res.Reason)
	fmt.Fprintf(w, "(%d entries checked; the chain verifies from the start through entry %d; newest entry %d)\n", res.Checked, res.VerifiedThrough, res.Head.ID)
	fmt.Fprintln(w, cpNote)
	// Listed unless the one problem is the break named above (a missing id is no
	// problem of its own: the ids below say so).
	if res.ProblemCount > 1 || res.ProblemCount == 1 && len(res.Problems) == 1 && res.Problems[0].ID != res.BadID {
		fmt.Fprintf(w, "%d entries do not verify:\n", res.ProblemCount)
		for _, p := range res.Problems {
			fmt.Fprintf(w, "  entry %d: %s\n", p.ID, p.Reason)
		}
		if n := res.ProblemCount - int64(len(res.Problems)); n > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", n)
		}
	}
	if res.Missing > 0 {
		fmt.Fprintf(w, "missing ids (%d; ids are consecutive, so each was deleted): %s\n", res.Missing, audit.GapList(res.Gaps))
	}
}
