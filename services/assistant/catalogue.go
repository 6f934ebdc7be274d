package assistant

import (
	"context"
	"strconv"
	"sync"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// catalogueCache keeps every server and tool the assistant knows between the events
// that change them: reading 10,000 tools with their schemas for each message was most
// of what a reply cost. Like the tool list's facets it watches the bus, so it is cleared
// before the author of a change hears it committed, and a load that began before a
// clear is not kept (gen); with no bus, or before the bus first listens, nothing is
// kept. People are read for each message: there are few, and no event says a person
// was added.
type catalogueCache struct {
	ready <-chan struct{} // the bus's Ready; nil: no bus, no cache

	mu      sync.Mutex
	gen     uint64
	servers []Server
	tools   []Tool
	words   []map[string]bool // each tool's words (toolWords), by index in tools
	loaded  bool
}

// Watch keeps the catalogue in memory between the server and tool events of bus, which
// clear it.
func (s *Service) Watch(bus *events.Bus) {
	if bus == nil {
		return
	}
	c := &s.cache
	c.ready = bus.Ready()
	bus.Watch(func(ev events.Event) {
		switch ev.Kind {
		case string(events.DiscoveryProgress), string(events.ToolPermission):
			// Progress and grants change nothing the assistant reads.
		default:
			c.mu.Lock()
			c.gen++
			c.servers, c.tools, c.words, c.loaded = nil, nil, nil, false
			c.mu.Unlock()
		}
	}, tools.Topic, tools.ServersTopic)
}

// kept is what the cache holds: every server and tool, and each tool's words.
type kept struct {
	servers []Server
	tools   []Tool
	words   []map[string]bool
}

// get returns what is kept (ok), or the generation a load must quote to keep its own;
// keep is false when no load may be kept (no bus, or the bus not listening yet when the
// load began: what committed before that is never delivered to clear it).
func (c *catalogueCache) get() (k kept, gen uint64, ok, keep bool) {
	if c.ready == nil {
		return k, 0, false, false
	}
	select {
	case <-c.ready:
	default:
		return k, 0, false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return kept{c.servers, c.tools, c.words}, c.gen, c.loaded, true
}

func (c *catalogueCache) put(gen uint64, k kept) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.servers, c.tools, c.words, c.loaded = k.servers, k.tools, k.words, true
	}
}

// Catalogue is the servers, tools and people the principal may see. Its slices (and
// the tools' words, all computed) are shared with other replies: read them, never
// change them.
func (s *Service) Catalogue(ctx context.Context, p *auth.Principal) (*Catalogue, error) {
	cat := &Catalogue{}
	if p.Can(auth.PermServerView) || p.Can(auth.PermToolView) {
		k, gen, ok, keep := s.cache.get()
		switch {
		case ok:
		case keep:
			// Replies that find the copy gone share one load of the next.
			v, err, _ := s.loading.Do(strconv.FormatUint(gen, 10), func() (any, error) {
				k, err := s.loadCatalogue(context.WithoutCancel(ctx))
				if err == nil {
					s.cache.put(gen, k)
				}
				return k, err
			})
			if err != nil {
				return nil, err
			}
			k = v.(kept)
		default:
			var err error
			if k, err = s.loadCatalogue(ctx); err != nil {
				return nil, err
			}
		}
		if p.Can(auth.PermServerView) {
			cat.Servers = k.servers
		}
		if p.Can(auth.PermToolView) {
			// Finding tools by what they do compares the sentence with every tool's
			// words: computed once per catalogue, not once per message.
			cat.Tools, cat.toolWords = k.tools, k.words
		}
	}
	if p.Can(auth.PermUsers) {
		us, err := s.auth.ListUsers(ctx)
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			if u.DisabledAt == nil {
				cat.Users = append(cat.Users, u.Username)
			}
		}
	}
	return cat, nil
}

// loadCatalogue reads every server and every tool, a page at a time, and each tool's
// words.
func (s *Service) loadCatalogue(ctx context.Context) (kept, error) {
	var servers []Server
	for lq := (registry.ListQuery{Limit: 200}); ; lq.Offset += lq.Limit {
		svs, total, err := s.registry.ListServers(ctx, lq)
		if err != nil {
			return kept{}, err
		}
		for _, sv := range svs {
			servers = append(servers, Server{ID: sv.ID, Name: sv.Name, Description: sv.Description, URL: sv.URL,
				Type: sv.Type, Status: sv.Status, Enabled: sv.Enabled, Builtin: sv.Name == registry.BuiltinName})
		}
		if len(svs) < lq.Limit || lq.Offset+len(svs) >= total {
			break
		}
	}
	var ts []Tool
	for q := (tools.Query{Limit: tools.MaxLimit}); ; {
		page, err := s.tools.List(ctx, q)
		if err != nil {
			return kept{}, err
		}
		for _, it := range page.Items {
			ts = append(ts, toolOf(it))
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	words := make([]map[string]bool, len(ts))
	for i, t := range ts {
		words[i] = toolWords(t)
	}
	return kept{servers, ts, words}, nil
}
