package tools_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/tools"
)

func TestCategories(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	net, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: " Network ", Description: " talks to hosts "})
	if err != nil {
		t.Fatal(err)
	}
	if net.Name != "network" || net.Description != "talks to hosts" || net.AutoEnable || uuid.Validate(net.ID) != nil || net.Tools != 0 {
		t.Errorf("created %+v", net)
	}
	if p := f.auditPayloads("category.create", net.ID); len(p) != 1 || p[0]["name"] != "network" {
		t.Errorf("create audit %v", p)
	}
	files, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "files", AutoEnable: true})
	if err != nil || !files.AutoEnable {
		t.Fatalf("files: %+v %v", files, err)
	}

	bad := []struct {
		name  string
		in    tools.CategoryInput
		field []string
		says  string
	}{
		{"duplicate", tools.CategoryInput{Name: "network"}, []string{"name"}, "exists already"},
		{"duplicate in other case", tools.CategoryInput{Name: " NETWORK"}, []string{"name"}, "exists already"},
		{"reserved none", tools.CategoryInput{Name: "none"}, []string{"name"}, "reserved"},
		{"reserved None", tools.CategoryInput{Name: " None "}, []string{"name"}, "reserved"},
		{"empty", tools.CategoryInput{Name: "  "}, []string{"name"}, "required"},
		{"spaces", tools.CategoryInput{Name: "my tools"}, []string{"name"}, "letters"},
		{"leading dash", tools.CategoryInput{Name: "-x"}, []string{"name"}, "letters"},
		{"too long", tools.CategoryInput{Name: strings.Repeat("c", 49)}, []string{"name"}, "48"},
		{"long description", tools.CategoryInput{Name: "ok", Description: strings.Repeat("d", 501)}, []string{"description"}, "500"},
		{"both", tools.CategoryInput{Name: "", Description: strings.Repeat("d", 501)}, []string{"name", "description"}, ""},
	}
	for _, b := range bad {
		_, err := f.svc.SaveCategory(f.ctx, alice, "", b.in)
		t.Run(b.name, func(t *testing.T) {
			ve := wantFields(t, err, b.field...)
			if !strings.Contains(ve.Fields[0].Message, b.says) {
				t.Errorf("message %q does not say %q", ve.Fields[0].Message, b.says)
			}
		})
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: strings.Repeat("c", 48)}); err != nil {
		t.Errorf("48 characters: %v", err)
	}

	// Tools in categories.
	srv := f.server("cats", false)
	a := f.tool(toolSpec{server: srv, name: "a"})
	b := f.tool(toolSpec{server: srv, name: "b"})
	f.update(a, tools.Patch{Category: ptr("network"), Tags: []string{"keep"}, SetTags: true})
	f.update(b, tools.Patch{Category: ptr("network")})
	cats, err := f.svc.Categories(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	var order []string
	for _, c := range cats {
		counts[c.Name] = c.Tools
		order = append(order, c.Name)
	}
	if counts["network"] != 2 || counts["files"] != 0 || !slices.IsSorted(order) || len(cats) != 3 {
		t.Errorf("categories %+v", cats)
	}

	// Update: rename, describe, auto-enable; a rename onto another name is a duplicate.
	up, err := f.svc.SaveCategory(f.ctx, bob, net.ID, tools.CategoryInput{Name: "net", Description: "renamed", AutoEnable: true})
	if err != nil || up.ID != net.ID || up.Name != "net" || up.Description != "renamed" || !up.AutoEnable || up.Tools != 2 ||
		!up.CreatedAt.Equal(net.CreatedAt) {
		t.Errorf("updated %+v %v", up, err)
	}
	if p := f.auditPayloads("category.update", net.ID); len(p) != 1 || p[0]["name"] != "net" || p[0]["auto_enable"] != true {
		t.Errorf("update audit %v", p)
	}
	if it := f.get(a); deref(it.Category) != "net" {
		t.Errorf("tool's category after rename: %v", it.Category)
	}
	_, err = f.svc.SaveCategory(f.ctx, alice, net.ID, tools.CategoryInput{Name: "files"})
	wantFields(t, err, "name")
	_, err = f.svc.SaveCategory(f.ctx, alice, net.ID, tools.CategoryInput{Name: "none"})
	wantFields(t, err, "name")
	if _, err := f.svc.SaveCategory(f.ctx, alice, net.ID, tools.CategoryInput{Name: "net", Description: "renamed", AutoEnable: true}); err != nil {
		t.Errorf("saving unchanged: %v", err)
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, uuid.NewString(), tools.CategoryInput{Name: "ghost"}); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("update unknown: %v", err)
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, "bad-id", tools.CategoryInput{Name: "ghost"}); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("update bad id: %v", err)
	}
	if n := f.count(`SELECT count(*) FROM tool_categories WHERE name = 'ghost'`); n != 0 {
		t.Errorf("a failed update created a category")
	}

	// Delete: the tools stay, without a category, and keep working.
	if err := f.svc.DeleteCategory(f.ctx, alice, net.ID); err != nil {
		t.Fatal(err)
	}
	if p := f.auditPayloads("category.delete", net.ID); len(p) != 1 || p[0]["tools_uncategorized"] != float64(2) {
		t.Errorf("delete audit %v", p)
	}
	it := f.get(a)
	if it.Category != nil || !slices.Equal(it.Tags, []string{"keep"}) {
		t.Errorf("tool after its category went: %+v", it)
	}
	if got := names(f.listAll(tools.Query{Category: "none", Server: "cats"})); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("uncategorized: %v", got)
	}
	if got := f.listAll(tools.Query{Category: "net"}); len(got) != 0 {
		t.Errorf("deleted category still lists %v", names(got))
	}
	v := f.version(a)
	it = f.update(a, tools.Patch{MayLowerRisk: true, Risk: ptr("low"), Params: map[string]tools.ParamInput{}})
	if deref(it.RiskOverride) != "low" || it.ConfigVersion != v+1 || it.Category != nil {
		t.Errorf("update after delete: %+v", it)
	}
	if out := f.setEnabled([]string{a}, true, "", false); out[0].Err() != nil {
		t.Errorf("enable after delete: %+v", out)
	}
	// The deleted name can be used again, and set on a tool.
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "net"}); err != nil {
		t.Errorf("reusing a deleted name: %v", err)
	}
	f.update(b, tools.Patch{Category: ptr("net")})
	if err := f.svc.DeleteCategory(f.ctx, alice, net.ID); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if err := f.svc.DeleteCategory(f.ctx, alice, "bad"); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("delete bad id: %v", err)
	}
}

func TestFacets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s1, s2 := f.server("one", false), f.server("two", true)
	f.server("empty", false)
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "used"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "unused"}); err != nil {
		t.Fatal(err)
	}
	specs := []struct {
		srv, name, status string
		tags              []string
		category          string
	}{
		{s1, "a", "enabled", []string{"x", "y"}, "used"},
		{s1, "b", "enabled", []string{"x"}, "used"},
		{s1, "c", "disabled", nil, ""},
		{s2, "a", "validated", []string{"z", "x"}, "used"},
		{s2, "d", "discovered", []string{"z"}, ""},
		{s2, "e", "invalid", nil, ""},
	}
	for _, s := range specs {
		id := f.tool(toolSpec{server: s.srv, name: s.name, status: s.status})
		p := tools.Patch{Tags: s.tags, SetTags: true}
		if s.category != "" {
			p.Category = ptr(s.category)
		}
		f.update(id, p)
	}
	fc, err := f.svc.Facets(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []tools.Facet{{"empty", 0}, {"one", 3}, {"two", 3}}; !slices.Equal(fc.Servers, want) {
		t.Errorf("servers %+v, want %+v", fc.Servers, want)
	}
	if want := []tools.Facet{{"unused", 0}, {"used", 3}}; !slices.Equal(fc.Categories, want) {
		t.Errorf("categories %+v, want %+v", fc.Categories, want)
	}
	// States in lifecycle order.
	if want := []tools.Facet{{"discovered", 1}, {"validated", 1}, {"invalid", 1}, {"enabled", 2}, {"disabled", 1}}; !slices.Equal(fc.Statuses, want) {
		t.Errorf("statuses %+v, want %+v", fc.Statuses, want)
	}
	// Tags, most used first, then by name.
	if want := []tools.Facet{{"x", 3}, {"z", 2}, {"y", 1}}; !slices.Equal(fc.Tags, want) {
		t.Errorf("tags %+v, want %+v", fc.Tags, want)
	}
	// Each facet's count is what the list's filter finds.
	for _, s := range fc.Servers {
		if n, _ := f.svc.Count(f.ctx, tools.Query{Server: s.Value}); n != s.Count {
			t.Errorf("server %s: facet %d, list %d", s.Value, s.Count, n)
		}
	}
	for _, c := range fc.Categories {
		if n, _ := f.svc.Count(f.ctx, tools.Query{Category: c.Value}); n != c.Count {
			t.Errorf("category %s: facet %d, list %d", c.Value, c.Count, n)
		}
	}
	for _, s := range fc.Statuses {
		if n, _ := f.svc.Count(f.ctx, tools.Query{Status: []string{s.Value}}); n != s.Count {
			t.Errorf("status %s: facet %d, list %d", s.Value, s.Count, n)
		}
	}
	for _, tg := range fc.Tags {
		if n, _ := f.svc.Count(f.ctx, tools.Query{Tags: []string{tg.Value}}); n != tg.Count {
			t.Errorf("tag %s: facet %d, list %d", tg.Value, tg.Count, n)
		}
	}
	// An empty database has empty facets, not an error.
	empty := newFixture(t)
	fc, err = empty.svc.Facets(empty.ctx)
	if err != nil || len(fc.Servers)+len(fc.Categories)+len(fc.Statuses)+len(fc.Tags) != 0 {
		t.Errorf("empty facets %+v %v", fc, err)
	}
}
