package audit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// The audit browser (/audit, GET /api/v1/audit): filters, keyset pages newest first,
// one entry, and the count of entries newer than a page's top. Each filter is answered
// from an index that ends in id (migrations 27 and 65), so a page costs the same at 10 M rows
// as at a thousand (BenchmarkBrowse).

// Groups are the values of the action filter that stand for several actions, in the
// order the page offers them (ActionGroup says which group an action is in).
var Groups = []string{"auth", "users", "servers", "tools", "calls", "executions", "approvals", "secrets", "settings", "audit", "other"}

// ActionGroup is the group of an action. It is the SQL function audit_action_group of
// migration 27, which the index of the group filter is built on; a test keeps the two
// equal.
func ActionGroup(action string) string {
	prefix, _, _ := strings.Cut(action, ".")
	switch {
	case slices.Contains([]string{"user.login", "user.login_failed", "user.logout", "request.denied"}, action),
		prefix == "token" && strings.Contains(action, "."), prefix == "session" && strings.Contains(action, "."):
		return "auth"
	case prefix == "user" && strings.Contains(action, "."):
		return "users"
	case prefix == "server" && strings.Contains(action, "."):
		return "servers"
	case slices.Contains([]string{"tool.call", "tool.call.refused", "tool.call.failed", "resource.read", "prompt.get", "terminal.input"}, action),
		(prefix == "memory" || prefix == "todo") && strings.Contains(action, "."):
		return "calls"
	case (prefix == "tool" || prefix == "category") && strings.Contains(action, "."):
		return "tools"
	case slices.Contains([]string{"execution.approve", "execution.approve.refused", "execution.reject"}, action),
		(prefix == "grant" || prefix == "collaboration") && strings.Contains(action, "."):
		return "approvals"
	case prefix == "execution" && strings.Contains(action, "."):
		return "executions"
	case (prefix == "secret" || prefix == "secrets") && strings.Contains(action, "."):
		return "secrets"
	case prefix == "settings" && strings.Contains(action, "."):
		return "settings"
	case prefix == "audit" && strings.Contains(action, "."):
		return "audit"
	}
	return "other"
}

// Results are the values of the result filter.
var Results = []string{ResultSuccess, ResultFailure, ResultDenied}

// ActorKindPerson is the actor_kind filter's value for a person's own acts, signed in
// (ActorUser) or through one of their API tokens (ActorToken).
const ActorKindPerson = "person"

// ActorKinds are the values of the actor_kind filter.
var ActorKinds = []string{ActorKindPerson, ActorUser, ActorToken, ActorSystem, ActorAnonymous}

// ActorKindFilter is the actor_kind filter that goes with actor_name for "every entry
// under this name" from an entry of kind: a person's (signed in or by token), or
// Toolwarden's own, or what was typed at a failed sign-in, so that a user named
// "system" and Toolwarden are not mixed.
func ActorKindFilter(kind string) string {
	if kind == ActorUser || kind == ActorToken {
		return ActorKindPerson
	}
	return kind
}

// Page sizes of the browser.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Filter selects entries. Zero fields select everything.
type Filter struct {
	Actor string // the actor's name (a username, "system")
	// ActorKind is one of ActorKinds: ActorKindPerson (user or token) or one kind. With
	// Actor it tells a user named "system" from Toolwarden.
	ActorKind string
	// Action is a group (Groups) or one exact action ("user.login").
	Action     string
	TargetType string
	TargetID   string
	Result     string // success, failure or denied
	RequestID  string
	Q          string    // words, each found whole in who, what, the target or the payload
	From, To   time.Time // at >= From, at < To
	// Cursor: entries older than this id (the next page). After: entries newer than this
	// id (what arrived since a page was read).
	Cursor int64
	After  int64
	Limit  int // DefaultLimit when 0
	// matches are the ids of every entry Q finds, when it finds few (searchable), or of
	// one page's when it finds many (manyMatches); nil when Q is empty, or finds many
	// and is read in batches (Each).
	matches []int64
	// brief leaves the payloads out (ListBrief).
	brief bool
	// through, when not 0, is the newest id selected: an export's head at its start, so
	// entries committed while it runs are not in it.
	through int64
}

// filterFields are the query parameters of a filter, in the order Query writes them.
var filterFields = []string{"actor", "actor_kind", "action", "target_type", "target_id", "result", "request_id", "q", "from", "to"}

// ParseFilter reads a filter from query parameters (the page's URL, the API's). A bad
// value is a *verr.Error naming its parameter.
func ParseFilter(v url.Values) (Filter, error) {
	var f Filter
	var ve verr.Error
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f.Actor, f.TargetType, f.TargetID, f.RequestID = get("actor"), get("target_type"), get("target_id"), get("request_id")
	f.Action, f.Result, f.Q = get("action"), get("result"), get("q")
	if f.ActorKind = get("actor_kind"); f.ActorKind != "" && !slices.Contains(ActorKinds, f.ActorKind) {
		ve.Add("actor_kind", "must be "+strings.Join(ActorKinds, ", "))
	}
	for _, k := range []string{"actor", "action", "target_type", "target_id", "request_id"} {
		if utf8.RuneCountInString(get(k)) > 200 { // characters, as the form's maxlength counts them
			ve.Add(k, "is longer than 200 characters")
		}
	}
	if f.Action != "" && !slices.Contains(Groups, f.Action) && !validAction(f.Action) {
		ve.Add("action", fmt.Sprintf("must be a group (%s) or an action name such as user.login", strings.Join(Groups, ", ")))
	}
	if f.Result != "" && !slices.Contains(Results, f.Result) {
		ve.Add("result", "must be success, failure or denied")
	}
	if n := len([]rune(f.Q)); n > 200 {
		ve.Add("q", "is longer than 200 characters")
	}
	var err error
	if s := get("from"); s != "" {
		if f.From, err = parseTime(s); err != nil {
			ve.Add("from", err.Error())
		}
	}
	if s := get("to"); s != "" {
		if f.To, err = parseTime(s); err != nil {
			ve.Add("to", err.Error())
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		ve.Add("to", "must be after from")
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			ve.Add("limit", fmt.Sprintf("must be a number from 1 to %d", MaxLimit))
		}
		f.Limit = n
	}
	for _, k := range []string{"cursor", "after"} {
		s := get(k)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			ve.Add(k, "is not a cursor this list gave")
			continue
		}
		if k == "cursor" {
			f.Cursor = n
		} else {
			f.After = n
		}
	}
	if err := ve.Err(); err != nil {
		return Filter{}, err
	}
	return f, nil
}

func validAction(a string) bool {
	if a == "" || len(a) > 100 {
		return false
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// timeLayouts are what from and to accept: RFC 3339, and the forms a browser's date
// and time inputs send (read as UTC). A space may stand for the T, as people type it
// ("2026-01-31 08:00", the way the list shows times).
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "UTC"))
	if len(s) > 10 && s[10] == ' ' {
		s = s[:10] + "T" + strings.TrimSpace(s[11:])
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("must be a time such as 2026-01-31 08:00 (UTC), 2026-01-31T08:00:00Z or 2026-01-31")
}

// Query is the filter as query parameters, without its cursor and limit: a page's
// bookmarkable address, a saved view.
func (f Filter) Query() url.Values {
	v := url.Values{}
	for _, k := range filterFields {
		var s string
		switch k {
		case "actor":
			s = f.Actor
		case "actor_kind":
			s = f.ActorKind
		case "action":
			s = f.Action
		case "target_type":
			s = f.TargetType
		case "target_id":
			s = f.TargetID
		case "result":
			s = f.Result
		case "request_id":
			s = f.RequestID
		case "q":
			s = f.Q
		case "from":
			if !f.From.IsZero() {
				s = f.From.Format(time.RFC3339Nano)
			}
		case "to":
			if !f.To.IsZero() {
				s = f.To.Format(time.RFC3339Nano)
			}
		}
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Empty reports whether the filter selects every entry.
func (f Filter) Empty() bool { return len(f.Query()) == 0 }

// where builds the filter's conditions; args holds its parameters.
func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, a any) {
		args = append(args, a)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.Actor != "" {
		add("actor_name = $?", f.Actor)
	}
	switch f.ActorKind {
	case "":
	case ActorKindPerson:
		conds = append(conds, "actor_kind IN ('user', 'token')")
	default:
		add("actor_kind = $?", f.ActorKind)
	}
	switch {
	case f.Action == "":
	case slices.Contains(Groups, f.Action):
		add("audit_action_group(action) = $?", f.Action)
	default:
		add("action = $?", f.Action)
	}
	if f.TargetType != "" {
		add("target_type = $?", f.TargetType)
	}
	if f.TargetID != "" {
		// A target id alone (DESIGN §1: the filters are separate) is found from the
		// partial index of migration 65, which this condition lets the planner use.
		add("target_id = $?", f.TargetID)
		conds = append(conds, "target_id <> ''")
	}
	if f.Result != "" {
		// Said as the partial index of migration 20 is, so a refused or failed entry is
		// found from it.
		add("result = $?", f.Result)
		if f.Result != ResultSuccess {
			conds = append(conds, "result <> 'success'")
		}
	}
	if f.RequestID != "" {
		add("request_id = $?", f.RequestID)
		conds = append(conds, "request_id <> ''")
	}
	if f.Q != "" {
		// Every word of q, as a whole word in any case (the words of migration 42, which
		// searchable brings up to date first): the few entries it found, or, when the
		// words are common, each entry's words checked as the page is read.
		if f.matches != nil {
			add("id = ANY($?::bigint[])", f.matches)
		} else {
			add(`EXISTS (SELECT 1 FROM audit_search s WHERE s.id = audit_log.id AND s.doc @@ plainto_tsquery('simple'::regconfig, $?))`, f.Q)
		}
	}
	if !f.From.IsZero() {
		add("at >= $?", f.From)
	}
	if !f.To.IsZero() {
		add("at < $?", f.To)
	}
	if f.Cursor > 0 {
		if f.timed() {
			add("(at, id) < (SELECT at, id FROM audit_log WHERE id = $?)", f.Cursor)
		} else {
			add("id < $?", f.Cursor)
		}
	}
	if f.After > 0 {
		add("id > $?", f.After)
	}
	if f.through > 0 {
		add("id <= $?", f.through)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// timed reports whether f has a time range. Such a filter is answered in time order
// (newest first, ties by id) from the index on (at, id): ids and times follow each
// other only nearly (an entry's time is taken before it waits for the chain's lock), so
// walking ids down to a window far in the past would read everything after it.
func (f Filter) timed() bool { return !f.From.IsZero() || !f.To.IsZero() }

// narrowed reports a filter besides the words that selects few entries: one person,
// one target, one request, or a failure or refusal. Success, an action or a group (a
// tool call, the calls) and a target type may each be most of the log, so reading on
// through them could read all of it (manyMatches).
func (f Filter) narrowed() bool {
	return f.Actor != "" || f.TargetID != "" || f.RequestID != "" || (f.Result != "" && f.Result != ResultSuccess)
}

// order is the ORDER BY of a page of f.
func (f Filter) order() string {
	if f.timed() {
		return " ORDER BY at DESC, id DESC"
	}
	return " ORDER BY id DESC"
}

// Page is one page of entries, newest first (by id; by time when the filter has a
// time range). NextCursor is the cursor of the next
// (older) page, 0 when this is the last.
type Page struct {
	Items      []Record
	NextCursor int64
}

// browseTimeout bounds a page of the browser, its count of newer entries and the API's
// list, each statement and all of them together: a filter the indexes answer badly (an
// actor over a long time range walks the index on (at, id)) must not hold a connection
// and the database for as long as it takes, and an auditor can load many at once. Well
// above the 100 ms a page takes (P6); past it the page says to narrow the filters, or
// that the log is busy (tooSlow). A variable for tests.
var browseTimeout = 5 * time.Second

// browseBusyRetry is the Retry-After of a page refused as busy.
const browseBusyRetry = 10 * time.Second

// bounded runs fn in a read-only transaction that stops after about browseTimeout: each
// statement by statement_timeout (a clean cancel, and a bound on the server even if the
// client goes), the page's statements together by a deadline a little later, which
// gives the statement's cancel the first turn (the deadline's closes the connection).
// A page stopped so is tooSlow's error. fn runs every statement with the ctx it is
// given (the page's): pgx bounds each call by its own context, so a statement run with
// the request's would be bounded only by statement_timeout, and a page of several could
// hold its connection for several times browseTimeout.
func (l *Log) bounded(ctx context.Context, f Filter, fn func(ctx context.Context, tx pgx.Tx) error) error {
	page, cancel := context.WithTimeout(ctx, browseTimeout+browseTimeout/10)
	defer cancel()
	err := pgx.BeginTxFunc(page, l.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(page, `SELECT set_config('statement_timeout', $1, true)`,
			strconv.FormatInt(max(browseTimeout.Milliseconds(), 1), 10)); err != nil {
			return err
		}
		return fn(page, tx)
	})
	var pe *pgconn.PgError
	if err != nil && ctx.Err() == nil && (page.Err() != nil && errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &pe) && pe.Code == "57014" /* query_canceled */) {
		return tooSlow(f)
	}
	return err
}

// narrowBy is what makes a filter cheap to answer: the filters Filter.narrowed names.
const narrowBy = "narrow it by an actor, a target id, a request id, a result of failure or denied, or more words"

// narrowField is the filter field an error about f's cost is shown at: the words, else
// the time range, else the first filter set ("" when none is).
func narrowField(f Filter) string {
	q := f.Query()
	for _, k := range append([]string{"q", "from", "to"}, filterFields...) {
		if q.Has(k) {
			return k
		}
	}
	return ""
}

// tooManyMatches refuses a search whose words are in more than most entries (within its
// cursors) and that no other filter narrows. Among the newest searchWalk entries the
// filters select the words are checked one by one whatever their matches, which is why
// a page may load and the next be refused, and why a time range that holds fewer entries
// than that is answered.
func tooManyMatches(f Filter, most int) error {
	return verr.New(narrowField(f), fmt.Sprintf("this search is too broad: its words are in more than %d entries to check one by one; %s, "+
		"or give it a time range that holds fewer than %d entries", most, narrowBy, searchWalk))
}

// tooSlow is a page of f stopped at browseTimeout. A filter narrowed to few entries
// (Filter.narrowed) is answered from its index in milliseconds: without words or a time
// range, which may cost more, its stop means the database is busy (a lock, load), as
// with no filter at all, and that is unavailable, with a wait. Otherwise it is a field
// error saying what to narrow.
func tooSlow(f Filter) error {
	field := narrowField(f)
	switch {
	case field == "" || f.narrowed() && f.Q == "" && !f.timed():
		busy := fault.Unavailable("audit_busy", fmt.Sprintf("the audit log did not answer within %s: it is busy, try again shortly", browseTimeout))
		busy.RetryAfter = browseBusyRetry
		return busy
	case f.narrowed():
		how := "give it a time range"
		if f.timed() {
			how = "give it a shorter time range"
		}
		return verr.New(field, fmt.Sprintf("this search took too long: the audit log did not answer it within %s; %s", browseTimeout, how))
	}
	return verr.New(field, fmt.Sprintf("this search is too broad: the audit log did not answer it within %s; %s, or a shorter time range",
		browseTimeout, narrowBy))
}

// List returns a page of the entries f selects, newest first.
// A cursor of a list in time order must name an entry (its time is where the page
// starts): one that names none is an error naming cursor, as a malformed one is.
// Its statements are bounded (bounded); its words too (maxMatches).
func (l *Log) List(ctx context.Context, f Filter) (Page, error) {
	if err := l.indexed(ctx, f); err != nil {
		return Page{}, err
	}
	var p Page
	err := l.bounded(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
		if f.Cursor > 0 && f.timed() {
			var found bool
			if err := tx.QueryRow(ctx, `/* audit.List.cursor */ SELECT EXISTS (SELECT 1 FROM audit_log WHERE id = $1)`, f.Cursor).Scan(&found); err != nil {
				return fmt.Errorf("audit: list: %w", err)
			}
			if !found {
				var ve verr.Error
				ve.Add("cursor", "is not a cursor this list gave")
				return ve.Err()
			}
		}
		g, err := l.searchable(ctx, tx, f)
		if err != nil {
			return err
		}
		p, err = l.list(ctx, tx, g)
		return err
	})
	return p, err
}

// ListBrief is List without each entry's payload, which can be large: the page's list,
// which never shows it.
func (l *Log) ListBrief(ctx context.Context, f Filter) (Page, error) {
	f.brief = true
	return l.List(ctx, f)
}

// briefColumns are recordColumns without the payload (NULL: Payload is nil).
var briefColumns = strings.Replace(recordColumns, " payload,", " NULL::json AS payload,", 1)

// query runs the select of up to limit entries of f. With words, each row also says
// whether it holds them (matched, scanRow): the word index (audit_search) is a table
// of its own, outside the chain, that whoever can write the database can edit, so an
// entry it names is checked against the entry's own words (audit_search_doc, migration
// 58) before it is shown. Computed for the rows returned only, not every row read.
func (l *Log) query(ctx context.Context, q db.Querier, f Filter, limit int) (pgx.Rows, error) {
	cols := recordColumns
	if f.brief {
		cols = briefColumns
	}
	where, args := f.where()
	if f.Q != "" {
		args = append(args, f.Q)
		cols += `, coalesce(audit_search_doc(actor_name, action, target_type, target_id, target_name, payload)
			@@ plainto_tsquery('simple'::regconfig, $` + strconv.Itoa(len(args)) + `), false) AS matched`
	}
	args = append(args, limit)
	return q.Query(ctx, `/* audit.List */ SELECT `+cols+` FROM audit_log`+where+
		f.order()+` LIMIT $`+strconv.Itoa(len(args)), args...)
}

// queryRow is a row of query: the entry, and whether it holds the words (nil: no words).
type queryRow struct {
	Record
	Matched *bool `db:"matched"`
}

// scanRow reads a row of query, and whether it is to be shown: an entry the word index
// named for words it does not hold is not.
func scanRow(rows pgx.Rows) (Record, bool, error) {
	r, err := pgx.RowToStructByNameLax[queryRow](rows)
	return r.Record, r.Matched == nil || *r.Matched, err
}

// list is List without indexing for search first, on q. An entry the word index named
// wrongly is left out (scanRow), and still counts for where the next page starts.
func (l *Log) list(ctx context.Context, q querier, f Filter) (Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	if f.Q != "" && f.matches == nil {
		ids, walk, err := l.manyMatches(ctx, q, f, limit+1, limit+1, maxMatches)
		if err != nil {
			return Page{}, err
		}
		if !walk {
			f.matches = ids
		}
	}
	rows, err := l.query(ctx, q, f, limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("audit: list: %w", err)
	}
	defer rows.Close()
	var recs []Record
	size, read := 0, 0
	var last int64 // the last row of the page read, shown or not
	for rows.Next() {
		r, show, err := scanRow(rows)
		if err != nil {
			return Page{}, fmt.Errorf("audit: list: %w", err)
		}
		if read++; read > limit {
			// One past the page: there is a next one.
			rows.Close()
			return Page{Items: recs, NextCursor: last}, nil
		}
		last = r.ID
		if !show {
			continue
		}
		recs = append(recs, r)
		// Payloads can be large (an export's batches are bounded so too): a page
		// stops once its entries hold listPageBytes, shorter than its limit, and
		// the next page starts after its last entry.
		if size += recordSize(r); size >= listPageBytes {
			rows.Close()
			return Page{Items: recs, NextCursor: r.ID}, nil
		}
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("audit: list: %w", err)
	}
	return Page{Items: recs}, nil
}

// listPageBytes bounds the entries one page of List holds (about, by recordSize), so
// that a page of 500 large payloads, a few of them at once, cannot hold gigabytes.
const listPageBytes = exportBatchBytes

// MaxNewer bounds CountNewer: the page says "N+ new entries" past it.
const MaxNewer = 1000

// CountNewer counts the entries f selects that are newer than after (the top of a page
// that is shown), up to 1000, for the "N new entries" banner. Bounded as List is.
func (l *Log) CountNewer(ctx context.Context, f Filter, after int64) (int64, error) {
	f.Cursor, f.After = 0, after
	if err := l.indexed(ctx, f); err != nil {
		return 0, err
	}
	var n int64
	err := l.bounded(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
		f, err := l.searchable(ctx, tx, f)
		if err != nil {
			return err
		}
		if f.Q != "" && f.matches == nil {
			ids, walk, err := l.manyMatches(ctx, tx, f, MaxNewer, MaxNewer, maxMatches)
			if err != nil {
				return err
			}
			if !walk {
				f.matches = ids
			}
		}
		where, args := f.where()
		if f.Q != "" {
			// As a page checks them (query): an entry the word index names for words it
			// does not hold is not counted either.
			args = append(args, f.Q)
			where += ` AND coalesce(audit_search_doc(actor_name, action, target_type, target_id, target_name, payload)
				@@ plainto_tsquery('simple'::regconfig, $` + strconv.Itoa(len(args)) + `), false)`
		}
		if err := tx.QueryRow(ctx, `/* audit.CountNewer */ SELECT count(*) FROM (SELECT 1 FROM audit_log`+where+
			` LIMIT `+strconv.Itoa(MaxNewer)+`) s`, args...).Scan(&n); err != nil {
			return fmt.Errorf("audit: count newer: %w", err)
		}
		return nil
	})
	return n, err
}

// ErrNotFound is an entry that does not exist.
var ErrNotFound = fault.NotFound("audit entry")

// Get returns one entry.
func (l *Log) Get(ctx context.Context, id int64) (Record, error) {
	rows, err := l.pool.Query(ctx, `/* audit.Get */ SELECT `+recordColumns+` FROM audit_log WHERE id = $1`, id)
	if err != nil {
		return Record{}, fmt.Errorf("audit: get %d: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Record])
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("audit: get %d: %w", id, err)
	}
	return r, nil
}

// HeadID is the newest entry's id (0 when the log is empty).
func (l *Log) HeadID(ctx context.Context) (int64, error) {
	var id int64
	if err := l.pool.QueryRow(ctx, `/* audit.HeadID */ SELECT coalesce(max(id), 0) FROM audit_log`).Scan(&id); err != nil {
		return 0, fmt.Errorf("audit: head: %w", err)
	}
	return id, nil
}
