package tools

import (
	"context"
	"slices"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// ServersTopic is registry.ServersTopic (the registry imports this package, so the name
// is repeated here; a registry test keeps the two equal). Server changes, deletions and
// discoveries change the facets.
const ServersTopic = "servers"

// Facets are the choices the list's filters offer, with how many tools each has.
type Facets struct {
	Servers    []Facet
	Categories []Facet
	Statuses   []Facet
	Tags       []Facet
}

// Facet is one choice of a filter.
type Facet struct {
	Value string `db:"value" json:"value"`
	Count int    `db:"count" json:"count"`
}

// Total is how many tools there are (the states' counts add up to it).
func (f Facets) Total() int {
	n := 0
	for _, s := range f.Statuses {
		n += s.Count
	}
	return n
}

func (f Facets) clone() Facets {
	return Facets{Servers: slices.Clone(f.Servers), Categories: slices.Clone(f.Categories),
		Statuses: slices.Clone(f.Statuses), Tags: slices.Clone(f.Tags)}
}

func countOf(fs []Facet, value string) int {
	for _, f := range fs {
		if f.Value == value {
			return f.Count
		}
	}
	return 0
}

// watchFacets keeps the facets in memory between the events that can change a count:
// counting 10,000 tools four times is most of what the list page would otherwise cost
// (issue #23, P3). Connection status, discovery progress and grants change no count.
func (s *Service) watchFacets(bus *events.Bus) {
	s.facets.Watch(bus, []string{Topic, ServersTopic},
		string(events.ServerStatusChanged), string(events.DiscoveryProgress), string(events.ToolPermission))
}

// Facets returns the servers, categories, states and tags tools have (for the filters),
// from memory between the events that change them.
func (s *Service) Facets(ctx context.Context) (Facets, error) {
	f, err := s.facets.Get(func() (Facets, error) { return s.loadFacets(context.WithoutCancel(ctx)) })
	if err != nil {
		return f, err
	}
	return f.clone(), nil
}

// loadFacets counts the facets: the states, servers and categories in one pass over the
// tools (grouping sets), the tags in another.
func (s *Service) loadFacets(ctx context.Context) (Facets, error) {
	var f Facets
	type row struct {
		Set   string `db:"set"`
		Value string `db:"value"`
		Count int    `db:"count"`
	}
	rows, err := db.All[row](ctx, s.pool, "tools: facets", `/* tools.Facets */
		WITH n AS (SELECT server_id, category_id, status, count(*)::int AS count FROM mcp_tools
			GROUP BY GROUPING SETS ((server_id), (category_id), (status)))
		SELECT 'server' AS set, sv.name AS value, coalesce(n.count, 0) AS count
			FROM mcp_servers sv LEFT JOIN n ON n.server_id = sv.id
		UNION ALL
		SELECT 'category', c.name, coalesce(n.count, 0) FROM tool_categories c LEFT JOIN n ON n.category_id = c.id
		UNION ALL
		SELECT 'status', n.status, n.count FROM n WHERE n.status IS NOT NULL
		ORDER BY 1, 2`)
	if err != nil {
		return f, err
	}
	for _, r := range rows {
		fc := Facet{Value: r.Value, Count: r.Count}
		switch r.Set {
		case "server":
			f.Servers = append(f.Servers, fc)
		case "category":
			f.Categories = append(f.Categories, fc)
		case "status":
			f.Statuses = append(f.Statuses, fc)
		}
	}
	slices.SortFunc(f.Statuses, func(a, b Facet) int {
		return slices.Index(toolstate.States, a.Value) - slices.Index(toolstate.States, b.Value)
	})
	if f.Tags, err = s.Tags(ctx); err != nil {
		return f, err
	}
	return f, nil
}

// countFromFacets answers Count without counting when the facets are in memory and q
// filters by at most one facet (one server by name, one category, states, one tag) and
// nothing else: the facets hold that number already. q has been checked. ok is false
// otherwise.
func (s *Service) countFromFacets(q Query) (int, bool) {
	f, ok := s.facets.Kept()
	if !ok || q.Q != "" || q.Risk != "" || len(q.Tags) > 1 {
		return 0, false
	}
	if _, byID := normalID(q.Server); byID {
		return 0, false
	}
	n := 0
	for _, set := range []bool{q.Server != "", q.Category != "", len(q.Status) > 0, len(q.Tags) > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return 0, false
	}
	switch {
	case q.Server != "":
		return countOf(f.Servers, q.Server), true
	case q.Category == "none":
		in := 0
		for _, c := range f.Categories {
			in += c.Count
		}
		return f.Total() - in, true
	case q.Category != "":
		return countOf(f.Categories, q.Category), true
	case len(q.Status) > 0:
		total := 0
		for _, st := range slices.Compact(slices.Sorted(slices.Values(q.Status))) {
			total += countOf(f.Statuses, st)
		}
		return total, true
	case len(q.Tags) == 1:
		return countOf(f.Tags, q.Tags[0]), true
	}
	return f.Total(), true
}
