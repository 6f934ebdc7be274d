package registry

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/services/toolstate"
)

// A discovery runs again after losing a race (a tool moved meanwhile, a deadlock, a
// serialization failure), at most discoveryAttempts times, and never after an error
// running it again would repeat.
func TestRetryDiscovery(t *testing.T) {
	t.Parallel()
	moved := toolstate.Moved("4f1c", toolstate.Validated, toolstate.Disabled)
	serialization := &pgconn.PgError{Code: "40001"}
	illegal := toolstate.Illegal(toolstate.Disabled, toolstate.Updating)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		errs      []error // what each attempt returns
		wantCalls int
		wantErr   error
	}{
		{"moved twice, then stored", []error{moved, fmt.Errorf("store: %w", moved), nil}, 3, nil},
		{"deadlock, then stored", []error{fmt.Errorf("lock: %w", &pgconn.PgError{Code: "40P01"}), nil}, 2, nil},
		{"serialization failure every time", []error{serialization, serialization, serialization, nil}, 3, serialization},
		{"illegal transition", []error{illegal, nil}, 1, illegal},
		{"other error", []error{boom, nil}, 1, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryDiscovery(context.Background(), func() error {
				calls++
				return tc.errs[calls-1]
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) {
				t.Errorf("got %d attempts and %v, want %d and %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
