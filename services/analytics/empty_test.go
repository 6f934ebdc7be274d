package analytics_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A report of an installation with no calls has its lists empty, [] in JSON as the API
// answers every list (DESIGN §1's {"top_tools":[...],"recommendations":[...]}), not null.
func TestEmptyReportListsAreEmpty(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	r, err := analytics.New(dbtest.New(t)).Report(context.Background(), analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"top_tools", "servers", "users", "slowest", "most_failing", "approval_wait", "pending_longest", "recommendations"} {
		if string(m[k]) != "[]" {
			t.Errorf("%s of an empty report: %s, want []", k, m[k])
		}
	}
}
