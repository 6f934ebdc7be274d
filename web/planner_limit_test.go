package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/planner"
)

// planModel stands in for the model: it plans mt__add for every prompt, and when hold is
// set keeps each request until hold is closed.
type planModel struct {
	mu      sync.Mutex
	asked   int
	arrived chan struct{}
	hold    chan struct{}
}

func (m *planModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked
}

func startPlanModel(t *testing.T, m *planModel) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.asked++
		m.mu.Unlock()
		if m.arrived != nil {
			m.arrived <- struct{}{}
		}
		if m.hold != nil {
			<-m.hold
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function",
				"function": map[string]any{"name": "mt__add", "arguments": `{"a":1,"b":2}`}}}}}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// promptPlan posts a prompt as the token's person and returns the status, the
// Retry-After header and the body.
func promptPlan(t *testing.T, srv *webtest.Server, token string) (int, string, string) {
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/executions", strings.NewReader(`{"prompt":"add one and two"}`))
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := srv.Client(t).Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Error(err)
	}
	return res.StatusCode, res.Header.Get("Retry-After"), string(body)
}

// The LLM planner's model calls are bounded as the assistant's are: with as many
// waiting on the model as a replica allows, another prompt is refused as busy at once,
// and nothing is stored for it.
func TestPlannerModelCallsBounded(t *testing.T) {
	t.Parallel()
	m := &planModel{arrived: make(chan struct{}, 16), hold: make(chan struct{})}
	srv := webtest.Start(t, &webtest.Options{Executions: &executions.Options{Planner: planner.NewLLM(startPlanModel(t, m), nil)}})
	srv.LiveServer(t, "mt", true, "add")
	const slots = planner.DefaultMaxModelCalls
	tokens := make([]string, slots+1)
	for i := range tokens {
		name := fmt.Sprint("planner", i)
		srv.CreateUser(t, name, auth.RoleToolUser, "planner-password-1")
		tokens[i] = svToken(t, srv, name)
	}
	before := srv.App.Count(t, `SELECT count(*) FROM executions`)
	var wg sync.WaitGroup
	statuses := make(chan int, slots)
	for i := range slots {
		wg.Go(func() {
			status, _, _ := promptPlan(t, srv, tokens[i])
			statuses <- status
		})
	}
	release := sync.OnceFunc(func() { close(m.hold) })
	defer func() { release(); wg.Wait() }()
	for range slots {
		<-m.arrived
	}
	done := make(chan struct{})
	var status int
	var body string
	go func() {
		status, _, body = promptPlan(t, srv, tokens[slots])
		close(done)
	}()
	select {
	case <-done:
	case <-m.arrived: // no bound: the model was asked once more
		release()
		<-done
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(body, planner.CodeBusy) || !strings.Contains(body, "try again") {
		t.Fatalf("a prompt past %d model calls at once: %d %s, want 503 %s", slots, status, body, planner.CodeBusy)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM executions`); n != before {
		t.Fatalf("executions stored while the model's calls were taken: %d, want %d", n, before)
	}
	release()
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusCreated {
			t.Errorf("a prompt held until the model answered: %d, want 201", s)
		}
	}
}

// One person's prompts the model plans are bounded by a rate of their own: past it a
// prompt is refused with 429 and Retry-After, nothing stored, while another person's
// is still planned.
func TestPlannerModelCallsRateLimitedPerPerson(t *testing.T) {
	t.Parallel()
	m := &planModel{}
	const burst = 3
	// Refilled slower than any test runs: the burst ends where it ends on any machine.
	gate := planner.NewGate(&planner.GateOptions{Burst: burst, Refill: time.Hour})
	srv := webtest.Start(t, &webtest.Options{Executions: &executions.Options{
		Planner: planner.NewLLM(startPlanModel(t, m), &planner.LLMOptions{Gate: gate})}})
	srv.LiveServer(t, "mt", true, "add")
	srv.CreateUser(t, "ann", auth.RoleToolUser, "ann-password-12")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	ann, bob := svToken(t, srv, "ann"), svToken(t, srv, "bob")
	for i := range burst {
		if status, _, body := promptPlan(t, srv, ann); status != http.StatusCreated {
			t.Fatalf("prompt %d: %d %s, want 201", i+1, status, body)
		}
	}
	before := srv.App.Count(t, `SELECT count(*) FROM executions`)
	status, retry, body := promptPlan(t, srv, ann)
	if status != http.StatusTooManyRequests || retry == "" || !strings.Contains(body, "rate_limited") || !strings.Contains(body, "try again in") {
		t.Fatalf("prompt %d in quick succession: %d (Retry-After %q) %s, want 429 rate_limited saying when to try again", burst+1, status, retry, body)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM executions`); n != before {
		t.Fatalf("executions after a refused prompt: %d, want %d", n, before)
	}
	if n := m.count(); n != burst {
		t.Fatalf("the model was asked %d times, want %d", n, burst)
	}
	if status, _, body := promptPlan(t, srv, bob); status != http.StatusCreated {
		t.Fatalf("another person's prompt: %d %s, want 201", status, body)
	}
	// On the page the refusal keeps the form and what was typed.
	res := srv.PostForm(t, srv.Login(t, "ann", "ann-password-12"), "/executions/new", url.Values{"mode": {"prompt"}, "prompt": {"add one and two, please"}})
	d := page(t, res)
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(d.Find("textarea[name=prompt]").Text(), "add one and two, please") ||
		!strings.Contains(d.Text(), "try again in") {
		t.Errorf("the page past the rate: HTTP %d, want 429 with the form, the prompt kept and when to try again", res.StatusCode)
	}
}
