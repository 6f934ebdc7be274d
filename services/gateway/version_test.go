package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A protocol version the SDK does not know is refused on every method, as the
// specification says: 400 with the JSON-RPC error UnsupportedProtocolVersion (-32022)
// whose data names the versions this server speaks and the one asked for, and the
// call's id. It was chosen by comparing strings: "9", "zzz" and "2026-07-28x" sort after
// 2026-07-28 and went to the stateless handler (a GET got 405, a call "missing _meta"),
// and an old unknown one got the SDK's plain-text answer. Without a token it is still
// 401.
func TestUnknownProtocolVersionRefused(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	token := "Bearer " + srv.Token(t, "tina")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`
	for _, version := range []string{"9", "zzz", "2026-07-28x", "2027-01-01", "1999-01-01", "2025-11-25x"} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			body := ""
			if method == http.MethodPost {
				body = call
			}
			res, out := send(t, srv, http.DefaultClient, method, body, map[string]string{"Authorization": token,
				"Mcp-Protocol-Version": version, "Mcp-Session-Id": "no-such-session"})
			what := method + " at " + version
			if res.StatusCode != http.StatusBadRequest || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%s: %d %s %s, want 400 with a JSON-RPC error", what, res.StatusCode, res.Header.Get("Content-Type"), out)
			}
			var got struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code int                                `json:"code"`
					Data mcp.UnsupportedProtocolVersionData `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil || got.JSONRPC != "2.0" || got.Error.Code != mcp.CodeUnsupportedProtocolVersion {
				t.Fatalf("%s: %s (%v), want a JSON-RPC error of code %d", what, out, err, mcp.CodeUnsupportedProtocolVersion)
			}
			if d := got.Error.Data; !slices.Equal(d.Supported, mcp.SupportedProtocolVersions()) || d.Requested != version {
				t.Fatalf("%s: data %+v, want the supported versions %v and the one asked for", what, d, mcp.SupportedProtocolVersions())
			}
			if method != http.MethodPost {
				if string(got.ID) != "null" {
					t.Fatalf("%s: id %s, want null (there is no call)", what, got.ID)
				}
				continue
			}
			// The call's id, so that a go-sdk client reads the refusal as its call's error.
			msg, err := jsonrpc.DecodeMessage([]byte(out))
			r, ok := msg.(*jsonrpc.Response)
			if err != nil || !ok || r.Error == nil {
				t.Fatalf("%s: %s is not a JSON-RPC error response (%v)", what, out, err)
			}
			var jerr *jsonrpc.Error
			if want, _ := jsonrpc.MakeID(float64(7)); r.ID != want || !errors.As(r.Error, &jerr) || jerr.Code != mcp.CodeUnsupportedProtocolVersion {
				t.Fatalf("%s: id %v, error %v; want the call's id 7 and code %d", what, r.ID.Raw(), r.Error, mcp.CodeUnsupportedProtocolVersion)
			}
		}
	}
	res, _ := send(t, srv, http.DefaultClient, http.MethodPost, call, map[string]string{"Mcp-Protocol-Version": "zzz"})
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unknown version without a token: %d, want 401", res.StatusCode)
	}
}
