package web_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// List filters repeated many times in one URL are answered with one problem each, and
// a tools cursor holding text PostgreSQL refuses is a bad cursor, not a 500: a 1 MB
// query string of bad statuses or distinct tags cost time in the square of its length.
func TestListFiltersBounded(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := srv.Token(t, "admin")
	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	bad := strings.TrimSuffix(strings.Repeat("x,", 20_000), ",")
	for _, path := range []string{"/api/v1/executions?status=" + bad, "/api/v1/tools?status=" + bad} {
		code, body := get(path)
		if code != http.StatusBadRequest && code != http.StatusUnprocessableEntity || len(body) > 4096 {
			t.Errorf("%.40s…: got %d with %d bytes, want 400 or 422 saying it once", path, code, len(body))
		}
	}
	var tags []string
	for i := range 5_000 {
		tags = append(tags, "t"+strconv.Itoa(i))
	}
	if code, body := get("/api/v1/tools?tag=" + strings.Join(tags, ",")); code != http.StatusBadRequest && code != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "at most 20 tags") {
		t.Errorf("5,000 tags: got %d %.200s, want them refused", code, body)
	}
	cursor := base64.RawURLEncoding.EncodeToString([]byte(`{"s":"name","n":"\u0000","i":"00000000-0000-0000-0000-000000000000","t":"0001-01-01T00:00:00Z"}`))
	if code, body := get("/api/v1/tools?cursor=" + cursor); code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
		t.Errorf("a cursor with a NUL: got %d %.200s, want 400 or 422", code, body)
	}
	// The page shows the one problem, not one a bad value.
	c := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.Get(t, c, "/executions?status="+bad)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if n := strings.Count(string(b), "unknown status"); n != 1 {
		t.Errorf("/executions with 20,000 bad statuses: %d messages, want 1", n)
	}
}
