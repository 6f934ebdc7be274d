package audit

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/atomicfile"
	"github.com/toolwarden/toolwarden/services/db"
)

// A checkpoint is a signed statement of the chain head (docs/security.md, Signed
// checkpoints): the newest entry's id and hash at a moment, signed with an Ed25519 key
// that lives in a file, not in the database. Whoever can rewrite the table (a database
// superuser) cannot make a chain that still matches a checkpoint kept elsewhere:
// deleting entries from the end, emptying the table or recomputing every hash all show
// at the checkpoint's id.

// CheckpointVersion is the format of the statement a checkpoint signs.
const CheckpointVersion = 1

// Checkpoint is a signed chain head, as written to a checkpoint file (JSON).
type Checkpoint struct {
	Version int    `json:"version"`
	ID      int64  `json:"id"`   // the newest entry (0: the log was empty)
	Hash    string `json:"hash"` // its hash, hex (the genesis hash for an empty log)
	// EntryAt is when that entry was written (zero for an empty log).
	EntryAt time.Time `json:"entry_at,omitzero"`
	At      time.Time `json:"at"` // when the checkpoint was made
	// KeyFingerprint names the signing key: "sha256:" and the hex SHA-256 of the raw public key.
	KeyFingerprint string `json:"key_fingerprint"`
	PublicKey      string `json:"public_key"` // base64 of the raw Ed25519 public key
	Signature      string `json:"signature"`  // base64 Ed25519 signature of Statement()
}

// Statement is the text the signature covers: one field a line, so nothing depends on
// how JSON is spelled.
func (c Checkpoint) Statement() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "toolwarden audit checkpoint v%d\n", c.Version)
	fmt.Fprintf(&b, "id %d\nhash %s\n", c.ID, c.Hash)
	entryAt := ""
	if !c.EntryAt.IsZero() {
		entryAt = c.EntryAt.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(&b, "entry_at %s\nat %s\nkey %s\n", entryAt, c.At.UTC().Format(time.RFC3339Nano), c.KeyFingerprint)
	return []byte(b.String())
}

// Fingerprint names a public key: "sha256:" and the hex SHA-256 of its 32 bytes.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ErrCheckpointSignature means a checkpoint's signature does not verify, or it was
// signed by another key than the one trusted.
var ErrCheckpointSignature = errors.New("audit: checkpoint signature does not verify")

// Verify checks the checkpoint's signature with its own public key and, when trusted
// is given, that this key is trusted's.
func (c Checkpoint) Verify(trusted ed25519.PublicKey) error {
	if c.Version != CheckpointVersion {
		return fmt.Errorf("audit: checkpoint version %d: this Toolwarden reads version %d", c.Version, CheckpointVersion)
	}
	pub, err := base64.StdEncoding.DecodeString(c.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: malformed public key", ErrCheckpointSignature)
	}
	if Fingerprint(pub) != c.KeyFingerprint {
		return fmt.Errorf("%w: the key fingerprint does not match its public key", ErrCheckpointSignature)
	}
	if trusted != nil && !slices.Equal(trusted, ed25519.PublicKey(pub)) {
		return fmt.Errorf("%w: signed by key %s, not by the trusted key %s", ErrCheckpointSignature, c.KeyFingerprint, Fingerprint(trusted))
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || !ed25519.Verify(pub, c.Statement(), sig) {
		return fmt.Errorf("%w: the statement was altered or not signed by key %s", ErrCheckpointSignature, c.KeyFingerprint)
	}
	if c.ID < 0 || len(c.Hash) != 2*sha256.Size {
		return fmt.Errorf("audit: checkpoint: malformed head %d %q", c.ID, c.Hash)
	}
	return nil
}

// Signer signs checkpoints with an Ed25519 private key.
type Signer struct {
	key ed25519.PrivateKey
}

// Public is the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// NewSigner is a Signer with key.
func NewSigner(key ed25519.PrivateKey) *Signer { return &Signer{key: key} }

// PublicKeyPath is where OpenSigner keeps the public key of the key at keyPath.
func PublicKeyPath(keyPath string) string { return strings.TrimSuffix(keyPath, ".key") + ".pub" }

// OpenSigner loads the checkpoint signing key from keyPath (PKCS #8 PEM), creating it
// on first use: mode 0600, with its public key (PKIX PEM) beside it at
// PublicKeyPath(keyPath). A key file others can read is refused, and so is a missing
// key whose public key is still there (the key was lost, this is no first use).
func OpenSigner(keyPath string) (*Signer, error) {
	s, err := readSigner(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return createSigner(keyPath)
	}
	if err != nil {
		return nil, err
	}
	// The public key is only a copy for auditors; put it back if it went missing.
	if _, err := os.Stat(PublicKeyPath(keyPath)); errors.Is(err, fs.ErrNotExist) {
		if err := writePublicKey(PublicKeyPath(keyPath), s.Public()); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readSigner loads an existing signing key (an error wrapping fs.ErrNotExist when there
// is none).
func readSigner(keyPath string) (*Signer, error) {
	raw, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("audit: checkpoint key: %w", err)
	}
	if st, err := os.Stat(keyPath); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit: checkpoint key file %s is readable by others (mode %o): chmod 600 it", keyPath, st.Mode().Perm())
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		return nil, fmt.Errorf("audit: checkpoint key file %s: not PEM", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: checkpoint key file %s: %w", keyPath, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit: checkpoint key file %s: not an Ed25519 key", keyPath)
	}
	return &Signer{key: key}, nil
}

func createSigner(keyPath string) (*Signer, error) {
	// A .pub without its key means the key was lost (not copied on a host move, say): a
	// new key would overwrite the .pub, and the checkpoints would be continued from none
	// of the old key's, so a chain cut before would be signed without complaint.
	pubPath := PublicKeyPath(keyPath)
	if _, err := os.Lstat(pubPath); err == nil {
		// Another process may have just made both: it writes the key before the .pub.
		if s, err := readSigner(keyPath); !errors.Is(err, fs.ErrNotExist) {
			return s, err
		}
		return nil, fmt.Errorf("audit: checkpoint key %s is missing but %s is there: restore the key file (--checkpoint-key-file), or move %s aside to start a new key (the old checkpoints then verify only with toolwarden audit verify --public-key <the old .pub>)",
			keyPath, pubPath, pubPath)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("audit: checkpoint public key: %w", err)
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("audit: checkpoint key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("audit: checkpoint key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(keyPath), 0o700); err != nil {
		return nil, fmt.Errorf("audit: checkpoint key: %w", err)
	}
	// Whole or not at all, and durable before a checkpoint is signed with it: a key file
	// left empty by a crash or a full disk (and no .pub) would be refused as not PEM at
	// every later start.
	err = atomicfile.WriteNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if errors.Is(err, fs.ErrExist) {
		return OpenSigner(keyPath) // another process made it first
	}
	if err != nil {
		return nil, fmt.Errorf("audit: create checkpoint key: %w", err)
	}
	if err := writePublicKey(PublicKeyPath(keyPath), pub); err != nil {
		return nil, err
	}
	return &Signer{key: key}, nil
}

func writePublicKey(path string, pub ed25519.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("audit: checkpoint public key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if err := writeFileAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("audit: write checkpoint public key: %w", err)
	}
	return nil
}

// ReadPublicKey reads a checkpoint public key file (PKIX PEM, as OpenSigner writes).
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: checkpoint public key: %w", err)
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		return nil, fmt.Errorf("audit: checkpoint public key %s: not PEM", path)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: checkpoint public key %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("audit: checkpoint public key %s: not an Ed25519 key", path)
	}
	return pub, nil
}

// Sign makes a checkpoint of head as found at the given time.
func (s *Signer) Sign(head Head, entryAt, at time.Time) Checkpoint {
	pub := s.Public()
	hash := head.Hash
	if head.ID == 0 {
		hash = genesis
	}
	c := Checkpoint{Version: CheckpointVersion, ID: head.ID, Hash: hex.EncodeToString(hash), At: at.UTC().Truncate(time.Microsecond),
		KeyFingerprint: Fingerprint(pub), PublicKey: base64.StdEncoding.EncodeToString(pub)}
	if head.ID != 0 {
		c.EntryAt = entryAt.UTC()
	}
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, c.Statement()))
	return c
}

// MakeCheckpoint signs the chain head as q sees it now. It does not verify the chain
// (VerifyWith does): it states what is there.
func MakeCheckpoint(ctx context.Context, q db.Querier, s *Signer) (Checkpoint, error) {
	var head Head
	var at time.Time
	err := q.QueryRow(ctx, `/* audit.MakeCheckpoint */ SELECT id, hash, at FROM audit_log ORDER BY id DESC LIMIT 1`).Scan(&head.ID, &head.Hash, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		head = Head{}
	} else if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: chain head: %w", err)
	}
	// The head may be a LOW call's entry, committed without waiting for the disk
	// (docs/security.md): signed and then lost in a crash, it would leave a whole chain
	// that never again reaches its checkpoint.
	if err := durable(ctx, q); err != nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", err)
	}
	return s.Sign(head, at, time.Now()), nil
}

// durable makes every commit so far durable: a transaction that writes a record of
// its own (a logical message, which changes no table) and commits synchronously
// flushes the WAL up to its commit record, and with it every asynchronous commit
// before, and waits for the synchronous standbys too. On a standby what can be read is
// on its disk already.
func durable(ctx context.Context, q db.Querier) error {
	b, ok := q.(db.TxBeginner)
	if !ok {
		return nil
	}
	var standby bool
	if err := q.QueryRow(ctx, `/* audit.durable */ SELECT pg_is_in_recovery()`).Scan(&standby); err != nil || standby {
		return err
	}
	return db.WithTx(ctx, b, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `/* audit.durable */ SET LOCAL synchronous_commit = on`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `/* audit.durable */ SELECT pg_logical_emit_message(true, 'toolwarden.checkpoint', '')`)
		return err
	})
}

// Marshal is the checkpoint file's content.
func (c Checkpoint) Marshal() []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}

// ParseCheckpoint reads a checkpoint file's content (it does not check the signature).
func ParseCheckpoint(data []byte) (Checkpoint, error) {
	var c Checkpoint
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", err)
	}
	return c, nil
}

// ReadCheckpoint reads and parses a checkpoint file.
func ReadCheckpoint(path string) (Checkpoint, error) {
	// A checkpoint is a small regular file: a FIFO or a link to a device put in its
	// place must not hang or exhaust the reader.
	st, err := os.Lstat(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxCheckpointFile {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint %s: not a regular file of at most %d bytes", path, maxCheckpointFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", err)
	}
	c, err := ParseCheckpoint(data)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// maxCheckpointFile bounds what ReadCheckpoint reads (a checkpoint is under 1 KB).
const maxCheckpointFile = 64 << 10

// FileName is the name WriteCheckpoint gives c: its time and id, so names sort by age.
func (c Checkpoint) FileName() string {
	return checkpointPrefix + c.At.UTC().Format(checkpointStamp) + "-" + strconv.FormatInt(c.ID, 10) + checkpointSuffix
}

// A checkpoint file's name: checkpointPrefix, its time (checkpointStamp), "-", its
// chain id, checkpointSuffix (FileName, parseCheckpointName).
const (
	checkpointPrefix = "checkpoint-"
	checkpointSuffix = ".json"
	checkpointStamp  = "20060102T150405.000000Z"
)

// isCheckpointName reports whether n is named as a checkpoint file is.
func isCheckpointName(n string) bool {
	return strings.HasPrefix(n, checkpointPrefix) && strings.HasSuffix(n, checkpointSuffix)
}

// parseCheckpointName is the time and chain id a checkpoint file's name n says (FileName);
// ok false when it says none.
func parseCheckpointName(n string) (at time.Time, id int64, ok bool) {
	stamp, idText, cut := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(n, checkpointPrefix), checkpointSuffix), "-")
	at, err := time.Parse(checkpointStamp, stamp)
	if err != nil || !cut {
		return time.Time{}, 0, false
	}
	id, err = strconv.ParseInt(idText, 10, 64)
	return at, id, err == nil && id >= 0
}

// WriteCheckpoint writes c into dir (created 0700 if missing) under c.FileName(),
// atomically, and returns its path.
func WriteCheckpoint(dir string, c Checkpoint) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("audit: checkpoint dir: %w", err)
	}
	path := filepath.Join(dir, c.FileName())
	if err := writeFileAtomic(path, c.Marshal(), 0o644); err != nil {
		return "", fmt.Errorf("audit: write checkpoint: %w", err)
	}
	return path, nil
}

// LatestCheckpoint is the path of the newest checkpoint file in dir ("" when there is
// none): the one of the highest chain id, ties by its time. Not the one whose name
// sorts last: a name begins with the time it was made, and one made while the clock was
// ahead would hide every later one, so checks would stop at a stale head. The newest as
// the names say is read, and then those whose names say a later time: a file that is no
// regular file, cannot be read, or whose name is not its content's (an older checkpoint
// renamed to look newer) is an error, as a sign the directory was tampered with. The
// signature is LoadCheckpoint's to check.
func LatestCheckpoint(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("audit: checkpoints: %w", err)
	}
	files, err := checkpointFiles(dir, entries, false)
	if err != nil {
		return "", err
	}
	latest := ""
	var newest Checkpoint
	for _, f := range files {
		// Past the newest, only a file whose name says a later time is read: the one a
		// check by name would have taken, which must not be a renamed older one.
		if latest != "" && !f.at.After(newest.At) {
			continue
		}
		path := filepath.Join(dir, f.name)
		cp, err := ReadCheckpoint(path)
		if err != nil {
			return "", err
		}
		if f.name != cp.FileName() {
			return "", fmt.Errorf("checkpoint %s: its name does not match its content (entry %d at %s)", path, cp.ID, cp.At.Format(time.RFC3339))
		}
		// One whose signature does not verify is still the newest: LoadCheckpoint
		// refuses it, not passes it over, as an altered checkpoint is an alarm.
		if latest == "" {
			latest, newest = path, cp
		}
	}
	return latest, nil
}

// checkpointFile is a checkpoint file as its name says: its chain id and time.
type checkpointFile struct {
	name string
	id   int64 // -1: the name says none
	at   time.Time
}

// checkpointFiles are the checkpoint files among dir's entries, newest first as their
// names say (by chain id, then time), those whose names say none first of all. A file
// that is no regular file (a FIFO, a link) is passed over with skipOdd, else an error,
// said as ReadCheckpoint says it.
func checkpointFiles(dir string, entries []fs.DirEntry, skipOdd bool) ([]checkpointFile, error) {
	var files []checkpointFile
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !isCheckpointName(n) {
			continue
		}
		if !e.Type().IsRegular() {
			if skipOdd {
				continue
			}
			_, err := ReadCheckpoint(filepath.Join(dir, n))
			return nil, err
		}
		f := checkpointFile{name: n, id: -1}
		if at, id, ok := parseCheckpointName(n); ok {
			f.id, f.at = id, at
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b checkpointFile) int {
		switch {
		case a.id < 0 || b.id < 0:
			return cmp.Compare(a.id, b.id)
		case a.id != b.id:
			return cmp.Compare(b.id, a.id)
		}
		return b.at.Compare(a.at)
	})
	return files, nil
}

// checkpointSkew is how far in the future a checkpoint's time may be before a check
// says so (clocks of hosts differ a little).
const checkpointSkew = time.Minute

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ErrChainRewound means the chain no longer holds the entry the newest checkpoint
// signed, with the hash signed (entries were deleted from its end or rewritten), or the
// entries after it do not verify (one was altered, removed or reordered since).
var ErrChainRewound = errors.New("audit: the chain no longer reaches the last checkpoint")

// Checkpointer writes signed checkpoints of the chain head into a directory: what
// `serve` does on a schedule (app's "checkpoints" component).
type Checkpointer struct {
	q      db.Querier
	signer *Signer
	dir    string
	// last is the newest checkpoint in dir signed by this key or, when there is none,
	// the newest signed by another (the key and its .pub both lost: a new key must
	// still find the chain reaching the old key's head).
	last *Checkpoint
}

// lastOfOtherKey says, for an error, that the checkpoint checked against is not this
// key's ("" when it is).
func (c *Checkpointer) lastOfOtherKey() string {
	if c.last == nil || c.last.KeyFingerprint == Fingerprint(c.signer.Public()) {
		return ""
	}
	return fmt.Sprintf(" (by key %s, not this one, %s: this key has signed no checkpoint here yet)",
		c.last.KeyFingerprint, Fingerprint(c.signer.Public()))
}

// NewCheckpointer writes checkpoints of the chain q reads into dir, signed by s.
func NewCheckpointer(q db.Querier, s *Signer, dir string) *Checkpointer {
	return &Checkpointer{q: q, signer: s, dir: dir}
}

// Write signs the head unless it is the one the newest checkpoint already signed, and
// returns the new file's path ("" when nothing changed). It writes nothing when Make
// refuses.
func (c *Checkpointer) Write(ctx context.Context) (string, error) {
	cp, same, err := c.Make(ctx)
	if err != nil || same {
		return "", err
	}
	path, err := WriteCheckpoint(c.dir, cp)
	if err != nil {
		return "", err
	}
	c.last = &cp
	return path, nil
}

// Make signs the chain head; same reports that the newest checkpoint in the directory
// signed that head already. Before signing it checks that the entry the newest
// checkpoint signed is still there with the same hash, and that the entries from it to
// the head verify (hashes, links, no missing id), so a chain cut back, rewritten or
// broken since is not blessed by a new checkpoint: it returns ErrChainRewound.
// `toolwarden audit checkpoint` and the server's schedule both sign through it.
func (c *Checkpointer) Make(ctx context.Context) (cp Checkpoint, same bool, err error) {
	if c.last == nil {
		if err := c.loadLast(); err != nil {
			return Checkpoint{}, false, err
		}
	}
	cp, err = MakeCheckpoint(ctx, c.q, c.signer)
	if err != nil {
		return Checkpoint{}, false, err
	}
	last := c.last
	if last == nil {
		return cp, false, nil
	}
	other := c.lastOfOtherKey()
	if cp.ID == last.ID && cp.Hash == last.Hash && other == "" {
		return cp, true, nil
	}
	if last.ID > 0 {
		var hash []byte
		err := c.q.QueryRow(ctx, `/* audit.Checkpointer.reach */ SELECT hash FROM audit_log WHERE id = $1`, last.ID).Scan(&hash)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && hex.EncodeToString(hash) != last.Hash:
			return Checkpoint{}, false, fmt.Errorf("%w: entry %d, signed at %s%s, is missing or was changed (run toolwarden audit verify; after restoring a backup, set aside the checkpoints newer than it: docs/deploy.md, Backups)",
				ErrChainRewound, last.ID, last.At.Format(time.RFC3339), other)
		case err != nil:
			return Checkpoint{}, false, fmt.Errorf("audit: checkpoint: %w", err)
		}
	}
	if err := verifySince(ctx, c.q, *last, cp, other); err != nil {
		return Checkpoint{}, false, err
	}
	return cp, false, nil
}

// verifySince checks the entries after the one last signed through the head cp is
// about to sign, as verify does: each hash, each link (the first to last's hash) and
// that no id is missing. Signing a head vouches for every entry before it; those before
// last were vouched for already.
func verifySince(ctx context.Context, q db.Querier, last, cp Checkpoint, other string) error {
	if cp.ID <= last.ID {
		return nil
	}
	prev, err := hex.DecodeString(last.Hash)
	if err != nil {
		return fmt.Errorf("audit: checkpoint: last checkpoint's hash: %w", err)
	}
	ch := &chunk{lo: last.ID + 1, hi: cp.ID}
	err = onConn(ctx, q, func(conn *pgx.Conn) error {
		return (&reader{checked: new(atomic.Int64)}).read(ctx, conn, ch)
	})
	if err != nil {
		return fmt.Errorf("audit: checkpoint: %w", err)
	}
	res := assemble([]*chunk{ch}, prev, nil, nil)
	if res.OK() && hex.EncodeToString(res.Head.Hash) != cp.Hash {
		res.BadID, res.Reason = cp.ID, "its hash changed while the chain was checked"
	}
	if !res.OK() {
		return fmt.Errorf("%w: the entries after entry %d, signed at %s%s, do not verify: entry %d: %s (run toolwarden audit verify)",
			ErrChainRewound, last.ID, last.At.Format(time.RFC3339), other, res.BadID, res.Reason)
	}
	return nil
}

// onConn runs fn on a connection of q: one of the pool's, or a transaction's own.
func onConn(ctx context.Context, q db.Querier, fn func(*pgx.Conn) error) error {
	switch c := q.(type) {
	case *pgxpool.Pool:
		pc, err := c.Acquire(ctx)
		if err != nil {
			return err
		}
		defer pc.Release()
		return fn(pc.Conn())
	case interface{ Conn() *pgx.Conn }:
		return fn(c.Conn())
	}
	return fmt.Errorf("need a pool, a connection or a transaction, got %T", q)
}

// OlderCheckpoints are the checkpoint files in src's directory (and beside src.Path)
// that signed an entry before cp's, for VerifyOptions.Older. They are read, not
// checked: verify checks the signature of the one it uses. A file that cannot be read
// is passed over; an older checkpoint can only narrow where a rewrite lies, never make
// a check pass.
func OlderCheckpoints(src CheckpointSource, cp *Checkpoint) []Checkpoint {
	if cp == nil {
		return nil
	}
	dirs := []string{src.Dir}
	if src.Path != "" {
		dirs = append(dirs, filepath.Dir(src.Path))
	}
	var older []Checkpoint
	seen := map[string]bool{}
	for _, dir := range dirs {
		if dir == "" || seen[filepath.Clean(dir)] {
			continue
		}
		seen[filepath.Clean(dir)] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !isCheckpointName(n) {
				continue
			}
			if o, err := ReadCheckpoint(filepath.Join(dir, n)); err == nil && o.ID > 0 && o.ID < cp.ID {
				older = append(older, o)
			}
		}
	}
	return older
}

func (c *Checkpointer) loadLast() error {
	entries, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit: checkpoints: %w", err)
	}
	// The newest this key signed (by chain id, not by the time in its name) is the one
	// to extend: the files are read newest first as their names say, and a name that
	// says another id than its content is passed over.
	files, _ := checkpointFiles(c.dir, entries, true)
	var other *Checkpoint
	for _, f := range files {
		cp, err := ReadCheckpoint(filepath.Join(c.dir, f.name))
		if err != nil || f.name != cp.FileName() {
			continue
		}
		if cp.Verify(c.signer.Public()) == nil {
			c.last = &cp
			return nil
		}
		// Else the newest whose signature verifies with the key it names: with the old
		// key and its .pub both lost, a new key's first checkpoint must not sign a chain
		// cut since.
		if other == nil && cp.Verify(nil) == nil {
			other = &cp
		}
	}
	c.last = other
	return nil
}

// CheckpointSource says which checkpoint a check of the chain must still reach: what
// `toolwarden audit verify` takes from its flags, and what the server's page and API
// take from its checkpoint directory and key, so both run the same check.
type CheckpointSource struct {
	// Path is one checkpoint file; "" takes the newest in Dir.
	Path string
	// Dir holds the checkpoint files (serve's <data-dir>/checkpoints).
	Dir string
	// PublicKey is the file of the key the checkpoint must be signed with; "" takes the
	// .pub beside KeyFile when it exists, else only the checkpoint's own signature is
	// checked (and the note says so).
	PublicKey string
	// KeyFile is the signing key whose public key (PublicKeyPath) is trusted by default.
	KeyFile string
	// NeedsKey is the server's: with no trusted key (neither PublicKey nor KeyFile's .pub
	// nor KeyFile itself), no checkpoint is used, and the note says so. A checkpoint
	// checked only against the key it names itself proves nothing to the server, as
	// anyone who can drop a file into Dir can sign one for a rewritten chain; the CLI,
	// on an auditor's machine, prints that key's fingerprint to compare instead.
	NeedsKey bool
}

// NoTrustedKeyNote is LoadCheckpoint's note when NeedsKey finds no trusted key.
const NoTrustedKeyNote = "no trusted key to check checkpoints with (the checkpoint key and its .pub are both missing)"

// shownAs is an error said in other words (a path shortened), still wrapping it.
type shownAs struct {
	msg string
	err error
}

func (e shownAs) Error() string { return e.msg }
func (e shownAs) Unwrap() error { return e.err }

// LoadCheckpoint finds, reads and checks the signature of the checkpoint src names, and
// says which one it is; it is nil, with a note saying so, when there is none yet.
func LoadCheckpoint(src CheckpointSource) (*Checkpoint, string, error) {
	path := src.Path
	if path == "" {
		if src.Dir == "" {
			return nil, "no checkpoint directory configured", nil
		}
		latest, err := LatestCheckpoint(src.Dir)
		if err != nil {
			return nil, "", shownAs{msg: strings.ReplaceAll(err.Error(), src.Dir, "the checkpoint directory"), err: err}
		}
		if latest == "" {
			return nil, "no checkpoint yet in " + src.Dir, nil
		}
		path = latest
	}
	// One found in Dir is named by its file alone: the notes reach the audit page, and
	// auditors need not learn the server's paths.
	shown := path
	if src.Path == "" {
		shown = filepath.Base(path)
	}
	cp, err := ReadCheckpoint(path)
	if err != nil {
		if src.Path == "" {
			err = shownAs{msg: strings.ReplaceAll(err.Error(), path, shown), err: err}
		}
		return nil, "", err
	}
	if src.Path == "" && filepath.Base(path) != cp.FileName() {
		// LatestCheckpoint refuses it too: a renamed checkpoint is a sign of tampering.
		return nil, "", fmt.Errorf("checkpoint %s: its name does not match its content (entry %d at %s)",
			shown, cp.ID, cp.At.Format(time.RFC3339))
	}
	// So are the key files, in the server's errors.
	hide := func(err error, p string) error {
		if src.Path != "" {
			return err
		}
		return shownAs{msg: strings.ReplaceAll(err.Error(), p, filepath.Base(p)), err: err}
	}
	pubPath := src.PublicKey
	var trusted ed25519.PublicKey
	if pubPath == "" && src.KeyFile != "" {
		if _, err := os.Stat(PublicKeyPath(src.KeyFile)); err == nil {
			pubPath = PublicKeyPath(src.KeyFile)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", hide(fmt.Errorf("audit: checkpoint public key: %w", err), PublicKeyPath(src.KeyFile))
		} else if s, err := readSigner(src.KeyFile); err == nil {
			trusted = s.Public() // the .pub copy went missing: the key itself is trusted
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", hide(err, src.KeyFile)
		}
	}
	signedBy := "signed by " + cp.KeyFingerprint + " (no trusted public key here to compare it with: pass --public-key)"
	if pubPath != "" {
		if trusted, err = ReadPublicKey(pubPath); err != nil {
			return nil, "", hide(err, pubPath)
		}
	}
	if trusted == nil && src.NeedsKey {
		return nil, NoTrustedKeyNote, nil
	}
	if trusted != nil {
		signedBy = "signed by the trusted key " + cp.KeyFingerprint
	}
	if err := cp.Verify(trusted); err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %w", shown, err)
	}
	note := fmt.Sprintf("checkpoint %s: entry %d at %s, %s", shown, cp.ID, cp.At.Format(time.RFC3339), signedBy)
	if cp.At.After(time.Now().Add(checkpointSkew)) {
		// Still the head it signed, but the clock of the host that signed it was ahead
		// (or this one's is behind): worth fixing, as times in the log are off too.
		note += "; its time is in the future: the clock of the host that signed it was ahead, or this host's is behind"
	}
	return &cp, note, nil
}
