package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A server's structured content with numbers past float64's precision is answered digit
// for digit by the JSON API and by /mcp (it came back as 12345678901234567000 and
// 9007199254740992 when decoded into any on the way).
func TestStructuredContentDigitsServed(t *testing.T) {
	t.Parallel()
	const sc = `{"id":12345678901234567890,"small":9007199254740993,"d":0.1000000000000000055511151231257827}`
	srv := webtest.Start(t, nil)
	hs := srv.LiveServer(t, "num", true)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "big", Description: "Answers with numbers past float64's precision.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, Structured: json.RawMessage(sc)})
	srv.App.Enable(t, "num__big")
	srv.App.SetRisk(t, "num__big", risk.Low)
	token := srv.Token(t, "admin")

	api := webtest.API{T: t, Srv: srv, Bearer: token}
	status, raw := api.Do(http.MethodPost, "/api/v1/tools/call", `{"tool":"num__big","arguments":{}}`)
	if status != http.StatusOK || !bytes.Contains(raw, []byte(`"structured_content":`+sc)) {
		t.Errorf("the JSON API: %d %s, want %s in it", status, raw, sc)
	}

	// What /mcp writes, read off the wire: the client's own decoding is not what is tested.
	wire := &recorder{base: bearerTransport(token)}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "digits", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: wire}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "num__big", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("/mcp: %v %+v", err, res)
	}
	if got := wire.String(); !strings.Contains(got, `"structuredContent":`+sc) {
		t.Errorf("/mcp answered %s, want %s in it", got, sc)
	}
}

// recorder keeps a copy of every response body read through it.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.base.RoundTrip(req)
	if err == nil {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(res.Body, lockedWriter{r}), res.Body}
	}
	return res, err
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

type lockedWriter struct{ r *recorder }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.buf.Write(p)
}
