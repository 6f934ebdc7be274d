package registry_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// cfgCanary is a secret value no export, plan, audit row or event may contain.
const cfgCanary = "cfg-canary-7d3e"

// cfgServers are registrations covering every exported field, in no particular order.
func cfgServers() []registry.Spec {
	return []registry.Spec{
		{Name: "zeta-http", Type: registry.TypeStreamableHTTP, URL: "https://mcp.example.com/mcp",
			Headers: map[string]string{"X-Team": cfgCanary + "-h"}, AuthType: registry.AuthBearer,
			AuthToken: cfgCanary + "-token", Enabled: true, Trusted: true, TimeoutMS: 5000, Retries: ptr(0)},
		{Name: "alpha-files", Description: "local files", Type: registry.TypeStdio, Command: "npx",
			Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/data"}, WorkingDir: "/srv",
			Env: map[string]string{"API_KEY": cfgCanary + "-env", "LOG_LEVEL": cfgCanary + "-env2"}, Enabled: true},
		{Name: "mid-sse", Type: registry.TypeSSE, URL: "http://127.0.0.1:3001/sse", AuthType: registry.AuthHeader,
			AuthHeader: "X-API-Key", AuthToken: cfgCanary + "-key", HealthIntervalMS: 60000, Enabled: false},
	}
}

// cfgExport is what Export writes for cfgServers.
const cfgExport = `# Toolwarden MCP servers: written by 'toolwarden export', read by 'toolwarden import'.
#
# Secret values are never exported. env and headers list each secret by name with a
# null value, and an auth block never holds its token. On import:
#   - a null value keeps the value already stored for that name;
#   - a name that is not stored yet is skipped with a warning: set it after import;
#   - a value written here replaces the stored one; 'toolwarden import' expands
#     ${env:NAME} and ${NAME} from its environment, so secrets can come from CI
#     (never Toolwarden's own settings: DATABASE_URL, TOOLWARDEN_*, PG*);
#   - a name removed from the file removes that secret.
version: 1
servers:
  - name: alpha-files
    type: stdio
    description: local files
    command: npx
    args: [-y, '@modelcontextprotocol/server-filesystem', /srv/data]
    working_dir: /srv
    env:
      API_KEY: null
      LOG_LEVEL: null
    timeout_ms: 30000
    retries: 3
    health_interval_ms: 30000
    enabled: true
    trusted: false
  - name: mid-sse
    type: sse
    url: http://127.0.0.1:3001/sse
    auth:
      type: header
      header: X-API-Key
    timeout_ms: 30000
    retries: 3
    health_interval_ms: 60000
    enabled: false
    trusted: false
  - name: zeta-http
    type: streamable_http
    url: https://mcp.example.com/mcp
    headers:
      X-Team: null
    auth:
      type: bearer
    timeout_ms: 5000
    retries: 0
    health_interval_ms: 30000
    enabled: true
    trusted: true
`

func (f *fixture) export() string {
	f.t.Helper()
	out, err := f.reg.Export(f.ctx)
	if err != nil {
		f.t.Fatalf("export: %v", err)
	}
	return string(out)
}

func (f *fixture) plan(name, data string, prune bool) *registry.Plan {
	f.t.Helper()
	cfg, err := registry.ParseConfig(name, []byte(data), registry.ParseOptions{})
	if err != nil {
		f.t.Fatalf("parse %s: %v", name, err)
	}
	plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{Prune: prune, CompareSecrets: true})
	if err != nil {
		f.t.Fatalf("plan %s: %v", name, err)
	}
	return plan
}

func TestExport(t *testing.T) {
	t.Parallel()
	specs := cfgServers()
	tests := []struct {
		name  string
		order []int
	}{
		{"in order", []int{0, 1, 2}},
		{"reversed", []int{2, 1, 0}},
		{"shuffled", []int{1, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			for _, i := range tt.order {
				f.create(specs[i])
			}
			first, second := f.export(), f.export()
			if first != second {
				t.Fatalf("two exports differ:\n%s\n---\n%s", first, second)
			}
			if first != cfgExport {
				t.Fatalf("got export\n%s\nwant\n%s", first, cfgExport)
			}
			if strings.Contains(first, cfgCanary) {
				t.Fatalf("export holds a secret value:\n%s", first)
			}
			for _, name := range []string{"API_KEY", "LOG_LEVEL", "X-Team"} {
				if !strings.Contains(first, name+": null") {
					t.Errorf("export: got no %q: null, want every secret named", name)
				}
			}
		})
	}
}

func TestExportEmpty(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := f.export()
	if !strings.HasSuffix(got, "version: 1\nservers: []\n") {
		t.Fatalf("export of an empty registry: got\n%s", got)
	}
	plan := f.plan("servers.yaml", got, true)
	if len(plan.Items) != 0 || plan.HasErrors() || len(plan.Warnings) != 0 {
		t.Fatalf("plan of an empty export: got %+v", plan)
	}
}

// TestExportRoundTrip imports an export into the database it came from: nothing changes.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, sp := range cfgServers() {
		f.create(sp)
	}
	before := f.count(`SELECT count(*) FROM audit_log`)
	plan := f.plan("servers.yaml", f.export(), true)
	if plan.HasErrors() || len(plan.Warnings) > 0 {
		t.Fatalf("round trip: got errors %v, warnings %v; want none", plan.Errors, plan.Warnings)
	}
	for _, it := range plan.Items {
		if it.Action != registry.PlanUnchanged {
			t.Errorf("round trip: %s: got %s %v, want unchanged", it.Name, it.Action, it.Changes)
		}
	}
	if got := plan.Count(registry.PlanUnchanged); got != 3 {
		t.Fatalf("round trip: got %d unchanged, want 3", got)
	}
	res, err := f.reg.ApplyImport(f.ctx, audit.System, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created)+len(res.Updated)+len(res.Deleted) != 0 || res.Unchanged != 3 {
		t.Fatalf("apply round trip: got %s, want 3 unchanged", res)
	}
	if after := f.count(`SELECT count(*) FROM audit_log`); after != before {
		t.Fatalf("apply round trip wrote %d audit entries, want 0", after-before)
	}
	c := f.connection(f.serverID("zeta-http"))
	if c.Headers["Authorization"] != "Bearer "+cfgCanary+"-token" || c.Headers["X-Team"] != cfgCanary+"-h" {
		t.Fatalf("secrets after round trip: got %v", c.Headers)
	}
}

// TestExportToFreshDatabase imports an export into another database: servers are
// created, secrets named without value are skipped with a warning, and a bearer token
// that was not exported is an error that says how to give it.
func TestExportToFreshDatabase(t *testing.T) {
	t.Parallel()
	src, dst := newFixture(t), newFixture(t)
	for _, sp := range cfgServers() {
		src.create(sp)
	}
	plan := dst.plan("servers.yaml", src.export(), false)
	if got := plan.Count(registry.PlanCreate); got != 3 {
		t.Fatalf("got %d creates, want 3:\n%s", got, plan)
	}
	var warned []string
	for _, w := range plan.Warnings {
		warned = append(warned, w.Server+" "+w.Field)
		if !strings.Contains(w.Message, "after import") {
			t.Errorf("warning %q: want it to say to set the value after import", w)
		}
	}
	slices.Sort(warned)
	if want := []string{"alpha-files env.API_KEY", "alpha-files env.LOG_LEVEL", "zeta-http headers.X-Team"}; !slices.Equal(warned, want) {
		t.Errorf("warnings: got %q, want %q", warned, want)
	}
	var errs []string
	for _, e := range plan.Errors {
		errs = append(errs, e.Server+" "+e.Field)
		if e.File != "servers.yaml" || !strings.Contains(e.Message, "${env:") {
			t.Errorf("error %q: want it to name the file and suggest ${env:NAME}", e)
		}
	}
	slices.Sort(errs)
	if want := []string{"mid-sse auth.token", "zeta-http auth.token"}; !slices.Equal(errs, want) {
		t.Fatalf("errors: got %q, want %q", errs, want)
	}
	if _, err := dst.reg.ApplyImport(dst.ctx, audit.System, plan); !errors.Is(err, registry.ErrInvalidPlan) {
		t.Fatalf("apply a plan with errors: got %v, want ErrInvalidPlan", err)
	}
	if n := dst.count(`SELECT count(*) FROM mcp_servers`); n != 0 {
		t.Fatalf("a refused plan created %d servers", n)
	}
}

func (f *fixture) serverID(name string) string {
	f.t.Helper()
	sv, err := f.reg.GetServerByName(f.ctx, name)
	if err != nil {
		f.t.Fatalf("server %q: %v", name, err)
	}
	return sv.ID
}
