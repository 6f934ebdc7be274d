package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// The resources and prompts of a server, over its live session, for the gateway's
// pass-through (issue #19). Lists follow the server's cursors to the end, within
// bounds; every request, each page of a list too, gets the server's timeout; and every
// answer is capped like a tool call's: a message over Options.MaxMessageBytes is
// dropped while it is read and the request fails with ErrResultTooLarge, the session
// going on. What comes back is the SDK's value as the server sent it: callers copy
// before they change anything (on 2026-07-28 sessions the SDK may hand the same value
// out again from its cache).

// MaxListed bounds the items one server's list brings back (resources, templates or
// prompts); a server that offers more is cut there, and the cut is logged.
const MaxListed = 10_000

// ErrNotOffered is a read or get on a server that did not declare resources (or
// prompts) when its session began.
var ErrNotOffered = fault.Conflict("not_offered", "the server offers none").About("server")

// ListResources lists server id's resources (nil when it offers none). Like every
// read here it also returns the masker of the session that answered (nil when none was
// asked): mask what it returned, its errors too, with that one (see CallToolServed).
func (m *Manager) ListResources(ctx context.Context, id string) ([]*mcp.Resource, *secrets.Masker, error) {
	return listAll(ctx, m, id, "resources/list", offersResources,
		func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]*mcp.Resource, string, error) {
			res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Resources, res.NextCursor, nil
		})
}

// ListResourceTemplates lists server id's resource templates (nil when it offers no
// resources).
func (m *Manager) ListResourceTemplates(ctx context.Context, id string) ([]*mcp.ResourceTemplate, *secrets.Masker, error) {
	return listAll(ctx, m, id, "resources/templates/list", offersResources,
		func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			res, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.ResourceTemplates, res.NextCursor, nil
		})
}

// ListPrompts lists server id's prompts (nil when it offers none).
func (m *Manager) ListPrompts(ctx context.Context, id string) ([]*mcp.Prompt, *secrets.Masker, error) {
	return listAll(ctx, m, id, "prompts/list", offersPrompts,
		func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]*mcp.Prompt, string, error) {
			res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Prompts, res.NextCursor, nil
		})
}

// ReadResource reads the resource uri (as the server named it) on server id.
func (m *Manager) ReadResource(ctx context.Context, id, uri string) (*mcp.ReadResourceResult, *secrets.Masker, error) {
	s, c, err := m.liveSession(id, offersResources, "resources")
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	res, err := s.cs.ReadResource(rctx, &mcp.ReadResourceParams{URI: uri})
	c.noteRefusal(err)
	if err != nil {
		return nil, c.masker, c.requestError(ctx, rctx, "resources/read", err)
	}
	if res.NeedsInput() {
		return nil, c.masker, fmt.Errorf("mcpclient: resources/read: %s asked for more input, which Toolwarden does not pass on", c.cfg.Name)
	}
	return res, c.masker, nil
}

// GetPrompt gets the prompt name (as the server named it) with args on server id.
func (m *Manager) GetPrompt(ctx context.Context, id, name string, args map[string]string) (*mcp.GetPromptResult, *secrets.Masker, error) {
	s, c, err := m.liveSession(id, offersPrompts, "prompts")
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	res, err := s.cs.GetPrompt(rctx, &mcp.GetPromptParams{Name: name, Arguments: args})
	c.noteRefusal(err)
	if err != nil {
		return nil, c.masker, c.requestError(ctx, rctx, "prompts/get", err)
	}
	return res, c.masker, nil
}

func offersResources(caps *mcp.ServerCapabilities) bool { return caps != nil && caps.Resources != nil }
func offersPrompts(caps *mcp.ServerCapabilities) bool   { return caps != nil && caps.Prompts != nil }

// liveSession is server id's open session, ErrNotConnected, or ErrNotOffered when the
// server did not declare what offers asks for.
func (m *Manager) liveSession(id string, offers func(*mcp.ServerCapabilities) bool, what string) (*session, *conn, error) {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		return nil, nil, ErrNotConnected
	}
	s, err := c.live()
	if err != nil {
		return nil, nil, err
	}
	if !offers(s.caps) {
		return nil, nil, ErrNotOffered.Withf("%s offers no %s", c.cfg.Name, what)
	}
	return s, c, nil
}

// timeout is the server's request timeout (its timeout_ms setting).
func (c *conn) timeout() time.Duration {
	if c.cfg.Timeout > 0 {
		return c.cfg.Timeout
	}
	return 30 * time.Second
}

// requestError says why a request to the server failed: an answer over the cap
// (ErrResultTooLarge), no answer within the server's timeout (ErrTimeout), or the
// server's own error (a *jsonrpc.Error stays reachable with errors.As).
func (c *conn) requestError(ctx, rctx context.Context, method string, err error) error {
	if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("mcpclient: %s: %s did not answer within %s: %w", method, c.cfg.Name, c.timeout(), ErrTimeout)
	}
	return fmt.Errorf("mcpclient: %s: %w", method, tooLarge(err))
}

// MaxListedBytes bounds what one server's list brings back, as JSON: items and cursors
// are the server's to size, and a list answers one request of an agent's.
const MaxListedBytes = 32 << 20

// listBound is how many of the server's timeouts one list may take, all pages together.
const listBound = 2

// listAll follows a list's cursors to the end: nil when the server does not offer the
// kind, an error rather than a partial list when a page fails or the cursors go round
// in circles, grow past maxCursor or on past Options.MaxPages or listBound timeouts, and
// at most MaxListed items and MaxListedBytes.
func listAll[T any](ctx context.Context, m *Manager, id, method string, offers func(*mcp.ServerCapabilities) bool,
	page func(context.Context, *mcp.ClientSession, string) ([]*T, string, error)) ([]*T, *secrets.Masker, error) {
	s, c, err := m.liveSession(id, offers, method)
	if errors.Is(err, ErrNotOffered) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	items, err := listPages(ctx, m, s, c, method, page)
	return items, c.masker, err
}

// listPages is listAll's paging on session s of c.
func listPages[T any](ctx context.Context, m *Manager, s *session, c *conn, method string,
	page func(context.Context, *mcp.ClientSession, string) ([]*T, string, error)) ([]*T, error) {
	var out []*T
	seen := newCursorSet()
	cursor := ""
	size := 0
	lim := listLimits{maxPages: m.opts.MaxPages}
	// Each page has the server's timeout, and the whole list a bound too: a server
	// answering page after page just in time would otherwise hold the agent's list (the
	// gateway waits for every server's) for hours.
	bound := min(listBound*c.timeout(), maxDiscovery)
	lctx, lcancel := context.WithTimeout(ctx, bound)
	defer lcancel()
	for pages := 1; ; pages++ {
		pctx, cancel := context.WithTimeout(lctx, c.timeout())
		items, next, err := page(pctx, s.cs, cursor)
		cancel()
		if ctx.Err() == nil && lctx.Err() != nil {
			return nil, fmt.Errorf("mcpclient: %s: %s still paging after %s (%d pages), the list's limit: %w", method, c.cfg.Name, bound, pages, ErrTimeout)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (page %d)", c.requestError(ctx, pctx, method, err), pages)
		}
		for _, it := range items {
			if it == nil {
				continue
			}
			if len(out) == MaxListed {
				m.log.Warn("mcpclient: list cut", "server", c.cfg.Name, "method", method, "max_items", MaxListed)
				return out, nil
			}
			b, _ := json.Marshal(it)
			if size += len(b); size > MaxListedBytes {
				m.log.Warn("mcpclient: list cut", "server", c.cfg.Name, "method", method, "max_bytes", MaxListedBytes)
				return out, nil
			}
			out = append(out, it)
		}
		if next == "" {
			return out, nil
		}
		if err := lim.next(seen, next, pages); err != nil {
			return nil, fmt.Errorf("mcpclient: %s: %s %w", method, c.cfg.Name, err)
		}
		cursor = next
	}
}
