package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// Change messages stored before they were bounded (long quoted names, hundreds to a
// version) are shown clipped on the Schema and History tabs, a bounded number to a
// version, the rest counted.
func TestToolChangeMessagesBounded(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "chg", true, "echo")
	id := toolID(t, srv, "chg__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)

	// 200 changes of 10 KB each, three versions' worth (6 MB) on each tab.
	const changes = `(SELECT jsonb_agg(jsonb_build_object('kind', 'parameter_removed', 'path', '/' || repeat('p', 5000) || i,
		'message', 'parameter "' || repeat('p', 5000) || i || '" was removed', 'breaking', true)) FROM generate_series(1, 200) i)`
	ctx := context.Background()
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO tool_schemas (tool_id, version_major, version_minor, definition_hash, definition, breaking, changes)
		SELECT $1, 0, g, md5(g::text), jsonb_build_object('name', 'echo', 'description', 'v' || g), true, `+changes+`
		FROM generate_series(1, 3) g`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO tool_state_history (tool_id, from_status, to_status, reason, actor, metadata)
		SELECT $1, 'enabled', 'updating', 'definition changed', 'discovery',
			jsonb_build_object('from_hash', md5(g::text), 'to_hash', md5((g + 1)::text), 'changes', `+changes+`)
		FROM generate_series(1, 3) g`, id); err != nil {
		t.Fatal(err)
	}

	// A list Diff bounded already (50 changes and its own count of the rest) over 64 KiB:
	// read with that count, not "and 1 more".
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO tool_schemas (tool_id, version_major, version_minor, definition_hash, definition, breaking, changes)
		SELECT $1, 0, 9, 'bounded', jsonb_build_object('name', 'echo'), true, (SELECT jsonb_agg(c ORDER BY i) FROM (
			SELECT i, jsonb_build_object('kind', 'parameter_removed', 'path', '/p' || i, 'message', repeat('"', 1000) || i, 'breaking', true) AS c
			FROM generate_series(1, 50) i
			UNION ALL SELECT 51, jsonb_build_object('kind', 'more', 'message', 'and 312 more changes', 'breaking', true)) x)`, id); err != nil {
		t.Fatal(err)
	}
	bounded, found, err := srv.Registry.ToolVersionOf(ctx, id, "bounded")
	if err != nil || !found {
		t.Fatal(err, found)
	}
	if n := len(bounded.Changes); n != 51 || bounded.Changes[50].Message != "and 312 more changes" {
		t.Errorf("a bounded list read with %d changes, the last %+v; want its own count kept", n, bounded.Changes[n-1])
	}
	if _, err := srv.Owner.Exec(ctx, `DELETE FROM tool_schemas WHERE tool_id = $1 AND definition_hash = 'bounded'`, id); err != nil {
		t.Fatal(err)
	}

	// What the pages read is bounded too, not only what they show.
	read, _, err := srv.Registry.ToolVersionsPage(ctx, id, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range read {
		if n := len(v.Changes); n > 51 || n > 0 && !strings.Contains(v.Changes[n-1].Message, "more change") {
			t.Errorf("version %s: read with %d changes, want at most 51, the rest counted", v.DefinitionHash, n)
		}
		for _, c := range v.Changes {
			if len(c.Message) > 1024 || len(c.Path) > 256 {
				t.Errorf("version %s: a change read with %d bytes of message and %d of path", v.DefinitionHash, len(c.Message), len(c.Path))
				break
			}
		}
	}
	hist, _, err := srv.Registry.ToolHistoryPage(ctx, id, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if len(h.Metadata) > 128<<10 {
			t.Errorf("a history row read with %d bytes of metadata", len(h.Metadata))
		}
	}

	get := func(tab string) (string, *goquery.Document) {
		t.Helper()
		res := srv.Get(t, admin, "/tools/"+id+"?tab="+tab)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET tab %s: %d", tab, res.StatusCode)
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b), doc
	}

	body, doc := get("schema")
	if len(body) > 512<<10 {
		t.Errorf("the Schema tab is %d bytes, want at most 512 KB", len(body))
	}
	versions := 0
	doc.Find("[data-testid=version]").Each(func(_ int, v *goquery.Selection) {
		cs := v.Find("[data-testid=change]")
		if cs.Length() == 0 {
			return
		}
		versions++
		if cs.Length() > 51 {
			t.Errorf("version %s lists %d changes, want at most 51", v.AttrOr("data-hash", ""), cs.Length())
		}
		longest := 0
		cs.Each(func(_ int, c *goquery.Selection) { longest = max(longest, len(c.Text())) })
		if longest > 1200 {
			t.Errorf("version %s: a change shows %d bytes, want it clipped", v.AttrOr("data-hash", ""), longest)
		}
		if last := cs.Last().Text(); !strings.Contains(last, "more changes") {
			t.Errorf("version %s: last change %.80q, want the count of those left out", v.AttrOr("data-hash", ""), last)
		}
	})
	if versions != 3 {
		t.Errorf("%d versions list changes, want the 3 stored", versions)
	}

	body, doc = get("history")
	if len(body) > 512<<10 {
		t.Errorf("the History tab is %d bytes, want at most 512 KB", len(body))
	}
	if n := strings.Count(body, "more changes"); n != 3 {
		t.Errorf("the History tab counts the changes left out %d times, want 3 (one a row)", n)
	}
	if n := doc.Find("[data-testid=history-row]").Length(); n < 3 {
		t.Errorf("the History tab shows %d rows, want the 3 stored and the tool's own", n)
	}
}
