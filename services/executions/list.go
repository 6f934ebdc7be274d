package executions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Get returns one execution. Anyone who may see executions (auth.PermExecutionView)
// may see every one of them: approvers must see what they approve, auditors what ran.
func (s *Service) Get(ctx context.Context, id string) (*Execution, error) {
	return s.get(ctx, s.pool, id) // an id that is not one: ErrNotFound
}

// Query filters and pages the execution history; the newest come first.
type Query struct {
	Status      []Status // any of these; none: all
	Risk        string   // low, medium, high; "": all
	RequestedBy string   // a user id; "": everyone's
	Source      string   // SourceMCP: only calls through /mcp; "": every source
	Q           string   // words in the prompt, the requester or the tools of the plan
	Cursor      string   // NextCursor of the previous page
	Limit       int      // default 50, at most 200
}

// Page is one page of executions.
type Page struct {
	Items      []Execution
	NextCursor string // "" on the last page
}

// DefaultLimit is a page's size when the query names none.
const DefaultLimit = 50

type cursor struct {
	At time.Time `json:"t"`
	ID string    `json:"i"`
}

func decodeCursor(s string) (cursor, bool) {
	var c cursor
	if !db.DecodeCursor(s, &c) {
		return cursor{}, false
	}
	if !uuidtext.Canonical(c.ID) {
		return cursor{}, false
	}
	return c, true
}

// List returns a page of executions, newest first. Bad filters are a *verr.Error
// naming the parameter.
func (s *Service) List(ctx context.Context, q Query) (Page, error) {
	e := &verr.Error{}
	for _, st := range q.Status {
		if !slices.Contains(Statuses, st) {
			// Said once: a URL can repeat a bad value a hundred thousand times.
			e.Add("status", fmt.Sprintf("unknown status %q; use one of %s", textcheck.Clip(string(st), 60, "…"), statusList()))
			break
		}
	}
	if q.Risk != "" && !slices.Contains([]string{string(risk.Low), string(risk.Medium), string(risk.High)}, q.Risk) {
		e.Add("risk", fmt.Sprintf("unknown risk %q; use low, medium or high", q.Risk))
	}
	if q.RequestedBy != "" {
		if !uuidtext.Canonical(q.RequestedBy) {
			e.Add("requested_by", "must be a user id (36 characters, lower case, as the API gives it)")
		}
	}
	var cur cursor
	if q.Cursor != "" {
		var ok bool
		if cur, ok = decodeCursor(q.Cursor); !ok {
			e.Add("cursor", "is not a cursor this list gave out; start from the first page")
		}
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 1 || q.Limit > 200:
		e.Add("limit", "must be between 1 and 200")
	}
	if len([]rune(q.Q)) > 200 {
		e.Add("q", "keep the search under 200 characters")
	}
	if err := e.Err(); err != nil {
		return Page{}, err
	}
	where := []string{"true"}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(q.Status) > 0 {
		ss := make([]string, len(q.Status))
		for i, st := range q.Status {
			ss[i] = string(st)
		}
		where = append(where, "status = ANY("+arg(ss)+")")
	}
	if q.Risk != "" {
		where = append(where, "risk = "+arg(q.Risk))
	}
	if q.RequestedBy != "" {
		where = append(where, "requested_by = "+arg(q.RequestedBy))
	}
	if q.Source != "" {
		where = append(where, "source = "+arg(q.Source))
	}
	for _, w := range strings.Fields(q.Q) {
		p := arg("%" + db.EscapeLike(w) + "%")
		where = append(where, fmt.Sprintf(`(prompt ILIKE %[1]s OR requester_name ILIKE %[1]s OR EXISTS (
			SELECT 1 FROM jsonb_array_elements(plan->'steps') st WHERE st->>'tool' ILIKE %[1]s))`, p))
	}
	if q.Cursor != "" {
		where = append(where, fmt.Sprintf("(created_at, id) < (%s, %s)", arg(cur.At), arg(cur.ID)))
	}
	lim := arg(q.Limit + 1)
	items, err := db.All[Execution](ctx, s.pool, "executions: list", `/* executions.List */ SELECT `+columns+`
		FROM executions WHERE `+strings.Join(where, " AND ")+` ORDER BY created_at DESC, id DESC LIMIT `+lim, args...)
	if err != nil {
		return Page{}, err
	}
	for i := range items {
		items[i].phraseAsAsked()
	}
	var p Page
	p.Items, p.NextCursor = db.NextPage(items, q.Limit, func(last Execution) any { return cursor{At: last.CreatedAt, ID: last.ID} })
	return p, nil
}

// AwaitingCount is how many executions wait for approval (the navigation's badge).
func (s *Service) AwaitingCount(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `/* executions.AwaitingCount */
		SELECT count(*) FROM executions WHERE status = 'awaiting_approval'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("executions: count awaiting: %w", err)
	}
	return n, nil
}

// ActiveStatuses are the states an execution is not done in.
var ActiveStatuses = []Status{Planning, AwaitingApproval, Executing, RollingBack}

// ActiveCounts is how many executions are in each of ActiveStatuses (the metrics).
func (s *Service) ActiveCounts(ctx context.Context) (map[Status]int64, error) {
	names := make([]string, len(ActiveStatuses))
	for i, st := range ActiveStatuses {
		names[i] = string(st)
	}
	rows, err := s.pool.Query(ctx, `/* executions.ActiveCounts */
		SELECT status, count(*) FROM executions WHERE status = ANY($1) GROUP BY status`, names)
	if err != nil {
		return nil, fmt.Errorf("executions: count active: %w", err)
	}
	out := make(map[Status]int64, len(ActiveStatuses))
	for _, st := range ActiveStatuses {
		out[st] = 0
	}
	var st string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		out[Status(st)] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("executions: count active: %w", err)
	}
	return out, nil
}

func statusList() string {
	ss := make([]string, len(Statuses))
	for i, st := range Statuses {
		ss[i] = string(st)
	}
	return strings.Join(ss, ", ")
}
