package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// PUT /api/v1/executions/settings whose fields are all null or "" changes nothing: it is
// refused at the body with the fields the route changes (as a body naming none is), and
// neither stores nor audits; a null beside a value still saves the value.
func TestSettingsPatchOfNothingRefused(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	for _, body := range []string{`{"approval_ttl_seconds":null}`, `{"high_separation":""}`,
		`{"approval_ttl_seconds":null,"high_separation":null,"separate_high_approver":null}`} {
		got := admin.Error(http.MethodPut, "/api/v1/executions/settings", body, http.StatusBadRequest, "invalid_input")
		var fields []struct{ Path, Message string }
		if err := json.Unmarshal(got.Error.Details, &fields); err != nil || len(fields) != 1 || fields[0].Path != "body" ||
			!strings.Contains(fields[0].Message, "approval_ttl_seconds, high_separation") {
			t.Errorf("%s: details %s, want the body named with the fields the route changes", body, got.Error.Details)
		}
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'settings.executions'`); n != 0 {
		t.Fatalf("%d settings.executions audit rows after patches of nothing, want 0", n)
	}
	var st struct {
		TTL        int64  `json:"approval_ttl_seconds"`
		Separation string `json:"high_separation"`
	}
	admin.JSON(http.MethodPut, "/api/v1/executions/settings", `{"approval_ttl_seconds":3600,"high_separation":null}`, http.StatusOK, &st)
	if st.TTL != 3600 || st.Separation != "auto" {
		t.Fatalf("a TTL beside a null separation: %+v", st)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'settings.executions'`); n != 1 {
		t.Fatalf("%d settings.executions audit rows, want 1", n)
	}
}
