package registry

import "testing"

// A panic in one of parallel's workers reaches its caller's goroutine (where the
// request's recovery is), not the process.
func TestParallelPanicsOnTheCaller(t *testing.T) {
	defer func() {
		if p := recover(); p != "boom at 700" {
			t.Fatalf("recovered %v, want the worker's panic", p)
		}
	}()
	parallel(5000, func(i int) {
		if i == 700 {
			panic("boom at 700")
		}
	})
	t.Fatal("parallel returned after a worker panicked")
}
