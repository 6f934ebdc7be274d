package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkShapes are messages with jsonrpc "2.0" whose "id", "method" or "error" the SDK's
// decoding (jsonrpc2.DecodeMessage) may refuse; TestReadersMatchSDKDecoding checks each
// against it.
var sdkShapes = []string{
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":"s-1","result":{}}`,
	`{"jsonrpc":"2.0","id":null,"result":{}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"2.0"}`,
	`{"jsonrpc":"2.0","id":true,"result":{}}`,
	`{"jsonrpc":"2.0","id":false,"result":{}}`,
	`{"jsonrpc":"2.0","id":{},"result":{}}`,
	`{"jsonrpc":"2.0","id":[],"result":{}}`,
	`{"jsonrpc":"2.0","id":[1],"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"id":true,"result":{}}`,
	`{"jsonrpc":"2.0","id":true,"id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"id":null,"result":{}}`,
	`{"jsonrpc":"2.0","\u0069d":true,"result":{}}`,
	`{"jsonrpc":"2.0","ID":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1e400,"result":{}}`,
	`{"jsonrpc":"2.0","id":-1E400,"result":{}}`,
	`{"jsonrpc":"2.0","id":1e-400,"result":{}}`,
	`{"jsonrpc":"2.0","id":-3e2,"result":{}}`,
	`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
	`{"jsonrpc":"2.0","id":1` + strings.Repeat("0", 200) + `,"result":{}}`,
	`{"jsonrpc":"2.0","id":1` + strings.Repeat("0", 400) + `,"result":{}}`,
	`{"jsonrpc":"2.0","method":"notifications/x"}`,
	`{"jsonrpc":"2.0","method":5}`,
	`{"jsonrpc":"2.0","method":true}`,
	`{"jsonrpc":"2.0","method":{}}`,
	`{"jsonrpc":"2.0","method":["x"]}`,
	`{"jsonrpc":"2.0","method":null}`,
	`{"jsonrpc":"2.0","id":2,"method":null}`,
	`{"jsonrpc":"2.0","method":"x","method":5}`,
	`{"jsonrpc":"2.0","method":5,"method":"x"}`,
	`{"jsonrpc":"2.0","m\u0065thod":5}`,
	`{"jsonrpc":"2.0","method":"x","id":true}`,
	`{"jsonrpc":"2.0","method":"x","id":null}`,
	`{"jsonrpc":"2.0","id":3,"method":"ping","params":5}`,
	`{"jsonrpc":"2.0","method":"x","error":5}`,
	`{"jsonrpc":"2.0","id":1,"error":5}`,
	`{"jsonrpc":"2.0","id":1,"error":"boom"}`,
	`{"jsonrpc":"2.0","id":1,"error":[]}`,
	`{"jsonrpc":"2.0","id":1,"error":true}`,
	`{"jsonrpc":"2.0","id":1,"error":null}`,
	`{"jsonrpc":"2.0","id":1,"error":{}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":{"code":"x"}}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1.5}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1e3}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":9223372036854775808}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":null,"message":null}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":5}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"Code":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1},"error":5}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1},"error":null}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":"x"},"error":{"code":1}}`,
	`{"jsonrpc":"2.0","id":1,"err\u006fr":5}`,
	`{"jsonrpc":"2.0","id":1,"Error":5}`,
	`{"jsonrpc":"2.0","id":1,"result":{"error":5,"id":true,"method":7}}`,
}

// The stdio and SSE readers pass a message exactly when the SDK decodes it: what it
// refuses of an id, a method or an error object ends the session there.
func TestReadersMatchSDKDecoding(t *testing.T) {
	t.Parallel()
	for _, msg := range sdkShapes {
		got := readersAgreeWithSDK(t, msg)
		// Whatever came out instead, the SDK reads.
		if len(got) > 0 {
			data := strings.TrimSuffix(strings.TrimPrefix(string(got), "data: "), "\n\n")
			if _, err := jsonrpc.DecodeMessage([]byte(data)); err != nil {
				t.Errorf("SSE %.80s: the SDK cannot decode what came out, %q: %v", msg, data, err)
			}
		}
	}
}

// readersAgreeWithSDK checks that the stdio and SSE readers pass msg exactly when the
// SDK decodes it, and returns what the SSE reader gave.
func readersAgreeWithSDK(t *testing.T, msg string) []byte {
	t.Helper()
	_, err := jsonrpc.DecodeMessage([]byte(msg))
	sdk := err == nil
	lim, _ := testLimit(1 << 20)
	got, rerr := io.ReadAll(newFrameReader(strings.NewReader(msg+"\n"), lim))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if passed := string(got) == msg+"\n"; passed != sdk {
		t.Errorf("stdio %.80s: passed %v, the SDK decodes it: %v (%v); got %.200q", msg, passed, sdk, err, got)
	}
	got, rerr = io.ReadAll(newEventReader(io.NopCloser(strings.NewReader("data: "+msg+"\n\n")), lim))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if passed := string(got) == "data: "+msg+"\n\n"; passed != sdk {
		t.Errorf("SSE %.80s: passed %v, the SDK decodes it: %v (%v)", msg, passed, sdk, err)
	}
	return got
}

// A response to one of our calls whose "error" the SDK refuses is answered at once with
// an error that says why; one whose id the SDK refuses is not ours to answer.
func TestBadErrorAnswered(t *testing.T) {
	t.Parallel()
	lim, logs := testLimit(1 << 20)
	why := func(id, why string) string {
		return string(lim.errorCode([]byte(id), CodeMalformedResponse,
			"malformed response: srv sent an answer that is not a JSON-RPC message the client can read ("+why+")"))
	}
	const next = `{"jsonrpc":"2.0","id":5,"result":{}}`
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":4,"error":"boom"}`, why("4", `its "error" is not a JSON-RPC error object`)},
		{`{"jsonrpc":"2.0","id":"c-4","error":{"code":"E42","message":"boom"}}`, why(`"c-4"`, `its "error" is not a JSON-RPC error object`)},
		{`{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":{"text":"boom"}}}`, why("4", `its "error" is not a JSON-RPC error object`)},
		{`{"jsonrpc":"2.0","id":1e400,"error":{"code":"x"}}`, ""},
		{`{"jsonrpc":"2.0","id":true,"error":5}`, ""},
	} {
		want := ""
		if tc.want != "" {
			want = tc.want + "\n"
		}
		got, err := io.ReadAll(newFrameReader(strings.NewReader(tc.in+"\n"+next+"\n"), lim))
		if err != nil || string(got) != want+next+"\n" {
			t.Errorf("stdio %s: got %q, %v, want %q and the next message", tc.in, got, err, want)
		}
		if tc.want != "" {
			want = "data: " + tc.want + "\n\n"
		}
		got, err = io.ReadAll(newEventReader(io.NopCloser(strings.NewReader("data: "+tc.in+"\n\n")), lim))
		if err != nil || string(got) != want {
			t.Errorf("SSE %s: got %q, %v, want %q", tc.in, got, err, want)
		}
	}
	if !strings.Contains(logs.String(), `answered_id=4`) {
		t.Errorf("log %q, want the dropped response noted", logs)
	}
	// A JSON body says why too, for the request's id.
	for body, reason := range map[string]string{
		`{"jsonrpc":"2.0","id":42,"error":[1]}`:   `its "error" is not a JSON-RPC error object`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`: `its "id" is not a number, a string or null`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`: `a response without an "id"`,
		`{"jsonrpc":"2.0","method":7,"id":42}`:    `its "method" is not a string`,
	} {
		b := newJSONBody(io.NopCloser(strings.NewReader(body)), lim, -1, func() []byte { return []byte("42") })
		b.answer = true
		got, err := io.ReadAll(b)
		if err != nil || string(got) != why("42", reason) {
			t.Errorf("JSON body %s: got %q, %v, want the error for 42 saying %q", body, got, err, reason)
		}
	}
}

// sdkReadsAll reads what r hands on through the SDK's own stdio reader, as a session
// does, and returns the messages it decoded and the first error other than the end.
func sdkReadsAll(t *testing.T, r io.Reader) ([]jsonrpc.Message, error) {
	t.Helper()
	conn, err := (&mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{}}).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var msgs []jsonrpc.Message
	for {
		msg, err := conn.Read(context.Background())
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, msg)
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// A batch is split into its messages: each one the SDK decodes is passed on alone, a
// response among the rest is answered, the rest is dropped and noted once. The SDK's
// own reader ends the session on a batch with an element it cannot decode, an empty one,
// or (over HTTP) any batch.
func TestReadersSplitBatch(t *testing.T) {
	t.Parallel()
	const (
		resp  = `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
		note  = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`
		resp2 = `{"jsonrpc":"2.0","id":"two","result":{}}`
		next  = `{"jsonrpc":"2.0","id":100,"result":{}}`
	)
	lim0, _ := testLimit(1 << 20)
	bad9 := string(lim0.errorCode([]byte("9"), CodeMalformedResponse,
		`malformed response: srv sent an answer that is not a JSON-RPC message the client can read (its "error" is not a JSON-RPC error object)`))
	for _, tc := range []struct {
		name, in string
		want     []string // the messages that come out, in order, before next
		noted    string   // in the note of what was dropped, "" for none
	}{
		{"a batch of messages", `[` + resp + `,` + note + `]`, []string{resp, note}, ""},
		{"pretty-printed", "[\n  " + resp + ",\n  " + resp2 + "\n]", []string{resp, resp2}, ""},
		{"what the SDK refuses is dropped", `[1,` + resp + `,"x",{},[` + resp2 + `],{"jsonrpc":"2.0","id":true,"result":{}},` + note + `]`,
			[]string{resp, note}, "start=1\n"},
		{"a response refused is answered", `[{"jsonrpc":"2.0","id":9,"error":"boom"},` + resp + `]`, []string{bad9, resp}, `answered_id=9`},
		{"an empty batch", `[ ]`, nil, `start="[ ]"`},
		{"nothing readable", `[null,{"jsonrpc":"1.0","method":"x"}]`, nil, `start=null`},
		{"repeated ids", `[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":7,"method":"ping"},` + note + `,` + note + `]`,
			[]string{`{"jsonrpc":"2.0","id":7,"method":"ping"}`, `{"jsonrpc":"2.0","id":7,"method":"ping"}`, note, note}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, rd := range readers {
				lim, logs := testLimit(1 << 20)
				var want strings.Builder
				for _, m := range tc.want {
					want.WriteString(m + "\n")
				}
				want.WriteString(next + "\n")
				got, err := io.ReadAll(newFrameReader(rd.wrap(strings.NewReader(tc.in+"\n"+next+"\n")), lim))
				if err != nil || string(got) != want.String() {
					t.Errorf("stdio, %s: got\n%.400q, %v, want\n%.400q", rd.name, got, err, want.String())
				}
				if noted := strings.Contains(logs.String(), "not a JSON-RPC message"); noted != (tc.noted != "") ||
					!strings.Contains(logs.String(), tc.noted) {
					t.Errorf("stdio, %s: log %q, want noted %q", rd.name, logs, tc.noted)
				}
				msgs, err := sdkReadsAll(t, newFrameReader(rd.wrap(strings.NewReader(tc.in+"\n"+next+"\n")), lim))
				if err != nil || len(msgs) != len(tc.want)+1 {
					t.Errorf("stdio, %s: the SDK read %d messages, %v; want %d and no error", rd.name, len(msgs), err, len(tc.want)+1)
				}

				lim, _ = testLimit(1 << 20)
				want.Reset()
				for i, m := range tc.want {
					if i == len(tc.want)-1 {
						want.WriteString("id: 0_4\n")
					}
					want.WriteString("data: " + m + "\n\n")
				}
				in := "event: message\nid: 0_4\ndata: " + strings.ReplaceAll(tc.in, "\n", "\ndata: ") + "\n\n"
				got, err = io.ReadAll(newEventReader(io.NopCloser(rd.wrap(strings.NewReader(in))), lim))
				if err != nil || string(got) != want.String() {
					t.Errorf("SSE, %s: got\n%.400q, %v, want\n%.400q", rd.name, got, err, want.String())
				}
			}
		})
	}
	// Before the split, the SDK's reader ended on such batches.
	for _, in := range []string{`[1,` + resp + `]`, `[]`} {
		if _, err := sdkReadsAll(t, strings.NewReader(in+"\n")); err == nil {
			t.Errorf("the SDK read %s without an error: the split is no longer needed", in)
		}
	}
}

// A success answer of application/json without a body (Content-Length 0) reaches the
// SDK as http.NoBody, which it decodes as the call's response and ends the session on:
// it is answered with the malformed-response error for the request's id. Other
// answers without a body stay empty.
func TestCapTransportEmptyJSONAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "0")
		case "/accepted":
			w.WriteHeader(http.StatusAccepted)
			return
		case "/error":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	lim, logs := testLimit(4096)
	hc := &http.Client{Transport: &capTransport{base: http.DefaultTransport, lim: lim}}
	post := func(path string) (*http.Response, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path,
			strings.NewReader(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(got)
	}
	want := string(lim.errorCode([]byte("17"), CodeMalformedResponse,
		"malformed response: srv sent an answer that is not a JSON-RPC message the client can read (not valid JSON)"))
	if resp, got := post("/json"); got != want {
		t.Errorf("200 application/json, Content-Length 0 (%d): got %q, want %q", resp.ContentLength, got, want)
	}
	if !strings.Contains(logs.String(), "answered_id=17") {
		t.Errorf("log %q, want the empty answer noted", logs)
	}
	// The SDK decodes what it now gets.
	if _, err := jsonrpc.DecodeMessage([]byte(want)); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/accepted", "/error"} {
		if resp, got := post(path); got != "" || resp.Body != http.NoBody {
			t.Errorf("%s: got %q, body %T, want it left empty", path, got, resp.Body)
		}
	}
}

// The errors that answer refused responses in a batch are held to the cap in all, and
// the note names only the first of their ids: half a million of them, in a batch of
// 16 MiB, would be ten times its size. A batch in an event of another name than
// "message", which the Streamable HTTP client ignores, is dropped.
func TestSplitBatchBounded(t *testing.T) {
	t.Parallel()
	const max = 64 << 10
	lim, logs := testLimit(max)
	var b strings.Builder
	b.WriteString("[")
	for i := 0; b.Len() < max-100; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"error":1}`, i)
	}
	b.WriteString("]")
	got, err := io.ReadAll(newFrameReader(strings.NewReader(b.String()+"\n"), lim))
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if err != nil || len(got) > max+len(lines) || len(lines) < 100 {
		t.Fatalf("got %d bytes in %d lines, %v; want at most the cap of answers, and many", len(got), len(lines), err)
	}
	for _, l := range lines {
		if _, err := jsonrpc.DecodeMessage([]byte(l)); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
	}
	if _, ids, _ := strings.Cut(logs.String(), "answered_id="); len(ids) > strayShown+16 || !strings.Contains(ids, ",…") {
		t.Errorf("log names %d bytes of ids, want at most %d and the rest left out: %.100q", len(ids), strayShown, ids)
	}

	lim, _ = testLimit(max)
	got, err = io.ReadAll(newEventReader(io.NopCloser(strings.NewReader(
		"event: other\ndata: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n")), lim))
	if want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"; err != nil || string(got) != want {
		t.Errorf("SSE: got %q, %v, want only %q", got, err, want)
	}
}
