package risk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/risk"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// decideCase is one input of Decide with the level docs/architecture.md (The path of a tool call) gives it.
type decideCase struct {
	name        string
	override    string
	annotations string // "" means nil (no annotations at all)
	trusted     bool
	want        risk.Level
	source      string
}

// decideCases walks every branch of Decide, trusted and untrusted.
var decideCases = []decideCase{
	// An administrator's override wins over everything.
	{"override low beats destructive", "low", `{"destructiveHint":true}`, false, risk.Low, risk.SourceOverride},
	{"override low without annotations", "low", "", false, risk.Low, risk.SourceOverride},
	{"override high beats trusted read-only", "high", `{"readOnlyHint":true}`, true, risk.High, risk.SourceOverride},
	{"override medium beats trusted read-only", "medium", `{"readOnlyHint":true}`, true, risk.Medium, risk.SourceOverride},
	{"override medium on junk annotations", "medium", `[1,2]`, false, risk.Medium, risk.SourceOverride},
	// An override that is not a level is ignored (annotations decide).
	{"invalid override ignored (read-only trusted)", "LOW", `{"readOnlyHint":true}`, true, risk.Low, risk.SourceAnnotations},
	{"invalid override ignored (destructive)", "lowest", `{"destructiveHint":true}`, true, risk.High, risk.SourceAnnotations},
	{"padded override ignored", " low", `{"destructiveHint":true}`, true, risk.High, risk.SourceAnnotations},
	{"capitalised override ignored", "High", `{"readOnlyHint":true}`, false, risk.Medium, risk.SourceAnnotations},
	// readOnlyHint.
	{"trusted read-only", "", `{"readOnlyHint":true}`, true, risk.Low, risk.SourceAnnotations},
	{"untrusted read-only", "", `{"readOnlyHint":true}`, false, risk.Medium, risk.SourceAnnotations},
	{"trusted read-only with spaces", "", `{ "readOnlyHint" :  true }`, true, risk.Low, risk.SourceAnnotations},
	{"trusted read-only and destructive", "", `{"readOnlyHint":true,"destructiveHint":true}`, true, risk.Low, risk.SourceAnnotations},
	{"untrusted read-only and destructive", "", `{"readOnlyHint":true,"destructiveHint":true}`, false, risk.Medium, risk.SourceAnnotations},
	{"trusted read-only duplicate key, last false", "", `{"readOnlyHint":true,"readOnlyHint":false}`, true, risk.High, risk.SourceAnnotations},
	// destructiveHint:false.
	{"trusted non-destructive", "", `{"destructiveHint":false}`, true, risk.Medium, risk.SourceAnnotations},
	{"untrusted non-destructive", "", `{"destructiveHint":false}`, false, risk.Medium, risk.SourceAnnotations},
	{"trusted read-only false, non-destructive", "", `{"readOnlyHint":false,"destructiveHint":false}`, true, risk.Medium, risk.SourceAnnotations},
	{"untrusted read-only false, non-destructive", "", `{"readOnlyHint":false,"destructiveHint":false}`, false, risk.Medium, risk.SourceAnnotations},
	// Destructive, absent or unreadable.
	{"trusted destructive", "", `{"destructiveHint":true}`, true, risk.High, risk.SourceAnnotations},
	{"untrusted destructive", "", `{"destructiveHint":true}`, false, risk.High, risk.SourceAnnotations},
	{"trusted read-only false", "", `{"readOnlyHint":false}`, true, risk.High, risk.SourceAnnotations},
	{"trusted empty annotations", "", `{}`, true, risk.High, risk.SourceAnnotations},
	{"untrusted empty annotations", "", `{}`, false, risk.High, risk.SourceAnnotations},
	{"trusted other hints only", "", `{"idempotentHint":true,"openWorldHint":false,"title":"x"}`, true, risk.High, risk.SourceAnnotations},
	{"trusted no annotations", "", "", true, risk.High, risk.SourceAnnotations},
	{"untrusted no annotations", "", "", false, risk.High, risk.SourceAnnotations},
	{"trusted JSON null", "", `null`, true, risk.High, risk.SourceAnnotations},
	{"trusted array", "", `[{"readOnlyHint":true}]`, true, risk.High, risk.SourceAnnotations},
	{"trusted string", "", `"readOnlyHint"`, true, risk.High, risk.SourceAnnotations},
	{"trusted number", "", `1`, true, risk.High, risk.SourceAnnotations},
	{"trusted boolean", "", `true`, true, risk.High, risk.SourceAnnotations},
	{"trusted not JSON", "", `{readOnlyHint:true}`, true, risk.High, risk.SourceAnnotations},
	{"trusted read-only as string", "", `{"readOnlyHint":"true"}`, true, risk.High, risk.SourceAnnotations},
	{"trusted read-only as number", "", `{"readOnlyHint":1}`, true, risk.High, risk.SourceAnnotations},
	{"trusted read-only null", "", `{"readOnlyHint":null}`, true, risk.High, risk.SourceAnnotations},
	{"trusted read-only object", "", `{"readOnlyHint":{"value":true}}`, true, risk.High, risk.SourceAnnotations},
	{"trusted read-only array", "", `{"readOnlyHint":[true]}`, true, risk.High, risk.SourceAnnotations},
	{"trusted destructive as string", "", `{"destructiveHint":"false"}`, true, risk.High, risk.SourceAnnotations},
	{"trusted destructive as number 0", "", `{"destructiveHint":0}`, true, risk.High, risk.SourceAnnotations},
	{"trusted destructive null", "", `{"destructiveHint":null}`, true, risk.High, risk.SourceAnnotations},
	{"trusted destructive array", "", `{"destructiveHint":[false]}`, true, risk.High, risk.SourceAnnotations},
	{"untrusted destructive null", "", `{"destructiveHint":null}`, false, risk.High, risk.SourceAnnotations},
	{"trusted wrong-case key", "", `{"ReadOnlyHint":true,"destructivehint":false}`, true, risk.High, risk.SourceAnnotations},
	{"trusted read-only string, non-destructive", "", `{"readOnlyHint":"true","destructiveHint":false}`, true, risk.Medium, risk.SourceAnnotations},
	{"trusted escaped key", "", `{"readOnly\u0048int":true}`, true, risk.Low, risk.SourceAnnotations},
	{"trusted nested hint does not count", "", `{"annotations":{"readOnlyHint":true}}`, true, risk.High, risk.SourceAnnotations},
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func TestDecide(t *testing.T) {
	t.Parallel()
	for _, c := range decideCases {
		d := risk.Decide(risk.Input{Override: c.override, Annotations: rawOrNil(c.annotations), Trusted: c.trusted})
		if d.Level != c.want || d.Source != c.source {
			t.Errorf("%s: Decide(override %q, %s, trusted %v) = %s/%s, want %s/%s",
				c.name, c.override, c.annotations, c.trusted, d.Level, d.Source, c.want, c.source)
		}
		if strings.TrimSpace(d.Why) == "" {
			t.Errorf("%s: no explanation", c.name)
		}
		if d.Source == risk.SourceOverride && !strings.Contains(d.Why, d.Level.Label()) {
			t.Errorf("%s: override explanation %q does not name the level", c.name, d.Why)
		}
	}
}

// TestDecideExplains checks that the explanations tell the cases apart: a person reading
// the badge learns why.
func TestDecideExplains(t *testing.T) {
	t.Parallel()
	why := func(ann string, trusted bool) string {
		return risk.Decide(risk.Input{Annotations: rawOrNil(ann), Trusted: trusted}).Why
	}
	if w := why(`{"readOnlyHint":true}`, false); !strings.Contains(w, "not trusted") {
		t.Errorf("untrusted read-only: %q does not say the server is not trusted", w)
	}
	if w := why(`{"readOnlyHint":true}`, true); !strings.Contains(w, "readOnlyHint") {
		t.Errorf("trusted read-only: %q does not name readOnlyHint", w)
	}
	if w := why(`{"destructiveHint":false}`, true); !strings.Contains(w, "destructiveHint") {
		t.Errorf("non-destructive: %q does not name destructiveHint", w)
	}
	if w := why("", true); !strings.Contains(w, "no annotations") {
		t.Errorf("no annotations: %q", w)
	}
	seen := map[string]bool{}
	for _, c := range []struct {
		ann     string
		trusted bool
	}{{`{"readOnlyHint":true}`, true}, {`{"readOnlyHint":true}`, false}, {`{"destructiveHint":false}`, true},
		{`{"destructiveHint":false}`, false}, {`{}`, true}, {"", true}} {
		seen[why(c.ann, c.trusted)] = true
	}
	if len(seen) != 6 {
		t.Errorf("the six branches share explanations: %d distinct", len(seen))
	}
}

func TestMax(t *testing.T) {
	t.Parallel()
	cases := []struct{ a, b, want risk.Level }{
		{risk.Low, risk.Low, risk.Low},
		{risk.Low, risk.Medium, risk.Medium},
		{risk.Medium, risk.Low, risk.Medium},
		{risk.Low, risk.High, risk.High},
		{risk.High, risk.Low, risk.High},
		{risk.Medium, risk.High, risk.High},
		{risk.High, risk.Medium, risk.High},
		{risk.Medium, risk.Medium, risk.Medium},
		{risk.High, risk.High, risk.High},
		// An unknown level ranks below every real one.
		{"", risk.Low, risk.Low},
		{risk.Low, "", risk.Low},
		{"bogus", risk.Medium, risk.Medium},
		{risk.High, "bogus", risk.High},
	}
	for _, c := range cases {
		if got := risk.Max(c.a, c.b); got != c.want {
			t.Errorf("Max(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
	// A plan's risk is its riskiest step.
	plan := risk.Level("")
	for _, l := range []risk.Level{risk.Low, risk.High, risk.Medium, risk.Low} {
		plan = risk.Max(plan, l)
	}
	if plan != risk.High {
		t.Errorf("fold over steps = %q, want high", plan)
	}
}

func TestParseAndLabel(t *testing.T) {
	t.Parallel()
	for _, l := range risk.Levels {
		got, ok := risk.Parse(string(l))
		if !ok || got != l {
			t.Errorf("Parse(%q) = %q, %v", l, got, ok)
		}
	}
	for _, s := range []string{"", "LOW", "Low", " low", "low ", "critical", "none", "med"} {
		if got, ok := risk.Parse(s); ok || got != "" {
			t.Errorf("Parse(%q) = %q, %v, want not ok", s, got, ok)
		}
	}
	labels := map[risk.Level]string{risk.Low: "Low", risk.Medium: "Medium", risk.High: "High", "x": "Unknown", "": "Unknown"}
	for l, want := range labels {
		if got := l.Label(); got != want {
			t.Errorf("%q.Label() = %q, want %q", l, got, want)
		}
	}
	if len(risk.Levels) != 3 || risk.Levels[0] != risk.Low || risk.Levels[2] != risk.High {
		t.Errorf("Levels = %v, want low, medium, high", risk.Levels)
	}
}

// TestSQLAgrees evaluates risk.SQL in PostgreSQL over many combinations of override,
// annotations (as jsonb, including odd values) and trust, and checks each against Decide:
// a list filtered by risk must agree with the risk each tool shows.
func TestSQLAgrees(t *testing.T) {
	t.Parallel()
	overrides := []*string{nil, ptr(""), ptr("low"), ptr("medium"), ptr("high"), ptr("LOW"), ptr("bogus")}
	annotations := []*string{
		nil, // SQL NULL
		ptr(`null`), ptr(`{}`), ptr(`[]`), ptr(`[{"readOnlyHint":true}]`), ptr(`"readOnlyHint"`), ptr(`"true"`),
		ptr(`1`), ptr(`true`), ptr(`false`),
		ptr(`{"readOnlyHint":true}`), ptr(`{"readOnlyHint":false}`), ptr(`{"readOnlyHint":"true"}`),
		ptr(`{"readOnlyHint":null}`), ptr(`{"readOnlyHint":1}`), ptr(`{"readOnlyHint":[true]}`),
		ptr(`{"readOnlyHint":{"x":true}}`),
		ptr(`{"destructiveHint":true}`), ptr(`{"destructiveHint":false}`), ptr(`{"destructiveHint":"false"}`),
		ptr(`{"destructiveHint":null}`), ptr(`{"destructiveHint":0}`), ptr(`{"destructiveHint":[false]}`),
		ptr(`{"readOnlyHint":true,"destructiveHint":true}`), ptr(`{"readOnlyHint":true,"destructiveHint":false}`),
		ptr(`{"readOnlyHint":false,"destructiveHint":false}`), ptr(`{"readOnlyHint":false,"destructiveHint":true}`),
		ptr(`{"readOnlyHint":"true","destructiveHint":false}`), ptr(`{"readOnlyHint":true,"readOnlyHint":false}`),
		ptr(`{"readOnlyHint":false,"readOnlyHint":true}`), ptr(`{"ReadOnlyHint":true}`),
		ptr(`{"readOnly\u0048int":true}`), ptr(`{"annotations":{"readOnlyHint":true}}`),
		ptr(`{"title":"Reads","idempotentHint":true,"openWorldHint":false}`),
	}
	type row struct {
		override    *string
		annotations *string
		trusted     bool
	}
	var rows []row
	for _, o := range overrides {
		for _, a := range annotations {
			for _, tr := range []bool{false, true} {
				rows = append(rows, row{o, a, tr})
			}
		}
	}
	// Every case of TestDecide too (their annotations are valid JSON unless unreadable).
	for _, c := range decideCases {
		if c.annotations != "" && !json.Valid([]byte(c.annotations)) {
			continue
		}
		var a *string
		if c.annotations != "" {
			a = ptr(c.annotations)
		}
		rows = append(rows, row{ptr(c.override), a, c.trusted})
	}

	pool := dbtest.New(t)
	ctx := context.Background()
	var values []string
	var args []any
	for i, r := range rows {
		values = append(values, fmt.Sprintf("(%d, $%d::text, $%d::jsonb, $%d::boolean)", i, 3*i+1, 3*i+2, 3*i+3))
		args = append(args, r.override, r.annotations, r.trusted)
	}
	sql := `SELECT i, ` + risk.SQL("o", "a", "tr") + ` FROM (VALUES ` + strings.Join(values, ", ") + `) AS v(i, o, a, tr) ORDER BY i`
	res, err := pool.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	type result struct {
		I     int
		Level string
	}
	got, err := pgx.CollectRows(res, func(r pgx.CollectableRow) (result, error) {
		var x result
		return x, r.Scan(&x.I, &x.Level)
	})
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	if len(got) != len(rows) || len(rows) < 40 {
		t.Fatalf("got %d results for %d cases", len(got), len(rows))
	}
	// The jsonb text PostgreSQL stores is what Item.Risk sees: decide on it, and on the
	// text as written.
	for _, g := range got {
		r := rows[g.I]
		var stored json.RawMessage
		if r.annotations != nil {
			var s string
			if err := pool.QueryRow(ctx, `SELECT $1::jsonb::text`, *r.annotations).Scan(&s); err != nil {
				t.Fatal(err)
			}
			stored = json.RawMessage(s)
		}
		for _, ann := range []json.RawMessage{stored, rawOrNil(deref(r.annotations))} {
			want := risk.Decide(risk.Input{Override: deref(r.override), Annotations: ann, Trusted: r.trusted})
			if string(want.Level) != g.Level {
				t.Errorf("override %s, annotations %s, trusted %v: SQL says %s, Decide says %s",
					show(r.override), show(r.annotations), r.trusted, g.Level, want.Level)
			}
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func show(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}
