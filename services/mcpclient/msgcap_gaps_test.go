package mcpclient

import (
	"io"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/loglimit"
)

// The readers pass a message exactly when the SDK decodes its "jsonrpc": the last one
// given wins, a null leaves the one before, escapes count, any other type fails. Each
// case is checked against the SDK's own decoding, then through the stdio and SSE readers.
func TestReadersRequireVersion2(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0 ","id":1,"result":{}}`,
		`{"jsonrpc":"","id":1,"result":{}}`,
		`{"jsonrpc":2.0,"id":1,"result":{}}`,
		`{"jsonrpc":true,"id":1,"result":{}}`,
		`{"jsonrpc":null,"id":1,"result":{}}`,
		`{"jsonrpc":{"v":"2.0"},"id":1,"result":{}}`,
		`{"jsonrpc":["2.0"],"id":1,"result":{}}`,
		`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"result":{}}`,
		`{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","jsonrpc":null,"id":1,"result":{}}`,
		`{"jsonrpc":"2.0","jsonrpc":3,"id":1,"result":{}}`,
		`{"jsonrpc":"2\u002e0","id":1,"result":{}}`,
		`{"json\u0072pc":"2.0","id":1,"result":{}}`,
		`{"JSONRPC":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"` + pad(300) + `","id":1,"result":{}}`,
		`{"result":{"jsonrpc":"1.0"},"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","method":"notifications/x","params":{"jsonrpc":1}}`,
		`{"jsonrpc":"1.0","method":"notifications/x"}`,
	} {
		readersAgreeWithSDK(t, msg)
	}
}

// A response to one of our calls whose "jsonrpc" is not "2.0" is answered at once, with
// an error that says why.
func TestWrongVersionAnswered(t *testing.T) {
	t.Parallel()
	lim, logs := testLimit(1 << 20)
	want := string(lim.errorCode([]byte("4"), CodeMalformedResponse,
		`malformed response: srv sent an answer that is not a JSON-RPC message the client can read (its "jsonrpc" is not "2.0")`))
	const next = `{"jsonrpc":"2.0","id":5,"result":{}}`
	got, err := io.ReadAll(newFrameReader(strings.NewReader(`{"jsonrpc":"1.0","id":4,"result":{}}`+"\n"+next+"\n"), lim))
	if err != nil || string(got) != want+"\n"+next+"\n" {
		t.Errorf("stdio: got %q, %v, want %q and the next message", got, err, want)
	}
	if !strings.Contains(logs.String(), "answered_id=4") {
		t.Errorf("log %q, want the dropped response noted", logs)
	}
	got, err = io.ReadAll(newEventReader(io.NopCloser(strings.NewReader("data: {\"jsonrpc\":\"1.0\",\"id\":4,\"result\":{}}\n\n")), lim))
	if err != nil || string(got) != "data: "+want+"\n\n" {
		t.Errorf("SSE: got %q, %v, want %q", got, err, want)
	}
}

// A stdio message that a line break leaves where valid JSON cannot go on ends at that
// line: a malformed response is answered at once, and the next line, a message of its
// own, comes through. Messages pretty-printed over several lines stay whole.
func TestFrameReaderLineEndsBrokenMessage(t *testing.T) {
	t.Parallel()
	const max = 128
	const next = `{"jsonrpc":"2.0","id":100,"result":{}}`
	for _, tc := range []struct {
		name, in, want, note string
	}{
		{"a closer missing", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}`, "bad:7", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}`},
		{"a closer missing, the id last", `{"jsonrpc":"2.0","result":{"ok":true},"id":"r-9"`, `bad:"r-9"`, ""},
		{"an opener too many", `{"jsonrpc":"2.0","id":7,"result":{{"a":1}}`, "bad:7", ""},
		{"a string not closed", `{"jsonrpc":"2.0","id":7,"result":{"text":"cut short`, "bad:7", `{"jsonrpc":"2.0","id":7,"result":{"text":"cut short`},
		{"an escape at the line's end", `{"jsonrpc":"2.0","id":7,"result":"a\`, "bad:7", ""},
		{"after a comma in an object", `{"jsonrpc":"2.0","id":7,"result":{"a":1,`, "bad:7", ""},
		{"after a key", `{"jsonrpc":"2.0","id":7,"result":{"a"`, "bad:7", ""},
		{"after an opening brace", `{"jsonrpc":"2.0","id":7,"result":{`, "bad:7", ""},
		{"a notification only dropped", `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":[1]`, "", ""},
		{"a log line in JSON only dropped", `{"level":"info","id":7,"msg":{"x":1}`, "", ""},
		{"over the cap, a string not closed", `{"jsonrpc":"2.0","id":7,"result":"` + pad(1000), "big:7", ""},
		{"pretty-printed passes", "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"result\": {\n    \"a\": [\n      1,\n      {}\n    ]\n  }\n}",
			"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"result\": {\n    \"a\": [\n      1,\n      {}\n    ]\n  }\n}\n", ""},
		{"pretty-printed, CRLF, passes", "{\r\n\"jsonrpc\":\"2.0\",\r\n\"id\":1,\r\n\"result\":\r\n[\r\n]\r\n}",
			"{\r\n\"jsonrpc\":\"2.0\",\r\n\"id\":1,\r\n\"result\":\r\n[\r\n]\r\n}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, rd := range readers {
				lim, logs := testLimit(max)
				lim.stderr = newLineBuffer(10, 2048)
				want := tc.want
				switch {
				case strings.HasPrefix(want, "bad:"):
					want = malformedFor(lim, want[4:]) + "\n"
				case strings.HasPrefix(want, "big:"):
					want = string(lim.errorResponse([]byte(want[4:]))) + "\n"
				}
				fr := newFrameReader(rd.wrap(strings.NewReader(tc.in+"\n"+next+"\n")), lim)
				got, err := io.ReadAll(fr)
				if err != nil {
					t.Fatalf("%s: %v", rd.name, err)
				}
				if want += next + "\n"; string(got) != want {
					t.Errorf("%s: got\n%.300q\nwant\n%.300q", rd.name, got, want)
				}
				if tc.note != "" && !slicesContain(lim.stderr.Lines(), strayMark+tc.note) {
					t.Errorf("%s: stderr %q, want the line noted alone", rd.name, lim.stderr.Lines())
				}
				if (strings.HasPrefix(tc.want, "bad:") || strings.HasPrefix(tc.want, "big:")) && !strings.Contains(logs.String(), "answered") {
					t.Errorf("%s: log %q, want it answered", rd.name, logs)
				}
			}
		})
	}
}

func slicesContain(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// A JSON body answering a call with a success status, which the SDK could not decode
// (and would end the session on), is replaced by the malformed-response error for the
// request's id, or the response's own; an error status's body is left to the SDK.
func TestJSONBodyUnreadable(t *testing.T) {
	t.Parallel()
	const max = 4096
	reqID := func() []byte { return []byte("42") }
	bad := func(lim msgLimit, id, why string) string {
		return string(lim.errorCode([]byte(id), CodeMalformedResponse,
			"malformed response: srv sent an answer that is not a JSON-RPC message the client can read ("+why+")"))
	}
	const good = `{"jsonrpc":"2.0","id":42,"result":{"content":[]}}`
	for _, tc := range []struct {
		name   string
		body   string
		reqID  func() []byte
		answer bool
		want   string // "bad:<id>:<why>" for the malformed error
	}{
		{"a readable body passes", good, reqID, true, good},
		{"pretty-printed passes", "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 42,\n  \"result\": {}\n}\n", reqID, true, "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 42,\n  \"result\": {}\n}\n"},
		{"what follows the message passes, as the SDK ignores it", good + " trailing", reqID, true, good + " trailing"},
		{"not JSON", `{"jsonrpc":"2.0","id":42,"result":{"content":[],}}`, reqID, true, "bad:42:not valid JSON"},
		{"an HTML page", "<html>oops</html>", reqID, true, "bad:42:not valid JSON"},
		{"cut short", `{"jsonrpc":"2.0","id":42,"result":{"content":[`, reqID, true, "bad:42:not valid JSON"},
		{"empty", "", reqID, true, "bad:42:not valid JSON"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":42,"result":{}}`, reqID, true, `bad:42:its "jsonrpc" is not "2.0"`},
		{"no jsonrpc", `{"id":42,"result":{}}`, reqID, true, "bad:42:not valid JSON"},
		{"a batch", `[` + good + `]`, reqID, true, "bad:42:a batch, where one message was due"},
		{"too deep", `{"jsonrpc":"2.0","id":42,"result":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`, reqID, true,
			"bad:42:nested deeper than 1000 levels"},
		{"no request id: the response's", `{"jsonrpc":"2.0","id":"s-1","result":{,}}`, nil, true, `bad:"s-1":not valid JSON`},
		{"no id at all: left to the SDK", `{oops}`, nil, true, `{oops}`},
		{"an error status: left to the SDK", `{"error":"session not found"}`, reqID, false, `{"error":"session not found"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, rd := range readers {
				lim, logs := testLimit(max)
				lim.strays = loglimit.New(1, 100)
				want := tc.want
				if rest, ok := strings.CutPrefix(want, "bad:"); ok {
					id, why, _ := strings.Cut(rest, ":")
					want = bad(lim, id, why)
				}
				b := newJSONBody(io.NopCloser(rd.wrap(strings.NewReader(tc.body))), lim, -1, tc.reqID)
				b.answer = tc.answer
				got, err := io.ReadAll(b)
				if err != nil || string(got) != want {
					t.Errorf("%s: got %.200q, %v, want %.200q", rd.name, got, err, want)
				}
				// What is not passed on is noted, and so is a body left to the SDK for want of an id.
				wantNoted := want != tc.body || tc.reqID == nil && tc.answer
				if noted := strings.Contains(logs.String(), "not a JSON-RPC message"); noted != wantNoted {
					t.Errorf("%s: noted %v, log %q", rd.name, noted, logs)
				}
			}
		})
	}
}
