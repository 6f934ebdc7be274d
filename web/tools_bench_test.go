package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Issue #4: "/tools page and API with 10,000 tools across 50 servers — report median and
// p95 render time and page size".
//
//	go test ./web -run '^$' -bench 'ToolList' -benchtime=200x -count=1
//
// Every sub-benchmark makes one HTTP request per iteration over a real loopback
// connection (keep-alive, as a browser or API client would) and reports the median and
// 95th percentile of the request's wall time (request sent to last body byte read) and
// the size of the response body.
//
// The page shows 24 cards a page since issue #23 (P3: page size < 60 KB); until then it
// showed 48, so bytes/page of earlier runs are of pages twice as long. The API's pages
// (limit=50) are unchanged.

const (
	benchServers        = 50
	benchToolsPerServer = 200
	// benchCardsPerPage mirrors handlers.toolsPerPage.
	benchCardsPerPage = 24
)

// benchToolSeed is what the seeding made that the sub-benchmarks filter by.
type benchToolSeed struct {
	servers    []string
	categories []string
	tags       []string
}

var (
	benchVerbs = [][2]string{{"read", "Reads"}, {"write", "Writes"}, {"list", "Lists"}, {"search", "Searches"},
		{"get", "Gets"}, {"create", "Creates"}, {"update", "Updates"}, {"delete", "Deletes"}, {"fetch", "Fetches"},
		{"sync", "Syncs"}, {"archive", "Archives"}, {"export", "Exports"}, {"import", "Imports"}, {"close", "Closes"},
		{"open", "Opens"}, {"merge", "Merges"}, {"assign", "Assigns"}, {"watch", "Watches"}, {"describe", "Describes"},
		{"count", "Counts"}}
	benchNouns = []string{"file", "files", "directory", "issue", "issues", "pull_request", "pull_requests", "commit",
		"branch", "repository", "comment", "label", "milestone", "user", "team", "channel", "message", "event",
		"calendar", "document", "page", "table", "row", "record", "ticket", "invoice", "customer", "order",
		"deployment", "secret_name"}
	benchAdjectives = []string{"cached", "remote", "local", "archived", "shared", "pending", "recent", "open",
		"closed", "private", "public", "draft", "nested", "tagged", "stale", "primary"}
	benchPlaces = []string{"the workspace", "the repository", "the project board", "the team space", "the database",
		"the billing account", "the shared drive", "the tracker", "the wiki", "the cluster"}
	benchExtras = []string{
		"Returns the result as structured JSON with one entry per item.",
		"Supports pagination with a cursor and a page size.",
		"Results are sorted by the time they were last changed.",
		"Large results are truncated to the first thousand entries.",
		"The call is rate limited by the upstream service.",
		"Useful when triaging work across several projects.",
		"Only items the configured account can see are returned.",
		"Dates are reported in UTC using the ISO 8601 format.",
		"Filters combine with a logical and.",
		"Fields that are not set keep their current values.",
		"Archived items are skipped unless asked for.",
		"Each entry carries its identifier, title and owner.",
	}
	benchParams = []struct{ name, typ, desc string }{
		{"path", "string", "Path of the item, relative to the workspace root."},
		{"query", "string", "Words to look for in titles and bodies."},
		{"limit", "integer", "How many entries to return at most."},
		{"cursor", "string", "Position returned by the previous call, to continue from."},
		{"recursive", "boolean", "Whether to descend into nested folders."},
		{"labels", "array", "Labels the items must carry."},
		{"owner", "string", "Account or organisation that owns the item."},
		{"state", "string", "Open, closed or all."},
		{"since", "string", "Only items changed after this time (ISO 8601)."},
		{"body", "string", "Text of the item, in Markdown."},
		{"id", "string", "Identifier of the item."},
		{"dry_run", "boolean", "Report what would change without changing it."},
	}
	benchServerNames = []string{"github", "gitlab", "jira", "linear", "slack", "notion", "confluence", "drive",
		"postgres", "sentry", "stripe", "zendesk", "hubspot", "salesforce", "calendar", "gmail", "s3", "k8s",
		"datadog", "pagerduty", "figma", "asana", "trello", "airtable", "filesystem"}
	benchCategoryNames = []string{"source-control", "issue-tracking", "chat", "documents", "storage", "databases",
		"monitoring", "billing", "crm", "scheduling"}
	benchRareTag  = "needs-review"
	benchTagNames = []string{"prod", "internal", "experimental", "pii", "billing", "read-heavy", "beta",
		"deprecated", "team-platform", "team-support", "sensitive", "reviewed"}
)

// benchToolDefs is one server's listing: n distinct verb_noun tools with 1-3 sentence
// descriptions, 2-6 described parameters and varied annotations.
func benchToolDefs(rng *rand.Rand, n int) []registry.ToolDef {
	combos := make([][2]int, 0, len(benchVerbs)*len(benchNouns))
	for v := range benchVerbs {
		for o := range benchNouns {
			combos = append(combos, [2]int{v, o})
		}
	}
	rng.Shuffle(len(combos), func(i, j int) { combos[i], combos[j] = combos[j], combos[i] })
	defs := make([]registry.ToolDef, n)
	for i := range defs {
		verb, noun := benchVerbs[combos[i][0]], benchNouns[combos[i][1]]
		name := verb[0] + "_" + noun
		sentences := []string{fmt.Sprintf("%s %s %s %s in %s.", verb[1], []string{"the", "a", "every"}[rng.IntN(3)],
			benchAdjectives[rng.IntN(len(benchAdjectives))], strings.ReplaceAll(noun, "_", " "),
			benchPlaces[rng.IntN(len(benchPlaces))])}
		for range rng.IntN(3) {
			sentences = append(sentences, benchExtras[rng.IntN(len(benchExtras))])
		}
		props := map[string]any{}
		var required []string
		for k, p := range rng.Perm(len(benchParams))[:2+rng.IntN(5)] {
			bp := benchParams[p]
			prop := map[string]any{"type": bp.typ, "description": bp.desc}
			switch bp.typ {
			case "integer":
				prop["minimum"], prop["maximum"] = 1, 1000
			case "array":
				prop["items"] = map[string]any{"type": "string"}
			}
			props[bp.name] = prop
			if k < 1+rng.IntN(2) {
				required = append(required, bp.name)
			}
		}
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
		d := registry.ToolDef{Name: name, Description: strings.Join(sentences, " "), InputSchema: schema}
		switch r := rng.IntN(20); {
		case r < 7:
			d.Annotations = json.RawMessage(`{"readOnlyHint":true}`)
		case r < 11:
			d.Annotations = json.RawMessage(`{"readOnlyHint":false,"destructiveHint":false}`)
		case r < 15:
			d.Annotations = json.RawMessage(`{"destructiveHint":true}`)
		}
		defs[i] = d
	}
	return defs
}

// seedToolBench stores 50 servers × 200 tools through discovery (so they are validated as
// in production), then files ~60% in one of 10 categories, tags ~50% with 1-3 of 12 tags
// (and 5 tools with a rare 13th), and moves ~30% to enabled and ~10% to disabled (direct
// SQL, for speed).
func seedToolBench(tb testing.TB, srv *webtest.Server) benchToolSeed {
	tb.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(4, 10000))
	var seed benchToolSeed
	for i := range benchServers {
		name := fmt.Sprintf("%s-%d", benchServerNames[i%len(benchServerNames)], i/len(benchServerNames)+1)
		sp := disabledSpec(name)
		sp.Trusted = i%2 == 0
		sv, err := srv.Registry.CreateServer(ctx, audit.System, sp)
		if err != nil {
			tb.Fatalf("create server %s: %v", name, err)
		}
		if _, err := srv.Registry.ApplyDiscovery(ctx, sv.ID, registry.Discovery{Trigger: "manual", Actor: audit.System,
			StartedAt: time.Now(), Pages: 1, Tools: benchToolDefs(rng, benchToolsPerServer)}); err != nil {
			tb.Fatalf("discovery on %s: %v", name, err)
		}
		seed.servers = append(seed.servers, name)
	}
	var catIDs []string
	for _, name := range benchCategoryNames {
		c, err := srv.Tools.SaveCategory(ctx, audit.System, "", tools.CategoryInput{Name: name})
		if err != nil {
			tb.Fatal(err)
		}
		catIDs = append(catIDs, c.ID)
	}
	seed.categories, seed.tags = benchCategoryNames, append(slices.Clone(benchTagNames), benchRareTag)

	rows, err := srv.Pool.Query(ctx, `SELECT id::text FROM mcp_tools ORDER BY server_id, name`)
	if err != nil {
		tb.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(ids) != benchServers*benchToolsPerServer {
		tb.Fatalf("seeded %d tools, want %d", len(ids), benchServers*benchToolsPerServer)
	}
	var catTool, catCat, tagTool, tagTag, enabled, disabled []string
	for i, id := range ids {
		if i%2000 == 1999 { // a rare tag: 5 tools
			tagTool, tagTag = append(tagTool, id), append(tagTag, benchRareTag)
		}
		if rng.IntN(10) < 6 {
			catTool, catCat = append(catTool, id), append(catCat, catIDs[rng.IntN(len(catIDs))])
		}
		if rng.IntN(2) == 0 {
			for _, k := range rng.Perm(len(benchTagNames))[:1+rng.IntN(3)] {
				tagTool, tagTag = append(tagTool, id), append(tagTag, benchTagNames[k])
			}
		}
		switch r := rng.IntN(10); {
		case r < 3:
			enabled = append(enabled, id)
		case r < 4:
			disabled = append(disabled, id)
		}
	}
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE mcp_tools t SET category_id = v.cat FROM unnest($1::uuid[], $2::uuid[]) AS v(id, cat) WHERE t.id = v.id`,
			[]any{catTool, catCat}},
		{`INSERT INTO tool_tags (tool_id, tag) SELECT * FROM unnest($1::uuid[], $2::text[])`, []any{tagTool, tagTag}},
		{`UPDATE mcp_tools SET status = 'enabled' WHERE id = ANY($1::uuid[]) AND status = 'validated'`, []any{enabled}},
		{`UPDATE mcp_tools SET status = 'disabled' WHERE id = ANY($1::uuid[]) AND status = 'validated'`, []any{disabled}},
		// What autovacuum would have done by the time anyone looks at the list.
		{`VACUUM ANALYZE mcp_tools`, nil},
		{`VACUUM ANALYZE tool_tags`, nil},
		{`ANALYZE mcp_servers`, nil},
		{`ANALYZE tool_categories`, nil},
	} {
		if _, err := srv.Pool.Exec(ctx, st.sql, st.args...); err != nil {
			tb.Fatalf("%s: %v", st.sql, err)
		}
	}
	return seed
}

// benchTimes collects one duration per iteration.
type benchTimes []time.Duration

func (d benchTimes) percentile(p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := max(0, min(int(math.Ceil(p*float64(len(s))))-1, len(s)-1)) // nearest rank
	return float64(s[i]) / float64(time.Millisecond)
}

// benchFetch makes one GET and returns the body; status must be 200.
func benchFetch(tb testing.TB, c *http.Client, bearer, rawURL string) []byte {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		tb.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d %.300s", rawURL, res.StatusCode, body)
	}
	return body
}

// benchRequests times GET path once per iteration, checks every body with check and
// reports p50-ms, p95-ms and bytes/page.
func benchRequests(b *testing.B, c *http.Client, bearer, rawURL string, check func(testing.TB, []byte)) {
	check(b, benchFetch(b, c, bearer, rawURL)) // warm: connection, caches, plans
	var times benchTimes
	size := 0
	for b.Loop() {
		start := time.Now()
		body := benchFetch(b, c, bearer, rawURL)
		times = append(times, time.Since(start))
		b.StopTimer()
		check(b, body)
		size = len(body)
		b.StartTimer()
	}
	b.ReportMetric(times.percentile(0.50), "p50-ms")
	b.ReportMetric(times.percentile(0.95), "p95-ms")
	b.ReportMetric(float64(size), "bytes/page")
}

var (
	benchCardRE = regexp.MustCompile(`data-testid="tool-card"`)
	benchNextRE = regexp.MustCompile(`href="([^"]+)" rel="next"`)
)

// benchPageCheck: the page shows 1..benchCardsPerPage cards (and no error flash).
func benchPageCheck(tb testing.TB, body []byte) {
	n := len(benchCardRE.FindAllIndex(body, -1))
	if n == 0 || n > benchCardsPerPage {
		tb.Fatalf("page has %d tool cards, want 1..%d", n, benchCardsPerPage)
	}
}

// benchAPIPage is the part of GET /api/v1/tools these benchmarks read.
type benchAPIPage struct {
	Tools      []json.RawMessage `json:"tools"`
	NextCursor string            `json:"next_cursor"`
}

// benchAPICheck: the API answered 1..limit tools.
func benchAPICheck(limit int) func(testing.TB, []byte) {
	return func(tb testing.TB, body []byte) {
		var p benchAPIPage
		if err := json.Unmarshal(body, &p); err != nil {
			tb.Fatal(err)
		}
		if len(p.Tools) == 0 || len(p.Tools) > limit {
			tb.Fatalf("API answered %d tools, want 1..%d", len(p.Tools), limit)
		}
	}
}

// BenchmarkToolList10000 measures the /tools page and GET /api/v1/tools over 10,000 tools
// on 50 servers (issue #4).
func BenchmarkToolList10000(b *testing.B) {
	srv := webtest.Start(b, nil)
	start := time.Now()
	seed := seedToolBench(b, srv)
	b.Logf("seeded %d tools on %d servers in %s", benchServers*benchToolsPerServer, benchServers,
		time.Since(start).Round(time.Millisecond))
	c := srv.Login(b, "admin", webtest.AdminPassword)
	ctx := context.Background()
	admin, err := srv.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := srv.Auth.CreateToken(ctx, audit.System, admin.ID, auth.NewToken{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	// The API through a client without the session cookie: the token authenticates it.
	api := &http.Client{Timeout: 30 * time.Second}

	// A server and a tag that have high-risk tools in common.
	var fServer, fTag string
	if err := srv.Pool.QueryRow(ctx, `SELECT s.name, tg.tag FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
		JOIN tool_tags tg ON tg.tool_id = t.id WHERE s.name = $1 AND t.annotations IS NULL
		GROUP BY s.name, tg.tag ORDER BY count(*) DESC, tg.tag LIMIT 1`, seed.servers[7]).Scan(&fServer, &fTag); err != nil {
		b.Fatal(err)
	}

	page := func(path string) string { return srv.URL + path }
	b.Run("page/first", func(b *testing.B) { benchRequests(b, c, "", page("/tools"), benchPageCheck) })
	b.Run("page/search-read", func(b *testing.B) { benchRequests(b, c, "", page("/tools?q=read"), benchPageCheck) })
	b.Run("page/search-multi", func(b *testing.B) {
		benchRequests(b, c, "", page("/tools?q="+url.QueryEscape("search open issues")), benchPageCheck)
	})
	b.Run("page/filtered", func(b *testing.B) {
		v := url.Values{"server": {fServer}, "risk": {"high"}, "tag": {fTag}}
		benchRequests(b, c, "", page("/tools?"+v.Encode()), benchPageCheck)
	})
	b.Run("page/tag", func(b *testing.B) {
		// A tag alone (~8% of tools carry it): no server narrows the rows first.
		benchRequests(b, c, "", page("/tools?tag="+seed.tags[0]), benchPageCheck)
	})
	b.Run("page/deep", func(b *testing.B) {
		// Follow "Next page" links to page 100 (of ~417); time that page only.
		path := "/tools"
		for range 99 {
			m := benchNextRE.FindSubmatch(benchFetch(b, c, "", page(path)))
			if m == nil {
				b.Fatalf("no next-page link on %s", path)
			}
			path = html.UnescapeString(string(m[1]))
		}
		benchRequests(b, c, "", page(path), benchPageCheck)
	})

	apiURL := func(v url.Values) string { return srv.URL + "/api/v1/tools?" + v.Encode() }
	b.Run("api/first", func(b *testing.B) {
		benchRequests(b, api, token, apiURL(url.Values{"limit": {"50"}}), benchAPICheck(50))
	})
	b.Run("api/search", func(b *testing.B) {
		benchRequests(b, api, token, apiURL(url.Values{"q": {"search issues"}, "limit": {"50"}}), benchAPICheck(50))
	})
	b.Run("api/filtered", func(b *testing.B) {
		v := url.Values{"status": {"enabled"}, "category": {seed.categories[1]}, "risk": {"medium"}, "limit": {"50"}}
		benchRequests(b, api, token, apiURL(v), benchAPICheck(50))
	})
	b.Run("api/tag-rare", func(b *testing.B) {
		benchRequests(b, api, token, apiURL(url.Values{"tag": {benchRareTag}, "limit": {"50"}}), benchAPICheck(50))
	})
	b.Run("api/cursor", func(b *testing.B) {
		// Follow next_cursor to page 100 of 200 (tools 4,951-5,000 by name).
		v := url.Values{"limit": {"50"}}
		for range 99 {
			var p benchAPIPage
			if err := json.Unmarshal(benchFetch(b, api, token, apiURL(v)), &p); err != nil {
				b.Fatal(err)
			}
			if p.NextCursor == "" {
				b.Fatal("the list ended before page 100")
			}
			v.Set("cursor", p.NextCursor)
		}
		benchRequests(b, api, token, apiURL(v), benchAPICheck(50))
	})
	// The assistant over the same 10,000 tools (seed 004 §7): a message that lists
	// tools, and one that finds them by what they do. Each reply reads the catalogue the
	// person may see.
	for _, m := range []struct{ name, msg string }{
		{"assistant/list", "show me all tools"},
		{"assistant/find", "find tools that search issues"},
	} {
		b.Run(m.name, func(b *testing.B) {
			body, _ := json.Marshal(map[string]string{"message": m.msg})
			ask := func() []byte {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/assistant/messages", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				res, err := api.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != http.StatusOK {
					b.Fatalf("assistant: %d %v %.300s", res.StatusCode, err, out)
				}
				return out
			}
			check := func(out []byte) {
				var r struct {
					Reply string `json:"reply"`
				}
				if err := json.Unmarshal(out, &r); err != nil || !strings.Contains(r.Reply, "tool") {
					b.Fatalf("assistant reply %q (%v)", r.Reply, err)
				}
			}
			check(ask())
			var times benchTimes
			for b.Loop() {
				start := time.Now()
				out := ask()
				times = append(times, time.Since(start))
				b.StopTimer()
				check(out)
				b.StartTimer()
			}
			b.ReportMetric(times.percentile(0.50), "p50-ms")
			b.ReportMetric(times.percentile(0.95), "p95-ms")
		})
	}
}
