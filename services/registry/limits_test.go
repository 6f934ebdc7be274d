package registry_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// preview runs p through PreviewConnection, what POST /api/v1/servers/test does for a
// new server; it needs no database.
func preview(t *testing.T, p registry.Patch) error {
	t.Helper()
	_, err := registry.New(nil, newKeyring(t), nil).PreviewConnection(context.Background(), "", p)
	return err
}

// wantMessage fails unless err is a field error on field whose message starts with msg.
func wantMessage(t *testing.T, err error, field, msg string) {
	t.Helper()
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got error %v, want %s: %s", err, field, msg)
	}
	if got := ve.For(field); !strings.HasPrefix(got, msg) {
		t.Fatalf("%s: got message %q (all: %v), want %q", field, got, err, msg)
	}
}

func httpPatch(u string) registry.Patch {
	return registry.Patch{Name: ptr("x"), Type: ptr(registry.TypeStreamableHTTP), URL: ptr(u)}
}

func stdioPatch(args []string, env map[string]*string) registry.Patch {
	return registry.Patch{Name: ptr("x"), Type: ptr(registry.TypeStdio), Command: ptr("npx"), Args: &args, Env: env}
}

func TestURLLengthLimit(t *testing.T) {
	t.Parallel()
	base := "http://127.0.0.1:3001/mcp?pad="
	if err := preview(t, httpPatch(base+strings.Repeat("a", 8192-len(base)))); err != nil {
		t.Fatalf("a URL of 8192 characters: %v", err)
	}
	wantMessage(t, preview(t, httpPatch(base+strings.Repeat("a", 8193-len(base)))), "url", "is too long (at most 8192 characters)")
	// URLs nested in query values, each of which the secret check would follow.
	nested := "http://x/?a=" + strings.Repeat("a://?a=", 10000) + "z"
	wantMessage(t, preview(t, httpPatch(nested)), "url", "is too long (at most 8192 characters)")
}

// A credential in a URL that is a query value of the server's URL is still found.
func TestURLNestedSecretRefused(t *testing.T) {
	t.Parallel()
	u := "https://proxy.example/mcp?next=" + url.QueryEscape("https://api.example/v1?api_key=abc123")
	err := preview(t, httpPatch(u))
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("url"), "carries a secret in its query (next)") {
		t.Fatalf("got %v, want url: carries a secret in its query (next)", err)
	}
}

func TestArgAndEnvLengthLimits(t *testing.T) {
	t.Parallel()
	if err := preview(t, stdioPatch([]string{"--config=" + strings.Repeat("x", 8192-len("--config="))}, nil)); err != nil {
		t.Fatalf("an argument of 8192 characters: %v", err)
	}
	wantMessage(t, preview(t, stdioPatch([]string{"-y", strings.Repeat("x", 8193)}, nil)), "args/1", "is too long (at most 8192 characters)")
	// One "=" after another, each of which the secret check of arguments would split at.
	wantMessage(t, preview(t, stdioPatch([]string{strings.Repeat("a=", 16384) + "a"}, nil)), "args/0", "is too long (at most 8192 characters)")

	big := strings.Repeat("v", 64<<10)
	if err := preview(t, stdioPatch(nil, map[string]*string{"CONFIG": &big})); err != nil {
		t.Fatalf("an env value of 64 KiB: %v", err)
	}
	bigger := big + "v"
	wantMessage(t, preview(t, stdioPatch(nil, map[string]*string{"CONFIG": &bigger})), "env/CONFIG",
		"is too long (at most 65536 bytes)")
}

// A server stored before the limits, with a longer argument or URL, can still be disabled
// and renamed: only a value changed is held to them.
func TestLengthLimitsSpareStoredValues(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := strings.Repeat("x", 10_000)
	st := f.create(stdioSpec("old-stdio"))
	f.exec(`UPDATE mcp_servers SET args = jsonb_build_array($2::text) WHERE id = $1`, st.ID, long)
	hs := f.create(httpSpec("old-http"))
	f.exec(`UPDATE mcp_servers SET url = $2 WHERE id = $1`, hs.ID, "http://127.0.0.1:3001/mcp?pad="+long)
	for _, id := range []string{st.ID, hs.ID} {
		if _, err := f.reg.SetEnabled(f.ctx, audit.System, id, false); err != nil {
			t.Fatalf("disable a server stored with a long value: %v", err)
		}
		f.update(id, registry.Patch{Description: ptr("renamed")})
	}
	// The stored argument moved by one put before it is still the one stored.
	f.update(st.ID, registry.Patch{Args: &[]string{"-y", long}})
	_, err := f.reg.UpdateServer(f.ctx, audit.System, st.ID, registry.Patch{Args: &[]string{long + "y"}})
	wantMessage(t, err, "args/0", "is too long (at most 8192 characters)")
	_, err = f.reg.UpdateServer(f.ctx, audit.System, hs.ID, registry.Patch{URL: ptr("http://127.0.0.1:3001/mcp?pad=" + long + "y")})
	wantMessage(t, err, "url", "is too long (at most 8192 characters)")
}
