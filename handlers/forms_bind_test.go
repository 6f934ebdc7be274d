package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/verr"
)

type bindShape struct {
	Name  string          `json:"name"`
	N     int             `json:"n"`
	Flag  *bool           `json:"flag"`
	When  *time.Time      `json:"when"`
	Args  json.RawMessage `json:"args"`
	Items []struct {
		Tool string `json:"tool"`
	} `json:"items"`
}

func bindCtx(body string) echo.Context {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	return echo.New().NewContext(req, httptest.NewRecorder())
}

// bindProblem is the one field error of err, as "path: message".
func bindProblem(err error) string {
	var ve *verr.Error
	if !errors.As(err, &ve) || len(ve.Fields) != 1 {
		return fmt.Sprint(err)
	}
	return ve.Fields[0].Field + ": " + ve.Fields[0].Message
}

// The keys a create lets through are cut out wherever they stand, in any case, and
// only at the top level; what is wrong after them is placed in the body as sent.
func TestBindCreateEchoedKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"id":"7","name":"a"}`, ""},
		{`{"name":"a","ID":"7"}`, ""},
		{`{"id":"7","name":"a","created_at":"x","Updated_At":"y"}`, ""},
		{`{"name":"a","id":1,"n":2,"created_at":{"a":[1]}}`, ""},
		{` { "id" : 7 } `, ""},
		{`{"id":"7","n":"x"}`, "/n: must be a whole number in range (at byte 17)"},
		{`{"id":"7","idd":1}`, "/idd: is not a key of the documented body here: check its spelling; the keys here are name, n, flag, when, args, items"},
		{`{"items":[{"tool":"a","id":1}]}`, "/items/0/id: is not a key"},
		{`{"id":"7","name":"a"} x`, "body: has more after the JSON value"},
		{`{"id":"7","name":"a",`, "body: is not valid JSON (it ends early)"},
	} {
		var v bindShape
		err := bindJSONCreate(bindCtx(tc.body), &v)
		if got := bindProblem(err); tc.want == "" && err != nil || tc.want != "" && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.body, got, tc.want)
		}
		if tc.want == "" && strings.Contains(tc.body, `"name"`) && v.Name != "a" {
			t.Errorf("%s: name %q, want a", tc.body, v.Name)
		}
	}
}

// A change reports the fields given as the shape names them, a key in another case too.
func TestBindChangeGiven(t *testing.T) {
	t.Parallel()
	var v bindShape
	given, err := bindJSONChange(bindCtx(`{"NAME":"a","Flag":null}`), &v)
	if err != nil || !given["name"] || !given["flag"] || len(given) != 2 || v.Name != "a" {
		t.Fatalf("got %v %v %+v", given, err, v)
	}
}

// A wrong value is placed where encoding/json placed it (just past it), and worded
// without Go's names; a null leaves a value as it is; arguments are kept as sent.
func TestBindStrictWording(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"n":"soon"}`, `{"name":5}`, `{"items":[{"tool":"a"},{"tool":[1, 2]}]}`,
		`{"n":1.5}`, `{"flag":"yes"}`, `{"items":{}}`, `[1]`, `{"n": 1e99 }`} {
		var ref bindShape
		var te *json.UnmarshalTypeError
		if !errors.As(json.Unmarshal([]byte(body), &ref), &te) {
			t.Fatalf("%s: encoding/json took it", body)
		}
		var v bindShape
		got := bindProblem(bindJSONStrict(bindCtx(body), &v))
		if want := fmt.Sprintf("(at byte %d)", te.Offset); !strings.HasSuffix(got, want) || strings.Contains(got, "Go") {
			t.Errorf("%s: got %q, want it to end %q", body, got, want)
		}
	}
	for _, body := range []string{`{"name":"a",}`, `{"name":tru}`, `{"name":"a\q"}`, `{"name" "a"}`, `{"n":01}`, `{"n":-}`, `{"name":"a"]`} {
		var ref bindShape
		var se *json.SyntaxError
		if !errors.As(json.NewDecoder(strings.NewReader(body)).Decode(&ref), &se) {
			t.Fatalf("%s: encoding/json took it", body)
		}
		// The same byte as encoding/json for a character out of place; a bad escape or a
		// trailing comma is placed where it starts, not past it.
		var v bindShape
		var at int64
		got := bindProblem(bindJSONStrict(bindCtx(body), &v))
		if _, err := fmt.Sscanf(got, "body: is not valid JSON (at byte %d)", &at); err != nil || at < se.Offset-1 || at > se.Offset {
			t.Errorf("%s: got %q, want at byte %d or the one before", body, got, se.Offset)
		}
	}
	// Keys match as encoding/json matches them: in any case, but not ignoring "_" or "-"
	// (v2's own folding) nor folding letters strings.EqualFold does not (dotless ı, Cyrillic а).
	for body, want := range map[string]string{
		`{"it_ems":[]}`:         "/it_ems: is not a key",
		`{"when":"yesterday"}`:  "/when: must be an RFC 3339 time like 2026-12-06T10:00:00Z",
		`{"when":5}`:            "/when: must be an RFC 3339 time like 2026-12-06T10:00:00Z",
		`{"name":"a"}{}`:        "body: has more after the JSON value: send one JSON value",
		`{"name":"a"`:           "body: is not valid JSON (it ends early)",
		` `:                     "body: is not valid JSON (it ends early)",
		`{"naMe":"a","nаme":1}`: "/nаme: is not a key",
		`{"ıtems":[]}`:          "/ıtems: is not a key",
	} {
		var v bindShape
		if got := bindProblem(bindJSONStrict(bindCtx(body), &v)); !strings.HasPrefix(got, want) {
			t.Errorf("%s: got %q, want %q", body, got, want)
		}
	}
	v := bindShape{Name: "kept", N: 3}
	args := `{"big":"` + strings.Repeat("x", 1<<20) + `"}`
	if err := bindJSONStrict(bindCtx(`{"name":null,"N":null,"args":`+args+`}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.Name != "kept" || v.N != 3 || string(v.Args) != args {
		t.Errorf("got name %q n %d args of %d bytes", v.Name, v.N, len(v.Args))
	}
	if err := bindJSONStrict(bindCtx(`{"args":null}`), &v); err != nil || string(v.Args) != "null" {
		t.Errorf("args null: %v %q", err, v.Args)
	}
}
