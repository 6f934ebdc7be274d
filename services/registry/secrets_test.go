package registry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

const canary = "canary-SECRET-9f1c"

// assertNoCanary checks every place a secret could leak to in the database: the server
// rows (every column, as text), the audit log and the events.
func (f *fixture) assertNoCanary(t *testing.T, secretsToo ...string) {
	t.Helper()
	needles := append([]string{canary}, secretsToo...)
	places := map[string]string{
		"mcp_servers rows": `SELECT s::text FROM mcp_servers s`,
		"audit payloads":   `SELECT payload::text FROM audit_log`,
		"audit rows":       `SELECT a::text FROM audit_log a`,
		"event payloads":   `SELECT payload::text FROM events`,
	}
	for place, q := range places {
		for _, row := range f.strings(q) {
			for _, n := range needles {
				if strings.Contains(row, n) {
					t.Errorf("%s: got %q in %s, want no secret value", place, n, row)
				}
			}
		}
	}
}

// storedSecrets returns the raw env, headers and auth_token columns of a server.
func (f *fixture) storedSecrets(id string) (env, headers map[string]string, token string) {
	f.t.Helper()
	if err := f.pool.QueryRow(f.ctx, `SELECT env, headers, auth_token FROM mcp_servers WHERE id = $1`, id).Scan(&env, &headers, &token); err != nil {
		f.t.Fatalf("select secrets: %v", err)
	}
	return env, headers, token
}

func TestSecretsAtRest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		spec        registry.Spec
		wantEnv     map[string]string
		wantHeaders map[string]string // including authentication
		wantToken   bool              // auth_token column is a ciphertext
		envNames    []string
		headerNames []string
	}{
		{
			name: "stdio env",
			spec: func() registry.Spec {
				s := stdioSpec("stdio-env")
				s.Env = map[string]string{"API_KEY": canary, "OTHER": canary + "-2"}
				return s
			}(),
			wantEnv:     map[string]string{"API_KEY": canary, "OTHER": canary + "-2"},
			wantHeaders: map[string]string{},
			envNames:    []string{"API_KEY", "OTHER"},
			headerNames: []string{},
		},
		{
			name: "http header",
			spec: func() registry.Spec {
				s := httpSpec("http-header")
				s.Headers = map[string]string{"X-Secret": canary}
				return s
			}(),
			wantEnv:     map[string]string{},
			wantHeaders: map[string]string{"X-Secret": canary},
			envNames:    []string{},
			headerNames: []string{"X-Secret"},
		},
		{
			name: "bearer token",
			spec: func() registry.Spec {
				s := httpSpec("bearer")
				s.AuthType, s.AuthToken = registry.AuthBearer, canary
				return s
			}(),
			wantEnv:     map[string]string{},
			wantHeaders: map[string]string{"X-Trace": "1", "Authorization": "Bearer " + canary},
			wantToken:   true,
			envNames:    []string{},
			headerNames: []string{"X-Trace"},
		},
		{
			name: "custom header token",
			spec: func() registry.Spec {
				s := httpSpec("header-auth")
				s.Type = registry.TypeSSE
				s.AuthType, s.AuthHeader, s.AuthToken = registry.AuthHeader, "X-Api-Key", canary
				return s
			}(),
			wantEnv:     map[string]string{},
			wantHeaders: map[string]string{"X-Trace": "1", "X-Api-Key": canary},
			wantToken:   true,
			envNames:    []string{},
			headerNames: []string{"X-Trace"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			sv := f.create(tc.spec)

			env, headers, token := f.storedSecrets(sv.ID)
			for what, m := range map[string]map[string]string{"env": env, "headers": headers} {
				for k, v := range m {
					if !secrets.IsCiphertext(v) {
						t.Errorf("%s/%s: got stored value %q, want a ciphertext", what, k, v)
					}
				}
			}
			if got := secrets.IsCiphertext(token); got != tc.wantToken {
				t.Errorf("auth_token %q: got IsCiphertext %v, want %v", token, got, tc.wantToken)
			}
			f.assertNoCanary(t)

			c := f.connection(sv.ID)
			if !maps.Equal(c.Env, tc.wantEnv) {
				t.Errorf("connection env: got %v, want %v", c.Env, tc.wantEnv)
			}
			if !maps.Equal(c.Headers, tc.wantHeaders) {
				t.Errorf("connection headers: got %v, want %v", c.Headers, tc.wantHeaders)
			}
			for _, s := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
				if strings.Contains(s, canary) {
					t.Errorf("formatted connection: got %q, want no secret", s)
				}
			}

			// The Server a handler renders carries names only.
			for _, got := range []registry.Server{sv, mustGet(t, f, sv.ID)} {
				b, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				js := string(b)
				if strings.Contains(js, canary) || strings.Contains(js, "v1:") {
					t.Errorf("server JSON: got %s, want no secret and no ciphertext", js)
				}
				var m struct {
					EnvNames       []string `json:"env_names"`
					HeaderNames    []string `json:"header_names"`
					AuthConfigured bool     `json:"auth_configured"`
				}
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(m.EnvNames) != fmt.Sprint(tc.envNames) || fmt.Sprint(m.HeaderNames) != fmt.Sprint(tc.headerNames) || m.AuthConfigured != tc.wantToken {
					t.Errorf("server JSON: got env_names %v header_names %v auth_configured %v, want %v %v %v",
						m.EnvNames, m.HeaderNames, m.AuthConfigured, tc.envNames, tc.headerNames, tc.wantToken)
				}
			}

			// Changing a secret keeps it out of the update's audit entry and events too.
			p := registry.Patch{Description: ptr("rotated")}
			switch {
			case len(tc.spec.Env) > 0:
				p.Env = map[string]*string{"API_KEY": ptr(canary + "-new")}
			case tc.spec.AuthToken != "":
				p.AuthToken = ptr(canary + "-new")
			default:
				p.Headers = map[string]*string{"X-Secret": ptr(canary + "-new")}
			}
			f.update(sv.ID, p)
			f.assertNoCanary(t)
			upd := f.auditPayloads("server.update")
			if len(upd) != 1 {
				t.Fatalf("got %d server.update audit rows, want 1", len(upd))
			}
			changes, _ := upd[0]["changes"].(map[string]any)
			if sc, _ := changes["secrets_changed"].([]any); len(sc) != 1 {
				t.Errorf("update audit: got secrets_changed %v, want one name", changes["secrets_changed"])
			}
			c2 := f.connection(sv.ID)
			if c2.Fingerprint == c.Fingerprint {
				t.Errorf("fingerprint: got the same after a secret changed, want a new one")
			}
			found := false
			for v := range maps.Values(c2.Env) {
				found = found || v == canary+"-new"
			}
			for v := range maps.Values(c2.Headers) {
				found = found || strings.HasSuffix(v, canary+"-new")
			}
			if !found {
				t.Errorf("connection after update: got env %v headers %v, want the new secret", c2.Env, c2.Headers)
			}
		})
	}
}

func mustGet(t *testing.T, f *fixture, id string) registry.Server {
	t.Helper()
	sv, err := f.reg.GetServer(f.ctx, id)
	if err != nil {
		t.Fatalf("get server %s: %v", id, err)
	}
	return sv
}

// TestCiphertextBoundToRow checks that the associated data binds each ciphertext to
// its server, field and name: moved anywhere else in the database, it does not open.
func TestCiphertextBoundToRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	src := f.create(func() registry.Spec {
		s := stdioSpec("source")
		s.Env = map[string]string{"API_KEY": canary}
		return s
	}())
	httpSrc := f.create(func() registry.Spec {
		s := httpSpec("http-source")
		s.Headers = map[string]string{"X-A": canary, "X-B": "b"}
		s.AuthType, s.AuthToken = registry.AuthBearer, canary
		return s
	}())
	cases := []struct {
		name  string
		setup func(victim string)
	}{
		{"env value into another server", func(victim string) {
			f.exec(`UPDATE mcp_servers SET env = jsonb_build_object('API_KEY', (SELECT env->'API_KEY' FROM mcp_servers WHERE id = $1)) WHERE id = $2`, src.ID, victim)
		}},
		{"env value under another name", func(victim string) {
			f.exec(`UPDATE mcp_servers SET env = jsonb_build_object('OTHER', (SELECT env->'API_KEY' FROM mcp_servers WHERE id = $1)) WHERE id = $2`, src.ID, victim)
		}},
		{"auth token into env", func(victim string) {
			f.exec(`UPDATE mcp_servers SET env = jsonb_build_object('API_KEY', (SELECT auth_token FROM mcp_servers WHERE id = $1)) WHERE id = $2`, httpSrc.ID, victim)
		}},
		{"tampered ciphertext", func(victim string) {
			f.exec(`UPDATE mcp_servers SET env = jsonb_build_object('API_KEY',
				(SELECT left(env->>'API_KEY', -2) || CASE WHEN right(env->>'API_KEY', 2) = 'AA' THEN 'AB' ELSE 'AA' END FROM mcp_servers WHERE id = $1)) WHERE id = $1`, victim)
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			victim := f.create(stdioSpec(fmt.Sprintf("victim-%d", i)))
			tc.setup(victim.ID)
			c, err := f.reg.Connection(f.ctx, victim.ID)
			if !errors.Is(err, secrets.ErrDecrypt) {
				t.Fatalf("connection: got %v, %v; want an error wrapping secrets.ErrDecrypt", c.Env, err)
			}
			if strings.Contains(err.Error(), canary) {
				t.Fatalf("error: got %q, want no secret in it", err)
			}
		})
	}
	t.Run("header under another name of the same row", func(t *testing.T) {
		f.exec(`UPDATE mcp_servers SET headers = jsonb_set(headers, '{X-B}', headers->'X-A') WHERE id = $1`, httpSrc.ID)
		if _, err := f.reg.Connection(f.ctx, httpSrc.ID); !errors.Is(err, secrets.ErrDecrypt) {
			t.Fatalf("connection: got %v, want an error wrapping secrets.ErrDecrypt", err)
		}
	})
	// The source rows still open.
	if c := f.connection(src.ID); c.Env["API_KEY"] != canary {
		t.Fatalf("source env: got %q, want the canary", c.Env["API_KEY"])
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	keyA, keyB := newKey(t), newKey(t)
	regA := registry.New(f.pool, newKeyring(t, keyA), nil)
	ringBA := newKeyring(t, keyB, keyA)
	regBA := registry.New(f.pool, ringBA, nil)
	regB := registry.New(f.pool, newKeyring(t, keyB), nil)

	sp := httpSpec("rotated")
	sp.Headers = map[string]string{"X-Secret": canary, "X-Kept": "kept"}
	sp.AuthType, sp.AuthToken = registry.AuthBearer, canary+"-tok"
	sv, err := regA.CreateServer(f.ctx, audit.System, sp)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"X-Secret": canary, "X-Kept": "kept", "Authorization": "Bearer " + canary + "-tok"}

	for _, tc := range []struct {
		name string
		reg  *registry.Service
	}{{"keyring A", regA}, {"keyring B,A", regBA}} {
		c, err := tc.reg.Connection(f.ctx, sv.ID)
		if err != nil {
			t.Fatalf("%s: connection: %v", tc.name, err)
		}
		if !maps.Equal(c.Headers, want) {
			t.Fatalf("%s: got headers %v, want %v", tc.name, c.Headers, want)
		}
	}
	if _, err := regB.Connection(f.ctx, sv.ID); !errors.Is(err, secrets.ErrUnknownKey) {
		t.Fatalf("keyring B alone: got %v, want an error wrapping secrets.ErrUnknownKey", err)
	}

	// A value written under [B, A] is sealed with B; untouched values stay under A.
	if _, err := regBA.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Headers: map[string]*string{"X-Secret": ptr(canary + "-b")}}); err != nil {
		t.Fatal(err)
	}
	_, headers, token := f.storedSecrets(sv.ID)
	if ringBA.NeedsRotation(headers["X-Secret"]) {
		t.Errorf("rewritten header: got a value under an old key, want the primary key %s", ringBA.PrimaryID())
	}
	if !ringBA.NeedsRotation(headers["X-Kept"]) || !ringBA.NeedsRotation(token) {
		t.Errorf("untouched values: got them re-encrypted, want them still under key A")
	}
	c, err := regBA.Connection(f.ctx, sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	want["X-Secret"] = canary + "-b"
	if !maps.Equal(c.Headers, want) {
		t.Fatalf("after update: got headers %v, want %v", c.Headers, want)
	}
}
