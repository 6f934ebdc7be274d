package web_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A configuration file's text PostgreSQL cannot store is refused by the dry run too,
// naming the field: the dry run planned it cleanly and the import then failed with a 500.
func TestImportNULTextAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := srv.Token(t, "admin")
	for _, tc := range []struct{ file, field string }{
		{"version: 1\ncategories:\n  - name: ok\n    description: \"a\\0b\"\n", "categories.ok.description"},
		{"version: 1\ntools:\n  - tool: ev__echo\n    state: enabled\n    override: \"a\\0b\"\n", "tools.ev__echo.override"},
	} {
		for _, dry := range []string{"true", "false"} {
			status, body := sendAPI(t, srv, token, http.MethodPost, "/api/v1/import?filename=config.yaml&dry_run="+dry, "application/yaml", tc.file)
			if status != http.StatusBadRequest || !strings.Contains(body, `"`+tc.field+`"`) || !strings.Contains(body, "NUL byte") {
				t.Errorf("dry_run=%s %q: got %d %.400s, want 400 naming %s", dry, tc.file, status, body, tc.field)
			}
		}
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_categories WHERE name = 'ok'`); n != 0 {
		t.Fatalf("got %d categories ok stored, want none", n)
	}
}

// An uploaded file whose name is not text (bytes that are not UTF-8, a NUL, ESC) is
// imported under a cleaned name: the import failed at its audit row, after the preview.
func TestImportUploadFileName(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Login(t, "admin", webtest.AdminPassword)

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	// RFC 2231's filename* carries any bytes: here "cfg\xff\x00\x1b[2J.yaml".
	h.Set("Content-Disposition", "form-data; name=\"file\"; filename*=UTF-8''cfg%FF%00%1B%5B2J.yaml")
	h.Set("Content-Type", "application/yaml")
	fw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte("version: 1\ncategories:\n  - name: uploaded\n"))
	mw.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/servers/import", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := readImportPage(t, res)
	if p.status != http.StatusOK || !p.apply {
		t.Fatalf("preview of the upload: %+v", p)
	}
	res = srv.PostForm(t, c, "/servers/import/apply", map[string][]string{"sealed": {p.sealed}, "digest": {p.digest}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/servers" {
		t.Fatalf("apply: %d to %q, want 303 to /servers", res.StatusCode, res.Header.Get("Location"))
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_categories WHERE name = 'uploaded'`); n != 1 {
		t.Fatal("the upload was not imported")
	}
}
