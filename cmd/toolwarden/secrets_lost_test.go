package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secretkeys"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// After serve --lost-keys X, what X sealed was entered again, but not a tool's past
// configurations (nor, here, one server's value). `secrets rotate` names the keys lost
// with --lost-keys (or TOOLWARDEN_LOST_KEYS) as serve does, re-encrypts the rest, leaves
// the values under lost keys as they are and says how many; without the flag its refusal
// says so.
func TestSecretsRotateLostKeys(t *testing.T) {
	ctx := context.Background()
	lk := lostKeySetup(t)
	dir, url, pool, lost, k1, ringLost, ring1, path := lk.dir, lk.url, lk.pool, lk.lost, lk.k1, lk.ringLost, lk.ring1, lk.path

	// Servers: one value still under the lost key, one entered again under K1.
	for name, ring := range map[string]*secrets.Keyring{"left-lost": ringLost, "re-entered": ring1} {
		if _, err := registry.New(pool, ring, nil).CreateServer(ctx, audit.System, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP,
			URL: "http://127.0.0.1:9/mcp", AuthType: registry.AuthBearer, AuthToken: "token-" + name}); err != nil {
			t.Fatal(err)
		}
	}
	lk.pastToolValue(t)
	usage, err := secretkeys.Usage(ctx, pool)
	if err != nil || usage[lost.ID] < 2 || usage[k1.ID] < 2 {
		t.Fatalf("usage before: %v %v", usage, err)
	}
	lostBefore := usage[lost.ID]
	cli := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append(args, "--database-url", url, "--data-dir", dir), nil, &out, &errb)
		return out.String() + errb.String(), err
	}

	out, err := cli("secrets", "rotate")
	if err == nil || !strings.Contains(err.Error(), "--lost-keys") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("rotate without --lost-keys: %v\n%s", err, out)
	}

	out, err = cli("secrets", "rotate", "--lost-keys", lost.ID)
	if err != nil {
		t.Fatalf("rotate --lost-keys %s: %v\n%s", lost.ID, err, out)
	}
	keys, err := secrets.LoadKeyring(path)
	if err != nil || keys.PrimaryID() == k1.ID {
		t.Fatalf("no key was added: %v %v", keys, err)
	}
	usage, _ = secretkeys.Usage(ctx, pool)
	if usage[k1.ID] != 0 || usage[lost.ID] != lostBefore || usage[keys.PrimaryID()] < 2 {
		t.Fatalf("usage after: %v (lost before %d)", usage, lostBefore)
	}
	if want := "left " + strconv.Itoa(lostBefore) + " values under lost keys"; !strings.Contains(out, want) {
		t.Fatalf("rotate's output:\n%s\nwant %q", out, want)
	}
	// TOOLWARDEN_LOST_KEYS too, as for serve.
	t.Setenv("TOOLWARDEN_LOST_KEYS", lost.ID)
	if out, err := cli("secrets", "rotate", "--reencrypt-only"); err != nil || !strings.Contains(out, "left "+strconv.Itoa(lostBefore)+" values under lost keys") {
		t.Fatalf("rotate with TOOLWARDEN_LOST_KEYS: %v\n%s", err, out)
	}
}

// lostKey is a CLI database whose key file holds K1 (k1) and a key lost for good (lost),
// as after serve --lost-keys.
type lostKey struct {
	dir, url, path  string
	pool            *pgxpool.Pool
	lost, k1        secrets.Key
	ringLost, ring1 *secrets.Keyring
}

func lostKeySetup(t *testing.T) *lostKey {
	t.Helper()
	lk := &lostKey{}
	lk.dir, lk.url, lk.pool = cliDatabase(t)
	var err error
	if lk.lost, err = secrets.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	lk.path = filepath.Join(lk.dir, "secret.key")
	lk.k1 = writeKeyFile(t, lk.path)
	lk.ringLost, _ = secrets.NewKeyring(lk.lost)
	lk.ring1, _ = secrets.NewKeyring(lk.k1)
	return lk
}

// pastToolValue stores a tool whose value was set under the lost key, then entered again
// under K1: its past version keeps the lost key's ciphertext.
func (lk *lostKey) pastToolValue(t *testing.T) {
	t.Helper()
	srv, tool := uuid.NewString(), uuid.NewString()
	testkit.Exec(t, lk.pool, `INSERT INTO mcp_servers (id, name, server_type, command) VALUES ($1, 'stdio-one', 'stdio', 'x')`, srv)
	testkit.Exec(t, lk.pool, `INSERT INTO mcp_tools (id, server_id, name, input_schema, definition, definition_hash, status)
		VALUES ($1, $2, 'work', '{"type":"object","properties":{"api_key":{"type":"string"}}}', '{"name":"work"}', 'h', 'validated')`, tool, srv)
	who := audit.Actor{Kind: audit.ActorUser, Name: "alice"}
	for i, ring := range []*secrets.Keyring{lk.ringLost, lk.ring1} {
		v := "sk-live-LostKey" + string(rune('A'+i))
		if _, err := tools.New(lk.pool, ring, nil).Update(context.Background(), who, tool, tools.Patch{Reason: "set",
			Params: map[string]tools.ParamInput{"api_key": {Mode: tools.ModeDefault, Text: &v}}}); err != nil {
			t.Fatal(err)
		}
	}
}
