package assistant

import (
	"context"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// kept is what the assistant keeps between the tools' and servers' events (an
// events.Memo): every server and tool, and each tool's words. Reading 10,000 tools with
// their schemas for each message was most of what a reply cost. People are read for
// each message: there are few, and no event says a person was added.
type kept struct {
	servers []Server
	tools   []Tool
	words   []map[string]bool // each tool's words (toolWords), by index in tools
	names   *names            // the names and the id index (namesOf) of all of them
}

// Watch keeps the catalogue in memory between the server and tool events of bus, which
// clear it; progress and grants change nothing the assistant reads.
func (s *Service) Watch(bus *events.Bus) {
	s.cache.Watch(bus, []string{tools.Topic, tools.ServersTopic},
		string(events.DiscoveryProgress), string(events.ToolPermission))
}

// Catalogue is the servers, tools and people the principal may see. Its slices (and
// the tools' words, all computed) are shared with other replies: read them, never
// change them.
func (s *Service) Catalogue(ctx context.Context, p *auth.Principal) (*Catalogue, error) {
	cat := &Catalogue{}
	if p.Can(auth.PermServerView) || p.Can(auth.PermToolView) {
		k, err := s.cache.Get(func() (kept, error) { return s.loadCatalogue(context.WithoutCancel(ctx)) })
		if err != nil {
			return nil, err
		}
		if p.Can(auth.PermServerView) {
			cat.Servers = k.servers
		}
		if p.Can(auth.PermToolView) {
			// Finding tools by what they do compares the sentence with every tool's
			// words: computed once per catalogue, not once per message.
			cat.Tools, cat.toolWords = k.tools, k.words
			if p.Can(auth.PermServerView) {
				// Built once per catalogue; without the servers, namesOf builds its own
				// (their names are in it).
				cat.names = k.names
			}
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
	all := &Catalogue{Servers: servers, Tools: ts}
	return kept{servers, ts, words, all.namesOf()}, nil
}
