package assistant_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/planner"
)

// unclear is a sentence the built-in reading finds no intent in: it goes to the model.
const unclear = "the thing that predicts rain tomorrow, could it be usable again"

// modelServer answers as a model would (there is no model offline), reading every
// message as a request for help. hold, when set, keeps each request until it is closed.
type modelServer struct {
	mu      sync.Mutex
	asked   int
	arrived chan struct{}
	hold    chan struct{}
}

func (m *modelServer) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked
}

func startModel(t *testing.T, m *modelServer) string {
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
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": `{"intent":"help"}`}}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func withModel(url string) *apptest.Options {
	return &apptest.Options{Config: func(c *app.Config) { c.Planner = planner.NewLLM(url, &planner.LLMOptions{Model: "test"}) }}
}

// One person's messages the model reads are bounded by a rate of their own: past a
// burst they are refused, saying when to try again, while a message the rules read is
// still answered.
func TestModelCallsRateLimitedPerPerson(t *testing.T) {
	t.Parallel()
	m := &modelServer{}
	a := apptest.Start(t, withModel(startModel(t, m)))
	ctx := t.Context()
	guest := a.CreateUser(t, "visitor", auth.RoleGuest, "visitor-password-1")
	p := &auth.Principal{User: guest, Kind: audit.ActorUser}
	const burst = planner.DefaultModelCallBurst
	// Refilled slower than any test runs: the burst ends where it ends on any machine.
	assistant.SetModelRate(a.Assistant, time.Hour, burst)
	for i := range burst {
		r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), "", unclear, 0, 0)
		if err != nil || !strings.Contains(r.Reply, "language model") {
			t.Fatalf("model call %d: %q (%v), want the model's reading", i+1, r.Reply, err)
		}
	}
	r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), "", unclear, 0, 0)
	f, ok := fault.As(err)
	if !ok || f.Kind != fault.KindRateLimited || f.RetryAfter <= 0 || !strings.Contains(f.Message, "try again in") {
		t.Fatalf("model call %d in quick succession: %q (%v), want refused saying when to try again", burst+1, r.Reply, err)
	}
	if n := m.count(); n != burst {
		t.Fatalf("the model was asked %d times, want %d", n, burst)
	}
	if r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), "", "help", 0, 0); err != nil || strings.Contains(r.Reply, "language model") {
		t.Fatalf("a message the rules read, past the model's limit: %q (%v)", r.Reply, err)
	}
	// Another person has their own.
	other := a.CreateUser(t, "visitor2", auth.RoleGuest, "visitor-password-2")
	q := &auth.Principal{User: other, Kind: audit.ActorUser}
	if _, err := a.Assistant.Handle(ctx, q, q.Actor("", ""), "", unclear, 0, 0); err != nil {
		t.Fatalf("another person's model call: %v", err)
	}
}

// Model calls take at most half the replica's turns: with that many waiting on the
// model, another message the model would read is refused as busy at once, and one the
// rules read is answered.
func TestModelCallsBounded(t *testing.T) {
	t.Parallel()
	m := &modelServer{arrived: make(chan struct{}, 16), hold: make(chan struct{})}
	a := apptest.Start(t, withModel(startModel(t, m)))
	ctx := t.Context()
	const slots = planner.DefaultMaxModelCalls // half the replica's assistant.MaxTurns
	var wg sync.WaitGroup
	errs := make(chan error, slots)
	for i := range slots {
		u := a.CreateUser(t, fmt.Sprint("waiter", i), auth.RoleGuest, "waiter-password-1")
		p := &auth.Principal{User: u, Kind: audit.ActorUser}
		wg.Go(func() {
			if _, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), "", unclear, 0, 0); err != nil {
				errs <- err
			}
		})
	}
	for range slots {
		<-m.arrived
	}
	u := a.CreateUser(t, "late", auth.RoleGuest, "late-password-1")
	p := &auth.Principal{User: u, Kind: audit.ActorUser}
	done := make(chan struct{})
	var reply string
	var err error
	go func() {
		reply, err = handle(ctx, a, p, unclear)
		close(done)
	}()
	release := sync.OnceFunc(func() { close(m.hold) })
	defer func() { release(); wg.Wait() }()
	select {
	case <-done:
	case <-m.arrived: // no bound: the model was asked once more
		release()
		<-done
	}
	if f, ok := fault.As(err); !ok || f.Code != "assistant_busy" || !strings.Contains(f.Message, "try again") {
		t.Fatalf("a model call past %d at once: %q (%v), want assistant_busy", slots, reply, err)
	}
	if reply, err := handle(ctx, a, p, "help"); err != nil || strings.Contains(reply, "language model") {
		t.Errorf("a message the rules read while the model's turns are taken: %q (%v)", reply, err)
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a model call held until the model answered: %v", err)
	}
}

func handle(ctx context.Context, a *apptest.App, p *auth.Principal, msg string) (string, error) {
	r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), "", msg, 0, 0)
	return r.Reply, err
}

// A person's plans and messages share one budget of model calls: with the LLM
// planner's gate spent by their plans, the assistant does not ask the model for them.
func TestModelCallsSharedWithPlanner(t *testing.T) {
	t.Parallel()
	m := &modelServer{}
	// Refilled slower than any test runs.
	gate := planner.NewGate(&planner.GateOptions{Refill: time.Hour})
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) {
		c.Planner = planner.NewLLM(startModel(t, m), &planner.LLMOptions{Model: "test", Gate: gate})
	}})
	u := a.CreateUser(t, "planner", auth.RoleGuest, "planner-password-1")
	p := &auth.Principal{User: u, Kind: audit.ActorUser}
	for range planner.DefaultModelCallBurst { // as many plans as the burst allows
		release, err := gate.Enter(u.ID)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	_, err := handle(t.Context(), a, p, unclear)
	if f, ok := fault.As(err); !ok || f.Kind != fault.KindRateLimited || !strings.Contains(f.Message, "messages and plans") {
		t.Fatalf("a message the model would read, the person's model calls spent on plans: %v, want rate limited", err)
	}
	if n := m.count(); n != 0 {
		t.Fatalf("the model was asked %d times, want none", n)
	}
}

// A message whose exception the rules found but not what it is an exception to is not
// handed to the model: its reading would drop the exception. The rules refuse it.
func TestModelNotAskedAboutAnException(t *testing.T) {
	t.Parallel()
	m := &modelServer{}
	a := apptest.Start(t, withModel(startModel(t, m)))
	ctx := t.Context()
	admin := a.CreateUser(t, "ada", auth.RoleAdmin, "ada-password-123")
	p := &auth.Principal{User: admin, Kind: audit.ActorUser}
	r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), "", "the thing that predicts rain, except get_alerts", 0, 0)
	if err != nil || !strings.Contains(r.Reply, "nothing was changed") {
		t.Fatalf("reply %q (%v), want the rules' refusal", r.Reply, err)
	}
	if n := m.count(); n != 0 {
		t.Fatalf("the model was asked %d times, want none", n)
	}
}
