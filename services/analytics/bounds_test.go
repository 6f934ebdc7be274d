package analytics_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A period is refused, naming the field, when either end lies outside the years 1970 to
// 9999 in UTC: 9999-12-31T20:00:00-05:00 parses, but is in the year 10000, which a
// report's JSON cannot hold. Periods at the edges make reports that encode.
func TestPeriodYears(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		from, to string
		fields   []string
	}{
		{"9999-12-31T20:00:00-05:00", "9999-12-31T23:00:00-05:00", []string{"from", "to"}},
		{"9999-12-31T12:00:00Z", "9999-12-31T23:00:00-05:00", []string{"to"}},
		{"1969-12-31T23:00:00Z", "1970-01-02T00:00:00Z", []string{"from"}},
		{"1970-01-01T04:00:00+05:00", "1970-01-02T00:00:00Z", []string{"from"}},
	} {
		err := analytics.Period{From: at(c.from), To: at(c.to)}.Check()
		var ve *verr.Error
		if !errors.As(err, &ve) {
			t.Errorf("%s to %s: %v, want a field error", c.from, c.to, err)
			continue
		}
		var fields []string
		for _, f := range ve.Fields {
			fields = append(fields, f.Field)
		}
		if !slices.Equal(fields, c.fields) {
			t.Errorf("%s to %s: %v, want %v named", c.from, c.to, err, c.fields)
		}
	}
	ctx := context.Background()
	svc := analytics.New(dbtest.New(t))
	for _, p := range []analytics.Period{
		{From: at("9999-12-30T00:00:00Z"), To: at("9999-12-31T23:59:59Z")},
		{From: at("1970-01-01T00:00:00Z"), To: at("1970-01-03T00:00:00Z")},
	} {
		r, err := svc.Report(ctx, p, time.Now())
		if err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("%v: %v", p, err)
		}
	}
}
