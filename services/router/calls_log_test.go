package router

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/usage"
)

// responseForLog builds a large result's log form without encoding it whole; what it
// keeps, and the length it reports, must be what cutting the whole JSON gives.
func TestResponseForLogAsTheWholeJSON(t *testing.T) {
	words := strings.Repeat("line 42: build finished ok\n", 4000)
	escapes := strings.Repeat("a<b>&c \"q\" back\\slash \n\t\r\b\f \x01 é 😀 \u2028\u2029 ", 3000)
	token := "ghp_" + strings.Repeat("A1b2C3d4E5", 4)
	inner, _ := json.Marshal(map[string]any{"password": "hunter2-hunter2", "items": strings.Fields(words)})
	size := int64(1234)
	huge := strings.Repeat("QUJD", 40000) // one word of 160 KB
	cases := map[string]*Result{
		"small":         {Content: []Content{{Type: "text", Text: "hello " + token}}},
		"words":         {Content: []Content{{Type: "text", Text: "key " + token + " " + words}}},
		"escapes":       {Content: []Content{{Type: "text", Text: escapes}}},
		"json text":     {Content: []Content{{Type: "text", Text: string(inner)}}},
		"one word":      {Content: []Content{{Type: "text", Text: huge}}},
		"no content":    {StructuredContent: json.RawMessage(`{"a":"` + strings.Repeat("é<", 9000) + `","token":"x"}`)},
		"nil and small": {},
		"kinds": {Content: []Content{
			{Type: "image", Data: strings.Repeat("iVBO", 5000), MIMEType: "image/png"},
			{Type: "text", Text: words},
			{Type: "resource_link", URI: "file:///a", Name: "a", Title: "A", Description: "d", MIMEType: "text/plain", Size: &size},
			{Type: "resource", Resource: &Resource{URI: "file:///b", MIMEType: "text/plain", Text: escapes}},
			{Type: "resource", Resource: &Resource{URI: "file:///c", Blob: strings.Repeat("AAAA", 9000)}},
			{Type: "resource"},
		}, StructuredContent: json.RawMessage(`{"n":12345678901234567890,"s":"` + strings.Repeat("x", 20000) + `"}`)},
	}
	for name, res := range cases {
		t.Run(name, func(t *testing.T) {
			whole, _ := json.Marshal(map[string]any{"content": res.Content, "structured_content": res.StructuredContent})
			want, wantCut := whole, 0
			if len(whole) > usage.MaxJSONBytes {
				var cut bool
				if want, cut = usage.ForLog(whole); cut {
					wantCut = len(whole)
				}
			}
			if form, size, ok := logForm(res); !ok || size != len(whole) {
				t.Errorf("logForm: length %d (ok %v), want %d", size, ok, len(whole))
			} else if got := usage.JSONLen(form); res.StructuredContent == nil && got != len(whole) {
				t.Errorf("JSONLen: %d, want %d", got, len(whole))
			}
			got, gotCut := responseForLog(res)
			if !bytes.Equal(got, want) || gotCut != wantCut {
				t.Errorf("got %d bytes (cut from %d), want %d bytes (cut from %d)\ngot  %.300s\nwant %.300s", len(got), gotCut, len(want), wantCut, got, want)
			}
		})
	}
}

// A string that is not valid UTF-8 (its JSON decodes to something else) takes the
// encoding path, with the same outcome.
func TestResponseForLogInvalidUTF8(t *testing.T) {
	res := &Result{Content: []Content{{Type: "text", Text: strings.Repeat("ab\xffcd ", 5000)}}}
	if _, _, ok := logForm(res); ok {
		t.Fatal("logForm took a string that is not UTF-8")
	}
	whole, _ := json.Marshal(map[string]any{"content": res.Content, "structured_content": res.StructuredContent})
	want, _ := usage.ForLog(whole)
	if got, n := responseForLog(res); !bytes.Equal(got, want) || n != len(whole) {
		t.Errorf("got %d bytes (cut from %d), want %d (cut from %d)", len(got), n, len(want), len(whole))
	}
}

// The point of building it: a large text is not copied whole into a log form (encoded
// whole and decoded again, it cost 65 MB of allocations).
func TestResponseForLogAllocates(t *testing.T) {
	res := &Result{Content: []Content{{Type: "text", Text: strings.Repeat("line 42: build finished ok\n", 400000)}}} // 10.8 MB
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, n := responseForLog(res)
	runtime.ReadMemStats(&after)
	if n == 0 || len(resp) > 2*usage.MaxJSONBytes {
		t.Fatalf("got %d bytes, cut from %d: want it cut", len(resp), n)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("allocated %d bytes for a 10.8 MB text, want under 1 MiB", got)
	}
}
