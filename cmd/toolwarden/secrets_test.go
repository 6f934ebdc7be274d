package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secretkeys"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// cliDatabase is a data dir and a database of its own for the commands, and a pool on
// the database.
func cliDatabase(t *testing.T) (dir, url string, pool *pgxpool.Pool) {
	t.Helper()
	dir, url = dbtest.TempDir(t), dbtest.NewURL(t)
	pool, err := db.NewPool(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return dir, url, pool
}

// `toolwarden secrets rotate` adds a key and re-encrypts every stored secret with it;
// values under the old key keep decrypting until it is retired; retire-key refuses while
// a value still needs the key; a ciphertext copied to another row does not decrypt.
// All of it audited.
func TestSecretsRotateAndRetire(t *testing.T) {
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	old, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(old.Bytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const canary = "canary-rotation-5f1c0d2e9a"
	// A serving process's keyring, loaded from the file before the rotation.
	serving, err := secrets.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(pool, serving, nil)
	mk := func(name string) registry.Server {
		sv, err := reg.CreateServer(ctx, audit.System, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:9/mcp",
			Headers: map[string]string{"X-Secret": canary + "-" + name}, AuthType: registry.AuthBearer, AuthToken: canary + "-token"})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	s1, s2 := mk("one"), mk("two")
	cli := cliOn(url, dir)
	settleKeyFile(t)
	if _, err := cli("secrets", "retire-key", old.ID); err == nil {
		t.Fatal("retiring the only (primary) key succeeded")
	}
	out, err := cli("secrets", "rotate")
	if err != nil || !strings.Contains(out, "re-encrypted 4 server values") {
		t.Fatalf("rotate: %v %s", err, out)
	}
	fresh, err := secrets.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.PrimaryID() == old.ID || len(fresh.IDs()) != 2 {
		t.Fatalf("keys after rotate: %v", fresh.IDs())
	}
	var headers map[string]string
	var token string
	if err := pool.QueryRow(ctx, `SELECT headers, auth_token FROM mcp_servers WHERE id = $1`, s1.ID).Scan(&headers, &token); err != nil {
		t.Fatal(err)
	}
	if secrets.KeyOf(headers["X-Secret"]) != fresh.PrimaryID() || secrets.KeyOf(token) != fresh.PrimaryID() {
		t.Fatalf("stored values after rotate are under %s and %s, want %s", secrets.KeyOf(headers["X-Secret"]), secrets.KeyOf(token), fresh.PrimaryID())
	}
	// The serving keyring follows the file and decrypts the rotated values.
	if c, err := reg.Connection(ctx, s1.ID); err != nil || c.Headers["X-Secret"] != canary+"-one" {
		t.Fatalf("serving keyring after rotation: %v", err)
	}

	// A process that still wrote under the old key leaves a value needing it: retiring is refused.
	oldOnly, _ := secrets.NewKeyring(old)
	if _, err := registry.New(pool, oldOnly, nil).UpdateServer(ctx, audit.System, s2.ID,
		registry.Patch{Headers: map[string]*string{"X-Late": ptrTo(canary + "-late")}}); err != nil {
		t.Fatal(err)
	}
	// Right after the rotation, retire-key waits until every running server has looked
	// at the key file (each looks every ReloadEvery): until then one may still seal a
	// value with the old key. (The wait is made a second here.) A file copied with its
	// modification time kept (rsync -a) still counts as changed now.
	takeUp(t, time.Second)
	if hour := time.Now().Add(-time.Hour); os.Chtimes(path, hour, hour) != nil {
		t.Fatal("set the key file's times back")
	}
	out, err = cli("secrets", "retire-key", old.ID)
	if err == nil || !strings.Contains(err.Error(), "still seals 1 stored values") || !strings.Contains(out, "waiting 1s for running servers to take up its keys") {
		t.Fatalf("retire with a value under the key: %v %s", err, out)
	}
	if k, _ := secrets.LoadKeyring(path); len(k.IDs()) != 2 {
		t.Fatal("a refused retire changed the key file")
	}
	if out, err = cli("secrets", "rotate", "--reencrypt-only"); err != nil || !strings.Contains(out, "re-encrypted 1 server values") {
		t.Fatalf("rotate --reencrypt-only: %v %s", err, out)
	}
	if out, err = cli("secrets", "retire-key", old.ID); err != nil {
		t.Fatalf("retire: %v %s", err, out)
	}
	after, err := secrets.LoadKeyring(path)
	if err != nil || len(after.IDs()) != 1 || after.PrimaryID() != fresh.PrimaryID() {
		t.Fatalf("keys after retire: %v %v", after, err)
	}
	for _, id := range []string{s1.ID, s2.ID} {
		if _, err := registry.New(pool, after, nil).Connection(ctx, id); err != nil {
			t.Fatalf("after retire, server %s: %v", id, err)
		}
	}
	if _, err := registry.New(pool, oldOnly, nil).Connection(ctx, s1.ID); !errors.Is(err, secrets.ErrUnknownKey) {
		t.Fatalf("the retired key alone: %v, want ErrUnknownKey", err)
	}
	out, _ = cli("secrets", "status")
	if !strings.Contains(out, after.PrimaryID()+"\tprimary\t5 values") {
		t.Errorf("status: %q", out)
	}

	// Copy attack: s1's header ciphertext pasted into s2's row does not decrypt there.
	if _, err := pool.Exec(ctx, `UPDATE mcp_servers SET headers = jsonb_set(headers, '{X-Secret}', (SELECT headers->'X-Secret' FROM mcp_servers WHERE id = $1)) WHERE id = $2`,
		s1.ID, s2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.New(pool, after, nil).Connection(ctx, s2.ID); !errors.Is(err, secrets.ErrDecrypt) {
		t.Fatalf("a ciphertext copied to another row: %v, want ErrDecrypt", err)
	}

	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action IN ('secrets.rotate', 'secrets.retire_key')`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("audited rotations and retirements: %d %v, want 3", n, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%' || $1 || '%'`, canary).Scan(&n); err != nil || n != 0 {
		t.Fatalf("audit rows with the secret: %d %v", n, err)
	}

	// One change of keys at a time: while another holds the key file's lock, or the
	// database's (another replica's rotation), a rotation is refused and adds no key.
	unlock, err := secretkeys.LockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cli("secrets", "rotate"); err == nil || !strings.Contains(err.Error(), "another 'toolwarden secrets' command") {
		t.Fatalf("rotate beside another on the key file: %v %s", err, out)
	}
	unlock()
	release, err := secretkeys.Lock(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cli("secrets", "retire-key", "nope"); err == nil || !strings.Contains(err.Error(), "running on this database") {
		t.Fatalf("retire beside a rotation on the database: %v %s", err, out)
	}
	if out, err := cli("secrets", "rotate"); err == nil || !strings.Contains(err.Error(), "running on this database") {
		t.Fatalf("rotate beside another on the database: %v %s", err, out)
	}
	release()
	if k, _ := secrets.LoadKeyring(path); len(k.IDs()) != 1 {
		t.Fatalf("refused rotations changed the key file: %v", k.IDs())
	}
}

// writeKeyFile writes a new key file holding one new key at path, and returns the key.
func writeKeyFile(t *testing.T, path string) secrets.Key {
	t.Helper()
	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k.Bytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// An execution's approval is sealed (a MAC) with the primary key of its time, and a
// failed one's rollback needs the seal to verify. retire-key refuses while such a seal
// of an execution not yet final only the key verifies (a rotation that re-encrypted the
// secrets alone left it so); `secrets rotate` seals those again with the new key, so the
// old key is retired and the rollback still starts. A seal no key verifies (an altered
// record) is not sealed again.
func TestSecretsRotateReseals(t *testing.T) {
	ctx := context.Background()
	dir := dbtest.TempDir(t)
	path := filepath.Join(dir, "secret.key")
	old := writeKeyFile(t, path)
	// The serving keyring follows the key file, as serve's does.
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) { c.Keys = keys }})
	a.LiveServer(t, "mt", true, "echo", "fail")
	a.SetRisk(t, "mt__fail", risk.Low)
	u, err := a.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	boss := executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}, Role: auth.RoleAdmin}
	step := func(tool, args string) executions.RequestStep {
		return executions.RequestStep{Tool: tool, Arguments: json.RawMessage(args)}
	}
	failed := func() string {
		t.Helper()
		ex, err := a.Executions.Create(ctx, boss, executions.Input{Plan: &executions.Request{
			Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__fail", `{}`)},
			Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo"}`)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, a, ex.ID, executions.Failed)
		return ex.ID
	}
	ex, altered, earlier := failed(), failed(), failed()
	if _, err := a.Pool.Exec(ctx, `UPDATE executions SET seal = '\x00'::bytea || seal WHERE id = $1`, altered); err != nil {
		t.Fatal(err)
	}
	// One sealed by the release before v2 seals (the id and the hashes only), with the
	// old key: it holds no retirement back, and the retirement says what it leaves.
	{
		got, err := a.Executions.Get(ctx, earlier)
		if err != nil {
			t.Fatal(err)
		}
		oldRing, err := secrets.NewKeyring(old)
		if err != nil {
			t.Fatal(err)
		}
		in := []byte("toolwarden execution seal v1\x00" + earlier)
		for _, h := range [][]byte{got.PlanHash, got.ApprovedHash, got.RollbackHash} {
			in = append(append(in, 0), h...)
		}
		if _, err := a.Pool.Exec(ctx, `UPDATE executions SET seal = $2 WHERE id = $1`, earlier, oldRing.MAC(in)); err != nil {
			t.Fatal(err)
		}
	}
	cli := cliOn(a.DBURL, dir)

	// A key added without sealing again (a rotation before seals were): the old key
	// still makes the only seal of the failed execution, so it is not retired.
	if _, err := secrets.AddKeyToFile(path); err != nil {
		t.Fatal(err)
	}
	settleKeyFile(t)
	out, err := cli("secrets", "retire-key", old.ID)
	if err == nil || !strings.Contains(err.Error(), "approvals of 1 executions") {
		t.Fatalf("retire a key that still seals an approval: %v %s", err, out)
	}
	if k, _ := secrets.LoadKeyring(path); len(k.IDs()) != 2 {
		t.Fatal("a refused retire changed the key file")
	}
	if out, err = cli("secrets", "rotate"); err != nil || !strings.Contains(out, "sealed the approvals of 1 executions again") {
		t.Fatalf("rotate: %v %s", err, out)
	}
	if n := a.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'secrets.rotate' AND payload->>'execution_seals' = '1'`); n != 1 {
		t.Errorf("audited rotations that sealed one approval again: %d, want 1", n)
	}
	settleKeyFile(t)
	if out, err = cli("secrets", "retire-key", old.ID); err != nil || !strings.Contains(out, "1 executions not yet final were sealed with it by an earlier release") {
		t.Fatalf("retire the old key after the rotation: %v %s; want it retired, saying what it leaves of the earlier release", err, out)
	}
	if n := a.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'secrets.retire_key' AND payload->>'earlier_release_seals' = '1'`); n != 1 {
		t.Errorf("audited retirements that left one earlier release's seal: %d, want 1", n)
	}
	// The serving process reads the key file again (it would within seconds).
	if err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(keys.IDs(), old.ID) {
		t.Fatalf("the serving keyring still holds the retired key: %v", keys.IDs())
	}
	if _, err := a.Executions.Rollback(ctx, boss, ex, executions.RollbackDecision{}); err != nil {
		t.Fatalf("the rollback after the old key was retired: %v", err)
	}
	waitStatus(t, a, ex, executions.RolledBack)
	if _, err := a.Executions.Rollback(ctx, boss, altered, executions.RollbackDecision{}); err == nil || !strings.Contains(err.Error(), "its seal does not match") {
		t.Fatalf("the rollback of an altered execution: %v, want it refused as altered", err)
	}
}

// waitStatus waits until execution id is in status want.
func waitStatus(t *testing.T, a *apptest.App, id string, want executions.Status) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, func() bool {
		got, err := a.Executions.Get(context.Background(), id)
		return err == nil && got.Status == want
	}, "execution "+id+" never became "+string(want))
}

// retire-key edits the key file before it writes its audit row: when the row cannot be
// written, the error says the key is gone from the file already.
func TestSecretsRetireAuditFails(t *testing.T) {
	ctx := context.Background()
	dir := dbtest.TempDir(t)
	url := dbtest.NewURL(t)
	path := filepath.Join(dir, "secret.key")
	old := writeKeyFile(t, path)
	cli := cliOn(url, dir)
	if out, err := cli("secrets", "rotate"); err != nil {
		t.Fatalf("rotate: %v %s", err, out)
	}
	pool, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE FUNCTION refuse_retire() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'audit log full'; END $$;
		CREATE TRIGGER refuse_retire BEFORE INSERT ON audit_log FOR EACH ROW
		WHEN (NEW.action = 'secrets.retire_key') EXECUTE FUNCTION refuse_retire()`); err != nil {
		t.Fatal(err)
	}
	settleKeyFile(t)
	out, err := cli("secrets", "retire-key", old.ID)
	if err == nil || !strings.Contains(err.Error(), "key "+old.ID+" was removed from "+path+" already") || !strings.Contains(err.Error(), "audit log full") {
		t.Fatalf("retire with an audit log that refuses the row: %v %s", err, out)
	}
	if k, err := secrets.LoadKeyring(path); err != nil || slices.Contains(k.IDs(), old.ID) {
		t.Fatalf("the key file after the retire: %v %v", k, err)
	}
}

func ptrTo(s string) *string { return &s }

// settleKeyFile has retire-key take the key file as taken up by every running server
// (none runs here): it does not wait for them. (The inode's change time, which it
// reads, cannot be set back.) Not for parallel tests: it sets keyTakeUp.
func settleKeyFile(t *testing.T) {
	t.Helper()
	takeUp(t, 0)
}

// takeUp sets keyTakeUp for the rest of the test.
func takeUp(t *testing.T, d time.Duration) {
	t.Helper()
	was := keyTakeUp
	keyTakeUp = d
	t.Cleanup(func() { keyTakeUp = was })
}

// cliOn runs toolwarden's commands on the database at url with data dir dir, returning
// what they printed (standard output, then error) and their error.
func cliOn(url, dir string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(args, "--database-url", url, "--data-dir", dir), nil, &out, &errb)
		return out.String() + errb.String(), err
	}
}
