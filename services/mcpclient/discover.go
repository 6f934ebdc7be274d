package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// progressEvery throttles discovery.progress events of a long, many-page discovery.
const progressEvery = 500 * time.Millisecond

// discoverNow lists every tool (and resource and prompt) of the live session and stores
// the result. Discoveries of one server run one at a time.
func (c *conn) discoverNow(ctx context.Context, trigger string, actor audit.Actor) (registry.DiscoveryResult, error) {
	c.discoverMu.Lock()
	defer c.discoverMu.Unlock()
	c.mu.Lock()
	s := c.sess
	errText := c.errText
	c.mu.Unlock()
	if s == nil {
		if errText != "" {
			return registry.DiscoveryResult{}, ErrNotConnected.Withf("%s (%s)", ErrNotConnected.Message, errText)
		}
		return registry.DiscoveryResult{}, ErrNotConnected
	}
	d := registry.Discovery{Trigger: trigger, Actor: actor, StartedAt: time.Now()}
	lastProgress := time.Now()
	tools, pages, err := listTools(ctx, s.cs, c.m.opts.MaxPages, func(pages, n int) {
		if time.Since(lastProgress) >= progressEvery {
			lastProgress = time.Now()
			if perr := c.m.reg.DiscoveryProgress(ctx, c.cfg.ServerID, trigger, pages, n); perr != nil {
				c.m.log.Warn("mcpclient: discovery progress", "server", c.cfg.Name, "err", perr)
			}
		}
	})
	d.Pages = pages
	if err != nil {
		err = c.mask(err) // the server's own words may carry its secret (an error page's text)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := c.m.reg.RecordDiscoveryFailure(wctx, c.cfg.ServerID, d, err); rerr != nil {
			c.m.log.Warn("mcpclient: record failed discovery", "server", c.cfg.Name, "err", rerr)
		}
		return registry.DiscoveryResult{}, fmt.Errorf("discovery of %s: %w", c.cfg.Name, err)
	}
	d.Tools = tools
	if s.caps != nil && s.caps.Resources != nil {
		d.Resources = listResources(ctx, s.cs)
	}
	if s.caps != nil && s.caps.Prompts != nil {
		d.Prompts = listPrompts(ctx, s.cs)
	}
	res, err := c.m.reg.ApplyDiscovery(ctx, c.cfg.ServerID, d)
	if err != nil {
		return registry.DiscoveryResult{}, err
	}
	c.m.log.Info("mcpclient: discovery", "server", c.cfg.Name, "trigger", trigger, "tools", res.Total,
		"added", res.Added, "updated", res.Updated, "removed", res.Removed, "pages", res.Pages)
	return res, nil
}

// listTools follows nextCursor to the end. It fails rather than return a partial list:
// a repeated cursor, too many pages or any error means no list at all. Each page's
// tools are converted (toolDef marshals each one) on another goroutine while the next
// page is fetched.
func listTools(ctx context.Context, cs *mcp.ClientSession, maxPages int, progress func(pages, tools int)) ([]registry.ToolDef, int, error) {
	var pageDefs [][]registry.ToolDef
	var wg sync.WaitGroup
	var convOnce sync.Once
	var convErr error // the first conversion that panicked
	defer wg.Wait()
	seen := map[string]bool{}
	cursor := ""
	pages, total := 0, 0
	for {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, pages, fmt.Errorf("tools/list page %d: %w", pages+1, err)
		}
		pages++
		listed := make([]*mcp.Tool, 0, len(res.Tools))
		for _, t := range res.Tools {
			if t != nil {
				listed = append(listed, t)
			}
		}
		total += len(listed)
		defs := make([]registry.ToolDef, len(listed))
		pageDefs = append(pageDefs, defs)
		page := pages
		wg.Go(func() {
			// A tool that makes the conversion panic (a hostile server's) fails the
			// discovery, not the process.
			defer func() {
				if p := recover(); p != nil {
					convOnce.Do(func() { convErr = fmt.Errorf("tools/list page %d: converting a tool failed: %v", page, p) })
				}
			}()
			for i, t := range listed {
				defs[i] = toolDef(t)
			}
		})
		if progress != nil {
			progress(pages, total)
		}
		if res.NextCursor == "" {
			wg.Wait()
			if convErr != nil {
				return nil, pages, convErr
			}
			var out []registry.ToolDef
			for _, defs := range pageDefs {
				out = append(out, defs...)
			}
			return out, pages, nil
		}
		if seen[res.NextCursor] {
			return nil, pages, fmt.Errorf("tools/list repeated cursor %q after %d pages: stopped to avoid an endless loop, no tools changed", res.NextCursor, pages)
		}
		if pages >= maxPages {
			return nil, pages, fmt.Errorf("tools/list still paging after %d pages: stopped, no tools changed", pages)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
}

func toolDef(t *mcp.Tool) registry.ToolDef {
	raw := mustJSON(t)
	d := registry.ToolDef{Name: t.Name, Title: t.Title, Description: t.Description, Raw: raw}
	if d.Title == "" && t.Annotations != nil {
		d.Title = t.Annotations.Title
	}
	// The parts are the bytes the whole tool was just encoded to: encoding the schema
	// a second time was a sixth of a large discovery's CPU.
	part := func(name string, v any) json.RawMessage {
		if b := member(raw, name); b != nil {
			return b
		}
		return mustJSON(v)
	}
	if t.InputSchema != nil {
		d.InputSchema = part("inputSchema", t.InputSchema)
	}
	if t.OutputSchema != nil {
		d.OutputSchema = part("outputSchema", t.OutputSchema)
	}
	if t.Annotations != nil {
		d.Annotations = part("annotations", t.Annotations)
	}
	return d
}

// member returns the bytes of the top-level member name of the JSON object raw (a
// slice of raw), or nil.
func member(raw []byte, name string) json.RawMessage {
	dec := jsontext.NewDecoder(bytes.NewBuffer(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	for dec.PeekKind() == '"' {
		key, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		if key.String() != name {
			if dec.SkipValue() != nil {
				return nil
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil
		}
		end := int(dec.InputOffset())
		start := end - len(v)
		return raw[start:end:end]
	}
	return nil
}

// listResources returns the server's resources, or nil when listing fails (recorded
// as "not listed", never as "no resources").
func listResources(ctx context.Context, cs *mcp.ClientSession) []registry.Resource {
	out := []registry.Resource{}
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			return nil
		}
		out = append(out, registry.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType})
		if len(out) >= 1000 {
			break
		}
	}
	return out
}

func listPrompts(ctx context.Context, cs *mcp.ClientSession) []registry.Prompt {
	out := []registry.Prompt{}
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			return nil
		}
		pr := registry.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			if a != nil {
				pr.Arguments = append(pr.Arguments, a.Name)
			}
		}
		out = append(out, pr)
		if len(out) >= 1000 {
			break
		}
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
