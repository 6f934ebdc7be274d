package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/registry"
)

// submitted is what a browser sends for the form sel of doc: enabled fields only, checked
// boxes only, a textarea without the line break a browser drops after its opening tag.
func submitted(doc *goquery.Document, sel string) url.Values {
	v := url.Values{}
	doc.Find(sel).Find("input, textarea, select").Each(func(_ int, s *goquery.Selection) {
		name, ok := s.Attr("name")
		if !ok || name == "" || s.Is("[disabled]") || s.Closest("fieldset[disabled]").Length() > 0 {
			return
		}
		switch {
		case s.Is("textarea"):
			v.Add(name, strings.TrimPrefix(s.Text(), "\n"))
		case s.Is("select"):
			v.Add(name, s.Find("option[selected]").AttrOr("value", s.Find("option").First().AttrOr("value", "")))
		case s.Is("[type=checkbox], [type=radio]"):
			if s.Is("[checked]") {
				v.Add(name, s.AttrOr("value", "on"))
			}
		case s.Is("[type=submit], [type=button]"):
		default:
			v.Add(name, s.AttrOr("value", ""))
		}
	})
	return v
}

// An edit form opened before someone else changed the server does not undo that change
// when saved: it comes back (409) with what was typed and a notice to reload; saved
// again from a reloaded form, it keeps the other change. The API's PATCH takes the same
// precondition as expect_updated_at.
func TestServerEditFormStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := svClient{t: t, srv: srv, c: admin}
	const before, after = "http://127.0.0.1:9/mcp", "http://127.0.0.1:9/other"
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "shared", Type: registry.TypeStreamableHTTP,
		URL: before, Description: "a typo hre", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}

	// Admin A opens the form; admin B disables the server and moves it.
	res := srv.Get(t, admin, "/servers/"+sv.ID+"/edit")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("edit form: got %d", res.StatusCode)
	}
	form := submitted(page(t, res), "[data-testid=server-form]")
	api.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"enabled": false, "url": after}, http.StatusOK, nil)

	// A fixes the typo and saves.
	form.Set("description", "a typo here")
	res = srv.PostForm(t, admin, "/servers/"+sv.ID, form)
	doc := page(t, res)
	got, _ := srv.Registry.GetServer(ctx, sv.ID)
	if got.Enabled || got.URL != after {
		t.Fatalf("saving a form opened before the change: got %d, enabled %v, url %s; want the other admin's change kept (disabled, %s)",
			res.StatusCode, got.Enabled, got.URL, after)
	}
	notice := doc.Find("[data-testid=error-updated_at]")
	if res.StatusCode != http.StatusConflict || notice.Length() != 1 || !strings.Contains(notice.Text(), "Someone else changed this server") || notice.Find(`a[href="/servers/`+sv.ID+`/edit"]`).Length() != 1 {
		t.Fatalf("the stale form: got %d, notice %q; want 409 with a notice to reload", res.StatusCode, notice.Text())
	}
	if d := doc.Find("textarea[name=description]").Text(); d != "a typo here" || got.Description != "a typo hre" {
		t.Errorf("the stale form: shows description %q (stored %q), want what was typed shown and nothing stored", d, got.Description)
	}
	// Saved again as it came back, it is still refused: the reload is what shows the change.
	res = srv.PostForm(t, admin, "/servers/"+sv.ID, submitted(doc, "[data-testid=server-form]"))
	res.Body.Close()
	if res.StatusCode != http.StatusConflict {
		t.Errorf("the stale form saved again: got %d, want 409", res.StatusCode)
	}

	// Reloaded, the same edit saves and keeps B's change.
	form = submitted(page(t, srv.Get(t, admin, "/servers/"+sv.ID+"/edit")), "[data-testid=server-form]")
	form.Set("description", "a typo here")
	res = srv.PostForm(t, admin, "/servers/"+sv.ID, form)
	res.Body.Close()
	got, _ = srv.Registry.GetServer(ctx, sv.ID)
	if res.StatusCode != http.StatusSeeOther || got.Description != "a typo here" || got.Enabled || got.URL != after {
		t.Fatalf("the reloaded form: got %d, %+v", res.StatusCode, got)
	}

	// The API: a stale expect_updated_at is refused, the current one accepted.
	var cur struct {
		UpdatedAt string `json:"updated_at"`
	}
	api.json(http.MethodGet, "/api/v1/servers/"+sv.ID, nil, http.StatusOK, &cur)
	stale := got.UpdatedAt.Add(-time.Microsecond).Format(time.RFC3339Nano)
	api.api().Error(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"enabled": true, "expect_updated_at": stale},
		http.StatusConflict, registry.CodeStale)
	api.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"enabled": true, "expect_updated_at": cur.UpdatedAt}, http.StatusOK, nil)
	if got, _ = srv.Registry.GetServer(ctx, sv.ID); !got.Enabled {
		t.Error("PATCH with the current expect_updated_at did not apply")
	}
}

// Two PUT /api/v1/executions/settings of different fields at the same time both stick:
// each keeps the field it leaves out as the other one stored it. A transaction holding
// the settings rows makes both requests read before either writes.
func TestExecutionSettingsConcurrentPatches(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	api.JSON(http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl_seconds": 3600, "high_separation": "auto"}, http.StatusOK, nil)

	const ttlKey = "executions.approval_ttl_seconds"
	ctx := context.Background()
	tx, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	testkit.Exec(t, tx, `SELECT key FROM settings WHERE key IN ($1, $2) FOR UPDATE`, ttlKey, decide.SettingKey)
	if n := testkit.Count(t, tx, `SELECT count(*) FROM settings WHERE key IN ($1, $2)`, ttlKey, decide.SettingKey); n != 2 {
		t.Fatalf("settings rows: %d, want 2", n)
	}

	type answer struct {
		status int
		body   string
	}
	answers := make([]answer, 2)
	var wg sync.WaitGroup
	for i, body := range []map[string]any{{"high_separation": "always"}, {"approval_ttl_seconds": 600}} {
		wg.Go(func() {
			// Not api.Do: it would fail the test from another goroutine.
			raw, _ := json.Marshal(body)
			req, _ := http.NewRequest(http.MethodPut, srv.URL+"/api/v1/executions/settings", bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			res, err := admin.Do(req)
			if err != nil {
				answers[i] = answer{0, err.Error()}
				return
			}
			defer res.Body.Close()
			out, _ := io.ReadAll(res.Body)
			answers[i] = answer{res.StatusCode, string(out)}
		})
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%settings%'`) == 2
	}, "the two PUTs never both waited for the settings rows")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != http.StatusOK {
			t.Fatalf("PUT %d: got %d %s", i, a.status, a.body)
		}
	}
	var st struct {
		TTL        int64  `json:"approval_ttl_seconds"`
		Separation string `json:"high_separation"`
	}
	api.JSON(http.MethodGet, "/api/v1/executions/settings", nil, http.StatusOK, &st)
	if st.TTL != 600 || st.Separation != "always" {
		t.Fatalf("after two concurrent PUTs: %+v, want approval_ttl_seconds 600 and high_separation always", st)
	}
}
