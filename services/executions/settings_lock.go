package executions

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// LockSettings locks the settings rows until tx ends (storing the defaults of those
// nobody set, which reads the same), as PatchSettings does: a configuration import
// takes it before it checks that the settings are still as its plan saw them, so a
// change committed after that check waits instead of being overwritten.
func LockSettings(ctx context.Context, tx pgx.Tx, by string) error { return lockSettings(ctx, tx, by) }
