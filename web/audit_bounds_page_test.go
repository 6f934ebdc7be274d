package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A search whose word is in more entries than a page may read (services/audit's
// maxMatches, 100,000), with a group that no entry with the word is in, is refused
// as too broad: the page answers 400 with the error next to the words' field (as a bad
// filter's), and the API answers 400 naming q.
func TestAuditPageSearchTooBroad(t *testing.T) {
	t.Parallel()
	e := auditStart(t)
	// 100,001 tool calls with the word, then 5,000 settings changes without it: more
	// than the newest entries a search checks word by word (searchWalk) before it reads
	// the word's matches, so the matches are counted. Not a valid chain: only read.
	if _, err := e.srv.Pool.Exec(context.Background(), `INSERT INTO audit_log (id, at, actor_kind, actor_name, action,
			target_type, target_id, target_name, payload, prev_hash, hash)
		SELECT h.id + g, now() - interval '1 hour' + g * interval '1 millisecond', 'user', 'seed',
			CASE WHEN g <= 100001 THEN 'tool.call' ELSE 'settings.update' END, 'tool', 't' || g, 'tool-' || g,
			json_build_object('note', CASE WHEN g <= 100001 THEN 'quokka' ELSE 'n' || g END), '\x00'::bytea, decode(md5(g::text), 'hex')
		FROM (SELECT coalesce(max(id), 0) AS id FROM audit_log) h, generate_series(1, 105001) g`); err != nil {
		t.Fatal(err)
	}
	const query = "q=quokka&action=settings"

	res := e.srv.Get(t, e.auditor, "/audit?"+query)
	if res.StatusCode != http.StatusBadRequest {
		res.Body.Close()
		t.Fatalf("/audit?%s: got %d, want 400", query, res.StatusCode)
	}
	d := doc(t, res)
	msg := d.Find(`[data-testid=error-q]`)
	if msg.Length() != 1 || !strings.Contains(msg.Text(), "too broad") || msg.AttrOr("id", "") != "q-error" {
		t.Fatalf("/audit?%s: the error at q: %d, id %q, %q; want one saying too broad", query, msg.Length(), msg.AttrOr("id", ""), msg.Text())
	}
	in := d.Find(`input[name=q]`)
	if in.AttrOr("aria-invalid", "") != "true" || in.AttrOr("aria-describedby", "") != "q-error" || in.AttrOr("value", "") != "quokka" {
		t.Errorf("/audit?%s: the q field: aria-invalid %q, aria-describedby %q, value %q; want true, q-error, quokka",
			query, in.AttrOr("aria-invalid", ""), in.AttrOr("aria-describedby", ""), in.AttrOr("value", ""))
	}
	if n := d.Find(`[data-testid=audit-row]`).Length(); n != 0 {
		t.Errorf("/audit?%s: %d rows listed beside the error", query, n)
	}

	eb := e.api.Error(http.MethodGet, "/api/v1/audit?"+query, nil, http.StatusBadRequest, "invalid_input")
	var details []struct{ Path, Message string }
	if err := json.Unmarshal(eb.Error.Details, &details); err != nil {
		t.Fatalf("the API's details %s: %v", eb.Error.Details, err)
	}
	if len(details) != 1 || details[0].Path != "q" || !strings.Contains(details[0].Message, "too broad") {
		t.Errorf("GET /api/v1/audit?%s: details %s; want one at q saying too broad", query, eb.Error.Details)
	}
}
