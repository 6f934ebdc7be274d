package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// probeLine is a line of the probe's output, after bash's bracketed-paste switch
// (ESC [?2004l CR) where it follows a prompt.
var probeLine = regexp.MustCompile(`^(?:\x1b\[\?2004l\r?)?(key|theirs|root|cluster|procs):(.*)$`)

// TestTerminalsConfined: a command and a PTY session of one conversation, started
// through the router as an agent's calls are, cannot read the secret key in the data
// dir, nor reach the database's directory (its unix socket) or another conversation's
// workspace, nor see Toolwarden's processes; they still work and write in their own
// workspace. Unconfined (--confine=off), the same commands read all of it: the test
// can tell.
func TestTerminalsConfined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret := "key-" + time.Now().Format("150405.000000")
	data := t.TempDir()
	key := filepath.Join(data, "secret.key")
	if err := os.WriteFile(key, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster := dbtest.ClusterDir(t)
	for _, tc := range []struct {
		name     string
		off      bool
		confined bool
	}{{"confined", false, true}, {"--confine=off", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := webtest.Start(t, &webtest.Options{Builtin: true, MCP: &mcpclient.Options{
				Confine: confine.Spec{Hide: []string{data, cluster}, Off: tc.off}}})
			const name = "builtin__terminal_operations"
			tg := srv.App.Enable(t, name)
			low := "low"
			if _, err := srv.App.Tools.Update(ctx, audit.System, tg.ID, tools.Patch{Risk: &low, MayLowerRisk: true, Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			root := srv.App.Builtin.Root()
			theirs, err := srv.App.Builtin.Workspace("conv-theirs")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(theirs, "note"), []byte("their note"), 0o600); err != nil {
				t.Fatal(err)
			}
			admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
			call := func(args string) *router.Result {
				t.Helper()
				var res *router.Result
				var err error
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					// the risk setting reaches the router's snapshot through the bus
					res, err = srv.Router.Call(ctx, router.Call{Tool: name, Arguments: json.RawMessage(args), Actor: admin,
						Role: auth.RoleAdmin, Source: router.SourceAPI, ConversationID: "conv-mine"})
					if err == nil || time.Now().After(deadline) {
						break
					}
				}
				if err != nil {
					t.Fatalf("%s: %v", args, err)
				}
				return res
			}
			// Each line says what the probe reached: the key, the other workspace's note,
			// the built-in root's entries, the cluster's files (its socket among them),
			// and how many processes it sees.
			probe := `echo "key:$(cat ` + key + ` 2>/dev/null)"; echo "theirs:$(cat ` + filepath.Join(theirs, "note") + ` 2>/dev/null)"; ` +
				`echo "root:$(ls -A ` + root + ` | tr '\n' ' ')"; echo "cluster:$(ls -A ` + cluster + ` 2>/dev/null | wc -l)"; ` +
				`echo "procs:$(ls /proc | grep -c '^[0-9]')"; echo written > mine.txt; echo probe-end`
			check := func(how, out string) {
				t.Helper()
				got := map[string]string{}
				for _, line := range strings.Split(out, "\n") {
					if m := probeLine.FindStringSubmatch(strings.TrimRight(line, "\r")); m != nil {
						got[m[1]] = strings.TrimSpace(m[2])
					}
				}
				if len(got) != 5 || !strings.Contains(out, "probe-end") {
					t.Fatalf("%s: the probe did not run to its end (%v):\n%s", how, got, out)
				}
				procs, _ := strconv.Atoi(got["procs"])
				var reached []string
				if got["key"] == secret {
					reached = append(reached, "the secret key")
				}
				if got["theirs"] != "" {
					reached = append(reached, "another workspace's file")
				}
				if got["root"] != "conv-mine" {
					reached = append(reached, "the built-in root: "+got["root"])
				}
				if got["cluster"] != "0" {
					reached = append(reached, "the database's directory: "+got["cluster"]+" entries")
				}
				if procs > 10 {
					reached = append(reached, fmt.Sprintf("%d processes", procs))
				}
				if tc.confined && len(reached) > 0 {
					t.Fatalf("%s reached %v:\n%s", how, reached, out)
				}
				// The host's processes are left out: a small container may have few.
				if !tc.confined && len(reached) < 4 {
					t.Fatalf("%s unconfined reached only %v (the test must see what confinement hides):\n%s", how, reached, out)
				}
				ws, err := srv.App.Builtin.Workspace("conv-mine")
				if err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(filepath.Join(ws, "mine.txt")); err != nil || string(b) != "written\n" {
					t.Fatalf("%s: the file written in the workspace: %q, %v", how, b, err)
				}
				_ = os.Remove(filepath.Join(ws, "mine.txt"))
			}

			res := call(`{"operation":"run_command","command":` + jsonString(probe) + `}`)
			check("run_command", router.TextOf(res.Content))

			res = call(`{"operation":"create_session"}`)
			var cs struct {
				SessionID string `json:"sessionId"`
				NextIndex int64  `json:"nextIndex"`
			}
			if err := json.Unmarshal(res.StructuredContent, &cs); err != nil || cs.SessionID == "" {
				t.Fatalf("create_session: %s %v", res.StructuredContent, err)
			}
			call(`{"operation":"send_input","sessionId":"` + cs.SessionID + `","input":` + jsonString(probe+"\n") + `}`)
			var out string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				res = call(`{"operation":"get_output","sessionId":"` + cs.SessionID + `","fromIndex":` + jsonInt(cs.NextIndex) + `}`)
				// The echoed command line holds "probe-end" too; its output line stands alone.
				if out = router.TextOf(res.Content); strings.Contains(out, "\nprobe-end") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("session output: %s", out)
				}
			}
			check("the PTY session", out)
			call(`{"operation":"close_session","sessionId":"` + cs.SessionID + `"}`)
		})
	}
}
