// Package tools manages the tools Toolwarden has discovered (seed 004 §3, §5, §8; issue #4):
// the searchable list with filters and keyset pagination, a tool's settings (risk
// override, timeout, category, tags and its versioned configuration with encrypted
// secret values), categories, and the administrator actions that move a tool through its
// lifecycle (enable, disable, override) with audit rows in the same transaction.
//
// services/registry keeps servers and discovery (which creates and pins tools, stored
// through StoreDiscovery); services/toolstate owns the state machine this package
// drives. This package is the one writer of mcp_tools.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Topic is the event topic of tool changes (shared with the registry and toolstate).
const Topic = toolstate.Topic

// ErrNotFound: no tool with that id. ErrCategoryNotFound and ErrTestCaseNotFound wrap
// it, so errors.Is(err, ErrNotFound) holds for them too.
var ErrNotFound = fault.NotFound("tool")

// ErrCategoryNotFound and ErrTestCaseNotFound are a category, or a test case of a tool
// that exists, not found: their subject lets a page name what is gone, not the tool.
var (
	ErrCategoryNotFound = notFoundBeside("category")
	ErrTestCaseNotFound = notFoundBeside("test case")
)

// notFoundBeside is a not-found fault about subject that wraps ErrNotFound.
func notFoundBeside(subject string) *fault.Error {
	f := fault.NotFound(subject)
	f.Err = ErrNotFound
	return f
}

// Service manages tools. It is safe for concurrent use.
type Service struct {
	pool  *pgxpool.Pool
	begin db.TxBeginner // pool, or its Local
	keys  *secrets.Keyring
	log   *slog.Logger

	facets events.Memo[Facets] // the list's filters' choices (facets.go)
}

// Options tune the service; nil means defaults.
type Options struct {
	Logger *slog.Logger // default slog.Default()
	// Local is this process's buses reading pool: the service begins its transactions
	// on it, so its events are delivered to them before its methods return (see
	// events.Local). nil: they arrive with the NOTIFY.
	Local *events.Local
	// Bus, when set, lets the service keep the list's facets in memory, cleared by the
	// events that change them (tools and servers topics).
	Bus *events.Bus
}

// New returns the tool service; keys encrypt secret configuration values.
func New(pool *pgxpool.Pool, keys *secrets.Keyring, opts *Options) *Service {
	if opts == nil {
		opts = &Options{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Service{pool: pool, begin: opts.Local.Beginner(pool), keys: keys, log: log}
	s.watchFacets(opts.Bus)
	return s
}

// Item is a tool as lists and the API show it: its row and its settings.
type Item struct {
	Row
	RiskOverride    *string    `db:"risk_override" json:"risk_override"`
	Category        *string    `db:"category" json:"category"`
	Tags            []string   `db:"tags" json:"tags"`
	TimeoutMS       *int       `db:"timeout_ms" json:"timeout_ms"`
	RateLimit       *int       `db:"rate_limit" json:"rate_limit"` // calls a minute across callers; nil: none
	ValidationWorst *string    `db:"validation_worst" json:"validation_worst"`
	EnableOverride  *string    `db:"enable_override" json:"enable_override,omitempty"`
	ConfigVersion   int        `db:"configuration_version" json:"configuration_version"`
	LastUsed        *time.Time `db:"last_used" json:"last_used"`
	UpdatedAt       time.Time  `db:"updated_at" json:"updated_at"`
	// Rank is the search relevance (0 without a search); it is part of the cursor.
	Rank float32 `db:"rank" json:"-"`
}

// Risk is the tool's risk and why (docs/architecture.md, The path of a tool call).
func (t Item) Risk() risk.Decision {
	return risk.Decide(risk.Input{Override: deref(t.RiskOverride), Annotations: t.Annotations, Trusted: t.ServerTrusted})
}

// MarshalJSON adds the derived fields of the public shape (docs/api.md).
func (t Item) MarshalJSON() ([]byte, error) {
	type plain Item
	r := t.Risk()
	return json.Marshal(struct {
		plain
		QualifiedName string `json:"qualified_name"`
		Version       string `json:"version"`
		Risk          string `json:"risk"`
		RiskSource    string `json:"risk_source"`
		RiskWhy       string `json:"risk_why"`
	}{plain(t), t.QualifiedName(), t.Version(), string(r.Level), r.Source, r.Why})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The list's sort orders.
const (
	SortName      = "name"      // name, then id (the default without a search)
	SortServer    = "server"    // server name, then tool name
	SortUpdated   = "updated"   // most recently changed first
	SortRelevance = "relevance" // best match first (the default with a search)
)

// Sorts lists the sort orders.
var Sorts = []string{SortName, SortServer, SortUpdated, SortRelevance}

// Query is a search of the tool list. Empty fields do not filter.
type Query struct {
	Q        string   // words matched against name, title and description (full-text, prefix)
	Server   string   // server name or id
	Category string   // category name; "none" for tools without one
	Status   []string // any of these states
	Tags     []string // every one of these tags
	Risk     string   // low, medium or high
	Sort     string
	Limit    int    // 1..200, default 50
	Cursor   string // next_cursor of the previous page
	// Brief leaves the definitions' schemas out of the items (InputSchema and
	// OutputSchema nil): the list page's cards do not show them.
	Brief bool
}

// Page is one page of the list.
type Page struct {
	Items      []Item
	NextCursor string // "" on the last page
	// Total is how many tools match when the page's own query could tell at no extra
	// cost (the first page of a search, which ranks every match anyway); -1 otherwise
	// (Count tells).
	Total int
}

// listRow is a row of List's query: an item and, on a search's first page, the number
// of matches (-1 otherwise).
type listRow struct {
	Item
	Total int `db:"total"`
	// Picked is how many rows the page's query chose before the byte budget (pageBytes)
	// kept the first of them, which Fits; 0 and false with Brief, which has none.
	Picked int  `db:"picked"`
	Fits   bool `db:"fits"`
}

// MaxLimit bounds a page.
const MaxLimit = 200

// DefaultLimit is the page size when the query names none.
const DefaultLimit = 50

// cursor is the position after the last row of a page: the sort key of that row.
type cursor struct {
	Sort string    `json:"s"`
	Q    string    `json:"q,omitempty"` // the search the rank belongs to
	Rank float32   `json:"r,omitempty"`
	Name string    `json:"n,omitempty"`
	Srv  string    `json:"v,omitempty"`
	At   time.Time `json:"t"`
	ID   string    `json:"i"`
}

func decodeCursor(s string) (cursor, bool) {
	var c cursor
	if !db.DecodeCursor(s, &c) {
		return cursor{}, false
	}
	if _, ok := normalID(c.ID); !ok {
		return cursor{}, false
	}
	// Cursors are the caller's to send: text PostgreSQL refuses must not reach it.
	if textcheck.Bad(c.Name+c.Srv+c.Q) != "" {
		return cursor{}, false
	}
	return c, true
}

// tsQuery turns what a person typed into a prefix query: every word must match the
// start of a word of the name, title or description ("read fil" finds read_file). Only
// letters and digits count, so no input is a tsquery syntax error.
func tsQuery(q string) string {
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	if len(words) > 12 {
		words = words[:12]
	}
	for i, w := range words {
		words[i] = w + ":*"
	}
	return strings.Join(words, " & ")
}

// tsQueryExpr is the search's tsquery from the parameter p (tsQuery's text), as an
// uncorrelated subquery: PostgreSQL computes it once per statement (an InitPlan). Written
// inline, a prepared statement's generic plan would parse it again for every matching
// row it ranks.
func tsQueryExpr(p string) string {
	return "(SELECT to_tsquery('simple', " + p + ") || to_tsquery('english', " + p + "))"
}

// check validates a query and fills in defaults; errors name the parameter.
func (q *Query) check() error {
	e := &verr.Error{}
	q.Q = strings.TrimSpace(q.Q)
	if len(q.Q) > 200 {
		e.Add("q", "is too long (at most 200 characters)")
	}
	if q.Sort == "" {
		q.Sort = SortName
		if tsQuery(q.Q) != "" {
			q.Sort = SortRelevance
		}
	}
	if !slices.Contains(Sorts, q.Sort) {
		e.Add("sort", "must be one of "+strings.Join(Sorts, ", "))
	} else if q.Sort == SortRelevance && tsQuery(q.Q) == "" {
		q.Sort = SortName
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 1 || q.Limit > MaxLimit:
		e.Add("limit", fmt.Sprintf("must be between 1 and %d", MaxLimit))
	}
	for _, s := range q.Status {
		if !toolstate.Valid(s) {
			// Said once: a URL can repeat a bad value a hundred thousand times.
			e.Add("status", fmt.Sprintf("%q is not a tool state (%s)", textcheck.Clip(s, 60, "…"), strings.Join(toolstate.States, ", ")))
			break
		}
	}
	if q.Risk != "" {
		if _, ok := risk.Parse(q.Risk); !ok {
			e.Add("risk", "must be low, medium or high")
		}
	}
	// A copy (the caller's slice stays as it was), without blanks and repeats: the filter
	// compares the number of matching tags with the number asked for.
	tags := make([]string, 0, len(q.Tags))
	seen := map[string]bool{}
	for _, t := range q.Tags {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" && !seen[t] {
			seen[t] = true
			tags = append(tags, t)
		}
	}
	if len(tags) > MaxTags {
		e.Add("tag", fmt.Sprintf("at most %d tags at once (a tool has at most that many), not %d", MaxTags, len(tags)))
	}
	q.Tags = tags
	if q.Cursor != "" {
		c, ok := decodeCursor(q.Cursor)
		if !ok || c.Sort != q.Sort || (c.Sort == SortRelevance && c.Q != tsQuery(q.Q)) {
			e.Add("cursor", "does not belong to this search; start again from the first page")
		}
	}
	return e.Err()
}

const itemColumns = RowColumns + `, t.risk_override, c.name AS category,
	ARRAY(SELECT tg.tag FROM tool_tags tg WHERE tg.tool_id = t.id ORDER BY tg.tag) AS tags,
	t.timeout_ms, t.rate_limit, t.validation_worst, t.enable_override, t.configuration_version, t.last_used, t.updated_at`

// What the list page's cards show of a title and a description, in characters (views:
// maxShownTitle, maxShownDescription).
const (
	briefTitleChars       = 200
	briefDescriptionChars = 2000
)

// briefItemColumns are itemColumns without the schemas and with only what the cards show
// of the rest (Query.Brief): the title and description cut one character past what a
// card shows (so it still marks them cut), and of the annotations only the two hints
// the risk is decided from (risk.Decide reads no others).
var briefItemColumns = func() string {
	c := itemColumns
	for _, r := range [][2]string{
		{"t.input_schema, t.output_schema,", "NULL::jsonb AS input_schema, NULL::jsonb AS output_schema,"},
		{"t.title,", fmt.Sprintf("left(t.title, %d) AS title,", briefTitleChars+1)},
		{"t.description,", fmt.Sprintf("left(t.description, %d) AS description,", briefDescriptionChars+1)},
		{"t.annotations,", `CASE WHEN jsonb_typeof(t.annotations) = 'object' THEN jsonb_strip_nulls(jsonb_build_object(
			'readOnlyHint', CASE WHEN t.annotations->'readOnlyHint' IN ('true', 'false') THEN t.annotations->'readOnlyHint' END,
			'destructiveHint', CASE WHEN t.annotations->'destructiveHint' IN ('true', 'false') THEN t.annotations->'destructiveHint' END))
			END AS annotations,`},
	} {
		if !strings.Contains(c, r[0]) {
			panic("tools: RowColumns no longer lists " + r[0] + " as briefItemColumns expects")
		}
		c = strings.Replace(c, r[0], r[1], 1)
	}
	return c
}()

// pageBytes bounds a page (without Brief) by the size of its rows' large columns: a
// tool's definition may be as large as an MCP message, and a page of 200 of them would
// be read and copied whole. A page stops before the row that would pass it (a row
// larger than it alone still makes a page, so paging goes on).
const pageBytes = 8 << 20

// rowBytes is what a row's large columns weigh without reading them: the texts' lengths
// and the schemas' and annotations' stored sizes (compressed ones weigh less here than
// on the wire; List also counts the bytes it reads).
const rowBytes = `(octet_length(t.title) + octet_length(t.description) + pg_column_size(t.input_schema)
	+ coalesce(pg_column_size(t.output_schema), 0) + coalesce(pg_column_size(t.annotations), 0))`

const itemFrom = RowFrom + `
	LEFT JOIN tool_categories c ON c.id = t.category_id`

// from is the FROM clause of q's filter: the tools, joined only to what the filters (or,
// with server, the order by server name) read; counting every tool needs no join at all.
func (q *Query) from(server bool) string {
	from := ` FROM mcp_tools t`
	if _, byID := normalID(q.Server); server || q.Risk != "" || (q.Server != "" && !byID) {
		from += ` JOIN mcp_servers s ON s.id = t.server_id`
	}
	if q.Category != "" && q.Category != "none" {
		from += ` LEFT JOIN tool_categories c ON c.id = t.category_id`
	}
	return from
}

// maxTagProbes is how many tags a filter checks one by one (EXISTS each); more are
// matched together.
const maxTagProbes = 4

// where builds the filter of q; args are appended to.
func (q *Query) where(args *[]any) []string {
	arg := func(v any) string {
		*args = append(*args, v)
		return fmt.Sprintf("$%d", len(*args))
	}
	var conds []string
	if tq := tsQuery(q.Q); tq != "" {
		p := arg(tq)
		conds = append(conds, "t.search @@ "+tsQueryExpr(p))
	}
	if q.Server != "" {
		if id, ok := normalID(q.Server); ok {
			conds = append(conds, "t.server_id = "+arg(id))
		} else {
			conds = append(conds, "s.name = "+arg(q.Server))
		}
	}
	switch q.Category {
	case "":
	case "none":
		conds = append(conds, "t.category_id IS NULL")
	default:
		conds = append(conds, "c.name = "+arg(q.Category))
	}
	if len(q.Status) > 0 {
		conds = append(conds, "t.status = ANY("+arg(q.Status)+"::text[])")
	}
	switch {
	case len(q.Tags) > 0 && len(q.Tags) <= maxTagProbes:
		// One probe of the (tag, tool_id) index per tag: the planner knows from the tag's
		// statistics how many tools carry it, so it can start from a narrower filter (a
		// server's 200 tools) or walk the name index until a page is full.
		for _, tag := range q.Tags {
			conds = append(conds, "EXISTS (SELECT 1 FROM tool_tags tg WHERE tg.tool_id = t.id AND tg.tag = "+arg(tag)+")")
		}
	case len(q.Tags) > 0:
		p := arg(q.Tags)
		// Many tags: the tools carrying every one, found once from the tag index.
		conds = append(conds, "t.id IN (SELECT tg.tool_id FROM tool_tags tg WHERE tg.tag = ANY("+p+"::text[]) GROUP BY tg.tool_id HAVING count(*) = cardinality("+p+"::text[]))")
	}
	if q.Risk != "" {
		conds = append(conds, risk.SQL("t.risk_override", "t.annotations", "s.trusted")+" = "+arg(q.Risk))
	}
	return conds
}

// List returns one page of the tools matching q, in q's order. Pages are keyset pages:
// rows inserted or removed meanwhile never make a later page repeat or skip a row that
// was there all along.
func (s *Service) List(ctx context.Context, q Query) (Page, error) {
	if err := q.check(); err != nil {
		return Page{}, err
	}
	var args []any
	conds := q.where(&args)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	rank := "0::real"
	if tq := tsQuery(q.Q); tq != "" {
		p := arg(tq)
		rank = "ts_rank(t.search, " + tsQueryExpr(p) + ")"
	}
	var order, kept string // kept: order over the columns of a page's rows
	switch q.Sort {
	case SortServer:
		order, kept = "s.name, t.name, t.id", "x.server_name, x.name, x.id"
	case SortUpdated:
		order, kept = "t.updated_at DESC, t.id DESC", "x.updated_at DESC, x.id DESC"
	case SortRelevance:
		order, kept = "rank DESC, t.id", "x.rank DESC, x.id"
	default:
		order, kept = "t.name, t.id", "x.name, x.id"
	}
	if q.Cursor != "" {
		c, _ := decodeCursor(q.Cursor)
		switch q.Sort {
		case SortServer:
			conds = append(conds, "(s.name, t.name, t.id) > ("+arg(c.Srv)+", "+arg(c.Name)+", "+arg(c.ID)+"::uuid)")
		case SortUpdated:
			conds = append(conds, "(t.updated_at, t.id) < ("+arg(c.At)+", "+arg(c.ID)+"::uuid)")
		case SortRelevance:
			r, id := arg(c.Rank), arg(c.ID)
			conds = append(conds, "("+rank+" < "+r+"::real OR ("+rank+" = "+r+"::real AND t.id > "+id+"::uuid))")
		default:
			conds = append(conds, "(t.name, t.id) > ("+arg(c.Name)+", "+arg(c.ID)+"::uuid)")
		}
	}
	cols := itemColumns
	if q.Brief {
		cols = briefItemColumns
	}
	// The page's rows are chosen first, reading only what the filters and the order need
	// (the name index alone, or a search's matches alone, to rank them); only those rows
	// are then joined to their servers, categories and tags. The outer ORDER BY is the
	// inner one over the same values.
	// A search's first page ranks every match before it keeps the best: counting them
	// there (over the narrow picked rows) spares the page a second pass (Count).
	total := "-1"
	counted := q.Sort == SortRelevance && q.Cursor == ""
	if counted {
		total = "count(*) OVER ()"
	}
	pick := `SELECT t.id, ` + rank + ` AS rank, ` + total + ` AS total` + q.from(q.Sort == SortServer)
	if len(conds) > 0 {
		pick += " WHERE " + strings.Join(conds, " AND ")
	}
	pick += " ORDER BY " + order + " LIMIT " + arg(q.Limit+1)
	sel := `SELECT ` + cols + `, p.rank AS rank, p.total::int AS total`
	from := ` FROM (` + pick + `) p
		JOIN mcp_tools t ON t.id = p.id JOIN mcp_servers s ON s.id = t.server_id
		LEFT JOIN tool_categories c ON c.id = t.category_id`
	sql := `/* tools.List */ ` + sel + from + ` ORDER BY ` + order
	if !q.Brief {
		// The rows up to the byte budget (the first whatever its size), and how many the
		// pick chose, which tells whether the budget cut the page short.
		budget := arg(pageBytes)
		sql = `/* tools.List */ SELECT x.* FROM (` + sel + `, count(*) OVER () AS picked,
			(sum(` + rowBytes + `) OVER w <= ` + budget + ` OR sum(` + rowBytes + `) OVER w = ` + rowBytes + `) AS fits` + from + `
			WINDOW w AS (ORDER BY ` + order + ` ROWS UNBOUNDED PRECEDING)) x WHERE x.fits ORDER BY ` + kept
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return Page{}, fmt.Errorf("tools: list: %w", err)
	}
	defer rows.Close()
	p := Page{Total: -1}
	if counted {
		p.Total = 0 // no row: nothing matches
	}
	var items []Item
	picked, read := 0, 0
	for rows.Next() {
		if !q.Brief {
			// Stored sizes undercount values that compress well: the bytes read bound
			// the page too.
			n := 0
			for _, v := range rows.RawValues() {
				n += len(v)
			}
			if read += n; len(items) > 0 && read > pageBytes {
				break
			}
		}
		r, err := pgx.RowToStructByNameLax[listRow](rows)
		if err != nil {
			return Page{}, fmt.Errorf("tools: list: %w", err)
		}
		items = append(items, r.Item)
		p.Total, picked = r.Total, r.Picked
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("tools: list: %w", err)
	}
	key := func(last Item) any {
		return cursor{Sort: q.Sort, Q: tsQuery(q.Q), Rank: last.Rank, Name: last.Name, Srv: last.Server, At: last.UpdatedAt, ID: last.ID}
	}
	p.Items, p.NextCursor = db.NextPage(items, q.Limit, key)
	if p.NextCursor == "" && len(items) > 0 && len(items) < picked {
		// The budget cut the page short: a shorter page, and the next begins after it.
		p.NextCursor = db.EncodeCursor(key(items[len(items)-1]))
	}
	return p, nil
}

// Count returns how many tools match q (its cursor, sort and limit do not matter). With
// no filter, or one facet alone, the facets kept in memory know it without counting.
func (s *Service) Count(ctx context.Context, q Query) (int, error) {
	q.Cursor, q.Sort, q.Limit = "", "", 0
	if err := q.check(); err != nil {
		return 0, err
	}
	if n, ok := s.countFromFacets(q); ok {
		return n, nil
	}
	var args []any
	conds := q.where(&args)
	sql := `/* tools.Count */ SELECT count(*)` + q.from(false)
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	var n int
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("tools: count: %w", err)
	}
	return n, nil
}

// Get returns one tool.
func (s *Service) Get(ctx context.Context, id string) (Item, error) {
	return getItem(ctx, s.pool, id, false)
}

// getItem reads one tool; forUpdate locks its row FOR NO KEY UPDATE, which rows that
// reference the tool (a call record, an execution step) do not wait for, so a change
// of a tool never stands in a lock cycle with the router recording calls to it.
func getItem(ctx context.Context, q db.Querier, id string, forUpdate bool) (Item, error) {
	id, ok := normalID(id)
	if !ok {
		return Item{}, ErrNotFound
	}
	sql := `/* tools.Get */ SELECT ` + itemColumns + `, 0::real AS rank` + itemFrom + ` WHERE t.id = $1`
	if forUpdate {
		sql += " FOR NO KEY UPDATE OF t"
	}
	items, err := db.All[Item](ctx, q, "tools: get", sql, id)
	if err != nil {
		return Item{}, err
	}
	if len(items) == 0 {
		return Item{}, ErrNotFound
	}
	return items[0], nil
}

// normalID returns id in PostgreSQL's canonical form; ok is false for anything that is
// not a plain UUID (uuid.Validate also accepts forms such as "urn:uuid:..." that
// PostgreSQL does not).
func normalID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", false
	}
	return u.String(), true
}

// Validation is the latest validation of a tool's current definition.
type Validation struct {
	DefinitionHash string          `db:"definition_hash" json:"definition_hash"`
	Success        bool            `db:"success" json:"success"`
	Worst          *string         `db:"worst" json:"worst"`
	Findings       json.RawMessage `db:"findings" json:"findings"`
	ValidatedBy    string          `db:"validated_by" json:"validated_by"`
	CreatedAt      time.Time       `db:"created_at" json:"created_at"`
}

// LatestValidation returns the newest schema validation of the tool's current
// definition; ok is false when it has not been validated yet.
func (s *Service) LatestValidation(ctx context.Context, t Item) (Validation, bool, error) {
	vs, err := db.All[Validation](ctx, s.pool, "tools: validation", `/* tools.LatestValidation */
		SELECT definition_hash, success, worst, findings, validated_by, created_at FROM tool_validations
		WHERE tool_id = $1 AND definition_hash = $2 AND validation_type = 'schema' ORDER BY id DESC LIMIT 1`,
		t.ID, t.DefinitionHash)
	if err != nil || len(vs) == 0 {
		return Validation{}, false, err
	}
	return vs[0], true, nil
}
