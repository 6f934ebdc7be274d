package assistant_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/registry"
)

// serverToolsRows records the rows each read of a server's stored tools returned.
type serverToolsRows struct {
	mu   sync.Mutex
	rows []int64
}

type serverToolsSQL struct{}

func (r *serverToolsRows) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "/* registry.ServerTools") {
		return context.WithValue(ctx, serverToolsSQL{}, true)
	}
	return ctx
}

func (r *serverToolsRows) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(serverToolsSQL{}) != nil && d.Err == nil {
		r.mu.Lock()
		r.rows = append(r.rows, d.CommandTag.RowsAffected())
		r.mu.Unlock()
	}
}

func (r *serverToolsRows) take() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rows
	r.rows = nil
	return out
}

// "discover the tools on X" reads one page of the server's stored tools, the ones it
// lists, and their count: a server may store twenty thousand tools with their schemas,
// and reading them all for the MaxChoices shown cost hundreds of megabytes a message.
// The reply is as it was: the count found, the first MaxChoices listed, and how many
// more there were ("number 30" says so).
func TestDiscoverReadsOnlyTheToolsListed(t *testing.T) {
	t.Parallel()
	reads := &serverToolsRows{}
	a := apptest.Start(t, &apptest.Options{Config: func(cfg *app.Config) {
		// The App's own pool, with the same settings, and a tracer.
		pc := cfg.Pool.Config()
		pc.ConnConfig.Tracer = reads
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		cfg.Pool = pool
	}})
	big := a.RegisterServer(t, registry.Spec{Name: "big", Type: registry.TypeStreamableHTTP,
		URL: mcptest.StartHTTP(t, &mcptest.Options{Name: "big", Generated: 2 * assistant.MaxChoices}).URL(), Enabled: true})
	small := a.RegisterServer(t, registry.Spec{Name: "small", Type: registry.TypeStreamableHTTP,
		URL: mcptest.StartHTTP(t, &mcptest.Options{Name: "small"}).URL(), Enabled: true})
	a.Settled(t, toolname.Join("big", "echo"))
	a.Settled(t, toolname.Join("small", "echo"))
	bigTotal, smallTotal := len(toolsOf(t, a, big.ID)), len(toolsOf(t, a, small.ID))
	if bigTotal <= assistant.MaxChoices || smallTotal == 0 || smallTotal > assistant.MaxChoices {
		t.Fatalf("big has %d tools, small %d: want more than %d, and 1 to %d", bigTotal, smallTotal, assistant.MaxChoices, assistant.MaxChoices)
	}

	c := newChat(t, a)
	reads.take()
	r := c.say("discover the tools on big")
	want := fmt.Sprintf("I found %d tools on big (0 new, 0 updated). The first %d are listed; the server's page has them all.",
		bigTotal, assistant.MaxChoices)
	if !strings.HasPrefix(r.Reply, want) {
		t.Errorf("discover the tools on big: %q, want it to begin %q", r.Reply, want)
	}
	if len(r.Choices) != assistant.MaxChoices {
		t.Errorf("discover the tools on big: %d choices, want %d", len(r.Choices), assistant.MaxChoices)
	}
	got := reads.take()
	if len(got) == 0 {
		t.Fatal("no read of the server's tools was seen: the tracer no longer matches the registry's query")
	}
	for _, n := range got {
		// A page reads one row past its end, to know whether there is a next.
		if n > assistant.MaxChoices+1 {
			t.Errorf("a read of big's tools returned %d rows, want at most %d (the ones listed)", n, assistant.MaxChoices+1)
		}
	}
	// The ones not listed are counted: a number past the list says how many there were.
	r = c.say(fmt.Sprintf("tell me about number %d", assistant.MaxChoices+5))
	if more := fmt.Sprintf("The list had %d more that were not shown", bigTotal-assistant.MaxChoices); !strings.Contains(r.Reply, more) {
		t.Errorf("number %d: %q, want %q", assistant.MaxChoices+5, r.Reply, more)
	}

	// A server with fewer tools lists them all, and says nothing of more.
	r = c.say("discover the tools on small")
	if want := fmt.Sprintf("I found %d tools on small (0 new, 0 updated). Say ", smallTotal); !strings.HasPrefix(r.Reply, want) {
		t.Errorf("discover the tools on small: %q, want it to begin %q", r.Reply, want)
	}
	if len(r.Choices) != smallTotal {
		t.Errorf("discover the tools on small: %d choices, want %d", len(r.Choices), smallTotal)
	}
}
