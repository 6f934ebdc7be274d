package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// An expired requestState made for the caller and the call is stale, with its
// execution (retried points the client at it), not a state to throw away and call
// again without; a state for another user stays refused outright. Neither touches the
// executions (the gateway has none here).
func TestExpiredRequestStateIsStale(t *testing.T) {
	t.Parallel()
	keys, err := secrets.NewKeyring(secrets.Key{ID: "k1", Bytes: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{opts: Options{Keys: keys}}
	c := &caller{p: &auth.Principal{User: auth.User{ID: "u1"}}}
	args := json.RawMessage(`{"message":"late"}`)
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "ut__echo", Arguments: args}}
	state := func(user string) string {
		return g.sign(retryState{User: user, Execution: "ex1", Digest: callDigest("ut__echo", args),
			Expires: time.Now().Add(-time.Minute).Unix(), Nonce: "n"})
	}
	req.Params.RequestState = state("u1")
	st, err := g.verifyState(context.Background(), c, req)
	if !errors.Is(err, errStaleState) || st == nil || st.Execution != "ex1" {
		t.Fatalf("an expired state of the caller's: %+v, %v; want stale, naming ex1", st, err)
	}
	req.Params.RequestState = state("u2")
	if st, err := g.verifyState(context.Background(), c, req); !errors.Is(err, errBadState) || st != nil {
		t.Fatalf("another user's expired state: %+v, %v; want refused", st, err)
	}
}
