package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/toolwarden/toolwarden/services/registry"
)

// Each replica runs its own session to a server (its own process of a stdio server),
// and the registry stores what the last discovery, on whichever replica, listed. Two
// sessions may list different definitions of one tool (a replica restarted onto a newer
// `npx -y pkg@latest`): a call is vetted and pinned against the stored definition, so
// before it is sent the session that will run it must list that definition too. Each
// session remembers what it listed last, name → definition hash, for that check.

// ErrDefinitionDiffers is a call refused before it was sent: the session that would run
// it does not list the tool with the definition the call was vetted against (a
// *DefinitionError says which). A discovery of the server on this replica was asked for.
var ErrDefinitionDiffers = errors.New("mcpclient: the session lists another definition of the tool than the one vetted")

// DefinitionError is ErrDefinitionDiffers for one tool.
type DefinitionError struct {
	Tool string
	// Listed: the session lists the tool, with another definition; false: it does not
	// list it at all.
	Listed bool
	// Differing: the session lists the tool more than once, with different definitions
	// (Listed is true): which of them a call runs is the server's choice.
	Differing bool
}

func (e *DefinitionError) Error() string {
	if !e.Listed {
		return fmt.Sprintf("mcpclient: call %s: the session does not list the tool", e.Tool)
	}
	if e.Differing {
		return fmt.Sprintf("mcpclient: call %s: the session lists the tool more than once, with different definitions", e.Tool)
	}
	return fmt.Sprintf("mcpclient: call %s: the session lists another definition of the tool than the one vetted", e.Tool)
}

func (e *DefinitionError) Unwrap() error { return ErrDefinitionDiffers }

// listing is what a session listed: each tool's definition hash, by name.
type listing struct {
	hashes map[string]string
}

// sessionListing is the part of a session that remembers its listing. The zero value
// has listed nothing.
type sessionListing struct {
	listed atomic.Pointer[listing] // nil: not listed yet, or a list_changed came since
	// gen counts the session's tools/list_changed notifications: a listing that began
	// before one is not recorded (it may be the old list).
	gen  atomic.Uint64
	mu   sync.Mutex    // orders record and forget
	busy chan struct{} // one on-demand listing at a time (listedNow); nil: made on first use
	once sync.Once
}

// record stores hashes as the session's listing, unless a list_changed arrived since the
// listing began (at gen).
func (s *sessionListing) record(gen uint64, hashes map[string]string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen.Load() != gen {
		return false
	}
	s.listed.Store(&listing{hashes: hashes})
	return true
}

// forget drops the listing: the server said its tools changed, so the next call lists
// them again (listedNow) rather than trust a list the session may no longer serve, even
// while the discovery the notification asked for waits (its debounce, churn or budget).
func (s *sessionListing) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen.Add(1)
	s.listed.Store(nil)
}

// listedHashes is the definition hash of each tool of a listing as the registry stores
// it for definition_hash (registry.HashListing), by name; tools already masked (maskTool).
func listedHashes(tools []registry.ToolDef) map[string]string {
	return hashesOf(tools, registry.HashListing(tools))
}

// hashesOf is the hashes by name of list, tools hashed (registry.HashListing), and
// differingHash for each name of tools the listing left out: listed more than once with
// different definitions.
func hashesOf(tools []registry.ToolDef, list []registry.ListedTool) map[string]string {
	out := make(map[string]string, len(list))
	for _, l := range list {
		out[l.Def.Name] = l.Hash
	}
	if len(list) < len(tools) {
		for _, t := range tools {
			if _, ok := out[t.Name]; !ok {
				out[t.Name] = differingHash
			}
		}
	}
	return out
}

// differingHash stands for the hash of a tool a session lists more than once, with
// different definitions: no stored definition hash is empty, so no call matches it.
const differingHash = ""

// checkDefinition refuses a call of tool name on session s unless s lists it with the
// definition hash want. A session that has listed nothing yet (just opened, or told of
// a change since) lists its tools first, once for all the calls waiting, within the
// server's timeout. On a refusal a discovery of the server on this replica is asked for
// (through the debounce, churn wait and budget of any automatic one), so the stored
// definition becomes this session's and the tool is validated again.
func (c *conn) checkDefinition(ctx context.Context, s *session, name, want string) error {
	l := s.tools.listed.Load()
	if l == nil {
		var err error
		if l, err = c.listedNow(ctx, s); err != nil {
			return fmt.Errorf("mcpclient: call %s: the server's tools could not be listed to check its definition before the call: %w", name, err)
		}
	}
	got, ok := l.hashes[name]
	if ok && got == want {
		return nil
	}
	c.m.log.Warn("mcpclient: call refused: the session does not list the definition of the tool that was vetted; discovering again",
		"server", c.cfg.Name, "tool", c.masker.String(name), "listed", ok)
	c.requestDiscovery("list_changed")
	return &DefinitionError{Tool: name, Listed: ok, Differing: ok && got == differingHash}
}

// listedNow lists session s's tools, unless another call did meanwhile, and records them.
func (c *conn) listedNow(ctx context.Context, s *session) (*listing, error) {
	t := &s.tools
	t.once.Do(func() { t.busy = make(chan struct{}, 1) })
	select {
	case t.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-t.busy }()
	if l := t.listed.Load(); l != nil {
		return l, nil
	}
	gen := t.gen.Load()
	// Each page has the server's timeout, as a discovery's, and the whole list the bound
	// of a resources list (the call waits on it). Running out is ErrTimeout, not a bare
	// context error, which the router would take for the session ending under the call.
	lctx, cancel := context.WithTimeout(ctx, min(listBound*c.timeout(), maxDiscovery))
	defer cancel()
	tools, _, err := listToolsSkipping(lctx, s.cs, listLimits{maxPages: c.m.opts.MaxPages, timeout: c.timeout()}, nil, nil)
	if err != nil {
		if ctx.Err() == nil && (lctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) {
			return nil, fmt.Errorf("mcpclient: tools/list: %s did not list its tools within %s: %w", c.cfg.Name, min(listBound*c.timeout(), maxDiscovery), ErrTimeout)
		}
		return nil, c.mask(err)
	}
	for i := range tools {
		maskTool(c.masker, &tools[i])
	}
	l := &listing{hashes: listedHashes(tools)}
	// Not recorded when a list_changed came meanwhile, but still what the session
	// listed a moment ago: this call is decided on it.
	t.record(gen, l.hashes)
	return l, nil
}
