package jobs_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/jobs"
)

// A stop while the queue starts on a database that takes connections and never
// answers (a black-holed address, no connect_timeout) ends Run at once: River's first
// round trip to the database is bounded by no context of the queue's (Start is given
// one that does not end, so a stop lets running jobs finish), and the stop waited as
// long as the connection did (minutes for TCP to give up; here, for good).
func TestStopWhileTheDatabaseNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@"+ln.Addr().String()+"/none?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the connections end (whatever waits on them fails)
	// before the pool closes.
	t.Cleanup(pool.Close)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	q := jobs.New(pool, nil)
	if err := jobs.Register(q, &signalWorker{ran: make(chan struct{}, 1)}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(conns) > 0
	}, "the queue never connected to the database")
	time.Sleep(100 * time.Millisecond) // its Start waits for the answer
	select {
	case err := <-done:
		t.Fatalf("run returned before its context ended: %v", err)
	default:
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10 s of its context ending, the database never answering")
	}
	if started, _ := q.Started(); started {
		t.Fatal("the queue says it started")
	}
	select {
	case <-q.Attempted():
	default:
		t.Fatal("a stopped run left its first start attempt unreported")
	}
}
