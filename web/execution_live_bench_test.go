package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// An execution's page is rendered again on every event of it: once for every viewer
// (the live fragment, its results masked), then once more by each page whose viewer is
// not the requester (GET …/results, masked again). Here a plan of executions.MaxSteps
// steps with results of 200 KiB each (half prose text, half structured JSON), as
// another person than its requester reads it.
//
//	go test ./web -run '^$' -bench 'ExecutionLiveLargeResults' -count=1
func BenchmarkExecutionLiveLargeResults(b *testing.B) {
	srv := webtest.Start(b, nil)
	liveServer(b, srv, "mt", true, "echo")
	srv.App.SetRisk(b, "mt__echo", risk.Low)
	srv.CreateUser(b, "carol", auth.RoleAuditor, "carol-password-1")
	admin := webtest.API{T: b, Srv: srv, C: srv.Login(b, "admin", webtest.AdminPassword)}
	var steps []map[string]any
	for range executions.MaxSteps {
		steps = append(steps, step("mt__echo", map[string]any{"message": "hi"}))
	}
	var ex struct {
		ID string `json:"id"`
	}
	admin.JSON(http.MethodPost, "/api/v1/executions", plan(steps...), 201, &ex)
	webtest.WaitFor(b, 2*time.Minute, func() bool {
		return srv.App.Count(b, `SELECT count(*) FROM executions WHERE id = $1 AND status = 'success'`, ex.ID) == 1
	}, "the execution did not succeed")
	ctx := context.Background()
	if _, err := srv.Pool.Exec(ctx, `UPDATE tool_calls SET result = CASE WHEN position % 2 = 0 THEN $2::jsonb ELSE $3::jsonb END
		WHERE execution_id = $1`, ex.ID, benchTextResult(200<<10), benchStructuredResult(200<<10)); err != nil {
		b.Fatal(err)
	}
	var evID int64
	if err := srv.Pool.QueryRow(ctx, `SELECT max(id) FROM events WHERE topic = $1 AND kind = 'execution.success'`,
		"execution:"+ex.ID).Scan(&evID); err != nil {
		b.Fatal(err)
	}
	evs, err := srv.Bus.Since(ctx, evID-1, []string{"execution:" + ex.ID}, 1)
	if err != nil || len(evs) != 1 {
		b.Fatalf("the success event: %v (%d)", err, len(evs))
	}

	b.Run("fragment", func(b *testing.B) {
		var size int
		for b.Loop() {
			raw, err := srv.Web.RenderLive(ctx, evs[0])
			if err != nil {
				b.Fatal(err)
			}
			size = len(raw)
		}
		b.ReportMetric(float64(size>>10), "KiB/op")
	})
	carol := srv.Login(b, "carol", "carol-password-1")
	b.Run("results-as-other", func(b *testing.B) {
		var size int
		for b.Loop() {
			res := srv.Get(b, carol, "/executions/"+ex.ID+"/results")
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("GET results: %d", res.StatusCode)
			}
			size = len(body)
		}
		b.ReportMetric(float64(size>>10), "KiB/op")
	})
}

// benchTextResult is a step result of about n bytes of log-like prose.
func benchTextResult(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "2025-01-02T03:04:05Z INFO request id=%d user=alice path=/api/v1/items/%d status=200 took=12ms {\"id\":%d,\"name\":\"item %d\"}\n", i, i, i, i)
	}
	raw, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": sb.String()}}, "is_error": false})
	return string(raw)
}

// benchStructuredResult is a step result of about n bytes of structured JSON records.
func benchStructuredResult(n int) string {
	var items []map[string]any
	for size := 0; size < n; size += 120 {
		i := len(items)
		items = append(items, map[string]any{"id": i, "name": fmt.Sprintf("item %d", i), "owner": "alice",
			"url": fmt.Sprintf("https://example.com/items/%d", i), "tags": []string{"a", "b"}})
	}
	raw, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": "listed"}},
		"structured_content": map[string]any{"items": items}, "is_error": false})
	return string(raw)
}
