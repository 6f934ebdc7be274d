package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestServerFormNumbersShownAsTyped: a timeout, retries or health interval that is not
// a whole number comes back as typed (not as the default), and one past what a number
// holds is said to be out of range.
func TestServerFormNumbersShownAsTyped(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	f := httpForm("raw-numbers", "http://127.0.0.1:9/mcp")
	f.Del("enabled")
	typed := map[string]string{"timeout_ms": "1.5", "retries": "99999999999999999999", "health_interval_ms": "30000.0"}
	for k, v := range typed {
		f.Set(k, v)
	}
	res := srv.PostForm(t, admin, "/servers", f)
	doc := page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("numbers that do not parse: got %d, want 422", res.StatusCode)
	}
	for k, v := range typed {
		if got := doc.Find("input#"+k).AttrOr("value", ""); got != v {
			t.Errorf("%s box holds %q, want what was typed, %q", k, got, v)
		}
		if doc.Find("input#"+k).AttrOr("aria-invalid", "") != "true" {
			t.Errorf("%s box is not marked invalid", k)
		}
	}
	if msg := doc.Find("[data-testid=error-retries]").Text(); !strings.Contains(msg, "out of range") {
		t.Errorf("retries of 20 digits: error %q, want it to say out of range", msg)
	}
	if msg := doc.Find("[data-testid=error-timeout_ms]").Text(); !strings.Contains(msg, "whole number") {
		t.Errorf("timeout 1.5: error %q, want it to ask for a whole number", msg)
	}
}
