package usage_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/usage"
)

// Recent reads what the router cut from the row's metadata: MetaRequestBytes there
// (whatever its value) marks the request cut, a positive MetaResponseBytes the
// response, with that size; other metadata, or none, marks nothing.
func TestRecentReadsTheCutSizesFromMetadata(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbtest.New(t))
	tool := f.tool()
	meta := []string{
		`{"call_id":"a","` + usage.MetaRequestBytes + `":70000,"` + usage.MetaResponseBytes + `":90000}`,
		`{"call_id":"b","` + usage.MetaRequestBytes + `":null}`,
		`{"call_id":"c","` + usage.MetaResponseBytes + `":0,"other_bytes":5}`,
		`{"call_id":"d","` + usage.MetaResponseBytes + `":"12"}`,
		`{}`,
	}
	now := time.Now()
	for i, m := range meta {
		f.insert(usage.Entry{ToolID: tool, Success: true, UsedAt: now.Add(-time.Duration(i) * time.Second),
			Request: json.RawMessage(`{}`), Response: json.RawMessage(`{"ok":true}`), Metadata: json.RawMessage(m)})
	}
	logs, _, err := usage.Recent(f.ctx, f.pool, tool, 0, 10)
	if err != nil || len(logs) != len(meta) {
		t.Fatalf("recent: %d logs, %v", len(logs), err)
	}
	want := []struct {
		req, resp bool
		bytes     int
	}{{true, true, 90000}, {true, false, 11}, {false, false, 11}, {false, false, 11}, {false, false, 11}}
	for i, w := range want {
		l := logs[i]
		if l.RequestTruncated != w.req || l.Truncated != w.resp || l.ResponseBytes != w.bytes {
			t.Errorf("%s: request cut %v, response cut %v (%d bytes), want %v, %v (%d)",
				meta[i], l.RequestTruncated, l.Truncated, l.ResponseBytes, w.req, w.resp, w.bytes)
		}
	}
}
