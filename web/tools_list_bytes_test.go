package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// Large tool definitions: an API page stops at its byte budget with a cursor that goes
// on from there, each tool once; the list page's cards show a bounded part of each.
func TestToolListLargeDefinitions(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	var defs []registry.ToolDef
	for i := range 6 {
		defs = append(defs, toolDef(fmt.Sprintf("big_%d", i), "A large tool.", `{"readOnlyHint":true}`))
	}
	sv := seedTools(t, srv, "huge", true, defs...)
	// 3 MiB descriptions: two a page under the 8 MiB budget.
	if _, err := srv.Pool.Exec(ctx, `UPDATE mcp_tools SET title = repeat('T', 5000), description = repeat('d', 3 << 20),
		annotations = jsonb_build_object('readOnlyHint', true, 'notes', repeat('n', 64 << 10)) WHERE server_id = $1`, sv.ID); err != nil {
		t.Fatal(err)
	}

	a := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
	var pages [][]string
	seen := map[string]bool{}
	path := "/api/v1/tools?limit=200"
	for len(pages) < 10 {
		var got toolList
		a.json(http.MethodGet, path, nil, http.StatusOK, &got)
		var names []string
		for _, tl := range got.Tools {
			if seen[tl.Name] {
				t.Errorf("%s again on page %d", tl.Name, len(pages)+1)
			}
			seen[tl.Name] = true
			names = append(names, tl.Name)
		}
		pages = append(pages, names)
		if got.NextCursor == "" {
			break
		}
		path = "/api/v1/tools?limit=200&cursor=" + url.QueryEscape(got.NextCursor)
	}
	want := "[[big_0 big_1] [big_2 big_3] [big_4 big_5]]"
	if got := fmt.Sprint(pages); got != want {
		t.Errorf("API pages %s, want %s", got, want)
	}

	c := srv.Login(t, "admin", webtest.AdminPassword)
	res, err := c.Get(srv.URL + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	doc := page(t, res)
	cards := doc.Find("[data-testid=tool-card]")
	if cards.Length() != 6 {
		t.Fatalf("%d cards, want 6", cards.Length())
	}
	card := cards.First()
	title, desc := strings.TrimSpace(card.Find(".card-title").Text()), strings.TrimSpace(card.Find(".card-desc").Text())
	if utf8.RuneCountInString(title) != 201 || !strings.HasSuffix(title, "…") {
		t.Errorf("card title: %d characters, ends %q", utf8.RuneCountInString(title), title[len(title)-5:])
	}
	if utf8.RuneCountInString(desc) != 2001 || !strings.HasSuffix(desc, "…") {
		t.Errorf("card description: %d characters", utf8.RuneCountInString(desc))
	}
	if r := card.Find("[data-testid=risk-badge]").AttrOr("data-risk", ""); r != "low" {
		t.Errorf("risk badge %q, want low (read-only on a trusted server)", r)
	}
}
