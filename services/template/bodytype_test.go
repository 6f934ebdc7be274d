package template_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/template"
)

// httpTool is a template of one POST tool with properties p and m and the http keys given.
func httpTool(keys string) string {
	return "tools:\n  - name: t\n    input_schema: {type: object, properties: {p: {type: string}, m: {type: string}}}\n" +
		"    http:\n      method: POST\n      url: \"https://example.com/\"\n" + keys
}

// A mapping body is sent only as JSON and a form only as a form: under another
// Content-Type a JSON string's "&role=admin" would be a form field to the server. A
// text body whose written text reads as JSON is refused whatever comes before it.
func TestBodyContentType(t *testing.T) {
	t.Parallel()
	for keys, want := range map[string]string{
		"      headers: {Content-Type: application/x-www-form-urlencoded}\n      body: {q: \"{p}\"}\n": "line 7: the body is a mapping, sent as JSON",
		"      headers: {content-type: text/plain}\n      body: {q: \"{p}\"}\n":                        "line 7: the body is a mapping, sent as JSON",
		"      headers: {Content-Type: multipart/form-data}\n      body: [\"{p}\"]\n":                  "line 7: the body is a mapping, sent as JSON",
		"      headers: {Content-Type: application/json}\n      form: {q: \"{p}\"}\n":                  "line 7: form: is sent as application/x-www-form-urlencoded",
		"      body: \"{p}{\\\"a\\\": \\\"{m}\\\"}\"\n":                                                "line 7: a body written as text with placeholders is sent as it is, and this one looks like JSON",
		"      body: \"{p} <user>{m}</user>\"\n":                                                       "line 7: a body written as text with placeholders is sent as it is, and this one looks like JSON or XML",
	} {
		_, err := template.Parse(httpTool(keys))
		var te *template.Error
		if !errors.As(err, &te) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", keys, err, want)
		}
	}
	for _, keys := range []string{
		"      body: {q: \"{p}\"}\n",
		"      headers: {Content-Type: application/json}\n      body: {q: \"{p}\"}\n",
		"      headers: {Content-Type: \"Application/JSON; charset=utf-8\"}\n      body: {q: \"{p}\"}\n",
		"      headers: {Content-Type: application/merge-patch+json}\n      body: {q: \"{p}\"}\n",
		"      headers: {Content-Type: application/vnd.api+json}\n      body: [\"{p}\"]\n",
		"      form: {q: \"{p}\"}\n",
		"      headers: {Content-Type: \"application/x-www-form-urlencoded; charset=utf-8\"}\n      form: {q: \"{p}\"}\n",
		"      body: \"[{p}] {m}\"\n",
		"      body: \"{p}: {m}\"\n",
	} {
		if _, err := template.Parse(httpTool(keys)); err != nil {
			t.Errorf("%s: %v", keys, err)
		}
	}
}

// A body key is sent as its text reads: "{{" is a literal "{", as in values.
func TestJSONBodyKeyBraces(t *testing.T) {
	t.Parallel()
	rc := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(rc.handler))
	defer srv.Close()
	tpl := mustParse(t, fmt.Sprintf(`tools:
  - name: k
    input_schema: {type: object, properties: {q: {type: string}}}
    http: {method: POST, url: "%s/", body: {"{{lit}": "{{v} {q}", "{ x }": 1}}
`, srv.URL))
	if res := call(t, tpl, "k", map[string]any{"q": "x"}); res.IsError {
		t.Fatalf("got %+v", res)
	}
	var body map[string]any
	if s := rc.take(t); json.Unmarshal([]byte(s.Body), &body) != nil || body["{lit}"] != "{v} x" || body["{ x }"] != float64(1) || len(body) != 2 {
		t.Fatalf("the server saw %s", s.Body)
	}
	// "{{a" and "{a" are the same key once read.
	_, err := template.Parse(`tools:
  - name: k
    http: {method: POST, url: "https://example.com/", body: {"{{a": 1, "{a": 2}}
`)
	if err == nil || !strings.Contains(err.Error(), `body key "{a" appears twice`) {
		t.Fatalf("got %v", err)
	}
}
