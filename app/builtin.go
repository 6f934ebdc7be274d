package app

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
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
	ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: b.Root(), Logger: a.log, OnInput: a.auditTerminalInput})
	if err != nil {
		return nil, err
	}
	a.Terminals = ts
	b.Add(builtin.TerminalTool(ts))
	b.OnClose(ts.Close)
	if _, err := a.Registry.EnsureBuiltin(ctx, builtinDescription); errors.Is(err, registry.ErrBuiltinNameTaken) {
		a.log.Warn(err.Error())
	} else if err != nil {
		return nil, err
	}
	return b, nil
}

// builtinArgumentRisk rates a built-in tool's call by its arguments (the router's
// ArgumentRisk): a terminal command that deletes recursively, runs sudo and the like is
// HIGH whatever the tool's level.
func builtinArgumentRisk(qualified string, args json.RawMessage) (risk.Level, string, bool) {
	bare, ok := strings.CutPrefix(qualified, registry.BuiltinName+"__")
	if !ok {
		return "", "", false
	}
	return builtin.ArgumentRisk(bare, args)
}
