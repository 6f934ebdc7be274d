package tools_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
)

// catalog is a small set of tools on two servers for the search and filter tests.
type catalog struct {
	*fixture
	files, web string            // server ids
	id         map[string]string // qualified name → tool id
}

func newCatalog(t *testing.T) *catalog {
	f := newFixture(t)
	c := &catalog{fixture: f, id: map[string]string{}}
	c.files = f.server("files", true)
	c.web = f.server("web", false)
	add := func(server, srvName string, s toolSpec) {
		s.server = server
		c.id[srvName+"__"+s.name] = f.tool(s)
	}
	add(c.files, "files", toolSpec{name: "echo", description: "Echoes a message back to the caller.",
		annotations: `{"readOnlyHint":true}`})
	add(c.files, "files", toolSpec{name: "read_file", title: "Read file",
		description: "Reads the contents of a file from disk and returns them as text.",
		annotations: `{"readOnlyHint":true,"destructiveHint":false}`, status: "enabled"})
	add(c.files, "files", toolSpec{name: "write_file", description: "Writes text to a file on disk, replacing what was there.",
		annotations: `{"destructiveHint":true}`, status: "disabled"})
	add(c.files, "files", toolSpec{name: "list-directory", description: "Lists the entries of a directory.",
		annotations: `{"destructiveHint":false}`, status: "invalid"})
	add(c.web, "web", toolSpec{name: "search_web", title: "Web search",
		description: "Searches the internet and returns the best pages.", annotations: `{"readOnlyHint":true}`, status: "enabled"})
	add(c.web, "web", toolSpec{name: "fetch_url", description: "Downloads a page by its address.",
		annotations: `{"readOnlyHint":"true"}`, status: "configured"})
	add(c.web, "web", toolSpec{name: "echo", description: "Repeats what it is given, word for word.", risk: "low"})
	return c
}

// qnames lists the qualified names of items, sorted.
func qnames(items []tools.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.QualifiedName()
	}
	slices.Sort(out)
	return out
}

func TestListSearch(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	cases := []struct {
		q    string
		want []string
	}{
		{"ech", []string{"files__echo", "web__echo"}},
		{"echo", []string{"files__echo", "web__echo"}},
		{"ECHO", []string{"files__echo", "web__echo"}},
		{"echoes", []string{"files__echo", "web__echo"}}, // stemmed to echo, which both names are
		{"message", []string{"files__echo"}},             // description only
		{"callers", []string{"files__echo"}},             // description, stemmed
		{"read file", []string{"files__read_file"}},      // underscores split the name
		{"read_file", []string{"files__read_file"}},
		{"rea fil", []string{"files__read_file"}}, // prefixes of both words
		{"file", []string{"files__read_file", "files__write_file"}},
		{"reads contents", []string{"files__read_file"}},
		{"internet search", []string{"web__search_web"}}, // description and title
		{"web", []string{"web__search_web"}},             // name and title
		{"list dir", []string{"files__list-directory"}},  // dashes split the name
		{"directory", []string{"files__list-directory"}},
		{"downloads", []string{"web__fetch_url"}},
		{"fetch page address", []string{"web__fetch_url"}}, // words across name and description
		{"echo internet", nil},                             // every word must match
		{"zebra", nil},
	}
	for _, tc := range cases {
		items := c.listAll(tools.Query{Q: tc.q})
		if got := qnames(items); !slices.Equal(got, tc.want) {
			t.Errorf("search %q: got %v, want %v", tc.q, got, tc.want)
		}
		n, err := c.svc.Count(c.ctx, tools.Query{Q: tc.q})
		if err != nil || n != len(tc.want) {
			t.Errorf("count %q: %d (%v), want %d", tc.q, n, err, len(tc.want))
		}
		// The first page of a search counts its matches, however short the page.
		p, err := c.svc.List(c.ctx, tools.Query{Q: tc.q, Limit: 1})
		if err != nil || p.Total != len(tc.want) {
			t.Errorf("search %q: the first page says %d matches (%v), want %d", tc.q, p.Total, err, len(tc.want))
		}
		if p.NextCursor != "" {
			if p, err = c.svc.List(c.ctx, tools.Query{Q: tc.q, Limit: 1, Cursor: p.NextCursor}); err != nil || p.Total != -1 {
				t.Errorf("search %q: a later page says %d matches (%v), want -1 (unknown)", tc.q, p.Total, err)
			}
		}
	}
	// Without a search (name order), a page does not count.
	if p, err := c.svc.List(c.ctx, tools.Query{Limit: 2}); err != nil || p.Total != -1 {
		t.Errorf("unsearched page says %d matches (%v), want -1", p.Total, err)
	}
}

// TestListSearchOddInput: no input is a tsquery syntax error.
func TestListSearchOddInput(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	inputs := []string{
		`a & | ! ( ' :*`, `'`, `:*`, `&`, `|`, `!!!`, `(((`, `)`, `<->`, `<2>`, `\`, `"quoted"`, `foo:*`, `foo:A`,
		`echo & read`, `echo | read`, `!echo`, `echo:*B`, `'echo'`, `''`, `a'b`, `%`, `_`, `__`, `-`, `--`, `*`,
		`café`, `日本語`, `ß`, `ǅ`, `١٢٣`, `Ⅻ`, `𝔘𝔫𝔦𝔠𝔬𝔡𝔢`, "tab\tnew\nline", "nul\x00byte", `e\u0301cho`,
		strings.Repeat("word ", 30), strings.Repeat("x", 200), "   ", "ｅｃｈｏ",
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aé&|!():*'\"\\<>-_ 1٣日ß\u0301\u200b")
	for range 40 {
		n := 1 + r.IntN(20)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		inputs = append(inputs, b.String())
	}
	for _, q := range inputs {
		if len(strings.TrimSpace(q)) > 200 {
			continue
		}
		for _, sort := range []string{"", tools.SortRelevance, tools.SortName} {
			if _, err := c.svc.List(c.ctx, tools.Query{Q: q, Sort: sort, Limit: 2}); err != nil {
				t.Errorf("search %q (sort %q): %v", q, sort, err)
			}
		}
		if _, err := c.svc.Count(c.ctx, tools.Query{Q: q}); err != nil {
			t.Errorf("count %q: %v", q, err)
		}
	}
	// Only letters and digits count: punctuation around a word does not matter.
	if got := qnames(c.listAll(tools.Query{Q: `'echo' & !(`})); len(got) != 2 {
		t.Errorf(`search "'echo' & !(": got %v, want both echo tools`, got)
	}
	// Input that holds no word lists everything.
	if got := c.listAll(tools.Query{Q: `& | ! ( ' :*`}); len(got) != len(c.id) {
		t.Errorf("search without words: got %d tools, want all %d", len(got), len(c.id))
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	cat, err := c.svc.SaveCategory(c.ctx, alice, "", tools.CategoryInput{Name: "filesystem"})
	if err != nil {
		t.Fatal(err)
	}
	for _, qn := range []string{"files__read_file", "files__write_file"} {
		if _, err := c.svc.Update(c.ctx, alice, c.id[qn], tools.Patch{Category: ptr("filesystem")}); err != nil {
			t.Fatal(err)
		}
	}
	tag := func(qn string, tags ...string) {
		if _, err := c.svc.Update(c.ctx, alice, c.id[qn], tools.Patch{Tags: tags, SetTags: true}); err != nil {
			t.Fatal(err)
		}
	}
	tag("files__read_file", "fs", "read", "t1", "t2", "t3")
	tag("files__write_file", "fs", "write")
	tag("web__search_web", "read", "net")

	all := len(c.id)
	cases := []struct {
		name string
		q    tools.Query
		want []string
	}{
		{"server by name", tools.Query{Server: "web"}, []string{"web__echo", "web__fetch_url", "web__search_web"}},
		{"server by id", tools.Query{Server: c.web}, []string{"web__echo", "web__fetch_url", "web__search_web"}},
		{"unknown server name", tools.Query{Server: "nope"}, nil},
		{"unknown server id", tools.Query{Server: uuid.NewString()}, nil},
		{"category", tools.Query{Category: "filesystem"}, []string{"files__read_file", "files__write_file"}},
		{"no category", tools.Query{Category: "none"}, []string{"files__echo", "files__list-directory", "web__echo",
			"web__fetch_url", "web__search_web"}},
		{"unknown category", tools.Query{Category: "ghost"}, nil},
		{"one status", tools.Query{Status: []string{"enabled"}}, []string{"files__read_file", "web__search_web"}},
		{"several states", tools.Query{Status: []string{"disabled", "invalid", "configured"}},
			[]string{"files__list-directory", "files__write_file", "web__fetch_url"}},
		{"state nobody has", tools.Query{Status: []string{"testing"}}, nil},
		{"one tag", tools.Query{Tags: []string{"fs"}}, []string{"files__read_file", "files__write_file"}},
		{"two tags: all must match", tools.Query{Tags: []string{"fs", "read"}}, []string{"files__read_file"}},
		{"tags are normalized", tools.Query{Tags: []string{" FS ", "Read", ""}}, []string{"files__read_file"}},
		{"a tag twice", tools.Query{Tags: []string{"fs", "FS"}}, []string{"files__read_file", "files__write_file"}},
		{"tag nobody has", tools.Query{Tags: []string{"fs", "nope"}}, nil},
		{"four tags, one missing", tools.Query{Tags: []string{"fs", "read", "write", "net"}}, nil},
		{"five tags (matched together)", tools.Query{Tags: []string{"fs", "read", "t1", "t2", "T3"}}, []string{"files__read_file"}},
		{"six tags, one missing", tools.Query{Tags: []string{"fs", "read", "t1", "t2", "t3", "nope"}}, nil},
		{"read tag", tools.Query{Tags: []string{"read"}}, []string{"files__read_file", "web__search_web"}},
		{"combined", tools.Query{Server: "files", Status: []string{"enabled", "disabled"}, Tags: []string{"fs"}, Q: "writes"},
			[]string{"files__write_file"}},
		{"combined with category", tools.Query{Category: "filesystem", Status: []string{"enabled"}}, []string{"files__read_file"}},
	}
	for _, tc := range cases {
		tagsBefore := slices.Clone(tc.q.Tags)
		items := c.listAll(tc.q)
		if got := qnames(items); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		if !slices.Equal(tc.q.Tags, tagsBefore) {
			t.Errorf("%s: List changed the caller's tags to %q", tc.name, tc.q.Tags)
		}
		n, err := c.svc.Count(c.ctx, tc.q)
		if err != nil || n != len(tc.want) {
			t.Errorf("%s: count %d (%v), want %d", tc.name, n, err, len(tc.want))
		}
	}
	if n, _ := c.svc.Count(c.ctx, tools.Query{}); n != all {
		t.Errorf("count of everything: %d, want %d", n, all)
	}
	// The items carry what the filters looked at.
	it := c.get(c.id["files__read_file"])
	if it.Category == nil || *it.Category != cat.Name || !slices.Equal(it.Tags, []string{"fs", "read", "t1", "t2", "t3"}) ||
		it.Server != "files" || it.ServerID != c.files || !it.ServerTrusted || it.Status != "enabled" {
		t.Errorf("read_file: got %+v", it)
	}
}

// TestListRiskFilter: the risk filter agrees with the risk each item shows.
func TestListRiskFilter(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	// More shapes of annotations, on both servers.
	for i, ann := range []string{`null`, `[]`, `"x"`, `{"readOnlyHint":null}`, `{"destructiveHint":"false"}`,
		`{"readOnlyHint":true,"destructiveHint":true}`, `{"destructiveHint":false,"readOnlyHint":false}`} {
		for _, srv := range []string{c.files, c.web} {
			c.tool(toolSpec{server: srv, name: fmt.Sprintf("odd%d", i), annotations: ann})
		}
	}
	c.tool(toolSpec{server: c.web, name: "forced-high", annotations: `{"readOnlyHint":true}`, risk: "high"})
	c.tool(toolSpec{server: c.files, name: "forced-medium", risk: "medium"})
	total, err := c.svc.Count(c.ctx, tools.Query{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]risk.Level{}
	for _, l := range risk.Levels {
		items := c.listAll(tools.Query{Risk: string(l)})
		if len(items) == 0 {
			t.Errorf("no %s tools", l)
		}
		for _, it := range items {
			if got := it.Risk().Level; got != l {
				t.Errorf("%s listed as %s but shows %s (annotations %s, override %v, trusted %v)",
					it.QualifiedName(), l, got, it.Annotations, it.RiskOverride, it.ServerTrusted)
			}
			if prev, dup := seen[it.ID]; dup {
				t.Errorf("%s listed as %s and %s", it.QualifiedName(), prev, l)
			}
			seen[it.ID] = l
		}
		if n, err := c.svc.Count(c.ctx, tools.Query{Risk: string(l)}); err != nil || n != len(items) {
			t.Errorf("count risk %s: %d (%v), want %d", l, n, err, len(items))
		}
	}
	if len(seen) != total {
		t.Errorf("the three levels list %d tools, want all %d", len(seen), total)
	}
	want := map[string]risk.Level{
		"files__echo": risk.Low, "web__search_web": risk.Medium, "files__read_file": risk.Low,
		"files__write_file": risk.High, "files__list-directory": risk.Medium, "web__fetch_url": risk.High,
		"web__echo": risk.Low,
	}
	for qn, l := range want {
		if got := seen[c.id[qn]]; got != l {
			t.Errorf("%s: risk %s, want %s", qn, got, l)
		}
	}
}

func TestListSorts(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	// Distinct update times: the web echo is the most recently changed, read_file the oldest.
	c.exec(`UPDATE mcp_tools SET updated_at = now() - interval '1 hour' * (SELECT count(*) FROM mcp_tools u WHERE u.name < mcp_tools.name)`)
	c.exec(`UPDATE mcp_tools SET updated_at = now() + interval '1 hour' WHERE id = $1`, c.id["web__echo"])

	byName := c.listAll(tools.Query{})
	if got := names(byName); !slices.IsSorted(got) || len(got) != len(c.id) {
		t.Errorf("default order: %v, want sorted by name", got)
	}
	if first := byName[0]; first.Name != "echo" || byName[1].Name != "echo" || first.ID > byName[1].ID {
		t.Errorf("same names sort by id: %v %v", first.ID, byName[1].ID)
	}
	var prev tools.Item
	for i, it := range c.listAll(tools.Query{Sort: tools.SortServer}) {
		if i > 0 && (prev.Server > it.Server || prev.Server == it.Server && prev.Name > it.Name) {
			t.Errorf("server order: %s before %s", prev.QualifiedName(), it.QualifiedName())
		}
		prev = it
	}
	upd := c.listAll(tools.Query{Sort: tools.SortUpdated})
	if upd[0].QualifiedName() != "web__echo" {
		t.Errorf("updated order starts with %s, want web__echo", upd[0].QualifiedName())
	}
	for i := 1; i < len(upd); i++ {
		if upd[i].UpdatedAt.After(upd[i-1].UpdatedAt) {
			t.Errorf("updated order: %s (%v) after %s (%v)", upd[i].Name, upd[i].UpdatedAt, upd[i-1].Name, upd[i-1].UpdatedAt)
		}
	}
	// Relevance: a match in the name and title beats one in the description only.
	rel := c.listAll(tools.Query{Q: "file"}) // relevance is the default with a search
	if got := names(rel); !slices.Equal(got, []string{"read_file", "write_file"}) {
		t.Errorf("relevance for file: %v, want read_file first", got)
	}
	if rel[0].Rank <= rel[1].Rank || rel[1].Rank <= 0 {
		t.Errorf("ranks %v %v, want decreasing and positive", rel[0].Rank, rel[1].Rank)
	}
	rel = c.listAll(tools.Query{Q: "echo", Sort: tools.SortRelevance})
	if rel[0].QualifiedName() != "files__echo" {
		t.Errorf("relevance for echo starts with %s, want files__echo (name and description)", rel[0].QualifiedName())
	}
	// A search sorted by name.
	if got := names(c.listAll(tools.Query{Q: "file", Sort: tools.SortName})); !slices.Equal(got, []string{"read_file", "write_file"}) {
		t.Errorf("search by name: %v", got)
	}
	// Relevance without a search is the name order.
	if got := ids(c.listAll(tools.Query{Sort: tools.SortRelevance})); !slices.Equal(got, ids(byName)) {
		t.Errorf("relevance without a search: %v, want the name order", got)
	}
	// Without a search the rank is 0.
	for _, it := range byName {
		if it.Rank != 0 {
			t.Errorf("%s: rank %v without a search", it.Name, it.Rank)
		}
	}
}

func TestListQueryErrors(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	p, err := c.svc.List(c.ctx, tools.Query{Limit: 2})
	if err != nil || p.NextCursor == "" || len(p.Items) != 2 {
		t.Fatalf("first page: %d items, cursor %q, %v", len(p.Items), p.NextCursor, err)
	}
	nameCursor := p.NextCursor
	p, err = c.svc.List(c.ctx, tools.Query{Q: "e", Limit: 1})
	if err != nil || p.NextCursor == "" {
		t.Fatalf("search page: %v %q", err, p.NextCursor)
	}
	searchCursor := p.NextCursor
	badID, _ := json.Marshal(map[string]any{"s": "name", "n": "a", "i": "not-a-uuid"})

	cases := []struct {
		name   string
		q      tools.Query
		fields []string
	}{
		{"negative limit", tools.Query{Limit: -1}, []string{"limit"}},
		{"limit too big", tools.Query{Limit: tools.MaxLimit + 1}, []string{"limit"}},
		{"bad sort", tools.Query{Sort: "size"}, []string{"sort"}},
		{"sort is case sensitive", tools.Query{Sort: "Name"}, []string{"sort"}},
		{"bad status", tools.Query{Status: []string{"running"}}, []string{"status"}},
		{"one bad status among good", tools.Query{Status: []string{"enabled", "executing"}}, []string{"status"}},
		{"bad risk", tools.Query{Risk: "extreme"}, []string{"risk"}},
		{"risk is case sensitive", tools.Query{Risk: "LOW"}, []string{"risk"}},
		{"garbage cursor", tools.Query{Cursor: "%%%"}, []string{"cursor"}},
		{"cursor not JSON", tools.Query{Cursor: base64.RawURLEncoding.EncodeToString([]byte("nope"))}, []string{"cursor"}},
		{"cursor with a bad id", tools.Query{Cursor: base64.RawURLEncoding.EncodeToString(badID)}, []string{"cursor"}},
		{"name cursor with server sort", tools.Query{Sort: tools.SortServer, Cursor: nameCursor}, []string{"cursor"}},
		{"name cursor with updated sort", tools.Query{Sort: tools.SortUpdated, Cursor: nameCursor}, []string{"cursor"}},
		{"name cursor with a search", tools.Query{Q: "echo", Cursor: nameCursor}, []string{"cursor"}},
		{"search cursor with another search", tools.Query{Q: "file", Cursor: searchCursor}, []string{"cursor"}},
		{"search cursor without search", tools.Query{Cursor: searchCursor}, []string{"cursor"}},
		{"search too long", tools.Query{Q: strings.Repeat("a", 201)}, []string{"q"}},
		{"everything wrong", tools.Query{Limit: 1000, Sort: "x", Status: []string{"x"}, Risk: "x", Cursor: "x"},
			[]string{"limit", "sort", "status", "risk", "cursor"}},
	}
	for _, tc := range cases {
		_, err := c.svc.List(c.ctx, tc.q)
		t.Run(tc.name, func(t *testing.T) { wantFields(t, err, tc.fields...) })
	}
	// Good ones: the limits, and cursors used with the query they came from.
	for _, q := range []tools.Query{{Limit: 1}, {Limit: tools.MaxLimit}, {Cursor: nameCursor},
		{Cursor: nameCursor, Sort: tools.SortName, Q: ""}, {Q: "e", Cursor: searchCursor},
		{Q: "  E ", Cursor: searchCursor}, {Q: "e!", Sort: tools.SortRelevance, Cursor: searchCursor}} {
		if _, err := c.svc.List(c.ctx, q); err != nil {
			t.Errorf("list %+v: %v", q, err)
		}
	}
	// The default page size.
	for i := range 60 {
		c.tool(toolSpec{server: c.web, name: fmt.Sprintf("bulk-%02d", i)})
	}
	p, err = c.svc.List(c.ctx, tools.Query{})
	if err != nil || len(p.Items) != tools.DefaultLimit || p.NextCursor == "" {
		t.Errorf("default page: %d items (%v), want %d and a cursor", len(p.Items), err, tools.DefaultLimit)
	}
	// Count ignores cursor, sort and limit, but checks the filters.
	if n, err := c.svc.Count(c.ctx, tools.Query{Limit: -5, Sort: "bogus", Cursor: "junk"}); err != nil || n != len(c.id)+60 {
		t.Errorf("count ignoring paging: %d, %v", n, err)
	}
	_, err = c.svc.Count(c.ctx, tools.Query{Status: []string{"bogus"}, Risk: "bogus"})
	wantFields(t, err, "status", "risk")

	if _, err := c.svc.Get(c.ctx, uuid.NewString()); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	if _, err := c.svc.Get(c.ctx, "not-a-uuid"); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("get bad id: %v", err)
	}
}

func TestItemJSON(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	it := c.get(c.id["files__echo"])
	b, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["qualified_name"] != "files__echo" || m["version"] != "1.0" || m["risk"] != "low" ||
		m["risk_source"] != risk.SourceAnnotations || m["risk_why"] == "" || m["server"] != "files" || m["id"] != it.ID {
		t.Errorf("json: %s", b)
	}
	if _, ok := m["rank"]; ok {
		t.Errorf("json shows the rank: %s", b)
	}
	if it.Version() != "1.0" || it.QualifiedName() != "files__echo" {
		t.Errorf("version %s name %s", it.Version(), it.QualifiedName())
	}
}

// manyTools inserts n tools over three servers: names repeat across servers, update times
// and search ranks tie in groups, so every sort has ties for the id to break.
func manyTools(f *fixture, n int) {
	f.t.Helper()
	srv := []string{f.server("alpha", true), f.server("beta", false), f.server("gamma", false)}
	f.exec(`INSERT INTO mcp_tools (id, server_id, name, description, input_schema, definition, definition_hash, status, updated_at)
		SELECT gen_random_uuid(), ($2::uuid[])[1 + i / 200], 't' || lpad((i % 200)::text, 3, '0'),
			'Tool number ' || i || ' ' || repeat('widget ', 1 + i % 4) || CASE WHEN i % 3 = 0 THEN 'gadget' ELSE '' END,
			'{"type":"object"}', '{}', 'h' || i, (ARRAY['validated', 'enabled', 'disabled'])[1 + i % 3],
			now() - interval '1 minute' * (i % 7)
		FROM generate_series(0, $1 - 1) AS i`, n, srv)
}

// TestKeysetPagination pages through 500 tools 37 at a time in every order: the pages
// together are the whole list in order, with no repeats and no gaps.
func TestKeysetPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	manyTools(f, 500)
	reference := map[string]string{
		tools.SortName:    `SELECT t.id::text FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id %s ORDER BY t.name, t.id`,
		tools.SortServer:  `SELECT t.id::text FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id %s ORDER BY s.name, t.name, t.id`,
		tools.SortUpdated: `SELECT t.id::text FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id %s ORDER BY t.updated_at DESC, t.id DESC`,
	}
	type run struct {
		q     tools.Query
		where string
		order string
	}
	var runs []run
	for _, sort := range []string{tools.SortName, tools.SortServer, tools.SortUpdated} {
		runs = append(runs, run{tools.Query{Sort: sort, Limit: 37}, "", reference[sort]})
		runs = append(runs, run{tools.Query{Sort: sort, Limit: 37, Status: []string{"enabled", "disabled"}},
			"WHERE t.status IN ('enabled', 'disabled')", reference[sort]})
	}
	rel := `SELECT t.id::text FROM mcp_tools t %s ORDER BY ts_rank(t.search, to_tsquery('simple', '%[2]s') || to_tsquery('english', '%[2]s')) DESC, t.id`
	runs = append(runs,
		run{tools.Query{Q: "widget", Limit: 37}, "WHERE t.search @@ to_tsquery('simple', 'widget:*')", fmt.Sprintf(rel, "%s", "widget:*")},
		run{tools.Query{Q: "widget gadget", Limit: 37}, "WHERE t.search @@ to_tsquery('simple', 'widget:* & gadget:*')",
			fmt.Sprintf(rel, "%s", "widget:* & gadget:*")},
		run{tools.Query{Q: "tool", Sort: tools.SortName, Limit: 37}, "", reference[tools.SortName]},
	)
	for _, r := range runs {
		name := fmt.Sprintf("sort=%s q=%q status=%v", r.q.Sort, r.q.Q, r.q.Status)
		want := f.strings(fmt.Sprintf(r.order, r.where))
		if len(want) < 100 {
			t.Fatalf("%s: reference has only %d rows", name, len(want))
		}
		pages := 0
		var got []tools.Item
		q := r.q
		for {
			p, err := f.svc.List(f.ctx, q)
			if err != nil {
				t.Fatalf("%s: page %d: %v", name, pages, err)
			}
			pages++
			if p.NextCursor != "" && len(p.Items) != 37 {
				t.Fatalf("%s: page %d has %d items and a next page", name, pages, len(p.Items))
			}
			got = append(got, p.Items...)
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		gotIDs := ids(got)
		seen := map[string]bool{}
		for _, id := range gotIDs {
			if seen[id] {
				t.Errorf("%s: %s appears twice", name, id)
			}
			seen[id] = true
		}
		if !slices.Equal(gotIDs, want) {
			missing := 0
			for _, id := range want {
				if !seen[id] {
					missing++
				}
			}
			t.Errorf("%s: got %d rows (%d missing), want %d in the reference order", name, len(gotIDs), missing, len(want))
		}
		if wantPages := (len(want) + 36) / 37; pages != wantPages {
			t.Errorf("%s: %d pages, want %d", name, pages, wantPages)
		}
		n, err := f.svc.Count(f.ctx, r.q)
		if err != nil || n != len(gotIDs) {
			t.Errorf("%s: count %d (%v), pages hold %d", name, n, err, len(gotIDs))
		}
		if r.q.Sort == "" { // a relevance order: ranks never increase, ties by id
			for i := 1; i < len(got); i++ {
				a, b := got[i-1], got[i]
				if b.Rank > a.Rank || b.Rank == a.Rank && b.ID < a.ID {
					t.Errorf("%s: %s (%v) after %s (%v)", name, b.ID, b.Rank, a.ID, a.Rank)
				}
			}
		}
	}
	// A page that ends exactly at the last row has no next cursor.
	p, err := f.svc.List(f.ctx, tools.Query{Limit: 200, Status: []string{"enabled"}}) // 167 enabled
	if err != nil || p.NextCursor != "" || len(p.Items) != 167 {
		t.Errorf("last page: %d items, cursor %q, %v", len(p.Items), p.NextCursor, err)
	}
	exact := f.count(`SELECT count(*) FROM mcp_tools WHERE status = 'disabled'`)
	p, err = f.svc.List(f.ctx, tools.Query{Limit: exact, Status: []string{"disabled"}})
	if err != nil || p.NextCursor != "" || len(p.Items) != exact {
		t.Errorf("page of exactly %d: %d items, cursor %q, %v", exact, len(p.Items), p.NextCursor, err)
	}
}

// TestPaginationWhileChanging pages through the list in name order while another
// goroutine inserts tools and deletes some of those it inserted: every tool that was there
// before paging began appears exactly once, and no tool appears twice.
func TestPaginationWhileChanging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("busy", false)
	f.exec(`INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash)
		SELECT gen_random_uuid(), $1, 'n' || lpad((i * 2)::text, 5, '0'), '{}', 'h' FROM generate_series(0, 399) AS i`, srv)
	before := f.strings(`SELECT id::text FROM mcp_tools`)

	done := make(chan struct{})
	var inserted, deleted atomic.Int64
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 9))
		var mine []string
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			// New tools land all over the name range: before, between and after the old ones.
			id := uuid.NewString()
			name := fmt.Sprintf("n%05d-%d", r.IntN(900), i)
			if _, err := f.pool.Exec(f.ctx, `INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash)
				VALUES ($1, $2, $3, '{}', 'h')`, id, srv, name); err != nil {
				werr = err
				return
			}
			inserted.Add(1)
			mine = append(mine, id)
			if len(mine) > 3 && r.IntN(2) == 0 {
				k := r.IntN(len(mine))
				if _, err := f.pool.Exec(f.ctx, `DELETE FROM mcp_tools WHERE id = $1`, mine[k]); err != nil {
					werr = err
					return
				}
				mine = slices.Delete(mine, k, k+1)
				deleted.Add(1)
			}
		}
	}()

	var got []string
	q := tools.Query{Limit: 37}
	for pages := 0; ; pages++ {
		p, err := f.svc.List(f.ctx, q)
		if err != nil {
			close(done)
			wg.Wait()
			t.Fatalf("page %d: %v", pages, err)
		}
		got = append(got, ids(p.Items)...)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
		// Let the writer change the table between every two pages (it is the point of
		// the test), however busy the machine is.
		seen := inserted.Load()
		for wait := time.Now().Add(5 * time.Second); inserted.Load() < seen+2 && time.Now().Before(wait); {
			time.Sleep(time.Millisecond) // poll interval
		}
	}
	close(done)
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	if inserted.Load() < 10 || deleted.Load() == 0 {
		t.Fatalf("the writer barely ran (%d inserted, %d deleted): the test proves nothing", inserted.Load(), deleted.Load())
	}
	count := map[string]int{}
	for _, id := range got {
		count[id]++
		if count[id] == 2 {
			t.Errorf("%s appears twice", id)
		}
	}
	for _, id := range before {
		if count[id] != 1 {
			t.Errorf("tool %s that was there all along appears %d times", id, count[id])
		}
	}
	t.Logf("paged %d rows while %d tools were inserted and %d deleted", len(got), inserted.Load(), deleted.Load())
}
