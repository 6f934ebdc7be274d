package router_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// runAs starts a test panel run of tool as user and waits for it to end.
func runAs(t *testing.T, runs *router.Runs, user, tool, args string) *router.Run {
	t.Helper()
	run := runs.Start(router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: audit.Actor{Kind: audit.ActorUser, Name: user},
		Role: auth.RoleAdmin, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true, Phrase: tool}}, "tool-id")
	if !run.Wait(30 * time.Second) {
		t.Fatalf("run of %s as %s did not end", tool, user)
	}
	return run
}

// kept reports which of runs the registry still holds.
func kept(rs *router.Runs, runs []*router.Run) []bool {
	out := make([]bool, len(runs))
	for i, run := range runs {
		_, out[i] = rs.Lookup(run.ID)
	}
	return out
}

// A person keeps only their newest few ended runs (a page follows its newest), and one
// still running is not dropped for them; the process keeps a bounded number in all,
// dropping the oldest ended first.
func TestRunsKeepFewEnded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("mt", true, "echo", "sleep")
	e.tool("mt__sleep")
	runs := router.NewRuns(e.r)

	long := runs.Start(router.Call{Tool: "mt__sleep", Arguments: json.RawMessage(`{"ms":60000}`), Actor: audit.Actor{Kind: audit.ActorUser, Name: "alice"},
		Role: auth.RoleAdmin, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true, Phrase: "mt__sleep"}}, "tool-id")
	var ended []*router.Run
	for i := range 10 {
		ended = append(ended, runAs(t, runs, "alice", "mt__echo", fmt.Sprintf(`{"message":"run %d"}`, i)))
	}
	bob := runAs(t, runs, "bob", "mt__echo", `{"message":"bob"}`)
	if got, want := fmt.Sprint(kept(runs, ended)), fmt.Sprint([]bool{false, false, true, true, true, true, true, true, true, true}); got != want {
		t.Errorf("alice's ended runs kept: got %s, want %s (the newest 8)", got, want)
	}
	if _, ok := runs.Lookup(long.ID); !ok {
		t.Error("alice's running run was dropped")
	}
	long.Cancel()
	if !long.Wait(30 * time.Second) {
		t.Error("the cancelled run did not end")
	}
	if _, ok := runs.Lookup(bob.ID); !ok {
		t.Error("bob's run was dropped for alice's")
	}

	// The process-wide bound: the oldest ended runs go, whoever started them.
	all := router.NewRuns(e.r)
	router.SetRunLimits(all, 8, 5)
	var mixed []*router.Run
	for i := range 9 {
		mixed = append(mixed, runAs(t, all, fmt.Sprintf("user%d", i%3), "mt__echo", `{"message":"x"}`))
	}
	if got, want := fmt.Sprint(kept(all, mixed)), fmt.Sprint([]bool{false, false, false, false, true, true, true, true, true}); got != want {
		t.Errorf("ended runs kept in all: got %s, want %s (the newest 5)", got, want)
	}

	// The bytes of the results kept in all are bounded: past them the oldest go, and
	// the newest is kept whatever its size.
	budgeted := router.NewRuns(e.r)
	bytesKept := router.SetRunBudget(budgeted, 3*len("Echo: 12345"))
	var sized []*router.Run
	for i := range 5 {
		sized = append(sized, runAs(t, budgeted, fmt.Sprintf("user%d", i), "mt__echo", `{"message":"12345"}`))
	}
	if got, want := fmt.Sprint(kept(budgeted, sized)), fmt.Sprint([]bool{false, false, true, true, true}); got != want || bytesKept() != 3*len("Echo: 12345") {
		t.Errorf("ended runs kept within the bytes: got %s (%d bytes), want %s", got, bytesKept(), want)
	}
	router.SetRunBudget(budgeted, 1)
	last := runAs(t, budgeted, "user9", "mt__echo", `{"message":"12345"}`)
	if got := fmt.Sprint(kept(budgeted, append(sized, last))); got != fmt.Sprint([]bool{false, false, false, false, false, true}) || bytesKept() != len("Echo: 12345") {
		t.Errorf("over a budget smaller than one result: kept %s (%d bytes), want the newest alone", got, bytesKept())
	}
}

// A run keeps at most 4 MiB of its result's text, and says it was shortened; a
// smaller result is kept whole.
func TestRunKeepsBoundedResult(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec := registry.Spec{Name: "huge", Type: registry.TypeStreamableHTTP, Enabled: true, Trusted: true,
		URL: mcptest.StartHTTP(t, &mcptest.Options{Name: "huge", Big: true}).URL()}
	e.register(spec, "big")
	runs := router.NewRuns(e.r)

	run := runAs(t, runs, "alice", "huge__big", fmt.Sprintf(`{"bytes":%d}`, 5<<20))
	_, res, err, _ := run.State()
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, c := range res.Content {
		size += len(c.Text)
	}
	text := router.TextOf(res.Content)
	if size > 4<<20 || !strings.Contains(text, "shortened") || !strings.HasPrefix(text, strings.Repeat("x", 1<<20)) {
		t.Errorf("a 5 MiB result: kept %d bytes of text, ending %q; want at most 4 MiB, marked shortened", size, text[max(0, len(text)-200):])
	}

	run = runAs(t, runs, "alice", "huge__big", `{"bytes":1000}`)
	if _, res, err, _ = run.State(); err != nil || router.TextOf(res.Content) != strings.Repeat("x", 1000) {
		t.Errorf("a small result: got %v, want it whole", err)
	}
}

// Runs dropped for newer ones let go of their results at once, and a result cut to the
// panel's 4 MiB keeps no more than that: a caller looping runs of a tool answering
// megabytes held every result of the last ten minutes (each whole), whatever the
// registry kept. Not parallel: it measures the heap.
func TestDroppedRunsLetGoOfResults(t *testing.T) {
	e := start(t, nil)
	spec := registry.Spec{Name: "huge", Type: registry.TypeStreamableHTTP, Enabled: true, Trusted: true,
		URL: mcptest.StartHTTP(t, &mcptest.Options{Name: "huge", Big: true}).URL()}
	e.register(spec, "big")
	runs := router.NewRuns(e.r)
	router.SetRunLimits(runs, 2, 4)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	runAs(t, runs, "alice", "huge__big", fmt.Sprintf(`{"bytes":%d}`, 5<<20)) // the session's buffers grow once
	before := heap()
	for range 12 {
		runAs(t, runs, "alice", "huge__big", fmt.Sprintf(`{"bytes":%d}`, 5<<20))
	}
	// Two runs kept, at most 4 MiB each: 60 MiB were held before.
	if grown := int64(heap()) - int64(before); grown > 24<<20 {
		t.Errorf("12 runs of 5 MiB results, 2 kept: the heap grew %d MiB", grown>>20)
	}
}
