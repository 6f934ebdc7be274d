package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/toolwarden/toolwarden/internal/loglimit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// testLimit is a cap of max bytes for server "srv" whose log goes to the returned buffer.
func testLimit(max int) (msgLimit, *bytes.Buffer) {
	logs := &bytes.Buffer{}
	return msgLimit{max: max, server: "srv", log: slog.New(slog.NewTextHandler(logs, nil))}, logs
}

// pad is n bytes of string content.
func pad(n int) string { return strings.Repeat("x", n) }

// tricky is JSON string content (escaped) holding what a careless scanner would take for
// structure: braces, brackets, quotes, an "id" key, backslashes.
var tricky = func() string {
	b, _ := json.Marshal("} ] { [ \"id\": 13, \"method\": \"x\" \\\" \\ \n\r\t end")
	return string(b[1 : len(b)-1])
}()

// readers are the ways a source may hand out its bytes.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one byte", iotest.OneByteReader},
	{"halves", iotest.HalfReader},
}

func TestScanner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		id       string // the top-level id, "" for none
		response bool
		method   string
	}{
		{"id first", `{"jsonrpc":"2.0","id":7,"result":{}}`, "7", true, ""},
		{"id last, as the TypeScript SDK writes", `{"result":{"content":[{"type":"text","text":"hi"}]},"jsonrpc":"2.0","id":12}`, "12", true, ""},
		{"nested ids are not the id", `{"result":{"id":99,"items":[{"id":5},{"id":"x"}]},"error":{"id":1},"jsonrpc":"2.0","id":3}`, "3", true, ""},
		{"no id", `{"jsonrpc":"2.0","result":{"id":4}}`, "", false, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"id":4}}`, "", false, "notifications/message"},
		{"server request", `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`, "1", false, "sampling/createMessage"},
		{"string id with escapes", `{"id":"a\"b}\\","result":1}`, `"a\"b}\\"`, true, ""},
		{"strings that look like structure", `{"result":{"text":"` + tricky + `","k":"}"},"x":"\"id\":2","id":8}`, "8", true, ""},
		{"id as a value, not a key", `{"result":"id","x":["id",{"id":6}],"id":10}`, "10", true, ""},
		{"escaped key", `{"\u0069d":9,"result":null}`, "9", true, ""},
		{"keys that start like id", `{"ids":[1],"idx":2,"i":3,"id":4,"result":0}`, "4", true, ""},
		{"last id wins", `{"id":1,"result":0,"id":2}`, "2", true, ""},
		{"id null", `{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}`, "", false, ""},
		{"id an object", `{"id":{"n":1},"result":0}`, "", false, ""},
		{"whitespace and CRLF", "{\r\n \"id\" \r\n:\r\n -3e2 ,\t\"result\":[ ]\r\n}", "-3e2", true, ""},
		{"batch", `[{"id":1,"result":0},{"id":2,"result":0}]`, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, step := range []int{len(tc.in), 1, 3} {
				var s scanner
				total, done := 0, false
				for i := 0; i < len(tc.in) && !done; i += step {
					var n int
					n, done = s.feed([]byte(tc.in[i:min(i+step, len(tc.in))]))
					total += n
				}
				if !done || total != len(tc.in) {
					t.Fatalf("step %d: got done %v after %d bytes, want done after %d", step, done, total, len(tc.in))
				}
				id, ok := s.topID()
				if got := string(id); got != tc.id || ok != (tc.id != "") {
					t.Errorf("step %d: got id %q (%v), want %q", step, got, ok, tc.id)
				}
				if _, ok := s.responseID(); ok != tc.response {
					t.Errorf("step %d: got response %v, want %v", step, ok, tc.response)
				}
				if got := string(s.method.bytes()); got != tc.method {
					t.Errorf("step %d: got method %q, want %q", step, got, tc.method)
				}
			}
		})
	}
}

// A bare value at the top level ends at the first byte after it, which is not consumed.
func TestScannerBareValue(t *testing.T) {
	t.Parallel()
	var s scanner
	if n, done := s.feed([]byte("12")); n != 2 || done {
		t.Fatalf("got %d, %v, want 2 bytes and not done", n, done)
	}
	if n, done := s.feed([]byte(" {")); n != 0 || !done {
		t.Fatalf("got %d, %v, want 0 bytes and done", n, done)
	}
}

func TestFrameReader(t *testing.T) {
	t.Parallel()
	const max = 128
	lim, _ := testLimit(max)
	errFor := func(id string) string { return string(lim.errorResponse([]byte(id))) + "\n" }
	badFor := func(id string) string { return malformedFor(lim, id) + "\n" }
	// Every case is followed by a normal message, which must come through after it.
	const next = `{"jsonrpc":"2.0","id":100,"result":{}}`
	for _, tc := range []struct {
		name, in, want, log string
	}{
		{"messages pass", `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/x"}` + "\r\n",
			`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/x"}` + "\n", ""},
		{"whitespace between messages goes", "  \n{\"jsonrpc\":\"2.0\",\"id\":1}\r\n\r\n\t{\"jsonrpc\":\"2.0\",\"id\":2}", "{\"jsonrpc\":\"2.0\",\"id\":1}\n{\"jsonrpc\":\"2.0\",\"id\":2}\n", ""},
		{"a message over several lines stays one", "{\n\"jsonrpc\":\"2.0\",\"id\": 1,\n\"result\": [1,\n2]\n}\n", "{\n\"jsonrpc\":\"2.0\",\"id\": 1,\n\"result\": [1,\n2]\n}\n", ""},
		{"strings that look like structure pass", `{"jsonrpc":"2.0","id":1,"result":"` + tricky + `"}`, `{"jsonrpc":"2.0","id":1,"result":"` + tricky + `"}` + "\n", ""},
		{"exactly the cap passes", `{"jsonrpc":"2.0","id":1,"result":"` + pad(max-36) + `"}`, `{"jsonrpc":"2.0","id":1,"result":"` + pad(max-36) + `"}` + "\n", ""},
		{"one byte over is replaced", `{"jsonrpc":"2.0","id":1,"result":"` + pad(max-35) + `"}`, errFor("1"), "result_too_large"},
		{"response with the id first", `{"jsonrpc":"2.0","id":7,"result":{"text":"` + pad(1000) + `"}}` + "\n", errFor("7"), "result_too_large"},
		{"response with the id last", `{"result":{"content":[{"type":"text","text":"` + pad(1000) + `"}]},"jsonrpc":"2.0","id":12}` + "\r\n",
			errFor("12"), "result_too_large"},
		{"nested ids before the id", `{"result":{"id":99,"items":[{"id":5}],"text":"` + pad(1000) + `"},"jsonrpc":"2.0","id":3}`, errFor("3"), "result_too_large"},
		{"nested ids after the id", `{"jsonrpc":"2.0","id":"q-1","result":{"text":"` + pad(1000) + `","id":99}}`, errFor(`"q-1"`), "result_too_large"},
		{"tricky strings", `{"result":{"text":"` + strings.Repeat(tricky, 30) + `"},"id":8}`, errFor("8"), "result_too_large"},
		{"no id", `{"jsonrpc":"2.0","result":{"text":"` + pad(1000) + `"}}`, "", "dropped"},
		{"id null", `{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"` + pad(1000) + `"}}`, "", "dropped"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + pad(1000) + `"}}`, "", "notifications/message"},
		{"server request", `{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"x":"` + pad(1000) + `"}}`, "", "sampling/createMessage"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"result":"` + pad(1000) + `"}]`, "", "dropped"},
		{"deep nesting", strings.Repeat("[", 5000) + strings.Repeat("]", 5000), "", "dropped"},
		// What the SDK could not decode is dropped, with the rest of its line, and logged.
		{"a banner is dropped whole", "server listening on stdio\n", "", "not a JSON-RPC message"},
		{"a log line in brackets", "[INFO] listening on stdio\n", "", "not a JSON-RPC message"},
		{"braces around no JSON", "{not json}\n", "", "not a JSON-RPC message"},
		{"JSON that is no message", "\"hello\"\n42\ntrue\nnull\n", "", "not a JSON-RPC message"},
		{"a stray closer", "}\n", "", "not a JSON-RPC message"},
		{"a log line in JSON (no jsonrpc key)", `{"level":"info","msg":"listening","id":1}` + "\n", "", "not a JSON-RPC message"},
		{"junk after a message", `{"jsonrpc":"2.0","id":1} and more` + "\n", `{"jsonrpc":"2.0","id":1}` + "\n", "not a JSON-RPC message"},
		{"a banner longer than the cap", pad(10*max) + "\n", "", "not a JSON-RPC message"},
		{"a banner with CRLF", "ready\r\n", "", "not a JSON-RPC message"},
		// A malformed response to one of our calls is answered with an error for its id,
		// so the call fails at once instead of at its timeout.
		{"a malformed response is answered", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}],}}` + "\n",
			badFor("7"), "answered_id=7"},
		{"a malformed response, the id last", `{"jsonrpc":"2.0","result":{"ok":tru},"id":"r-9"} trailing` + "\n", badFor(`"r-9"`), "not a JSON-RPC message"},
		{"a malformed request is only dropped", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{,}}` + "\n", "", "not a JSON-RPC message"},
		{"a malformed response with a malformed id", `{"jsonrpc":"2.0","id":7x,"result":{}}` + "\n", "", "not a JSON-RPC message"},
		{"a malformed response with id null", `{"jsonrpc":"2.0","id":null,"result":{,}}` + "\n", "", "not a JSON-RPC message"},
		{"a malformed log line with an id", `{"level":"info","id":7,"msg":"x",}` + "\n", "", "not a JSON-RPC message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, rd := range readers {
				lim, logs := testLimit(max)
				fr := newFrameReader(rd.wrap(strings.NewReader(tc.in+"\n"+next+"\n")), lim)
				got, err := io.ReadAll(fr)
				if err != nil {
					t.Fatalf("%s: %v", rd.name, err)
				}
				if want := tc.want + next + "\n"; string(got) != want {
					t.Errorf("%s: got\n%.300q\nwant\n%.300q", rd.name, got, want)
				}
				if fr.peak > max+1 {
					t.Errorf("%s: buffer reached %d bytes, want at most %d", rd.name, fr.peak, max+1)
				}
				if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
					t.Errorf("%s: log %q, want it to mention %q", rd.name, logs, tc.log)
				}
			}
		})
	}
}

// malformedFor is the error response that answers a malformed response to call id (raw
// JSON) from server "srv".
func malformedFor(lim msgLimit, id string) string {
	return string(lim.errorCode([]byte(id), CodeMalformedResponse,
		"malformed response: srv sent an answer that is not a JSON-RPC message the client can read (not valid JSON)"))
}

// The replacement is a JSON-RPC error response the SDK decodes for the right call.
func TestErrorResponse(t *testing.T) {
	t.Parallel()
	lim, _ := testLimit(16 << 20)
	var got struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(lim.errorResponse([]byte(`"a\"b"`)), &got); err != nil {
		t.Fatal(err)
	}
	want := "result too large: srv sent more than 16 MiB; raise --max-message-size or ask for less"
	if got.JSONRPC != "2.0" || string(got.ID) != `"a\"b"` || got.Error.Code != CodeResultTooLarge || got.Error.Message != want {
		t.Errorf("got %+v, want id \"a\\\"b\", code %d, message %q", got, CodeResultTooLarge, want)
	}
}

func TestEventReader(t *testing.T) {
	t.Parallel()
	const max = 512
	lim, _ := testLimit(max)
	errEvent := func(fields, id string) string {
		return fields + "data: " + string(lim.errorResponse([]byte(id))) + "\n\n"
	}
	badEvent := func(fields, id string) string { return fields + "data: " + malformedFor(lim, id) + "\n\n" }
	big := pad(2000)
	capped := `{"jsonrpc":"2.0","id":1,"result":"` + pad(max-36) + `"}` // max bytes of JSON
	// max/2 and max/2-1 bytes, joined by the newline: max
	half1, half2 := `{"jsonrpc":"2.0","id":1,"result":["`+pad(max/2-37)+`",`, `"`+pad(max/2-5)+`"]}`
	const next = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":100,\"result\":{}}\n\n"
	for _, tc := range []struct {
		name, in, want, log string
	}{
		{"events pass", "event: message\nid: 0_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1}\n\nretry: 10\n\n", "event: message\nid: 0_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1}\n\nretry: 10\n\n", ""},
		{"comments and unknown fields go", ": ping\nfoo: bar\ndata: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n: alone\n\n", "data: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n", ""},
		{"CRLF lines", "data: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":2}\r\n\r\n", "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":2}\n\n", ""},
		{"a field without a colon", "data\n\n", "data:\n\n", ""},
		{"the endpoint event", "event: endpoint\ndata: /sse?sessionid=X\n\n", "event: endpoint\ndata: /sse?sessionid=X\n\n", ""},
		{"data of the cap passes", "event: message\nid: 1\ndata: " + capped + "\n\n", "event: message\nid: 1\ndata: " + capped + "\n\n", ""},
		{"data of the cap over two lines passes", "data: " + half1 + "\ndata:" + half2 + "\n\n",
			"data: " + half1 + "\ndata:" + half2 + "\n\n", ""},
		// What the SDK could not decode is dropped, and the stream goes on.
		{"data that is not JSON", "event: message\nid: 0_2\ndata: server says hello\n\n", "", "not a JSON-RPC message"},
		{"data without an event name", "data: [INFO] ready\n\n", "", "not a JSON-RPC message"},
		{"braces around no JSON", "data: {not json}\n\n", "", "not a JSON-RPC message"},
		{"JSON that is no message", "data: 42\n\n", "", "not a JSON-RPC message"},
		{"not JSON over two lines", "data: {\"id\":\ndata: }\n\n", "", "not a JSON-RPC message"},
		{"an event of another name", "event: ping\ndata: hi\n\n", "", "not a JSON-RPC message"},
		{"an event without data passes", "id: 0_7\n\n", "id: 0_7\n\n", ""},
		{"one byte over is dropped", "data: " + pad(max+1) + "\n\n", "", "dropped"},
		{"one byte over by the joining newline", "data: " + pad(max/2) + "\ndata: " + pad(max/2) + "\n\n", "", "dropped"},
		{"many empty data lines", strings.Repeat("data:\n", 1000) + "\n", "", "dropped"},
		{"response with the id first", "event: message\nid: 0_5\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":\"" + big + "\"}\n\n",
			errEvent("event: message\nid: 0_5\n", "5"), "result_too_large"},
		{"response with the id last", "data: {\"result\":{\"text\":\"" + big + "\"},\"jsonrpc\":\"2.0\",\"id\":12}\r\n\r\n",
			errEvent("", "12"), "result_too_large"},
		{"nested ids", "data: {\"result\":{\"id\":99,\"t\":\"" + big + "\",\"x\":{\"id\":1}},\"id\":\"s\"}\n\n", errEvent("", `"s"`), "result_too_large"},
		{"tricky strings", "data: {\"result\":\"" + strings.Repeat(tricky, 60) + "\",\"id\":8}\n\n", errEvent("", "8"), "result_too_large"},
		{"fields after the data", "data: {\"id\":6,\"result\":\"" + big + "\"}\nid: 9_9\nevent: message\n\n", errEvent("event: message\nid: 9_9\n", "6"), "result_too_large"},
		{"a message over many data lines", "data: {\"result\":[\n" + strings.Repeat("data: \""+pad(50)+"\",\n", 40) + "data: 1],\ndata: \"id\":4}\n\n",
			errEvent("", "4"), "result_too_large"},
		{"notification", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"m\":\"" + big + "\"}}\n\n", "", "notifications/progress"},
		{"no id", "data: {\"jsonrpc\":\"2.0\",\"result\":\"" + big + "\"}\n\n", "", "dropped"},
		{"a huge id field", "id: " + pad(2000) + "\ndata: {\"id\":3,\"result\":1}\n\n", errEvent("", "3"), "result_too_large"},
		{"a huge comment", ": " + pad(100_000) + "\ndata: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n", "data: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n", ""},
		{"a huge unknown field", "foo: " + pad(100_000) + "\ndata: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n", "data: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n", ""},
		{"a huge field name", pad(100_000) + ": x\ndata: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n", "data: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n", ""},
		// A malformed response to one of our calls is answered with an error for its id.
		{"a malformed response is answered", "event: message\nid: 0_3\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[],}}\n\n",
			badEvent("event: message\nid: 0_3\n", "7"), "answered_id=7"},
		{"a malformed response over two data lines", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{,}}\nid: 0_4\n\n",
			badEvent("id: 0_4\n", "7"), "answered_id=7"},
		{"a malformed response cut short", "data: {\"jsonrpc\":\"2.0\",\"id\":\"s-1\",\"result\":{\"text\":\"x\n\n", badEvent("", `"s-1"`), "not a JSON-RPC message"},
		{"a malformed response with a long id", "data: {\"jsonrpc\":\"2.0\",\"id\":\"" + pad(200) + "\",\"result\":{,}}\n\n", "", "not a JSON-RPC message"},
		{"a malformed notification", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{,}}\n\n", "", "not a JSON-RPC message"},
		{"an id cut short", "data: {\"jsonrpc\":\"2.0\",\"result\":{},\"id\":7\n\n", "", "not a JSON-RPC message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, rd := range readers {
				lim, logs := testLimit(max)
				er := newEventReader(io.NopCloser(rd.wrap(strings.NewReader(tc.in+next))), lim)
				got, err := io.ReadAll(er)
				if err != nil {
					t.Fatalf("%s: %v", rd.name, err)
				}
				if want := tc.want + next; string(got) != want {
					t.Errorf("%s: got\n%.300q\nwant\n%.300q", rd.name, got, want)
				}
				if limit := max + eventSlack + 1; er.peak > limit {
					t.Errorf("%s: buffer reached %d bytes, want at most %d", rd.name, er.peak, limit)
				}
				if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
					t.Errorf("%s: log %q, want it to mention %q", rd.name, logs, tc.log)
				}
			}
		})
	}
}

// The SDK reads a stream up to its end as one more event, even without a blank line.
func TestEventReaderUnterminated(t *testing.T) {
	t.Parallel()
	lim, _ := testLimit(512)
	got, err := io.ReadAll(newEventReader(io.NopCloser(strings.NewReader("data: {\"jsonrpc\":\"2.0\",\"id\":1}")), lim))
	if err != nil || string(got) != "data: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n" {
		t.Errorf("got %q, %v, want the event terminated", got, err)
	}
}

// A carriage return that ends a read buffer ends the line when "\n" follows it, and is
// part of the line when something else does.
func TestEventReaderCRAtBufferEnd(t *testing.T) {
	t.Parallel()
	lim, _ := testLimit(64 << 10)
	const head = `{"jsonrpc":"2.0","id":1,"result":[`
	value := head + strings.Repeat(" ", eventBuffer-len("data: ")-len(head)-1) // the '\r' is the buffer's last byte
	for _, tc := range []struct{ in, want string }{
		{"data: " + value + "\r\ndata: 1]}\n\n", "data: " + value + "\ndata: 1]}\n\n"},
		{"data: " + value + "\r1]}\n\n", "data: " + value + "\r1]}\n\n"},
	} {
		got, err := io.ReadAll(newEventReader(io.NopCloser(strings.NewReader(tc.in)), lim))
		if err != nil || string(got) != tc.want {
			t.Errorf("got %.40q...%q (%d bytes), %v, want ...%q (%d bytes)", got, got[max(0, len(got)-10):], len(got), err,
				tc.want[len(tc.want)-10:], len(tc.want))
		}
	}
}

// counting is a source of n bytes of a JSON response that counts what was read from it
// and whether it was closed.
type counting struct {
	r      io.Reader
	read   int64
	closed bool
}

func newCounting(s string) *counting { return &counting{r: strings.NewReader(s)} }

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *counting) Close() error { c.closed = true; return nil }

func TestJSONBody(t *testing.T) {
	t.Parallel()
	const max = 4096
	lim, _ := testLimit(max)
	reqID := func() []byte { return []byte("42") }
	over := `{"result":{"text":"` + pad(100_000) + `"},"jsonrpc":"2.0","id":7}`
	for _, tc := range []struct {
		name    string
		body    string
		size    int64
		reqID   func() []byte
		want    string
		wantErr bool
		maxRead int64 // the most that may be read from the body
	}{
		{"within the cap", `{"id":1,"result":"` + pad(max-20) + `"}`, -1, reqID, `{"id":1,"result":"` + pad(max-20) + `"}`, false, max},
		{"over the cap: the request's id, the rest unread", over, -1, reqID, string(lim.errorResponse([]byte("42"))), false, max + 1},
		{"declared over the cap: nothing read", over, int64(len(over)), reqID, string(lim.errorResponse([]byte("42"))), false, 0},
		{"over the cap, no request: the response's id", over, -1, nil, string(lim.errorResponse([]byte("7"))), false, int64(len(over))},
		{"over the cap, no id anywhere", `{"result":"` + pad(100_000) + `"}`, -1, nil, "", true, 100_013},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, rd := range readers {
				src := newCounting(tc.body)
				b := newJSONBody(struct {
					io.Reader
					io.Closer
				}{rd.wrap(src), src}, lim, tc.size, tc.reqID)
				got, err := io.ReadAll(b)
				if (err != nil) != tc.wantErr || string(got) != tc.want {
					t.Errorf("%s: got %.100q, %v, want %.100q (error %v)", rd.name, got, err, tc.want, tc.wantErr)
				}
				if src.read > tc.maxRead {
					t.Errorf("%s: read %d bytes of the body, want at most %d", rd.name, src.read, tc.maxRead)
				}
				if b.peak > max+1 {
					t.Errorf("%s: buffer reached %d bytes, want at most %d", rd.name, b.peak, max+1)
				}
			}
		})
	}
}

func TestLimitedBody(t *testing.T) {
	t.Parallel()
	const max = 1000
	lim, _ := testLimit(max)
	for _, n := range []int{max, max + 1, 10 * max} {
		b := &limitedBody{src: io.NopCloser(iotest.HalfReader(strings.NewReader(pad(n)))), lim: lim, left: max + 1}
		got, err := io.ReadAll(b)
		if n <= max && (err != nil || len(got) != n) {
			t.Errorf("%d bytes: got %d, %v, want them all", n, len(got), err)
		}
		if n > max && (err == nil || !strings.Contains(err.Error(), "result too large") || len(got) > max) {
			t.Errorf("%d bytes: got %d, %v, want at most %d and a result too large error", n, len(got), err, max)
		}
	}
}

// capTransport picks the reader by Content-Type, and finds the id of a JSON answer in
// the request it answers.
func TestCapTransport(t *testing.T) {
	t.Parallel()
	const max = 4096
	huge := pad(50_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","result":{"text":%q}}`, huge) // no id: it must come from the request
		case "/sse":
			w.Header().Set("Content-Type", "Text/Event-Stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":%q}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":1}\n\n", huge)
		default:
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, huge)
		}
	}))
	t.Cleanup(srv.Close)
	lim, _ := testLimit(max)
	hc := &http.Client{Transport: &capTransport{base: http.DefaultTransport, lim: lim}}
	get := func(method, path, body string) (string, error) {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		return string(got), err
	}
	if got, err := get(http.MethodPost, "/json", `{"jsonrpc":"2.0","id":"r9","method":"tools/call","params":{}}`); err != nil ||
		got != string(lim.errorResponse([]byte(`"r9"`))) {
		t.Errorf("json: got %.100q, %v, want the error response for the request's id", got, err)
	}
	want := "event: message\ndata: " + string(lim.errorResponse([]byte("3"))) + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":1}\n\n"
	if got, err := get(http.MethodGet, "/sse", ""); err != nil || got != want {
		t.Errorf("sse: got %.200q, %v, want %q", got, err, want)
	}
	if got, err := get(http.MethodGet, "/html", ""); err == nil || len(got) > max {
		t.Errorf("html: got %d bytes, %v, want at most %d and an error", len(got), err, max)
	}
}

// gen is a JSON-RPC response of any size made while it is read: the id last, and a text
// full of what looks like structure.
type gen struct {
	head, tail []byte
	fill       []byte
	left       int64 // filler bytes still to come
}

func newGen(head string, size int64, tail string) *gen {
	unit := []byte(pad(4096) + tricky)
	return &gen{head: []byte(head), tail: []byte(tail), fill: bytes.Repeat(unit, 64<<10/len(unit)+1), left: size}
}

func (g *gen) Read(p []byte) (int, error) {
	switch {
	case len(g.head) > 0:
		n := copy(p, g.head)
		g.head = g.head[n:]
		return n, nil
	case g.left > 0:
		n := copy(p[:min(int64(len(p)), g.left)], g.fill)
		g.left -= int64(n)
		return n, nil
	case len(g.tail) > 0:
		n := copy(p, g.tail)
		g.tail = g.tail[n:]
		return n, nil
	}
	return 0, io.EOF
}

func (g *gen) Close() error { return nil }

// 200 MB through each reader: the answer is the error for the id that came last, and no
// reader ever holds more than the cap plus a small constant.
func TestReadersHoldAtMostTheCap(t *testing.T) {
	t.Parallel()
	const (
		max  = 1 << 20
		size = 200 << 20
	)
	head := `{"result":{"content":[{"type":"text","text":"`
	tail := `"}]},"jsonrpc":"2.0","id":77}`
	lim, _ := testLimit(max)
	want := string(lim.errorResponse([]byte("77")))
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		fr := newFrameReader(newGen(head, size, tail+"\n"), lim)
		got, err := io.ReadAll(fr)
		if err != nil || string(got) != want+"\n" {
			t.Errorf("got %.200q, %v, want %q", got, err, want)
		}
		if fr.peak > max+1 {
			t.Errorf("buffer reached %d bytes, want at most %d", fr.peak, max+1)
		}
	})
	t.Run("sse", func(t *testing.T) {
		t.Parallel()
		er := newEventReader(newGen("event: message\ndata: "+head, size, tail+"\n\n"), lim)
		got, err := io.ReadAll(er)
		if err != nil || string(got) != "event: message\ndata: "+want+"\n\n" {
			t.Errorf("got %.200q, %v, want the event with %q", got, err, want)
		}
		if er.peak > max+eventSlack+1 {
			t.Errorf("buffer reached %d bytes, want at most %d", er.peak, max+eventSlack+1)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		b := newJSONBody(newGen(head, size, tail), lim, -1, nil)
		got, err := io.ReadAll(b)
		if err != nil || string(got) != want {
			t.Errorf("got %.200q, %v, want %q", got, err, want)
		}
		if b.peak > max+1 {
			t.Errorf("buffer reached %d bytes, want at most %d", b.peak, max+1)
		}
	})
}

// A read error from the server's output reaches the SDK once what came before it has.
func TestFrameReaderPassesErrors(t *testing.T) {
	t.Parallel()
	lim, _ := testLimit(128)
	boom := errors.New("boom")
	fr := newFrameReader(io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1}`+"\n"+`{"id":`), iotest.ErrReader(boom)), lim)
	got, err := io.ReadAll(fr)
	if string(got) != "{\"jsonrpc\":\"2.0\",\"id\":1}\n" || !errors.Is(err, boom) {
		t.Errorf("got %q, %v, want the first message, then boom", got, err)
	}
}

// The readers' cost on ordinary traffic (the call targets of docs/architecture.md, Performance): small responses like an echo
// call's, per message, and the throughput on a result near the default cap.
//
//	go test ./services/mcpclient -run '^$' -bench Readers -benchmem
func BenchmarkReaders(b *testing.B) {
	lim, _ := testLimit(DefaultMaxMessageBytes)
	msg := `{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}`
	big := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat(pad(4000)+tricky, 2000) + `"}]}}`
	buf := make([]byte, 32<<10)
	drain := func(r io.Reader) {
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
		}
	}
	// A stdio session's reader lives as long as the session; a stream of messages.
	b.Run("stdio/small", func(b *testing.B) {
		stream := []byte(strings.Repeat(msg+"\n", 1000))
		for b.Loop() {
			drain(newFrameReader(bytes.NewReader(stream), lim))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/msg")
	})
	b.Run("stdio/big", func(b *testing.B) {
		b.SetBytes(int64(len(big)))
		for b.Loop() {
			drain(newFrameReader(strings.NewReader(big+"\n"), lim))
		}
	})
	// Streamable HTTP answers each call with a stream of its own: one reader per message.
	b.Run("sse/small", func(b *testing.B) {
		event := "event: message\nid: 0_1\ndata: " + msg + "\n\n"
		for b.Loop() {
			drain(newEventReader(io.NopCloser(strings.NewReader(event)), lim))
		}
	})
	b.Run("sse/big", func(b *testing.B) {
		event := "event: message\ndata: " + big + "\n\n"
		b.SetBytes(int64(len(event)))
		for b.Loop() {
			drain(newEventReader(io.NopCloser(strings.NewReader(event)), lim))
		}
	})
	b.Run("json/big", func(b *testing.B) {
		b.SetBytes(int64(len(big)))
		for b.Loop() {
			drain(newJSONBody(io.NopCloser(strings.NewReader(big)), lim, -1, nil))
		}
	})
}

// A write to a stdio server that reads nothing ends once its pipe stays full for the
// write wait, with an error saying so, instead of holding the session for ever.
func TestStdinWriteGivesUp(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stdin: stdin, terminate: 100 * time.Millisecond, writeWait: 300 * time.Millisecond}
	defer p.Close()
	chunk := make([]byte, 32<<10)
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := p.Write(chunk); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "has not read its standard input") {
			t.Fatalf("the write ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a server that reads nothing did not give up")
	}
}

// A stderr line is masked before it is cut: a secret that begins just before the cut
// shows no part of itself, in a finished line or one still being written.
func TestStderrMaskedBeforeCut(t *testing.T) {
	const secret = "sk-live-abcdefghijklmnopqrstuvwxyz0123"
	b := newLineBuffer(10, 64)
	b.setRedact(func(s string) string { return strings.ReplaceAll(s, secret, "***") })
	line := strings.Repeat("a", 50) + secret + " and more"
	_, _ = b.Write([]byte(line + "\n" + line))
	for _, l := range b.Lines() {
		if strings.Contains(l, secret[:8]) || len(l) > 64 {
			t.Fatalf("a kept line shows part of the secret or is too long: %q", l)
		}
	}
	if got := b.Lines(); len(got) != 2 || got[0] != strings.Repeat("a", 50)+"*** and more" {
		t.Fatalf("lines: %q", got)
	}
}

// A last line the old process left unfinished is masked with the old secrets when the
// server's settings change (the new masker does not know them), and the next process's
// first line starts a line of its own.
func TestStderrPartialLineMaskedAcrossSettings(t *testing.T) {
	const old = "sk-old-abcdefghijklmnop"
	b := newLineBuffer(10, 200)
	b.setRedact(func(s string) string { return strings.ReplaceAll(s, old, "***") })
	_, _ = b.Write([]byte("bad key " + old))
	b.setRedact(func(s string) string { return strings.ReplaceAll(s, "sk-new-abcdefghijklmnop", "***") })
	_, _ = b.Write([]byte("started\n"))
	got := b.Lines()
	if len(got) != 2 || got[0] != "bad key ***" || got[1] != "started" {
		t.Fatalf("lines: %q; want the old line masked with the old secret, and the new process's own", got)
	}
}

// A message nested deeper than the SDK decodes is dropped as one it cannot read; one
// at the SDK's depth passes.
func TestReadersDropTooDeep(t *testing.T) {
	t.Parallel()
	nested := func(depth int) string {
		return `{"jsonrpc":"2.0","method":"x","params":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	}
	for _, tc := range []struct {
		depth int
		pass  bool
	}{{sdkMaxDepth, true}, {sdkMaxDepth + 1, false}} {
		lim, logs := testLimit(1 << 20)
		want := ""
		if tc.pass {
			want = nested(tc.depth) + "\n"
		}
		got, err := io.ReadAll(newFrameReader(strings.NewReader(nested(tc.depth)+"\n"), lim))
		if err != nil || string(got) != want || tc.pass == strings.Contains(logs.String(), "not a JSON-RPC message") {
			t.Errorf("stdio, depth %d: got %d bytes, %v, log %q", tc.depth, len(got), err, logs)
		}
		if tc.pass {
			want = "data: " + nested(tc.depth) + "\n\n"
		}
		got, err = io.ReadAll(newEventReader(io.NopCloser(strings.NewReader("data: "+nested(tc.depth)+"\n\n")), lim))
		if err != nil || string(got) != want {
			t.Errorf("SSE, depth %d: got %d bytes, %v", tc.depth, len(got), err)
		}
	}
}

// A response nested deeper than the SDK decodes is answered with an error for its call
// that says so, on both readers.
func TestReadersAnswerTooDeep(t *testing.T) {
	t.Parallel()
	lim, _ := testLimit(1 << 20)
	msg := `{"jsonrpc":"2.0","id":3,"result":` + strings.Repeat("[", sdkMaxDepth) + strings.Repeat("]", sdkMaxDepth) + `}`
	want := string(lim.errorCode([]byte("3"), CodeMalformedResponse,
		"malformed response: srv sent an answer that is not a JSON-RPC message the client can read (nested deeper than 1000 levels)"))
	got, err := io.ReadAll(newFrameReader(strings.NewReader(msg+"\n"), lim))
	if err != nil || string(got) != want+"\n" {
		t.Errorf("stdio: got %.300q, %v, want %q", got, err, want)
	}
	got, err = io.ReadAll(newEventReader(io.NopCloser(strings.NewReader("data: "+msg+"\n\n")), lim))
	if err != nil || string(got) != "data: "+want+"\n\n" {
		t.Errorf("SSE: got %.300q, %v, want %q", got, err, want)
	}
}

// What a stdio server writes to standard output that is not a message shows among its
// standard error lines, masked and cut, each line of it; the log has as many as its
// budget allows. A last line without a newline counts too.
func TestStrayOutputNoted(t *testing.T) {
	t.Parallel()
	const secret = "sk-stray-secret-13579"
	lim, logs := testLimit(1 << 20)
	lim.clean = func(s string) string { return strings.ReplaceAll(s, secret, "***") }
	lim.strays = loglimit.New(time.Hour, 2)
	lim.stderr = newLineBuffer(10, 2048)
	lim.stderr.setRedact(lim.clean)
	in := "server listening on stdio with " + secret + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/x"}` + "\n" +
		"[INFO] " + pad(strayShown+100) + secret + "\n" +
		"{oops\n}\n" +
		"last words"
	got, err := io.ReadAll(newFrameReader(iotest.OneByteReader(strings.NewReader(in)), lim))
	if err != nil || string(got) != `{"jsonrpc":"2.0","method":"notifications/x"}`+"\n" {
		t.Fatalf("got %q, %v, want only the notification", got, err)
	}
	lines := lim.stderr.Lines()
	want := []string{
		strayMark + "server listening on stdio with ***",
		strayMark + "[INFO] " + pad(strayShown-len("[INFO] ")) + registry.CutMark,
		strayMark + "{oops }",
		strayMark + "last words",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("stderr lines:\n%q\nwant\n%q", lines, want)
	}
	if n := strings.Count(logs.String(), "not a JSON-RPC message"); n != 2 || strings.Contains(logs.String(), secret) ||
		!strings.Contains(logs.String(), "with ***") {
		t.Fatalf("log: %d lines, want 2 masked:\n%s", n, logs)
	}
}
