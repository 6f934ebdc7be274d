// Package usage owns tool_usage_logs, the one row the router writes for every tool call
// (migration 000014), and the read side behind a tool's Usage and Logs tabs: a summary
// of a period (calls, success rate, latency percentiles), a time series of equal buckets
// for the charts, and the newest calls page by page.
//
// The table is built for millions of rows. Every read filters by tool_id and, where it
// has one, a used_at range, so it is served by the (tool_id, used_at DESC) index (or,
// for the calls that ran only, its partial twin of migration 67) and never scans other
// tools' rows. Logs are redacted again when they are read (secret
// keys and credential-shaped strings become "********") in case a writer missed one,
// and oversized JSON is cut before it reaches a page.
package usage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// Mask replaces a redacted value.
const Mask = "********"

// MaxJSONBytes is about how much of a log's request, response or error JSON is kept
// (ForLog) and shown (Recent): bytes of content (strings, keys, numbers), the JSON's
// structure kept around them.
const MaxJSONBytes = 8 << 10

// Limits of the read functions' arguments.
const (
	MaxRecent  = 200
	MaxBuckets = 1000
)

// Copier writes rows with COPY; *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it.
type Copier interface {
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// Entry is one tool call to record. The writer (the router) bounds the request and the
// response with ForLog, which masks what it cuts, and says so in Metadata
// (MetaResponseBytes); what it keeps whole is masked when read. nil JSON is stored as
// {} (Request, Metadata) or NULL (Response, Error).
type Entry struct {
	ToolID     string
	UserID     string // "" when no user (a system call)
	Actor      string
	Source     string // test_panel, api, execution, gateway
	UsedAt     time.Time
	DurationMS *float64 // nil when the call never ran (rejected arguments, say)
	Success    bool
	ErrorCode  string // "" when none
	Request    json.RawMessage
	Response   json.RawMessage
	Error      json.RawMessage
	Metadata   json.RawMessage
}

var insertColumns = []string{"tool_id", "user_id", "actor", "source", "used_at", "duration_ms", "success",
	"error_code", "request", "response", "error", "metadata"}

// Insert writes entries with one COPY. An entry without UsedAt is stamped now.
func Insert(ctx context.Context, q Copier, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	now := time.Now()
	rows := make([][]any, len(entries))
	for i, e := range entries {
		tool, err := uuid.Parse(e.ToolID)
		if err != nil {
			return fmt.Errorf("usage: entry %d: tool id %q: %w", i, e.ToolID, err)
		}
		var user any
		if e.UserID != "" {
			u, err := uuid.Parse(e.UserID)
			if err != nil {
				return fmt.Errorf("usage: entry %d: user id %q: %w", i, e.UserID, err)
			}
			user = u
		}
		used := e.UsedAt
		if used.IsZero() {
			used = now
		}
		var code any
		if e.ErrorCode != "" {
			code = e.ErrorCode
		}
		rows[i] = []any{tool, user, e.Actor, e.Source, used, e.DurationMS, e.Success, code,
			jsonOr(e.Request, "{}"), jsonOr(e.Response, ""), jsonOr(e.Error, ""), jsonOr(e.Metadata, "{}")}
	}
	if _, err := q.CopyFrom(ctx, pgx.Identifier{"tool_usage_logs"}, insertColumns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("usage: insert %d logs: %w", len(entries), err)
	}
	return nil
}

// MissingTool reports whether err is Insert failing on an entry whose tool no longer
// exists (deleted with its server while the call ran): tool_id's foreign key. Such an
// entry can never be written; its tool's other usage rows went with the tool.
func MissingTool(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503" && pe.TableName == "tool_usage_logs"
}

// jsonOr returns raw, or def when raw is empty (nil when def is "": SQL NULL).
func jsonOr(raw json.RawMessage, def string) any {
	if len(bytes.TrimSpace(raw)) > 0 {
		return raw
	}
	if def == "" {
		return nil
	}
	return json.RawMessage(def)
}

// ErrRange: the period is empty or reversed.
var ErrRange = errors.New("usage: the period must end after it starts")

// period checks [from, to) and rounds both to PostgreSQL's microseconds.
func period(from, to time.Time) (time.Time, time.Time, error) {
	from, to = from.Truncate(time.Microsecond), to.Truncate(time.Microsecond)
	if !to.After(from) {
		return from, to, ErrRange
	}
	return from, to, nil
}

// Stats describes a tool's calls in a period.
type Stats struct {
	Calls     int64
	Successes int64
	Failures  int64
	// SuccessRate is Successes/Calls in 0..1; 0 when there were no calls.
	SuccessRate float64
	// Latency percentiles (percentile_cont) and mean in milliseconds over the calls
	// that have a duration; nil when there were none. Over a RollupSpan or longer they
	// come from the daily rollups' histograms, within a few percent of exact.
	P50MS, P95MS, AvgMS *float64
	// LastUsed is the tool's newest call that ran, inside the period or not; nil: never.
	LastUsed *time.Time
}

// RollupSpan: a period this long or longer reads its whole rolled-up days from the
// daily rollups (services/analytics), as /analytics does, and only the rest (today, a
// partial first day, a day not rolled yet) call by call: a month of a busy tool was a
// million rows sorted twice on every view.
const RollupSpan = 7 * 24 * time.Hour

// statsRow is Summary's result row.
type statsRow struct {
	Calls     int64      `db:"calls"`
	Successes int64      `db:"successes"`
	P50       *float64   `db:"p50"`
	P95       *float64   `db:"p95"`
	Avg       *float64   `db:"avg"`
	LastUsed  *time.Time `db:"last_used"`
}

// Summary sums up toolID's calls in [from, to): the calls that ran (a call the router
// refused has no duration and is not the tool's failure; it stays in the log). LastUsed
// is the newest call that ran, in any period.
func Summary(ctx context.Context, q db.Querier, toolID string, from, to time.Time) (Stats, error) {
	from, to, err := period(from, to)
	if err != nil {
		return Stats{}, err
	}
	if to.Sub(from) >= RollupSpan {
		return rolledSummary(ctx, q, toolID, from, to)
	}
	rows, err := q.Query(ctx, `/* usage.Summary */
		SELECT count(*) AS calls,
		       count(*) FILTER (WHERE success) AS successes,
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
		       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95,
		       avg(duration_ms) AS avg,
		       (SELECT max(used_at) FROM tool_usage_logs WHERE tool_id = $1 AND duration_ms IS NOT NULL) AS last_used
		FROM tool_usage_logs
		WHERE tool_id = $1 AND used_at >= $2 AND used_at < $3 AND duration_ms IS NOT NULL`, toolID, from, to)
	if err != nil {
		return Stats{}, fmt.Errorf("usage: summary: %w", err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[statsRow])
	if err != nil {
		return Stats{}, fmt.Errorf("usage: summary: %w", err)
	}
	s := Stats{Calls: r.Calls, Successes: r.Successes, Failures: r.Calls - r.Successes,
		P50MS: r.P50, P95MS: r.P95, AvgMS: r.Avg, LastUsed: r.LastUsed}
	if s.Calls > 0 {
		s.SuccessRate = float64(s.Successes) / float64(s.Calls)
	}
	return s, nil
}

// rolledSummary is Summary of a long period, from the rollups and the calls not rolled.
func rolledSummary(ctx context.Context, q db.Querier, toolID string, from, to time.Time) (Stats, error) {
	sp, err := analytics.ToolSpans(ctx, q, toolID, []time.Time{from, to})
	if err != nil {
		return Stats{}, fmt.Errorf("usage: summary: %w", err)
	}
	var last *time.Time
	if err := q.QueryRow(ctx, `/* usage.Summary.last */ SELECT max(used_at) FROM tool_usage_logs WHERE tool_id = $1 AND duration_ms IS NOT NULL`,
		toolID).Scan(&last); err != nil {
		return Stats{}, fmt.Errorf("usage: summary: %w", err)
	}
	t := sp[0]
	s := Stats{Calls: t.Calls, Successes: t.Calls - t.Errors, Failures: t.Errors, P50MS: t.P50MS, P95MS: t.P95MS, AvgMS: t.AvgMS, LastUsed: last}
	if s.Calls > 0 {
		s.SuccessRate = float64(s.Successes) / float64(s.Calls)
	}
	return s, nil
}

// Bucket is one interval of a Series. The percentiles are nil when no call in the
// bucket has a duration (always so when Calls is 0).
type Bucket struct {
	Start, End time.Time
	Calls      int64
	Failures   int64
	P50MS      *float64
	P95MS      *float64
}

// seriesRow is one of Series's result rows.
type seriesRow struct {
	Idx      int64    `db:"idx"`
	Calls    int64    `db:"calls"`
	Failures int64    `db:"failures"`
	P50      *float64 `db:"p50"`
	P95      *float64 `db:"p95"`
}

// Series splits [from, to) into buckets equal intervals (clamped to 1..MaxBuckets) and
// returns every one of them, oldest first, empty ones included, so a chart has a
// continuous x axis. A call at used_at falls into the bucket whose [Start, End) holds it.
func Series(ctx context.Context, q db.Querier, toolID string, from, to time.Time, buckets int) ([]Bucket, error) {
	from, to, err := period(from, to)
	if err != nil {
		return nil, err
	}
	n := int64(min(max(buckets, 1), MaxBuckets))
	total := to.Sub(from).Microseconds()
	// bound is the first microsecond of 0-based bucket k: ceil(k*total/n).
	bound := func(k int64) time.Time {
		return from.Add(time.Duration((k*total+n-1)/n) * time.Microsecond)
	}
	if to.Sub(from) >= RollupSpan {
		edges := make([]time.Time, n+1)
		for k := range edges {
			edges[k] = bound(int64(k))
		}
		sps, err := analytics.ToolSpans(ctx, q, toolID, edges)
		if err != nil {
			return nil, fmt.Errorf("usage: series: %w", err)
		}
		out := make([]Bucket, n)
		for k, sp := range sps {
			out[k] = Bucket{Start: edges[k], End: edges[k+1], Calls: sp.Calls, Failures: sp.Errors, P50MS: sp.P50MS, P95MS: sp.P95MS}
		}
		return out, nil
	}
	// width_bucket on exact numeric microseconds: bucket k (1-based) holds the offsets
	// x with (k-1)*total/n <= x < k*total/n, the same arithmetic as bound below.
	rs, err := db.All[seriesRow](ctx, q, "usage: series", `/* usage.Series */
		WITH agg AS (
			SELECT width_bucket(extract(epoch FROM used_at - $2::timestamptz) * 1000000, 0, $4::numeric, $5::int) AS idx,
			       count(*) AS calls,
			       count(*) FILTER (WHERE NOT success) AS failures,
			       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
			       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95
			FROM tool_usage_logs
			WHERE tool_id = $1 AND used_at >= $2 AND used_at < $3 AND duration_ms IS NOT NULL
			GROUP BY 1
		)
		SELECT g.idx::bigint AS idx, coalesce(a.calls, 0) AS calls, coalesce(a.failures, 0) AS failures, a.p50, a.p95
		FROM generate_series(1, $5::int) AS g(idx)
		LEFT JOIN agg a ON a.idx = g.idx
		ORDER BY g.idx`, toolID, from, to, total, n)
	if err != nil {
		return nil, err
	}
	out := make([]Bucket, len(rs))
	for i, r := range rs {
		k := r.Idx - 1
		out[i] = Bucket{Start: bound(k), End: bound(k + 1), Calls: r.Calls, Failures: r.Failures, P50MS: r.P50, P95MS: r.P95}
	}
	return out, nil
}

// logRow is one of Recent's result rows.
type logRow struct {
	ID         int64           `db:"id"`
	ToolID     string          `db:"tool_id"`
	UserID     string          `db:"user_id"`
	Actor      string          `db:"actor"`
	Source     string          `db:"source"`
	UsedAt     time.Time       `db:"used_at"`
	DurationMS *float64        `db:"duration_ms"`
	Success    bool            `db:"success"`
	ErrorCode  string          `db:"error_code"`
	Request    json.RawMessage `db:"request"`
	Response   json.RawMessage `db:"response"`
	Error      json.RawMessage `db:"error"`
	Metadata   json.RawMessage `db:"metadata"`
	// What the router cut when it wrote the row (ForLog) says so in its metadata:
	// whether MetaRequestBytes is there, and MetaResponseBytes (nil when absent).
	RequestCut  bool            `db:"request_cut"`
	ResponseCut json.RawMessage `db:"response_cut"`
}

const recentColumns = `l.id, l.tool_id::text AS tool_id, coalesce(l.user_id::text, '') AS user_id, l.actor, l.source,
	l.used_at, l.duration_ms, l.success, coalesce(l.error_code, '') AS error_code,
	l.request, l.response, l.error, l.metadata,
	l.metadata -> '` + MetaRequestBytes + `' IS NOT NULL AS request_cut, l.metadata -> '` + MetaResponseBytes + `' AS response_cut`

// Recent returns up to limit (clamped to 1..MaxRecent) of toolID's calls, newest first
// (by used_at, then id), starting after the call beforeID (0: from the newest), and the
// id to pass as beforeID for the next page (0: this is the last page). A beforeID that
// is not one of toolID's calls (pruned meanwhile, say) gives an empty last page.
func Recent(ctx context.Context, q db.Querier, toolID string, beforeID int64, limit int) ([]Log, int64, error) {
	return RecentOf(ctx, q, toolID, nil, beforeID, limit)
}

// RecentOf is Recent of the calls the user with id *userID made (nil: everyone's): a
// built-in tool's calls carry their caller's commands, output, notes and files, which
// others may read only with audit.view (handlers/tool.go).
func RecentOf(ctx context.Context, q db.Querier, toolID string, userID *string, beforeID int64, limit int) ([]Log, int64, error) {
	limit = min(max(limit, 1), MaxRecent)
	var (
		rs  []logRow
		err error
	)
	// One text with and one without the person: "$n IS NULL OR …" would keep a generic
	// plan from using the person's index (tool_usage_logs_tool_user_time_idx).
	only := func(args []any) (string, []any) {
		if userID == nil {
			return "", args
		}
		return fmt.Sprintf(" AND l.user_id = $%d::uuid", len(args)+1), append(args, *userID)
	}
	if beforeID <= 0 {
		who, args := only([]any{toolID, limit + 1})
		rs, err = db.All[logRow](ctx, q, "usage: recent", `/* usage.Recent */
			SELECT `+recentColumns+`
			FROM tool_usage_logs l
			WHERE l.tool_id = $1`+who+`
			ORDER BY l.used_at DESC, l.id DESC
			LIMIT $2`, args...)
	} else {
		// The cursor row's used_at (an InitPlan, so an index condition) bounds the
		// index scan, however deep the page; id breaks ties.
		who, args := only([]any{toolID, beforeID, limit + 1})
		rs, err = db.All[logRow](ctx, q, "usage: recent", `/* usage.Recent */
			SELECT `+recentColumns+`
			FROM tool_usage_logs l
			WHERE l.tool_id = $1`+who+`
			  AND l.used_at <= (SELECT c.used_at FROM tool_usage_logs c WHERE c.id = $2 AND c.tool_id = $1)
			  AND (l.used_at < (SELECT c.used_at FROM tool_usage_logs c WHERE c.id = $2 AND c.tool_id = $1) OR l.id < $2)
			ORDER BY l.used_at DESC, l.id DESC
			LIMIT $3`, args...)
	}
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(rs) > limit {
		rs = rs[:limit]
		next = rs[limit-1].ID
	}
	out := make([]Log, len(rs))
	for i, r := range rs {
		l := Log{ID: r.ID, ToolID: r.ToolID, UserID: r.UserID, Actor: r.Actor, Source: r.Source, UsedAt: r.UsedAt,
			DurationMS: r.DurationMS, Success: r.Success, ErrorCode: r.ErrorCode, ResponseBytes: len(r.Response)}
		l.Request, l.RequestTruncated = shown(r.Request)
		l.Response, l.Truncated = shown(r.Response)
		l.Error, l.ErrorTruncated = shown(r.Error)
		l.Metadata, _ = shown(r.Metadata)
		if r.RequestCut {
			l.RequestTruncated = true
		}
		var n int
		if json.Unmarshal(r.ResponseCut, &n) == nil && n > 0 {
			l.Truncated, l.ResponseBytes = true, n
		}
		out[i] = l
	}
	return out, next, nil
}

// shown is a log's stored JSON as a page shows it: masked, and cut to about
// MaxJSONBytes of content keeping its structure (RedactCut), which a row the router
// cut already (ForLog) keeps as it is; cut says some was left out here.
func shown(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) <= MaxJSONBytes {
		return Redact(raw), false
	}
	out, _, cut := RedactCut(raw, MaxJSONBytes)
	return out, cut
}

// Log is one recorded call as the Logs tab shows it, redacted and size-capped.
type Log struct {
	ID         int64
	ToolID     string
	UserID     string // "" when none
	Actor      string
	Source     string
	UsedAt     time.Time
	DurationMS *float64
	Success    bool
	ErrorCode  string
	// Request, Response, Error and Metadata are valid JSON (nil when NULL). One of more
	// than MaxJSONBytes is cut to about MaxJSONBytes of content, keeping its structure
	// (RedactCut); its *Truncated flag is set when it was cut, here or when written.
	Request          json.RawMessage
	Response         json.RawMessage
	Error            json.RawMessage
	Metadata         json.RawMessage
	RequestTruncated bool
	Truncated        bool // the response was cut
	ErrorTruncated   bool
	// ResponseBytes is the size of the response JSON before any cut: the router's
	// (MetaResponseBytes) or, when it cut none, the stored JSON's.
	ResponseBytes int
}

// Redact returns raw with every value under a secret-looking key (secrets.LooksSecretName)
// and every credential-shaped string (secrets.LooksSecretValue), an object's keys too,
// replaced by Mask, at any depth (keys masked whole become Mask, Mask#2, …: maskKeys). JSON null stays null. Invalid JSON is replaced by a JSON string saying so,
// since it cannot be inspected.
func Redact(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	v, _, ok := redactJSON(raw)
	if !ok {
		return json.RawMessage(`"(unreadable JSON withheld)"`)
	}
	return encodeRedacted(v)
}

// RedactChanged is Redact that also says whether it masked anything; when it did not,
// raw itself is returned, not encoded again (a page masking large results for a
// viewer pays for the decoding only).
func RedactChanged(raw json.RawMessage) (json.RawMessage, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw, false
	}
	v, changed, ok := redactJSON(raw)
	switch {
	case !ok:
		return json.RawMessage(`"(unreadable JSON withheld)"`), true
	case !changed:
		return raw, false
	}
	return encodeRedacted(v), true
}

// redactJSON decodes raw (one JSON value) and masks it (redactValue); ok is false for
// JSON that cannot be read.
func redactJSON(raw json.RawMessage) (v any, changed, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, false
	}
	return redactValue(v, &changed), changed, true
}

// encodeRedacted is v as JSON, HTML characters as they are.
func encodeRedacted(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(`"(unreadable JSON withheld)"`)
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
}

// RedactText is Redact for one string (an error message): the whole of it masked when it
// looks like a credential, else each credential-like word in it.
func RedactText(s string) string {
	if secrets.LooksSecretValue(s) {
		return Mask
	}
	if w, ok := redactJSONText(s); ok {
		return w
	}
	return redactWords(s)
}

// redactValue masks v in place (its maps and slices), setting *changed when it masks.
func redactValue(v any, changed *bool) any {
	switch x := v.(type) {
	case map[string]any:
		// An image's or a sound's data (MCP content) is base64, which looks like a
		// credential and is none: kept, so a picture still shows.
		if maskKeys(x) {
			*changed = true
		}
		media := x["type"] == "image" || x["type"] == "audio"
		for k, val := range x {
			if val != nil && secrets.LooksSecretName(k) {
				x[k], *changed = Mask, true
				continue
			}
			if media && k == "data" {
				continue
			}
			x[k] = redactValue(val, changed)
		}
		return x
	case []any:
		for i, val := range x {
			x[i] = redactValue(val, changed)
		}
		return x
	case string:
		w, masked := redactString(x)
		if masked {
			*changed = true
		}
		return w
	}
	return v
}

// redactString is a string value masked as redactValue masks one: whole when it looks
// like a credential, as JSON when it is JSON as text, else word by word; masked says
// it changed.
func redactString(s string) (string, bool) {
	if secrets.LooksSecretValue(s) {
		return Mask, true
	}
	if w, ok := redactJSONText(s); ok {
		return w, w != s
	}
	w := redactWords(s)
	return w, w != s
}

// maskKeys masks the keys of x as its string values are masked (redactString): a result
// keyed by credential ({"ghp_…": {"scopes": [...]}}) showed it to every viewer. A key
// masked whole becomes Mask, then Mask#2, … in the order of the keys, so that none is
// lost to another; it reports whether any key changed. The values stay under their keys.
func maskKeys(x map[string]any) bool {
	var hit [][2]string // key, masked
	for k := range x {
		if w, masked := redactString(k); masked {
			hit = append(hit, [2]string{k, w})
		}
	}
	if len(hit) == 0 {
		return false
	}
	slices.SortFunc(hit, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	for _, h := range hit {
		name := h[1]
		for n := 2; ; n++ {
			if _, taken := x[name]; !taken {
				break
			}
			name = fmt.Sprintf("%s#%d", h[1], n)
		}
		x[name] = x[h[0]]
		delete(x, h[0])
	}
	return true
}

// redactJSONText masks s when it is JSON as text (a tool's text content is often a
// compact JSON object: one "word" to redactWords, whose keys and values it cannot see);
// ok is false when s is not JSON.
func redactJSONText(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) {
		return s, false
	}
	v, changed, ok := redactJSON(json.RawMessage(t))
	if !ok {
		return s, false
	}
	if !changed {
		return s, true
	}
	return string(encodeRedacted(v)), true
}

// minSecretWord is the length of the shortest credential LooksSecretValue recognises
// without an auth scheme in front (a Slack token); shorter words are not checked.
const minSecretWord = 15

// redactWords masks the credentials inside prose ("auth failed for ghp_…", "use
// Authorization: Bearer …"): each whitespace-separated word, without surrounding
// punctuation, is judged by LooksSecretValue, as is the value after a "=" or ":" in it
// ("token=sk-…"); a credential-like word of 8+ characters after the word Bearer or
// Basic is masked too.
func redactWords(s string) string {
	if len(s) < 8 {
		return s
	}
	// Copied only from the first change: a text of megabytes that holds no credential
	// costs no copy of itself.
	var b strings.Builder
	changed, prev := false, ""
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		if changed {
			b.WriteString(s[i:j])
		}
		i = j
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		word, start := s[i:j], i
		i = j
		lead := len(word) - len(strings.TrimLeft(word, wordPunct))
		core := strings.TrimRight(word[lead:], wordPunct)
		masked := ""
		switch {
		case core == "":
		case len(core) >= 8 && authScheme(prev) && credentialLike(core):
			masked = Mask
		case len(core) >= minSecretWord && secrets.LooksSecretValue(core):
			masked = Mask
		default:
			// key=value or key:value, the value quoted or not (message="ghp_…").
			if k := strings.LastIndexAny(core, "=:"); k >= 0 {
				v := core[k+1:]
				q := len(v) - len(strings.TrimLeft(v, "\"'`"))
				if len(v)-q >= minSecretWord && secrets.LooksSecretValue(v[q:]) {
					masked = core[:k+1+q] + Mask
				}
			}
			if masked == "" && strings.ContainsAny(core, jsonPunct) {
				masked = redactPieces(core) // compact JSON, whole or cut: {"token":"ghp_…","id":1}
			}
		}
		switch {
		case masked != "":
			if !changed {
				b.WriteString(s[:start])
				changed = true
			}
			b.WriteString(word[:lead] + masked + word[lead+len(core):])
		case changed:
			b.WriteString(word)
		}
		prev = core
	}
	if !changed {
		return s
	}
	return b.String()
}

// jsonPunct separates the values of JSON written without spaces.
const jsonPunct = "\"{}[],:="

// redactPieces is word with each piece between jsonPunct that looks like a credential
// masked, or "" when none does.
func redactPieces(word string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(word); {
		j := i
		for j < len(word) && strings.IndexByte(jsonPunct, word[j]) < 0 {
			j++
		}
		if piece := word[i:j]; len(piece) >= minSecretWord && secrets.LooksSecretValue(piece) {
			b.WriteString(Mask)
			changed = true
		} else {
			b.WriteString(piece)
		}
		if j < len(word) {
			b.WriteByte(word[j])
		}
		i = j + 1
	}
	if !changed {
		return ""
	}
	return b.String()
}

// wordPunct is what may wrap a credential in prose.
const wordPunct = "\"'`()[]{}<>,;.!?"

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func authScheme(w string) bool {
	w = strings.ToLower(w)
	return w == "bearer" || w == "basic"
}

// credentialLike tells a token ("dXNlcjpwYXNz", "abc123def") from a word
// ("authentication", "Settings"): it has a digit, a symbol or an upper-case letter
// after the first character.
func credentialLike(w string) bool {
	for i, c := range w {
		switch {
		case c >= '0' && c <= '9', strings.ContainsRune("-_.+/=~", c), i > 0 && c >= 'A' && c <= 'Z':
			return true
		}
	}
	return false
}

// Cap returns raw when it fits in max bytes; otherwise a JSON string holding its
// first max bytes (cut at a character boundary) and true.
func Cap(raw json.RawMessage, max int) (json.RawMessage, bool) {
	if len(raw) <= max {
		return raw, false
	}
	cut := raw[:max]
	for i := 0; i < utf8.UTFMax && len(cut) > 0; i++ {
		if r, size := utf8.DecodeLastRune(cut); r != utf8.RuneError || size > 1 {
			break
		}
		cut = cut[:len(cut)-1]
	}
	s, _ := json.Marshal(string(cut))
	return s, true
}
