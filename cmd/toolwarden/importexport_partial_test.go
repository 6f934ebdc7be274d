package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// An import that stops after its first transaction committed (configcode.ErrPartial)
// reports what that transaction changed, what it discovered and what was not applied,
// as the page and the API do, not only the servers, and exits 1.
func TestImportPartialReportsWhatWasDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "x"})
	dir := dbtest.TempDir(t)
	url := dbtest.NewURL(t)
	pool, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The second transaction (the tools of the servers discovered) fails at its summary,
	// the config.import entry without server changes.
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION fail_pending_summary() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			IF NEW.action = 'config.import' AND NEW.payload->>'server_changes' = '0' THEN
				RAISE EXCEPTION 'test: the summary cannot be written';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_pending_summary BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION fail_pending_summary();`); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, "config.yaml", "version: 1\nservers:\n  - name: x\n    type: streamable_http\n    url: "+hs.URL()+"\n    enabled: true\n"+
		"categories:\n  - name: utilities\n    description: Small helpers\n"+
		"tools:\n  - tool: x__echo\n    risk: high\n")
	stdout, stderr, err := runCmd(t, "", "import", "--database-url", url, "--data-dir", dir, file)
	if !errors.Is(err, configcode.ErrPartial) {
		t.Fatalf("got %v, want a partial import\n%s%s", err, stdout, stderr)
	}
	wantOutput(t, "partial import", stdout, "Imported "+file+" in part: 1 created, 0 updated, 0 deleted, 0 unchanged, 0 kept.\n",
		"Also changed: category utilities.\n", "Discovered: x.\n",
		"Not applied (1; everything else was):\n  ! "+file+": tools.x__echo: the import stopped after discovering server x")
}

// import discovers with the message cap serve uses (--max-message-size, or its
// variable): a tools/list larger than it fails there as in serve, and one that serve
// is configured to take does not fail at import under the 16 MiB default. The flag
// was serve's only. Not parallel: a subtest sets the variable.
func TestImportTakesTheMessageCap(t *testing.T) {
	// About 120 KB of tools/list in one page.
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "many", Generated: 600})
	for _, tc := range []struct {
		name string
		args []string
		env  bool
	}{
		{"flag", []string{"--max-message-size", "64KiB"}, false},
		{"variable", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env {
				t.Setenv("TOOLWARDEN_MAX_MESSAGE_SIZE", "64KiB")
			}
			dir := dbtest.TempDir(t)
			file := writeFile(t, dir, "config.yaml", "version: 1\nservers:\n  - name: many\n    type: streamable_http\n    url: "+hs.URL()+"\n    enabled: true\ntools:\n  - tool: many__gen-00001\n    risk: high\n")
			args := append([]string{"import", "--database-url", dbtest.NewURL(t), "--data-dir", dir}, tc.args...)
			stdout, stderr, err := runCmd(t, "", append(args, file)...)
			if err == nil || !strings.Contains(stdout+stderr, "result too large: many sent more than 64 KiB; raise --max-message-size") {
				t.Fatalf("import under a 64 KiB cap of a ~120 KB tools/list: %v, want its discovery refused naming --max-message-size\n%s%s", err, stdout, stderr)
			}
		})
	}
}
