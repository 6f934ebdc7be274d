package web_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit/audittest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// P6 (docs/architecture.md, Performance): a filtered /audit page at 10 M rows, p95 < 100 ms.
//
//	go test ./web -run '^$' -bench 'AuditPage' -benchtime=200x -count=1
//
// The log is filled with TOOLWARDEN_BENCH_AUDIT_ROWS synthetic entries (default
// 10,000,000; loading them takes minutes) on the durable settings of `make bench`. Each
// sub-benchmark requests the page as an auditor over a real loopback connection, ten
// requests an iteration, rotating through values of its filter (and, for "deep", pages
// far down the log), and reports p50-ms and p95-ms of the whole request. Before them the
// log gets benchOldEntries by "leaver", a name found only there ("q-old": a search for
// a renamed or departed name, whose matches are all old), and "export-q-old" downloads
// them all as CSV through GET /api/v1/audit/export.

var benchAuditRowRE = regexp.MustCompile(`data-testid="audit-row"`)

// benchOldEntries is how many of the oldest entries name "leaver": more than the 10,000
// matches a search reads from their ids, so it finds them as it finds an old name.
const benchOldEntries = 15_000

func BenchmarkAuditPage(b *testing.B) {
	n := 10_000_000
	if s := os.Getenv("TOOLWARDEN_BENCH_AUDIT_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1000 {
			b.Fatalf("TOOLWARDEN_BENCH_AUDIT_ROWS=%q: want a number of at least 1000", s)
		}
	}
	srv := webtest.Start(b, nil)
	start := time.Now()
	// Before the others, and an hour older than the first of them.
	if _, err := srv.Pool.Exec(context.Background(), `INSERT INTO audit_log (id, at, actor_kind, actor_name, action, target_type,
			target_id, target_name, ip, payload, prev_hash, hash)
		SELECT h.id + g, now() - $1::bigint * interval '10 milliseconds' - interval '1 hour' + g * interval '1 millisecond', 'user', 'leaver',
			'tool.call', 'tool', 't' || g, 'tool-' || g, '10.0.0.1', json_build_object('client', 'bench'), '\x00'::bytea, decode(md5(g::text), 'hex')
		FROM (SELECT coalesce(max(id), 0) AS id FROM audit_log) h, generate_series(1, $2::bigint) g`, n, benchOldEntries); err != nil {
		b.Fatal(err)
	}
	if err := audittest.Load(context.Background(), srv.Pool, n); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d audit entries in %s", n, time.Since(start).Round(time.Second))
	srv.CreateUser(b, "bench-auditor", auth.RoleAuditor, "bench-auditor-password")
	c := srv.Login(b, "bench-auditor", "bench-auditor-password")
	mid := int64(n / 2)
	// The entries span n×10 ms up to now (audittest.Load): ten windows of a hundredth of
	// that span each, spread over the log.
	span := time.Duration(n) * 10 * time.Millisecond
	first := time.Now().UTC().Add(-span)
	cases := []struct {
		name  string
		query func(i int) string
		some  bool // every page has rows
	}{
		{"none", func(i int) string { return "" }, true},
		{"actor", func(i int) string { return fmt.Sprintf("actor=user%d", i%audittest.Actors) }, true},
		{"group", func(i int) string {
			return "action=" + []string{"calls", "executions", "approvals", "servers", "tools", "auth"}[i%6]
		}, true},
		{"action", func(i int) string { return "action=" + audittest.Actions[i%len(audittest.Actions)] }, true},
		{"target", func(i int) string { return fmt.Sprintf("target_type=tool&target_id=t%d", (i*7)%audittest.Targets) }, false},
		{"denied", func(i int) string { return "result=denied" }, true},
		{"failure+actor", func(i int) string { return fmt.Sprintf("result=failure&actor=user%d", i%audittest.Actors) }, false},
		{"request", func(i int) string { return fmt.Sprintf("request_id=req-%d", (i*7919)%(n/3)) }, true},
		{"time", func(i int) string {
			from := first.Add(span * time.Duration(i%10) / 10).Truncate(time.Second)
			return "from=" + from.Format(time.RFC3339) + "&to=" + from.Add(span/100).Format(time.RFC3339)
		}, true},
		{"q", func(i int) string { return fmt.Sprintf("q=tool-%d", 10000+(i*13)%40000) }, false},
		// A word every entry has, alone and with an actor: read newest first, not found
		// through the words' index.
		{"q-common", func(i int) string { return "q=bench" }, true},
		{"q-common+actor", func(i int) string { return fmt.Sprintf("q=bench&actor=user%d", i%audittest.Actors) }, true},
		// A name only the oldest entries have, on the page and exported whole.
		{"q-old", func(i int) string { return "q=leaver" }, true},
		// The same, every entry downloaded: GET /api/v1/audit/export?format=csv&q=leaver.
		{"export-q-old", func(i int) string { return "q=leaver" }, true},
		{"actor+group", func(i int) string { return fmt.Sprintf("actor=user%d&action=calls", i%audittest.Actors) }, true},
		{"deep", func(i int) string { return fmt.Sprintf("action=calls&cursor=%d", mid-int64(i)*1000) }, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			url := func(i int) string { return srv.URL + "/audit?" + tc.query(i) }
			export := strings.HasPrefix(tc.name, "export-")
			if export {
				url = func(i int) string { return srv.URL + "/api/v1/audit/export?format=csv&" + tc.query(i) }
			}
			benchFetch(b, c, "", url(0)) // warm
			var times benchTimes
			i := 0
			// Ten requests an iteration, so a slow filter still has a p95 of its own
			// when the benchmark runs it only once.
			for b.Loop() {
				for range 10 {
					i++
					start := time.Now()
					body := benchFetch(b, c, "", url(i))
					times = append(times, time.Since(start))
					if export && bytes.Count(body, []byte("\n")) <= benchOldEntries {
						b.Fatalf("%s: %d lines, want the header and at least %d entries", url(i), bytes.Count(body, []byte("\n")), benchOldEntries)
					}
					if !export && tc.some && len(benchAuditRowRE.FindAllIndex(body, -1)) == 0 {
						b.Fatalf("%s: no rows", url(i))
					}
				}
			}
			b.ReportMetric(times.percentile(0.50), "p50-ms")
			b.ReportMetric(times.percentile(0.95), "p95-ms")
			b.ReportMetric(float64(n), "rows") // the log's size (P6 names 10 M)
		})
	}
}
