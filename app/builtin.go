package app

import (
	"context"
	"errors"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/registry"
)

// builtinDescription is the built-in server's description in the registry.
const builtinDescription = "Toolwarden's own tools: files in each conversation's workspace, terminals, memory, thinking, and asking a person."

// newBuiltin builds the built-in tools and makes sure the registry has their server. A
// server registered as builtin before the name was reserved keeps the name; the
// built-in tools then wait, and the log says why, until it is renamed.
func (a *App) newBuiltin(ctx context.Context, cfg Config) (*builtin.Server, error) {
	b, err := builtin.New(&builtin.Options{Root: cfg.BuiltinRoot, Logger: a.log, Version: cfg.Version})
	if err != nil {
		return nil, err
	}
	b.Add(builtin.Think())
	b.Add(b.FileOperations())
	if _, err := a.Registry.EnsureBuiltin(ctx, builtinDescription); errors.Is(err, registry.ErrBuiltinNameTaken) {
		a.log.Warn(err.Error())
	} else if err != nil {
		return nil, err
	}
	return b, nil
}
