package assistant_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

type handled struct {
	r   assistant.Reply
	err error
}

// holdModel sends unclear on conversation conv and returns once the model is reading
// it, after checking that the conversation's row is not locked meanwhile: the turn
// asks the model outside its transaction. release lets the model answer.
func holdModel(t *testing.T, a *apptest.App, m *modelServer, p *auth.Principal, conv string) (release func(), done <-chan handled) {
	t.Helper()
	release = sync.OnceFunc(func() { close(m.hold) })
	t.Cleanup(release)
	ch := make(chan handled, 1)
	go func() {
		r, err := a.Assistant.Handle(t.Context(), p, p.Actor("", ""), conv, unclear, 0, 0)
		ch <- handled{r, err}
	}()
	<-m.arrived
	tx, err := a.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	var one int
	if err := tx.QueryRow(t.Context(), `SELECT 1 FROM assistant_conversations WHERE user_id = $1 AND id = $2 FOR UPDATE NOWAIT`,
		p.User.ID, conv).Scan(&one); err != nil {
		t.Fatalf("while the model reads a message, its conversation's row: %v, want it not locked", err)
	}
	return release, ch
}

// A turn waiting on the model holds no lock on its conversation: another message on it
// is answered meanwhile, and the model's reading is still used once it comes.
func TestModelAskedOutsideTheConversationLock(t *testing.T) {
	t.Parallel()
	m := &modelServer{arrived: make(chan struct{}, 4), hold: make(chan struct{})}
	a := apptest.Start(t, withModel(startModel(t, m)))
	ctx := t.Context()
	u := a.CreateUser(t, "reader", auth.RoleGuest, "reader-password-1")
	p := &auth.Principal{User: u, Kind: audit.ActorUser}
	const conv = "c-unlocked"
	if _, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), conv, "help", 0, 0); err != nil {
		t.Fatal(err)
	}
	release, done := holdModel(t, a, m, p, conv)
	if r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), conv, "help", 0, 0); err != nil || strings.Contains(r.Reply, "language model") {
		t.Fatalf("a message on the conversation while the model reads another: %q (%v)", r.Reply, err)
	}
	release()
	if h := <-done; h.err != nil || !strings.Contains(h.r.Reply, "language model") {
		t.Fatalf("the message the model read: %q (%v), want the model's reading", h.r.Reply, h.err)
	}
	if n := m.count(); n != 1 {
		t.Fatalf("the model was asked %d times, want 1", n)
	}
}

// A reading the model gave is not used when, by the time the turn has its conversation,
// the conversation went on to where the model is not asked (a guided set-up another
// message started): the message is read by the set-up's rules, as it would have been.
func TestModelReadingDroppedWhenConversationMovedOn(t *testing.T) {
	t.Parallel()
	m := &modelServer{arrived: make(chan struct{}, 4), hold: make(chan struct{})}
	a := apptest.Start(t, withModel(startModel(t, m)))
	ctx := t.Context()
	u := a.CreateUser(t, "mover", auth.RoleToolManager, "mover-password-1") // may start a set-up
	p := &auth.Principal{User: u, Kind: audit.ActorUser}
	const conv = "c-moved"
	if _, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), conv, "help", 0, 0); err != nil {
		t.Fatal(err)
	}
	release, done := holdModel(t, a, m, p, conv)
	if r, err := a.Assistant.Handle(ctx, p, p.Actor("", ""), conv, "help me set up a new tool", 0, 0); err != nil || !strings.Contains(r.Reply, "set up a new tool") {
		t.Fatalf("starting a set-up while the model reads another message: %q (%v)", r.Reply, err)
	}
	release()
	h := <-done
	if h.err != nil || strings.Contains(h.r.Reply, "language model") {
		t.Fatalf("the message the model read, the conversation now in a set-up: %q (%v), want the set-up's rules' reading", h.r.Reply, h.err)
	}
}
