package planner_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// A key or password written into the --llm-url (a gateway's ?api_key=) is in no error:
// errors reach the people who plan, who are not the operator.
func TestLLMURLCredentialsNotInErrors(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-in-url-77"
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // nothing listens there now: the request fails with a *url.Error
	up := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "upstream is down")
	})
	for name, base := range map[string]string{
		"unreachable, key in the query": downURL + "/v1?api_key=" + secret,
		"unreachable, user info":        strings.Replace(downURL, "://", "://ops:"+secret+"@", 1) + "/v1",
		"unreachable, user name":        strings.Replace(downURL, "://", "://"+secret+"@", 1) + "/v1",
		"answers 502, key in the query": up.URL + "/v1?api_key=" + secret,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := planner.NewLLM(base, &planner.LLMOptions{Model: "m"}).Plan(context.Background(), "do it", llmTools)
			if err == nil {
				t.Fatal("got a plan, want an error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("got error %q, want it without the URL's credentials", err)
			}
			if !strings.Contains(err.Error(), "/v1/chat/completions") {
				t.Errorf("got error %q, want it to name the endpoint", err)
			}
		})
	}
}
