package tools_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/tools"
)

// busFixture is a fixture whose tool service keeps its facets, as `serve` runs it: on
// the pool's Local, with a running bus.
func busFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	local := events.NewLocal(f.pool)
	log := slog.New(slog.DiscardHandler)
	bus := events.NewBus(f.pool, &events.BusOptions{Logger: log, Local: local})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = bus.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-bus.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the bus never listened")
	}
	f.svc = tools.New(f.pool, f.keys, &tools.Options{Logger: log, Local: local, Bus: bus})
	return f
}

func (f *fixture) facets() tools.Facets {
	f.t.Helper()
	fc, err := f.svc.Facets(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return fc
}

func (f *fixture) countOf(q tools.Query) int {
	f.t.Helper()
	n, err := f.svc.Count(f.ctx, q)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestFacetsFollowEvents: the facets (and the counts they answer) are kept between
// changes, and every change made through the services is in them by the time it
// returns; a change on another replica arrives with its event.
func TestFacetsFollowEvents(t *testing.T) {
	t.Parallel()
	f := busFixture(t)
	s1 := f.server("one", false)
	a := f.tool(toolSpec{server: s1, name: "a", status: "validated"})
	b := f.tool(toolSpec{server: s1, name: "b", status: "validated"})
	if got := f.facets(); got.Total() != 2 || !slices.Equal(got.Statuses, []tools.Facet{{"validated", 2}}) {
		t.Fatalf("facets %+v", got)
	}

	// Kept: a row written behind the services' back (no event) is not seen...
	f.tool(toolSpec{server: s1, name: "hidden", status: "validated"})
	if got := f.facets(); got.Total() != 2 || f.countOf(tools.Query{}) != 2 || f.countOf(tools.Query{Server: "one"}) != 2 {
		t.Fatalf("the facets were not kept: %+v", got)
	}
	// ...while a count the facets cannot answer still counts.
	if n := f.countOf(tools.Query{Server: "one", Status: []string{"validated"}}); n != 3 {
		t.Errorf("combined filter counted %d, want 3", n)
	}

	// A state change through the service.
	if _, err := f.svc.SetEnabled(f.ctx, alice, []string{a}, true, "", false); err != nil {
		t.Fatal(err)
	}
	if got := f.facets(); !slices.Equal(got.Statuses, []tools.Facet{{"validated", 2}, {"enabled", 1}}) ||
		f.countOf(tools.Query{Status: []string{"enabled"}}) != 1 || f.countOf(tools.Query{}) != 3 {
		t.Errorf("after enable: %+v", got.Statuses)
	}
	// Tags and categories.
	f.update(b, tools.Patch{Tags: []string{"x", "y"}, SetTags: true})
	if got := f.facets(); !slices.Equal(got.Tags, []tools.Facet{{"x", 1}, {"y", 1}}) || f.countOf(tools.Query{Tags: []string{"x"}}) != 1 {
		t.Errorf("after tagging: %+v", got.Tags)
	}
	cat, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "files"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.facets(); !slices.Equal(got.Categories, []tools.Facet{{"files", 0}}) {
		t.Errorf("after adding a category: %+v", got.Categories)
	}
	f.update(b, tools.Patch{Category: ptr("files")})
	if got := f.facets(); !slices.Equal(got.Categories, []tools.Facet{{"files", 1}}) ||
		f.countOf(tools.Query{Category: "files"}) != 1 || f.countOf(tools.Query{Category: "none"}) != 2 {
		t.Errorf("after filing a tool: %+v", got.Categories)
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, cat.ID, tools.CategoryInput{Name: "storage"}); err != nil {
		t.Fatal(err)
	}
	if got := f.facets(); !slices.Equal(got.Categories, []tools.Facet{{"storage", 1}}) || f.countOf(tools.Query{Category: "files"}) != 0 {
		t.Errorf("after renaming the category: %+v", got.Categories)
	}
	if err := f.svc.DeleteCategory(f.ctx, alice, cat.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.facets(); len(got.Categories) != 0 || f.countOf(tools.Query{Category: "none"}) != 3 {
		t.Errorf("after deleting the category: %+v", got.Categories)
	}

	// Another replica's change reaches this one with its NOTIFY: a server renamed there.
	f.exec(`UPDATE mcp_servers SET name = 'renamed' WHERE id = $1`, s1)
	tx, err := f.pool.BeginTx(f.ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.ServerChanged.Publish(f.ctx, tx, tools.ServersTopic, events.ServerStatus{ID: s1, Name: "renamed"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.facets()
		if slices.Equal(got.Servers, []tools.Facet{{"renamed", 3}}) && f.countOf(tools.Query{Server: "renamed"}) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica's change never arrived: %+v", got.Servers)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
