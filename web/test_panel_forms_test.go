package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// The test panel's editors for a oneOf, nullable values and maps (issue #22), through
// HTTP as a browser without script uses them: every variant is sent and the picker
// says which counts, map rows are added by posting the form, and a submission with
// bad rows comes back as it was typed, with the error under the map.
func TestTestPanelFormEditors(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt", Shapes: true})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "tags", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"tags":{"type":"array","items":{"type":"string"}},"meta":{"type":"object","additionalProperties":{"type":"string"}}}}`)})
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, "shapes", "tags")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	id := toolID(t, srv, "mt__shapes")

	doc := page(t, srv.Get(t, c, "/tools/"+id+"/test"))
	var labels []string
	doc.Find(`select[name="arg/shape/~v"] option`).Each(func(_ int, s *goquery.Selection) { labels = append(labels, s.Text()) })
	if strings.Join(labels, "|") != "Circle|kind: rect" {
		t.Errorf("the shape picker offers %q, want Circle and kind: rect", labels)
	}
	if doc.Find(`input[type=checkbox][name="arg/label/~null"]`).Length() != 1 || doc.Find(`[data-testid="map-add-/tags"]`).Length() != 1 {
		t.Fatal("no null box for label or no Add entry for tags")
	}

	sent := url.Values{"mode": {"form"}, "arg/shape/~v": {"1"}, "arg/shape/~v0/radius": {"5"},
		"arg/shape/~v1/width": {"2"}, "arg/shape/~v1/height": {"3"}, "arg/label/~null": {"1"}, "arg/label": {"behind null"}}
	for i := range 2 {
		sent.Set("_edit", "addrow:/tags")
		ws := testPost(t, srv, c, id, sent)
		if got := ws.Find(`[data-testid="field-/tags"] li.form-row`).Length(); got != i+1 {
			t.Fatalf("after Add entry %d: %d rows, want %d", i+1, got, i+1)
		}
		if ws.Find(`input[name="arg/shape/~v1/width"]`).AttrOr("value", "") != "2" || ws.Find(`select[name="arg/shape/~v"] option[selected]`).Text() != "kind: rect" {
			t.Fatal("adding a row lost the shape")
		}
		sent.Set("arg/tags", ws.Find(`input[type=hidden][name="arg/tags"]`).AttrOr("value", ""))
	}
	sent.Del("_edit")
	sent.Set("_action", "run")
	sent.Set("arg/tags/0/~key", "a")
	sent.Set("arg/tags/0", "1")
	sent.Set("arg/tags/1/~key", "a")
	sent.Set("arg/tags/1", "2")
	ws := testPost(t, srv, c, id, sent)
	if got := ws.Find(`[data-testid="error-/tags"]`).Text(); got != `row 2: the key "a" is already used in row 1` {
		t.Errorf("the map's error reads %q, want the repeated key named", got)
	}
	if ws.Find(`[data-testid="test-result"]`).Length() != 0 {
		t.Error("a form with a repeated key was run")
	}
	if ws.Find(`input[name="arg/tags/1/~key"]`).AttrOr("value", "") != "a" || ws.Find(`input[name="arg/tags/1"]`).AttrOr("value", "") != "2" {
		t.Error("the refused row was not shown again as typed")
	}
	if _, checked := ws.Find(`input[name="arg/label/~null"]`).Attr("checked"); !checked || ws.Find(`input[name="arg/label"]`).AttrOr("value", "") != "behind null" {
		t.Error("the null box or the text behind it was lost")
	}

	sent.Set("arg/tags/1/~key", "b")
	ws = testPost(t, srv, c, id, sent)
	if got := ws.Find(`[data-testid="test-result"]`).AttrOr("data-status", ""); got != "success" {
		t.Fatalf("status %q, want success: %s", got, ws.Find("#test-workspace").Text())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(ws.Find(`[data-testid="output-0"]`).Text()), &got); err != nil {
		t.Fatalf("output %q: %v", ws.Find(`[data-testid="output-0"]`).Text(), err)
	}
	want := map[string]any{"shape": map[string]any{"kind": "rect", "width": 2.0, "height": 3.0}, "label": nil, "tags": map[string]any{"a": "1", "b": "2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the tool received %v, want %v", got, want)
	}

	// Remove the first row: the second moves up.
	sent.Set("_edit", "removerow:/tags/0")
	ws = testPost(t, srv, c, id, sent)
	if ws.Find(`input[name="arg/tags/0/~key"]`).AttrOr("value", "") != "b" || ws.Find(`input[name="arg/tags/1/~key"]`).Length() != 0 {
		t.Error("removing row 1 did not leave row b alone")
	}
	// Add item on an array shows the new item, and keeps a map row the arguments cannot hold.
	tags := toolID(t, srv, "mt__tags")
	ws = testPost(t, srv, c, tags, url.Values{"mode": {"form"}, "_edit": {"add:/tags"},
		"arg/meta/0/~key": {""}, "arg/meta/0": {"no key yet"}})
	if ws.Find(`input[name="arg/tags/0"]`).Length() != 1 || ws.Find(`input[name="arg/meta/0"]`).AttrOr("value", "") != "no key yet" {
		t.Errorf("after Add item: got the new item %d times and the keyless row %q, want both",
			ws.Find(`input[name="arg/tags/0"]`).Length(), ws.Find(`input[name="arg/meta/0"]`).AttrOr("value", ""))
	}
	if res := srv.PostFormHeaders(t, c, "/tools/"+id+"/test", url.Values{"mode": {"form"}, "_edit": {"removerow:/tags/9"}}, map[string]string{"HX-Request": "true"}); res.StatusCode != http.StatusOK {
		t.Errorf("a bad row edit: got %d, want the panel with the error", res.StatusCode)
	}
}

// What the form could not read is never dropped nor moved: adding or removing an
// array item, switching to JSON, or running, with an item that is not a number comes
// back as sent, each item in its place, with the error at that one.
func TestTestPanelEditsKeepUnreadValues(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "nums", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"nums":{"type":"array","items":{"type":"number"}}}}`)})
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, "nums")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	id := toolID(t, srv, "mt__nums")
	sent := url.Values{"mode": {"form"}, "arg/nums": {"3"}, "arg/nums/0": {"5"}, "arg/nums/1": {"five"}, "arg/nums/2": {"7"}}
	// shown posts the form as sent with edit and returns what the form shows then.
	shown := func(edit url.Values) (string, *goquery.Document) {
		v := url.Values{}
		for _, from := range []url.Values{sent, edit} {
			for k, x := range from {
				v[k] = x
			}
		}
		ws := testPost(t, srv, c, id, v)
		var got []string
		for i := range 4 {
			if in := ws.Find(`input[name="arg/nums/` + strconv.Itoa(i) + `"]`); in.Length() == 1 {
				got = append(got, in.AttrOr("value", ""))
			}
		}
		return strings.Join(got, ","), ws
	}
	// Removing an item: the one that could not be read, or another, from the form as sent.
	for _, tc := range []struct{ remove, want string }{{"/nums/1", "5,7"}, {"/nums/0", "five,7"}} {
		if got, _ := shown(url.Values{"_edit": {"remove:" + tc.remove}}); got != tc.want {
			t.Errorf("remove %s from 5, five, 7: the form shows %q, want %s", tc.remove, got, tc.want)
		}
	}
	for _, edit := range []url.Values{{"_edit": {"add:/nums"}}, {"_action": {"mode:json"}}, {"_action": {"run"}}} {
		got, ws := shown(edit)
		if got != "5,five,7" || !strings.Contains(ws.Text(), "is not a number") {
			t.Errorf("%v with an item that is not a number: the form shows %q (error shown: %v), want 5, five, 7 and the error",
				edit, got, strings.Contains(ws.Text(), "is not a number"))
		}
	}
}
