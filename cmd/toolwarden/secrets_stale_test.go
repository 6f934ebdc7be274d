package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A replica's key file that lacks a key the database uses (another replica rotated and
// its new file was not copied here) must not rotate: it would re-encrypt values, and seal
// approvals, under a key only this file holds. Both forms of rotate refuse and change
// neither the file nor a row.
func TestSecretsRotateStaleKeyFile(t *testing.T) {
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	path := filepath.Join(dir, "secret.key")
	k1 := writeKeyFile(t, path)
	k2, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	// The other replica's file: K2 first, then K1. One server's values are under K1, the
	// other's under K2.
	ring1, _ := secrets.NewKeyring(k1)
	ring2, _ := secrets.NewKeyring(k2, k1)
	for name, ring := range map[string]*secrets.Keyring{"under-k1": ring1, "under-k2": ring2} {
		if _, err := registry.New(pool, ring, nil).CreateServer(ctx, audit.System, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP,
			URL: "http://127.0.0.1:9/mcp", AuthType: registry.AuthBearer, AuthToken: "token-" + name}); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() string {
		var s string
		if err := pool.QueryRow(ctx, `SELECT string_agg(name || '=' || auth_token, ',' ORDER BY name) FROM mcp_servers`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	fileBefore, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rowsBefore := rows()
	for _, args := range [][]string{{"secrets", "rotate"}, {"secrets", "rotate", "--reencrypt-only"}} {
		var out, errb bytes.Buffer
		err := run(ctx, append(args, "--database-url", url, "--data-dir", dir), nil, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), "1 under key "+k2.ID) || !strings.Contains(err.Error(), "nothing was changed") {
			t.Fatalf("%v with a key file lacking %s: %v\n%s%s", args, k2.ID, err, out.String(), errb.String())
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, fileBefore) {
			t.Fatalf("%v changed the key file:\n%s", args, after)
		}
		if after := rows(); after != rowsBefore {
			t.Fatalf("%v changed stored values:\n%s\nwas\n%s", args, after, rowsBefore)
		}
	}
}
