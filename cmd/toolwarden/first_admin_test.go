package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A first start that fails after the database is set up (here New's check of
// --checkpoint-public-key against the signing key) creates no administrator: one made
// before the failure had its random password shown nowhere, and the next start, finding
// a user, made none, so no one could ever sign in. The next start creates it and shows
// its password, which signs in.
func TestFailedFirstStartCreatesNoAdmin(t *testing.T) {
	t.Parallel()
	dataDir := dbtest.TempDir(t)
	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := audit.OpenSigner(other); err != nil {
		t.Fatal(err)
	}
	var out, errb syncBuffer
	err := run(context.Background(), []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0",
		"--checkpoint-public-key", audit.PublicKeyPath(other)}, nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "is not that of the key this server signs checkpoints with") {
		t.Fatalf("serve with another key's public key: got %v\n%s; want it refused", err, errb.String())
	}
	if strings.Contains(out.String(), "password") {
		t.Errorf("the failed start printed a password:\n%s", out.String())
	}
	d, err := openDB(context.Background(), config{DataDir: dataDir, LogLevel: "info", fastDB: true}, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var users int
	err = d.Pool.QueryRow(context.Background(), `SELECT count(*) FROM users`).Scan(&users)
	d.Close()
	if err != nil || users != 0 {
		t.Fatalf("users after the failed start: %d, %v; want none", users, err)
	}

	ready := filepath.Join(dataDir, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out2, errb2 syncBuffer
	go func() {
		done <- run(ctx, []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--ready-file", ready}, nil, &out2, &errb2)
	}()
	defer func() { cancel(); <-done }()
	var addr string
	for deadline := time.Now().Add(60 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			addr = string(b)
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("serve exited early: %v\n%s", err, errb2.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready:\n%s", errb2.String())
		}
	}
	m := regexp.MustCompile(`username: admin\n\s+password: (\S+)\n`).FindStringSubmatch(out2.String())
	if m == nil {
		t.Fatalf("the next start did not print the admin password:\n%s", out2.String())
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/login", strings.NewReader(url.Values{"username": {"admin"}, "password": {m[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+addr)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in with the printed password: got %d, want 303", res.StatusCode)
	}
}
