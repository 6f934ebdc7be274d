package app_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// A replica shutting down says so before its listener closes: from then on the other
// replicas no longer forward its terminals and test runs to it (GetByID: gone), nor
// count it among those still serving (Others), while it is still alive for them
// (Alive), so the executions it is finishing are not taken for orphaned. It said
// nothing until its row went, minutes later at worst, and forwards met a closed port.
func TestStopSaysLeavingBeforeComponentsStop(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{NoStart: true})
	bg := context.Background()
	other := replicas.New(a.Pool, replicas.Options{Name: "other"})
	if err := other.Join(bg); err != nil {
		t.Fatal(err)
	}
	self := a.Replicas.Self().ID
	// Started last, the probe is the first component told to stop.
	seen := make(chan error, 1)
	a.AddComponent(app.Component{Name: "probe", Run: func(ctx context.Context) error {
		<-ctx.Done()
		_, err := other.GetByID(bg, self)
		n, nerr := other.Others(bg) // this one, leaving, is not counted; other is itself
		switch {
		case !errors.Is(err, replicas.ErrGone):
			seen <- fmt.Errorf("while its components stop, the replica is found for forwarding: %v", err)
		case !other.Alive(bg, self):
			seen <- errors.New("while its components stop, the replica is taken for dead")
		case nerr != nil || n != 0:
			seen <- fmt.Errorf("while its components stop, the other replica counts %d others (%v), want 0", n, nerr)
		default:
			seen <- nil
		}
		return nil
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ready := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx, ln, func() { close(ready) }) }()
	<-ready
	if _, err := other.GetByID(bg, self); err != nil {
		t.Fatalf("running, the replica is not found: %v", err)
	}
	if n, err := other.Others(bg); err != nil || n != 1 {
		t.Fatalf("running, the other replica counts %d others (%v), want 1", n, err)
	}
	cancel()
	select {
	case err := <-seen:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the probe component was not stopped")
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}
