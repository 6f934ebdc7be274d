package configcode

// Planning: what importing a file would change, field by field, computed against the
// database without changing it.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// ImportOptions tune Plan.
type ImportOptions struct {
	// Prune deletes registered servers and categories the file does not list.
	Prune bool
	// CompareSecrets lets the plan say that a secret in the file equals the stored one
	// (see registry.ImportOptions): only callers who could read secrets anyway set it.
	CompareSecrets bool
	// Token: an API token imports, which may take a tool away from a user but not give
	// one or lift a refusal (tools.ErrTokenGivesToolAccess); such rules are not applied.
	Token bool
	// Actor is who will apply the plan (see registry.ImportOptions): pruning a server
	// whose tools have per-user refusals Actor may not lift is an error of the plan.
	Actor audit.Actor
}

// Item kinds and actions (besides registry's).
const (
	KindCategory = "category"
	KindSettings = "settings"
	KindTool     = "tool"
	// ActionPending: the tool's server is registered by this import (or was never
	// discovered); its settings apply once the import has discovered it.
	ActionPending = "after_discovery"
)

// Plan is what importing a file would do. Apply it with Apply; a plan with Errors
// cannot be applied. Unapplied lists what the file states that cannot be applied here
// (a tool the server does not offer, a user that does not exist): the rest applies.
type Plan struct {
	File      string             `json:"file"`
	Format    string             `json:"format"`
	Servers   *registry.Plan     `json:"servers"`
	Items     []Item             `json:"items"`
	Unapplied []registry.Problem `json:"not_applied"`
	Warnings  []registry.Problem `json:"warnings"`
	Errors    []registry.Problem `json:"errors"`

	file *File
	opts ImportOptions
	base *state // what the plan was made against (Apply checks it still holds)
}

// Item is what happens to one category, the settings or one tool.
type Item struct {
	Kind    string                 `json:"kind"`
	Name    string                 `json:"name"`
	Action  string                 `json:"action"` // create, update, delete or after_discovery
	Changes []registry.FieldChange `json:"changes,omitempty"`

	tool     *Tool
	cur      *storedTool
	catID    string
	cat      *Category
	params   map[string]tools.ParamInput // nil: the parameters do not change
	perms    map[string]*bool            // user → new rule (nil removes it)
	comp     bool                        // the compensation changes
	cases    []tools.TestCase            // to save
	drop     []string                    // test cases to delete
	patch    bool                        // risk, timeout, rate limit, category or tags change
	state    string                      // "" or the state to move to
	via      bool                        // disabled through enabled
	override bool                        // the enable overrides findings (with the file's reason)
	set      *Settings                   // KindSettings: the new settings
}

// label names the item for people: "tool ev__echo", "category utilities", "settings".
func (it Item) label() string {
	if it.Kind == KindSettings {
		return it.Kind
	}
	return it.Kind + " " + registry.Printable(it.Name)
}

// HasErrors reports whether the plan cannot be applied.
func (p *Plan) HasErrors() bool { return len(p.Errors) > 0 }

// Empty reports whether applying the plan would change nothing.
func (p *Plan) Empty() bool {
	return p.Servers.Count(registry.PlanCreate)+p.Servers.Count(registry.PlanUpdate)+p.Servers.Count(registry.PlanDelete) == 0 &&
		len(p.Items) == 0
}

// Count returns how many items of kind get action.
func (p *Plan) Count(kind, action string) int {
	n := 0
	for _, it := range p.Items {
		if it.Kind == kind && it.Action == action {
			n++
		}
	}
	return n
}

// Digest identifies what the plan does (see registry.Plan.Digest).
func (p *Plan) Digest() string {
	h := sha256.New()
	h.Write([]byte(p.Servers.Digest()))
	h.Write([]byte(p.String()))
	// The definitions of the tools it changes: a plan enabling a tool whose definition
	// changed since the preview is another plan.
	for _, it := range p.Items {
		if it.Kind == KindTool && it.cur != nil {
			h.Write([]byte("\x00" + it.Name + "\x00" + it.cur.DefinitionHash))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Plan computes what importing f would change.
func (s *Service) Plan(ctx context.Context, f *File, opts ImportOptions) (*Plan, error) {
	if f == nil || f.Servers == nil {
		return nil, errors.New("configcode: plan: no file")
	}
	sp, err := s.reg.PlanImport(ctx, f.Servers, registry.ImportOptions{Prune: opts.Prune, CompareSecrets: opts.CompareSecrets,
		Actor: opts.Actor})
	if err != nil {
		return nil, err
	}
	plan := &Plan{File: f.Servers.File, Format: f.Servers.Format, Servers: sp, file: f, opts: opts,
		Warnings: sp.Warnings, Errors: slices.Clone(sp.Errors)}
	st, err := s.load(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	// A server the import deletes takes its tools with it: planning their settings
	// (or an undo step on one) would fail the whole import when applied.
	st.Pruned = map[string]bool{}
	for _, it := range sp.Items {
		if it.Action == registry.PlanDelete {
			st.Pruned[it.Name] = true
			delete(st.Servers, it.Name)
		}
	}
	for name, t := range st.Tools {
		if st.Pruned[t.Server] {
			delete(st.Tools, name)
		}
	}
	for name := range st.Unlisted {
		if st.Pruned[serverOf(name)] {
			delete(st.Unlisted, name)
		}
	}
	plan.base = st
	plan.planCategories(st)
	plan.planSettings(st)
	pending := plan.pendingServers(st)
	cats := plan.categoryNames(st)
	schemas, err := s.compensationSchemas(ctx, f.Tools, st)
	if err != nil {
		return nil, err
	}
	if err := st.loadRedefined(ctx, s.pool, f.Tools); err != nil {
		return nil, err
	}
	for i := range f.Tools {
		ft := &f.Tools[i]
		if ft.Override != "" && ft.DefinitionHash == "" {
			// An override without the definition it was decided on (every export before
			// definition_hash wrote them so): that tool's state and override are not
			// applied, the rest of the file is, so an old backup still restores.
			c := *ft
			c.State, c.Override = "", ""
			ft = &c
		}
		it, ps := s.planTool(ctx, ft, st, pending, cats, schemas, opts, plan.File)
		if ft != &f.Tools[i] && !slices.ContainsFunc(ps, func(p registry.Problem) bool { return p.Field == "tools."+ft.Name }) {
			plan.Unapplied = append(plan.Unapplied, registry.Problem{File: plan.File, Field: "tools." + ft.Name + ".override",
				Message: overrideWithoutHash(st.Tools[ft.Name])})
		}
		plan.Unapplied = append(plan.Unapplied, ps...)
		if it != nil {
			plan.Items = append(plan.Items, *it)
		}
	}
	return plan, nil
}

func (p *Plan) planCategories(st *state) {
	if !p.file.HasCats {
		return
	}
	inFile := map[string]bool{}
	for i, c := range p.file.Categories {
		inFile[c.Name] = true
		cur, ok := st.Categories[c.Name]
		// A description the file changes is judged as the category page judges it; the
		// stored one, kept, is not (parse left it to here).
		var kept *string
		if ok {
			kept = &cur.Description
		}
		in := tools.CategoryInput{Name: c.Name, Description: c.Description, AutoEnable: c.AutoEnable}
		if err := tools.CheckCategoryKeeping(&in, kept); err != nil {
			// A problem of the plan, as a server's is: the import is refused with every
			// problem listed, and the page keeps what was pasted.
			var fe *verr.Error
			if !errors.As(err, &fe) {
				fe = &verr.Error{Fields: []verr.Field{{Field: "description", Message: err.Error()}}}
			}
			for _, f := range fe.Fields {
				p.Errors = append(p.Errors, registry.Problem{File: p.File, Field: "categories." + c.Name + "." + f.Field, Message: f.Message})
			}
			continue
		}
		it := Item{Kind: KindCategory, Name: c.Name, Action: registry.PlanCreate, cat: &p.file.Categories[i]}
		if ok {
			it.Action, it.catID = registry.PlanUpdate, cur.ID
		}
		add := func(field, from, to string) {
			if !ok || from != to {
				if !ok {
					from = ""
				}
				it.Changes = append(it.Changes, registry.FieldChange{Field: field, From: from, To: to})
			}
		}
		add("description", strconv.Quote(cur.Description), strconv.Quote(c.Description))
		add("auto_enable", strconv.FormatBool(cur.AutoEnable), strconv.FormatBool(c.AutoEnable))
		if len(it.Changes) > 0 {
			p.Items = append(p.Items, it)
		}
	}
	if p.opts.Prune {
		for _, name := range slices.Sorted(maps.Keys(st.Categories)) {
			if !inFile[name] {
				p.Items = append(p.Items, Item{Kind: KindCategory, Name: name, Action: registry.PlanDelete, catID: st.Categories[name].ID})
			}
		}
	}
}

func (p *Plan) categoryNames(st *state) map[string]bool {
	out := map[string]bool{}
	for name := range st.Categories {
		out[name] = true
	}
	for _, it := range p.Items {
		if it.Kind == KindCategory && it.Action == registry.PlanDelete {
			delete(out, it.Name)
		}
	}
	for _, c := range p.file.Categories {
		out[c.Name] = true
	}
	return out
}

func settingsOf(s *Settings) executions.Settings {
	return executions.Settings{ApprovalTTL: executions.TTLSeconds(s.ApprovalTTLSeconds), HighSeparation: decide.Separation(s.HighSeparation)}
}

func (p *Plan) planSettings(st *state) {
	f := p.file.Settings
	if f == nil {
		return
	}
	it := Item{Kind: KindSettings, Name: "settings", Action: registry.PlanUpdate, set: f}
	if cur, want := int64(st.Settings.ApprovalTTL/time.Second), f.ApprovalTTLSeconds; cur != want {
		it.Changes = append(it.Changes, registry.FieldChange{Field: "approval_ttl_seconds", From: strconv.FormatInt(cur, 10), To: strconv.FormatInt(want, 10)})
	}
	want := f.HighSeparation
	if want == "" {
		want = string(decide.SeparationAuto)
	}
	if cur := string(st.Settings.HighSeparation); cur != want {
		it.Changes = append(it.Changes, registry.FieldChange{Field: "high_separation", From: cur, To: want})
	}
	if len(it.Changes) > 0 {
		p.Items = append(p.Items, it)
	}
}

// pendingServers are the servers whose tools this import can know only after
// discovering them: servers it registers, and registered ones never discovered (no
// tool rows, listed or not), with whether they are enabled (a disabled server is not
// discovered). A server whose last discovery listed none of its tools keeps their
// settings: planned from the file alone, applying would change those unreviewed.
func (p *Plan) pendingServers(st *state) map[string]bool {
	out := map[string]bool{}
	for _, it := range p.Servers.Items {
		if it.Action == registry.PlanCreate {
			out[it.Name] = true
		}
	}
	has := map[string]bool{}
	for _, t := range st.Tools {
		has[t.Server] = true
	}
	for qualified := range st.Unlisted {
		has[serverOf(qualified)] = true
	}
	for name := range st.Servers {
		if !has[name] {
			out[name] = true
		}
	}
	return out
}

// tokenPermission says why an API token's import leaves a rule as it is.
const tokenPermission = "an API token cannot give a user a tool or lift a refusal: sign in to import it; the permission was not applied"

// planTool compares one tool of the file with the stored one.
func (s *Service) planTool(ctx context.Context, ft *Tool, st *state, pending, cats map[string]bool, schemas map[string]json.RawMessage, opts ImportOptions, file string) (*Item, []registry.Problem) {
	compare := opts.CompareSecrets
	var not []registry.Problem
	skip := func(field, msg string) {
		f := "tools." + ft.Name
		if field != "" {
			f += "." + field
		}
		not = append(not, registry.Problem{File: file, Field: f, Message: msg})
	}
	server, name, _ := toolname.Split(ft.Name)
	cur := st.Tools[ft.Name]
	if cur == nil {
		switch _, registered := st.Servers[server]; {
		case pending[server]:
			it := &Item{Kind: KindTool, Name: ft.Name, Action: ActionPending, tool: ft}
			it.Changes = []registry.FieldChange{{Field: "waits for", To: "discovery of server " + server +
				"; then each setting below is checked against the tool found, and what cannot be applied is reported"}}
			it.Changes = append(it.Changes, pendingChanges(ft)...)
			return it, nil
		case registered && st.Unlisted[ft.Name]:
			skip("", fmt.Sprintf("server %s does not list a tool %q now (its last discovery did not; the tool keeps its settings): the file's settings were not applied: import it again once the server lists the tool", server, name))
		case registered:
			skip("", fmt.Sprintf("server %s does not offer a tool %q (%s): its settings were not applied", server, name, st.offers(server, ft.Name)))
		case st.Pruned[server]:
			skip("", fmt.Sprintf("server %s is deleted by this import (prune): its tools go with it, and the tool's settings were not applied", server))
		default:
			skip("", fmt.Sprintf("there is no server %q, here or in the file: the tool's settings were not applied", server))
		}
		return nil, not
	}
	it := &Item{Kind: KindTool, Name: ft.Name, Action: registry.PlanUpdate, tool: ft, cur: cur}
	change := func(field, from, to string) {
		it.Changes = append(it.Changes, registry.FieldChange{Field: field, From: from, To: to})
	}
	or := func(v, none string) string {
		if v == "" {
			return none
		}
		return v
	}
	num := func(v int) string {
		if v == 0 {
			return "none"
		}
		return strconv.Itoa(v)
	}
	if ft.Risk != cur.Risk {
		change("risk", or(cur.Risk, "(annotations)"), or(ft.Risk, "(annotations)"))
		it.patch = true
	}
	if ft.TimeoutMS != cur.TimeoutMS {
		change("timeout_ms", num(cur.TimeoutMS), num(ft.TimeoutMS))
		it.patch = true
	}
	if ft.RateLimit != cur.RateLimit {
		change("rate_limit", num(cur.RateLimit), num(ft.RateLimit))
		it.patch = true
	}
	category := ft.Category
	if category != "" && !cats[category] {
		keeps := "the tool keeps its category"
		category = cur.Category
		if category != "" && !cats[category] {
			// Its category is pruned by this import: kept, the tool's update would name a
			// category deleted a moment before and fail the whole import after a clean plan.
			keeps = fmt.Sprintf("its category %q is deleted by this import (prune), so the tool is left without one", category)
			category = ""
		}
		skip("category", fmt.Sprintf("there is no category %q, here or in the file's categories: %s", ft.Category, keeps))
	}
	if category != cur.Category {
		change("category", or(cur.Category, "none"), or(category, "none"))
		it.patch = true
	}
	ft.Category = category
	if !slices.Equal(ft.Tags, cur.Tags) && !(len(ft.Tags) == 0 && len(cur.Tags) == 0) {
		change("tags", "["+strings.Join(cur.Tags, ", ")+"]", "["+strings.Join(ft.Tags, ", ")+"]")
		it.patch = true
	}
	s.planParams(ctx, it, ft, cur, compare, skip)
	if ft.State != "" && ft.State != cur.Status {
		// A tool reaches disabled only from enabled: a file's disabled tool that was never
		// enabled here is enabled and disabled in the one transaction (nobody sees it
		// enabled), so it ends as the file says.
		step := ft.State
		if ft.State == toolstate.Disabled && cur.Status != toolstate.Enabled {
			step, it.via = toolstate.Enabled, true
		}
		blocked := step == toolstate.Enabled && (cur.ValidationWorst == "critical" || cur.ValidationWorst == "error")
		switch {
		case !toolstate.Allowed(cur.Status, step):
			skip("state", fmt.Sprintf("a tool that is %s cannot be %s", cur.Status, ft.State))
		case ft.DefinitionHash != "" && pinApplies(ft, step == toolstate.Enabled) && !pinIs(ft.DefinitionHash, cur.DefinitionHash):
			// The file's enable (or override) was decided on another definition: applied,
			// it would enable the new one unreviewed, undoing what discovery's move out of
			// enabled is for.
			skip("state", s.stalePin(ctx, ft, cur.ID, cur.Status, cur.Version, cur.DefinitionHash))
		case step == toolstate.Enabled && unpinnedEnable(ft) && st.Redefined[cur.ID] != "":
			// An older file (or a hand-written one) pins nothing, and the tool's server
			// redefined it since it was last enabled (while enabled, or after a person
			// disabled it): enabling it would put that definition in service unreviewed. A
			// tool a person disabled, still at the definition it was enabled with, is
			// enabled as the file says.
			skip("state", redefinedUnpinned(st.Redefined[cur.ID], cur.Status, cur.Version, cur.DefinitionHash))
		case (blocked || toolstate.NeedsOverride(cur.Status, step)) && ft.Override == "":
			skip("state", fmt.Sprintf("enabling it (now %s) needs an administrator's override with a reason: enable it on the tool's page, or give override: <reason> in the file", cur.Status))
		default:
			to := ft.State
			if it.via {
				to += " (enabled, then disabled)"
			}
			if ft.State == toolstate.Enabled {
				// Whether a change upstream before the apply would be caught by the file
				// itself, or only by this plan's own check (unchanged).
				if ft.DefinitionHash == "" {
					to += " (definition v" + cur.Version + " not pinned by the file)"
				} else {
					to += " (definition v" + cur.Version + ", as the file pins it)"
				}
			}
			if blocked || toolstate.NeedsOverride(cur.Status, step) {
				to += ", overriding its findings: " + strconv.Quote(ft.Override)
				it.override = true
			}
			change("state", cur.Status, to)
			it.state = ft.State
		}
	}
	if ft.State == toolstate.Enabled && cur.Status == toolstate.Enabled && cur.Override != "" && ft.Override != cur.Override {
		// An override's reason is recorded by the enable that needed it (tools'
		// SetEnabledTx), and the tool is enabled already: there is no move to give the
		// file's reason to (or to drop it with), so it is named rather than ignored
		// unseen. A tool enabled without one needed none: the file's override is for
		// findings that block an enable, as when the file enabled it.
		skip("override", overrideKept(ft.Override, cur.Override))
	}
	it.perms = map[string]*bool{}
	for _, user := range slices.Sorted(maps.Keys(ft.Permissions)) {
		want := ft.Permissions[user]
		if !st.Users[user] {
			skip("permissions."+user, fmt.Sprintf("there is no user %q: the permission was not applied", user))
			continue
		}
		if have, ok := cur.Permissions[user]; !ok || have != want {
			if want && opts.Token {
				skip("permissions."+user, tokenPermission)
				continue
			}
			from := "role"
			if ok {
				from = strconv.FormatBool(have)
			}
			change("permissions."+user, from, strconv.FormatBool(want))
			it.perms[user] = &want
		}
	}
	for _, user := range slices.Sorted(maps.Keys(cur.Permissions)) {
		if _, ok := ft.Permissions[user]; !ok {
			if !cur.Permissions[user] && opts.Token {
				skip("permissions."+user, tokenPermission)
				continue
			}
			change("permissions."+user, strconv.FormatBool(cur.Permissions[user]), "role")
			it.perms[user] = nil
		}
	}
	planCompensation(it, ft, cur, st, pending, schemas, skip)
	// A case's arguments are read by the tool's schema, for the secrets it may not keep.
	var caseSchema json.RawMessage
	var err error
	if len(ft.TestCases) > 0 {
		var t tools.Target
		t, err = s.tools.Target(ctx, cur.ID)
		caseSchema = t.InputSchema
	}
	if err != nil {
		skip("test_cases", err.Error()+": the test cases were not applied")
	} else {
		planCases(it, ft, cur, caseSchema, skip)
	}
	if len(it.Changes) == 0 {
		return nil, not
	}
	return it, not
}

// overrideWithoutHash says why a tool's state and override were not applied: the file
// gives the override without definition_hash. cur is the tool (nil: not discovered yet).
func overrideWithoutHash(cur *storedTool) string {
	msg := "needs definition_hash beside it: an override is a decision about one definition (export the tool again, or copy the hash from the tool's page): the tool's state and override were not applied"
	if cur != nil {
		msg += ", and it stays " + cur.Status
	}
	return msg
}

// overrideKept says why the file's override (file, "" for none) of a tool enabled
// already with the override reason stored was not applied.
func overrideKept(file, stored string) string {
	const how = "the reason of an override is given on the tool's page when the tool is enabled (disable it there and enable it again with the new reason)"
	if file == "" {
		return fmt.Sprintf("the file gives no override, but the tool is enabled with one (%s): an import does not remove it, and the tool stays enabled with it; %s",
			strconv.Quote(stored), how)
	}
	return fmt.Sprintf("the tool is enabled with the override %s; the file's %s was not applied, and the tool keeps its override: %s",
		strconv.Quote(stored), strconv.Quote(file), how)
}

// unpinnedEnable reports whether ft enables its tool without saying which definition.
func unpinnedEnable(ft *Tool) bool {
	return ft.State == toolstate.Enabled && ft.DefinitionHash == ""
}

// redefinedUnpinned says why an unpinned enable was not applied: the tool's server
// redefined it since it was last enabled (reason, discovery's history row's), and it is
// now status at definition version (hash current).
func redefinedUnpinned(reason, status, version, current string) string {
	return fmt.Sprintf("its server redefined the tool since it was last enabled here (%s), and nobody has enabled the new definition since. The file does not pin a definition (no definition_hash), so state enabled was not applied, and the tool stays %s at definition v%s (%s). Review definition v%s on the tool's page (enable it there if it is safe), or give definition_hash: beside state, the hash of the definition you reviewed",
		reason, status, version, shortHash(current), version)
}

// pinApplies reports whether ft's definition_hash, when it gives one, must name the
// tool's current definition for its state to be applied. enables says whether the move
// enables the tool (a disabled tool never enabled is enabled on its way): the pin holds
// when the file enables it or gives an override. A disable alone is never refused for
// it, as the tool page's is not.
func pinApplies(ft *Tool, enables bool) bool {
	return enables && (ft.State == toolstate.Enabled || ft.Override != "")
}

// pinIs reports whether pin, a file's definition_hash, names the definition current:
// the whole hash, or its start of at least tools.SeenPrefix characters, matched as the
// tool pages and the API match the hash a person saw (tools' seenIs, unexported).
func pinIs(pin, current string) bool {
	return pin == current || len(pin) >= tools.SeenPrefix && strings.HasPrefix(current, pin)
}

// shortHash is the start of a definition hash people compare by eye.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// stalePin says why the state the file gives the tool toolID (status, definition
// version and hash current) was not applied: its definition_hash names another
// definition, which it names by version when the tool had it here.
func (s *Service) stalePin(ctx context.Context, ft *Tool, toolID, status, version, current string) string {
	pinned := shortHash(ft.DefinitionHash) + " (not a definition this tool has had here)"
	vs, err := s.reg.ToolVersions(ctx, toolID)
	if err != nil {
		pinned = shortHash(ft.DefinitionHash)
	}
	if i := slices.IndexFunc(vs, func(v registry.ToolVersion) bool { return pinIs(ft.DefinitionHash, v.DefinitionHash) }); i >= 0 {
		pinned = fmt.Sprintf("v%d.%d (%s)", vs[i].VersionMajor, vs[i].VersionMinor, shortHash(vs[i].DefinitionHash))
	} else if v, found, err := s.reg.ToolVersionOf(ctx, toolID, ft.DefinitionHash); err == nil && found {
		// Older than the newest versions listed (a whole hash only: looked up exactly).
		pinned = fmt.Sprintf("v%d.%d (%s)", v.VersionMajor, v.VersionMinor, shortHash(v.DefinitionHash))
	}
	what := "state " + ft.State
	if ft.Override != "" {
		what += " with its override"
	}
	return fmt.Sprintf("the file pins definition %s, but the tool's definition is now v%s (%s): %s was not applied, and the tool stays %s. Review the new definition on the tool's page (enable it there if it is safe), then export again",
		pinned, version, shortHash(current), what, status)
}

// pendingChanges are the settings the file states for a tool not discovered yet:
// applying sets them after discovery with no other review, so the plan (and its
// digest) shows them. Its schema is unknown yet: a value is masked by its name and
// look, and one that is sure to be refused (a credential in a test case or a
// compensation, a secret not in the environment) is shown as not applied, never its value.
func pendingChanges(ft *Tool) []registry.FieldChange {
	var out []registry.FieldChange
	add := func(field, to string, secret bool) {
		out = append(out, registry.FieldChange{Field: field, To: to, Secret: secret})
	}
	if ft.State != "" {
		state := ft.State
		switch {
		case ft.DefinitionHash != "":
			state += " (definition " + shortHash(ft.DefinitionHash) + " only, as the file pins it)"
		case ft.State == toolstate.Enabled:
			state += " (definition not pinned by the file)"
		}
		add("state", state, false)
		if ft.Override != "" {
			add("override", strconv.Quote(ft.Override)+" (if its findings or a failed test block enabling it)", false)
		}
	}
	if ft.Risk != "" {
		add("risk", ft.Risk, false)
	}
	if ft.TimeoutMS != 0 {
		add("timeout_ms", strconv.Itoa(ft.TimeoutMS), false)
	}
	if ft.RateLimit != 0 {
		add("rate_limit", strconv.Itoa(ft.RateLimit), false)
	}
	if ft.Category != "" {
		add("category", ft.Category, false)
	}
	if len(ft.Tags) > 0 {
		add("tags", "["+strings.Join(ft.Tags, ", ")+"]", false)
	}
	for _, name := range slices.Sorted(maps.Keys(ft.Params)) {
		fp, field := ft.Params[name], "config."+name
		switch {
		case fp.SecretEnv != "" && fp.Value == nil:
			add(field, fmt.Sprintf("not applied: ${env:%s} is not set where the file was imported", fp.SecretEnv), false)
		case fp.SecretEnv != "":
			add(field, "set (secret, from ${env:"+fp.SecretEnv+"})", true)
		case tools.IsSecretParam(name, nil) || secrets.HoldsSecret(decodeJSON(fp.Value)):
			add(field, "set (secret)", true)
		default:
			add(field, fp.Mode+" "+compactJSON(fp.Value), false)
		}
	}
	for _, user := range slices.Sorted(maps.Keys(ft.Permissions)) {
		add("permissions."+user, strconv.FormatBool(ft.Permissions[user]), false)
	}
	if c := ft.Compensation; c != nil {
		var ve *verr.Error
		if errors.As(executions.CheckMapSecrets(c.Arguments, nil, c.Undo), &ve) {
			for _, f := range ve.Fields {
				add("compensation.arguments."+strings.TrimPrefix(f.Field, "/argument_map/"), "not applied: "+f.Message, false)
			}
		} else {
			add("compensation", c.Undo+" "+argsText(c.Arguments), false)
		}
	}
	for _, tc := range ft.TestCases {
		if msg := tools.SecretsHeld(nil, tc.Arguments); msg != "" {
			add("test_cases."+tc.Name, "not applied: "+msg, false)
			continue
		}
		to := fmt.Sprintf("%s %s", compactJSON(tc.Arguments), tc.Expect)
		if tc.ExpectText != "" {
			to += " containing " + strconv.Quote(tc.ExpectText)
		}
		add("test_cases."+tc.Name, to, false)
	}
	return out
}

// maxOffered is how many of a server's tools a message names.
const maxOffered = 20

// offers says which tools server offers, for the file's tool named qualified that it
// does not: the first such tool of each server names them (at most maxOffered), the
// others point at it. Listed in full in every message, a file of thousands of such
// tools took a sort of all tools each and made a plan of hundreds of megabytes.
func (st *state) offers(server, qualified string) string {
	if st.offered == nil {
		st.offered, st.offeredAt = map[string][]string{}, map[string]string{}
		for _, t := range st.Tools {
			st.offered[t.Server] = append(st.offered[t.Server], t.Name)
		}
		for _, names := range st.offered {
			slices.Sort(names)
		}
	}
	if at, ok := st.offeredAt[server]; ok {
		return "tools." + at + " names the tools it offers"
	}
	st.offeredAt[server] = qualified
	names := st.offered[server]
	if len(names) == 0 {
		return "it offers none"
	}
	if len(names) > maxOffered {
		return fmt.Sprintf("it offers %s and %d more", strings.Join(names[:maxOffered], ", "), len(names)-maxOffered)
	}
	return "it offers " + strings.Join(names, ", ")
}

func (s *Service) planParams(ctx context.Context, it *Item, ft *Tool, cur *storedTool, compare bool, skip func(field, msg string)) {
	inputs := map[string]tools.ParamInput{}
	changed := false
	// secretParam reports whether a plain value will be stored encrypted, as applying
	// decides it (tools.SecretParams, a stored secret, a value that looks like one); the
	// tool's schema is read once, when a value first needs it.
	var props map[string]map[string]any
	var isSecret func(string, map[string]any) bool
	secretParam := func(name string, cs tools.Setting, v json.RawMessage) (bool, error) {
		if cs.Secret != "" || secrets.LooksSecretName(name) || secrets.HoldsSecret(decodeJSON(v)) {
			return true, nil
		}
		if props == nil {
			t, err := s.tools.Target(ctx, cur.ID)
			if err != nil {
				return false, err
			}
			props, isSecret = schema.PropertySchemas(t.InputSchema), tools.SecretParams(t.InputSchema)
		}
		return isSecret(name, props[name]), nil
	}
	for _, name := range slices.Sorted(maps.Keys(ft.Params)) {
		fp := ft.Params[name]
		cs, stored := cur.Config.Params[name]
		field := "config." + name
		switch {
		case fp.SecretEnv != "" && fp.Value == nil:
			if !stored || cs.Secret == "" {
				skip(field, fmt.Sprintf("the secret's value is not stored here and ${env:%s} is not set where the file was imported: set it on the tool's page, or set %s and import again", fp.SecretEnv, fp.SecretEnv))
				if stored {
					// The inputs replace the whole parameter set: left out, the stored setting
					// would go with any other parameter's change, though the plan keeps it.
					inputs[name] = tools.ParamInput{Mode: cs.Mode, Value: cs.Value}
				}
				continue
			}
			inputs[name] = tools.ParamInput{Mode: fp.Mode, Secret: true} // keeps the stored value
			if cs.Mode != fp.Mode {
				it.Changes = append(it.Changes, registry.FieldChange{Field: field + ".mode", From: cs.Mode, To: fp.Mode})
				changed = true
			}
		case fp.SecretEnv != "":
			// Encrypted whatever its look: the file says it is a secret.
			inputs[name] = tools.ParamInput{Mode: fp.Mode, Value: fp.Value, Secret: true}
			same := stored && cs.Secret != "" && cs.Mode == fp.Mode && compare && s.tools.SameSecret(cur.ID, name, cs.Secret, fp.Value)
			if !same {
				to := "set"
				if stored {
					to = "replaced"
				}
				it.Changes = append(it.Changes, registry.FieldChange{Field: field, To: to + " (secret, from ${env:" + fp.SecretEnv + "})", Secret: true})
				changed = true
			}
		default:
			inputs[name] = tools.ParamInput{Mode: fp.Mode, Value: fp.Value}
			secret, err := secretParam(name, cs, fp.Value)
			if err != nil {
				skip("config", err.Error()+": the tool's parameters were not applied")
				it.Changes = slices.DeleteFunc(it.Changes, func(c registry.FieldChange) bool { return strings.HasPrefix(c.Field, "config.") })
				return
			}
			if secret {
				// Stored encrypted however the file gives it: compared as the secret it is,
				// and its value never shown.
				if stored && cs.Secret != "" && cs.Mode == fp.Mode && compare && s.tools.SameSecret(cur.ID, name, cs.Secret, fp.Value) {
					continue
				}
				to := "set"
				if stored {
					to = "replaced"
				}
				it.Changes = append(it.Changes, registry.FieldChange{Field: field, To: to + " (secret)", Secret: true})
				changed = true
				continue
			}
			if stored && cs.Secret == "" && cs.Mode == fp.Mode && tools.SameJSON(cs.Value, fp.Value) {
				continue
			}
			from := ""
			if stored {
				from = cs.Mode + " " + compactJSON(cs.Value)
				if cs.Secret != "" {
					from = cs.Mode + " (secret)"
				}
			}
			it.Changes = append(it.Changes, registry.FieldChange{Field: field, From: from, To: fp.Mode + " " + compactJSON(fp.Value)})
			changed = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cur.Config.Params)) {
		if _, ok := ft.Params[name]; !ok {
			it.Changes = append(it.Changes, registry.FieldChange{Field: "config." + name, To: "removed"})
			changed = true
		}
	}
	if !changed {
		return
	}
	// Checked as applying them will check (names, types, values): a clean plan must
	// apply, and a dry run say what would be refused.
	// Either way the parameters are not applied (it.params stays nil): their changes
	// leave the plan, which shows only what applying it does.
	var ve *verr.Error
	switch err := s.tools.CheckParams(ctx, cur.ID, inputs); {
	case errors.As(err, &ve):
		for _, f := range ve.Fields {
			skip("config."+strings.TrimPrefix(f.Field, "params."), f.Message+": the tool's parameters were not applied")
		}
		it.Changes = slices.DeleteFunc(it.Changes, func(c registry.FieldChange) bool { return strings.HasPrefix(c.Field, "config.") })
		return
	case err != nil:
		skip("config", err.Error()+": the tool's parameters were not applied")
		it.Changes = slices.DeleteFunc(it.Changes, func(c registry.FieldChange) bool { return strings.HasPrefix(c.Field, "config.") })
		return
	}
	it.params = inputs
}

// compensationSchemas are the input schemas of the stored tools the file's
// compensations name (the tool undone and its undo tool), by qualified name: what
// planCompensation checks the argument names against, as the tool page does; and of
// the undo tool of the stored compensation each replaces, whose schema masks its
// fixed values in the plan as in the export.
func (s *Service) compensationSchemas(ctx context.Context, fts []Tool, st *state) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, ft := range fts {
		if ft.Compensation == nil {
			continue
		}
		for _, name := range []string{ft.Name, ft.Compensation.Undo} {
			if _, done := out[name]; done || st.Tools[name] == nil {
				continue
			}
			t, err := s.tools.Target(ctx, st.Tools[name].ID)
			if err != nil {
				return nil, fmt.Errorf("configcode: plan: the schema of %s: %w", name, err)
			}
			out[name] = t.InputSchema
		}
		// By name: its tool may be one this import prunes or its server no longer lists,
		// which the plan's state leaves out, and its values are shown all the same.
		if cur := st.Tools[ft.Name]; cur != nil && cur.Compensation != nil {
			name := cur.Compensation.Undo
			if _, done := out[name]; done {
				continue
			}
			t, err := s.tools.Target(ctx, name)
			if errors.Is(err, tools.ErrNotFound) {
				continue // gone with its server: maskedArgsText masks every value then
			}
			if err != nil {
				return nil, fmt.Errorf("configcode: plan: the schema of %s: %w", name, err)
			}
			out[name] = t.InputSchema
		}
	}
	return out, nil
}

func planCompensation(it *Item, ft *Tool, cur *storedTool, st *state, pending map[string]bool, schemas map[string]json.RawMessage, skip func(field, msg string)) {
	want, have := ft.Compensation, cur.Compensation
	// The stored compensation's undo tool is on a server this import deletes: it goes
	// with that server whatever the file says, which a compensation not applied must say.
	lost := have != nil && st.Pruned[serverOf(have.Undo)]
	if want != nil {
		server, _, _ := toolname.Split(want.Undo)
		same := have != nil && have.Undo == want.Undo && sameArgs(have.Arguments, want.Arguments)
		switch {
		case want.Undo == ft.Name:
			skip("compensation.undo", "a tool cannot undo itself")
			want = nil
		case st.Unlisted[want.Undo]:
			skip("compensation.undo", fmt.Sprintf("server %s does not list tool %q now: the compensation was not applied", server, want.Undo))
			want = nil
		case st.Pruned[server]:
			// Not "there is no tool": that reads as if the stored compensation stayed, and
			// deleting the server removes it (tool_compensations.undo_tool_id cascades).
			msg := fmt.Sprintf("server %s is deleted by this import (prune), and its tool %q with it: the compensation was not applied", server, want.Undo)
			if lost {
				msg += fmt.Sprintf(", and the stored one (undo %s) goes with the server: the tool is left without one", have.Undo)
				lost = false // said
			}
			skip("compensation.undo", msg)
			want = nil
		case st.Tools[want.Undo] == nil && !pending[server]:
			skip("compensation.undo", fmt.Sprintf("there is no tool %q: the compensation was not applied", want.Undo))
			want = nil
		case st.Tools[want.Undo] == nil:
			skip("compensation.undo", fmt.Sprintf("tool %q is not discovered yet: import the file again once server %s is discovered", want.Undo, server))
			want = nil
		case !same:
			// Checked as the tool page checks it, when it would change (a stored one
			// that no longer passes is the tool page's to show).
			for _, err := range []error{
				executions.CheckMapNames(want.Arguments, schemas[ft.Name], schemas[want.Undo], want.Undo),
				executions.CheckMapSecrets(want.Arguments, schemas[want.Undo], want.Undo),
			} {
				var ve *verr.Error
				if errors.As(err, &ve) {
					for _, f := range ve.Fields {
						name := strings.TrimPrefix(f.Field, "/argument_map/")
						skip("compensation.arguments."+name, f.Message+": the compensation was not applied")
					}
					want = nil
				}
			}
		}
	}
	if want == nil && ft.Compensation != nil && lost {
		skip("compensation", fmt.Sprintf("the stored compensation (undo %s) goes with server %s, which this import deletes (prune): the tool is left without one",
			have.Undo, serverOf(have.Undo)))
	}
	switch {
	case want == nil && have == nil:
	case want == nil:
		if ft.Compensation == nil { // not applicable is not "remove"
			it.Changes = append(it.Changes, registry.FieldChange{Field: "compensation", From: have.Undo, To: "none"})
			it.comp = true
		}
	case have == nil || have.Undo != want.Undo || !sameArgs(have.Arguments, want.Arguments):
		from := "none"
		if have != nil {
			from = have.Undo + " " + maskedArgsText(have.Arguments, schemas[have.Undo])
		}
		it.Changes = append(it.Changes, registry.FieldChange{Field: "compensation", From: from, To: want.Undo + " " + argsText(want.Arguments)})
		it.comp = true
	}
}

func argsText(m map[string]executions.MappedArgument) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// maskedArgsText is argsText of a stored mapping with each fixed value that undoSchema,
// the undo tool's current input schema, marks secret masked, as the export masks it
// (toolEntry): saved before the schema said so, it is shown by neither. Without a
// schema (the undo tool is gone) every fixed value is masked.
func maskedArgsText(m map[string]executions.MappedArgument, undoSchema json.RawMessage) string {
	if undoSchema == nil {
		// The undo tool is gone: nothing says which values are secret, so none is shown.
		out := make(map[string]executions.MappedArgument, len(m))
		for k, a := range m {
			if len(a.Value) > 0 {
				a.Value = json.RawMessage(`"` + tools.Mask + `"`)
			}
			out[k] = a
		}
		return argsText(out)
	}
	names := tools.SecretArgNames(undoSchema)
	if len(names) == 0 {
		return argsText(m)
	}
	out := make(map[string]executions.MappedArgument, len(m))
	for k, a := range m {
		if len(a.Value) > 0 {
			// Masked one by one as the undo tool's argument k; a value that is not JSON
			// (jsonb holds none) is masked rather than shown.
			one, err := json.Marshal(map[string]json.RawMessage{k: a.Value})
			if err != nil {
				a.Value = json.RawMessage(`"` + tools.Mask + `"`)
			} else if masked := tools.MaskArgs(one, names); !bytes.Equal(masked, one) {
				var v map[string]json.RawMessage
				if json.Unmarshal(masked, &v) == nil {
					a.Value = v[k]
				}
			}
		}
		out[k] = a
	}
	return argsText(out)
}

func sameArgs(a, b map[string]executions.MappedArgument) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.From != y.From || (len(x.Value) > 0) != (len(y.Value) > 0) || len(x.Value) > 0 && !tools.SameJSON(x.Value, y.Value) {
			return false
		}
	}
	return true
}

func planCases(it *Item, ft *Tool, cur *storedTool, schema json.RawMessage, skip func(field, msg string)) {
	names := map[string]bool{}
	for _, tc := range ft.TestCases {
		names[tc.Name] = true
		if msg := tools.SecretsHeld(schema, tc.Arguments); msg != "" {
			skip("test_cases."+tc.Name+".arguments", msg+": the case was not applied")
			continue
		}
		have, ok := cur.TestCases[tc.Name]
		if ok && have.Expect == tc.Expect && have.ExpectText == tc.ExpectText && tools.SameJSON(have.Arguments, tc.Arguments) {
			continue
		}
		to := fmt.Sprintf("%s %s", compactJSON(tc.Arguments), tc.Expect)
		if tc.ExpectText != "" {
			to += " containing " + strconv.Quote(tc.ExpectText)
		}
		from := ""
		if ok {
			// Masked as the export masks it: a value saved before the schema marked its
			// argument secret is not shown by a plan either.
			from = fmt.Sprintf("%s %s", compactJSON(tools.MaskArgs(have.Arguments, tools.SecretArgNames(schema))), have.Expect)
			if have.ExpectText != "" {
				from += " containing " + strconv.Quote(have.ExpectText)
			}
		}
		it.Changes = append(it.Changes, registry.FieldChange{Field: "test_cases." + tc.Name, From: from, To: to})
		it.cases = append(it.cases, tc)
	}
	for _, name := range slices.Sorted(maps.Keys(cur.TestCases)) {
		if !names[name] {
			it.Changes = append(it.Changes, registry.FieldChange{Field: "test_cases." + name, To: "removed"})
			it.drop = append(it.drop, name)
		}
	}
}

// decodeJSON is a JSON value decoded as applying decodes it (numbers kept as written).
func decodeJSON(raw json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	_ = dec.Decode(&v)
	return v
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// String renders the plan for people: the servers as registry renders them, then each
// category, the settings and each tool with its changed fields (old → new), what waits
// for discovery, what cannot be applied, and a summary. Never a secret value.
func (p *Plan) String() string {
	var b strings.Builder
	b.WriteString(p.Servers.String())
	if len(p.Items) > 0 || len(p.Unapplied) > 0 {
		b.WriteString("\nCategories, settings and tools\n")
	}
	for _, it := range p.Items {
		sign := map[string]string{registry.PlanCreate: "+ create", registry.PlanUpdate: "~ update",
			registry.PlanDelete: "- delete", ActionPending: "… after discovery:"}[it.Action]
		fmt.Fprintf(&b, "%s %s\n", sign, it.label())
		for _, c := range it.Changes {
			fmt.Fprintf(&b, "    %s\n", c)
		}
	}
	if len(p.Unapplied) > 0 {
		b.WriteString("\nNot applied (the rest is):\n")
		for _, u := range p.Unapplied {
			b.WriteString("  ! " + u.String() + "\n")
		}
	}
	fmt.Fprintf(&b, "\n%d tool(s) to change, %d after discovery, %d categories to create, %d to update, %d to delete, settings %s; %d not applied.\n",
		p.Count(KindTool, registry.PlanUpdate), p.Count(KindTool, ActionPending), p.Count(KindCategory, registry.PlanCreate),
		p.Count(KindCategory, registry.PlanUpdate), p.Count(KindCategory, registry.PlanDelete),
		map[bool]string{true: "change", false: "unchanged"}[p.Count(KindSettings, registry.PlanUpdate) > 0], len(p.Unapplied))
	return b.String()
}
