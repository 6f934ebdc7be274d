package configcode

// Applying: a reviewed plan carried out in one transaction; the tools of servers the
// import registers follow in a second, after those servers are discovered.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// ErrInvalidPlan is returned by Apply for a plan that has errors.
var ErrInvalidPlan = errors.New("configcode: the import plan has errors; nothing was changed")

// ErrPartial: the first transaction (servers, categories, settings, known tools) was
// applied, the settings of the tools of servers discovered afterwards were not.
var ErrPartial = errors.New("configcode: the import was applied except for the settings of the tools of the servers it discovered")

// Result is what Apply did.
type Result struct {
	Servers    registry.ImportResult `json:"servers"`
	Changed    []string              `json:"changed"`    // "tool a__b", "category c", "settings"
	Discovered []string              `json:"discovered"` // servers discovered by the import
	Unapplied  []registry.Problem    `json:"not_applied"`
}

func (r Result) String() string {
	return fmt.Sprintf("servers: %s; %d other change(s), %d server(s) discovered, %d not applied",
		r.Servers, len(r.Changed), len(r.Discovered), len(r.Unapplied))
}

// Apply carries out plan: servers, categories, settings and the tools already known in
// one transaction, each change audited by its owner as the pages audit it, plus one
// config.import entry summing the import up. Then, when the file states settings of
// tools on servers that this import registered (or that were never discovered), it
// discovers those servers (Options.Discoverer) and applies those tools' settings in a
// second transaction, planned against what discovery found. What cannot be applied is
// reported in Result.Unapplied, and the rest is applied.
func (s *Service) Apply(ctx context.Context, actor audit.Actor, plan *Plan) (Result, error) {
	var res Result
	if plan == nil {
		return res, errors.New("configcode: apply: no plan")
	}
	if plan.HasErrors() {
		return res, fmt.Errorf("%w:\n%s", ErrInvalidPlan, registry.ConfigError(plan.Errors).Error())
	}
	res.Unapplied = slices.Clone(plan.Unapplied)
	var pending []Item
	for _, it := range plan.Items {
		if it.Action == ActionPending {
			pending = append(pending, it)
		}
	}
	serverChanges := plan.Servers.Count(registry.PlanCreate)+plan.Servers.Count(registry.PlanUpdate)+plan.Servers.Count(registry.PlanDelete) > 0
	// counted is how much of res.Unapplied a config.import entry has counted: the second
	// transaction's entry counts what follows (all of it when there was no first).
	counted := 0
	if serverChanges || len(pending) < len(plan.Items) {
		base := len(res.Unapplied)
		err := db.WithTxRetry(ctx, s.begin, func(tx pgx.Tx) error {
			var err error
			// Begun again after a retry: what the last attempt noted goes.
			res.Changed, res.Servers, res.Unapplied = nil, registry.ImportResult{}, res.Unapplied[:base]
			if err := s.unchanged(ctx, tx, plan); err != nil {
				return err
			}
			if res.Servers, err = s.reg.ApplyImportTx(ctx, tx, actor, plan.Servers); err != nil {
				return err
			}
			for _, it := range plan.Items {
				if it.Action == ActionPending {
					continue
				}
				if err := s.applyItem(ctx, tx, actor, it, plan.File, &res); err != nil {
					return err
				}
			}
			return s.summary(ctx, tx, actor, plan, &res, len(res.Servers.Created)+len(res.Servers.Updated)+len(res.Servers.Deleted))
		})
		if err != nil {
			return Result{}, err
		}
		counted = len(res.Unapplied)
	}
	if len(pending) == 0 {
		return res, nil
	}
	if err := s.applyPending(ctx, actor, plan, pending, counted, &res); err != nil {
		// Named one by one, as what a plan cannot apply is: the result says what is left.
		for _, it := range pending {
			field := "tools." + it.Name
			if !slices.ContainsFunc(res.Unapplied, func(p registry.Problem) bool { return p.Field == field }) {
				res.Unapplied = append(res.Unapplied, registry.Problem{File: plan.File, Field: field,
					Message: "the import stopped after discovering server " + serverOf(it.Name) + ": its settings were not applied"})
			}
		}
		return res, fmt.Errorf("%w: %w", ErrPartial, err)
	}
	return res, nil
}

func serverOf(qualified string) string {
	server, _, _ := toolname.Split(qualified)
	return server
}

// ErrChangedSincePlan: what a plan changes was changed by someone else after it was
// made; applied, it would mix the two.
var ErrChangedSincePlan = fault.Stale("changed_since_plan", "the configuration changed since this import was planned: plan it again")

// unchanged checks, with imports one at a time, that the tools, categories and settings
// plan changes or its file lists are still as plan saw them: two imports applied at once
// each kept the other's values where its own plan saw nothing to change, matching
// neither file. A tool's definition counts: an enable is of the definition previewed.
// Servers have their own check (registry's).
func (s *Service) unchanged(ctx context.Context, tx pgx.Tx, plan *Plan) error {
	if plan.base == nil {
		return nil
	}
	if _, err := tx.Exec(ctx, `/* configcode.unchanged */ SELECT pg_advisory_xact_lock(hashtext('toolwarden:config-import'))`); err != nil {
		return fmt.Errorf("configcode: lock: %w", err)
	}
	// The tools' rows too, as the tool page's update locks them, before they are read:
	// an edit committed meanwhile is seen (and refuses the import), a later one waits for
	// the import to commit, instead of being overwritten by the import's update. In id
	// order, as others lock many tools, so that two never wait on each other.
	checks := slices.Clone(plan.Items)
	if f := plan.file; f != nil {
		// What the file lists and the plan left alone: another import may change it.
		for _, ft := range f.Tools {
			if cur := plan.base.Tools[ft.Name]; cur != nil {
				checks = append(checks, Item{Kind: KindTool, Name: ft.Name, Action: registry.PlanUnchanged, cur: cur})
			}
		}
		for _, c := range f.Categories {
			checks = append(checks, Item{Kind: KindCategory, Name: c.Name})
		}
		if f.Settings != nil {
			checks = append(checks, Item{Kind: KindSettings, Name: KindSettings})
		}
	}
	var ids []string
	seen := map[string]bool{}
	for _, it := range checks {
		if it.Kind == KindTool && it.cur != nil && !seen[it.cur.ID] {
			seen[it.cur.ID] = true
			ids = append(ids, it.cur.ID)
		}
	}
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `/* configcode.unchanged.tools */ SELECT 1 FROM mcp_tools WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`, ids); err != nil {
			return fmt.Errorf("configcode: lock tools: %w", err)
		}
	}
	// Categories and the settings too: the tool page's category save and the settings
	// page lock their rows as they write. NO KEY UPDATE, as a tool's update takes KEY
	// SHARE on its category (the foreign key) and must not wait on the import for it.
	var cats []string
	settings := false
	for _, it := range checks {
		switch it.Kind {
		case KindCategory:
			cats = append(cats, it.Name)
		case KindSettings:
			settings = true
		}
	}
	if len(cats) > 0 {
		if _, err := tx.Exec(ctx, `/* configcode.unchanged.categories */
			SELECT 1 FROM tool_categories WHERE name = ANY($1) ORDER BY id FOR NO KEY UPDATE`, cats); err != nil {
			return fmt.Errorf("configcode: lock categories: %w", err)
		}
	}
	if settings {
		if err := executions.LockSettings(ctx, tx, "import"); err != nil {
			return err
		}
	}
	now, err := s.load(ctx, tx)
	if err != nil {
		return err
	}
	for _, it := range checks {
		same := true
		switch it.Kind {
		case KindTool:
			was, is := settingsOnly(plan.base.Tools[it.Name]), settingsOnly(now.Tools[it.Name])
			if it.Action == registry.PlanUnchanged {
				// A tool the plan leaves alone is not pinned to its definition: one the
				// server redefined meanwhile (same state and settings) is nothing the
				// import changes.
				was, is = unpinned(was), unpinned(is)
			}
			same = it.Action == ActionPending || sameSettings(was, is)
		case KindCategory:
			same = reflect.DeepEqual(now.Categories[it.Name], plan.base.Categories[it.Name])
		case KindSettings:
			same = now.Settings == plan.base.Settings
		}
		if !same {
			return fmt.Errorf("%w (%s %s)", ErrChangedSincePlan, it.Kind, it.Name)
		}
	}
	return nil
}

// unpinned is t without what a new definition changes by itself: its hash and the
// worst finding of its validation.
func unpinned(t *storedTool) *storedTool {
	if t == nil {
		return nil
	}
	c := *t
	c.DefinitionHash, c.ValidationWorst, c.Version = "", "", ""
	return &c
}

// settingsOnly is t without its test cases' last runs: a run of a test case between plan
// and apply is no change of configuration.
func settingsOnly(t *storedTool) *storedTool {
	if t == nil {
		return nil
	}
	c := *t
	c.TestCases = make(map[string]tools.TestCase, len(t.TestCases))
	for name, tc := range t.TestCases {
		tc.LastRunAt, tc.LastPassed, tc.LastDurationMS, tc.LastMessage = nil, nil, nil, ""
		c.TestCases[name] = tc
	}
	return &c
}

// sameSettings reports whether a person changed nothing of was, the tool as the plan
// saw it, to make is. Its parameters are compared by what a person sets (mode, value,
// whether it is secret), not by their ciphertexts: `secrets rotate` re-encrypts them
// under a new key, without a new configuration version, and that is no change. A
// secret's ciphertext that differs is one a person saved when the version moved too.
func sameSettings(was, is *storedTool) bool {
	if was == nil || is == nil {
		return was == is
	}
	if len(was.Config.Params) != len(is.Config.Params) {
		return false
	}
	for name, w := range was.Config.Params {
		i, ok := is.Config.Params[name]
		if !ok || w.Mode != i.Mode || !bytes.Equal(w.Value, i.Value) || (w.Secret == "") != (i.Secret == "") ||
			w.Secret != i.Secret && was.ConfigVersion != is.ConfigVersion {
			return false
		}
	}
	a, b := *was, *is
	a.Config, b.Config = tools.Configuration{}, tools.Configuration{}
	// A save that set everything as it was moves the version alone: nothing to refuse.
	a.ConfigVersion, b.ConfigVersion = 0, 0
	return reflect.DeepEqual(&a, &b)
}

// applyPending discovers the servers of the pending tools, then plans and applies those
// tools against what was found. res.Unapplied from counted on is what its config.import
// entry counts as not applied.
func (s *Service) applyPending(ctx context.Context, actor audit.Actor, plan *Plan, pending []Item, counted int, res *Result) error {
	notApplied := func(it Item, msg string) {
		res.Unapplied = append(res.Unapplied, registry.Problem{File: plan.File, Field: "tools." + it.Name, Message: msg})
	}
	failed := map[string]string{}
	var servers []string
	for _, it := range pending {
		server, _, _ := toolname.Split(it.Name)
		if !slices.Contains(servers, server) {
			servers = append(servers, server)
		}
	}
	slices.Sort(servers)
	for _, name := range servers {
		sv, err := s.reg.GetServerByName(ctx, name)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			failed[name] = "server " + name + " is not registered"
			continue
		case err != nil:
			return err
		case !sv.Enabled:
			failed[name] = "server " + name + " is disabled, so it was not discovered: enable it and import the file again"
			continue
		case s.discover == nil:
			failed[name] = "server " + name + " is not discovered yet: import the file again once it is"
			continue
		}
		if _, err := s.discover.DiscoverOnce(ctx, sv.ID, "import", actor); err != nil {
			failed[name] = "server " + name + " could not be discovered (" + err.Error() + "): import the file again once it is"
			continue
		}
		res.Discovered = append(res.Discovered, name)
	}
	st, err := s.load(ctx, s.pool)
	if err != nil {
		return err
	}
	cats := map[string]bool{}
	for name := range st.Categories {
		cats[name] = true
	}
	fts := make([]Tool, 0, len(pending))
	for _, it := range pending {
		fts = append(fts, *it.tool)
	}
	schemas, err := s.compensationSchemas(ctx, fts, st)
	if err != nil {
		return err
	}
	if err := st.loadRedefined(ctx, s.pool, fts); err != nil {
		return err
	}
	var items []Item
	for _, it := range pending {
		server, _, _ := toolname.Split(it.Name)
		if why, ok := failed[server]; ok {
			notApplied(it, why+"; its settings were not applied")
			continue
		}
		ft := *it.tool
		next, ps := s.planTool(ctx, &ft, st, map[string]bool{}, cats, schemas, plan.opts, plan.File)
		if unshown := unshownChanges(it, next); len(unshown) > 0 {
			// The tool was found with settings of its own (configured between plan and
			// apply): applied, the file would change what the reviewed plan never showed.
			notApplied(it, "applying would also change "+strings.Join(unshown, ", ")+
				", which the reviewed plan did not show (the tool was found with settings of its own): its settings were not applied: plan the import again")
			continue
		}
		res.Unapplied = append(res.Unapplied, ps...)
		if next != nil {
			items = append(items, *next)
		}
	}
	if len(items) == 0 {
		return nil
	}
	before, unapplied := len(res.Changed), len(res.Unapplied)
	// Planned against st: checked as the first transaction's items are.
	again := &Plan{Items: items, base: st}
	err = db.WithTxRetry(ctx, s.begin, func(tx pgx.Tx) error {
		res.Changed, res.Unapplied = res.Changed[:before], res.Unapplied[:unapplied]
		if err := s.unchanged(ctx, tx, again); err != nil {
			return err
		}
		for _, it := range items {
			if err := s.applyItem(ctx, tx, actor, it, plan.File, res); err != nil {
				return err
			}
		}
		return s.summary(ctx, tx, actor, &Plan{File: plan.File, Format: plan.Format, Items: items},
			&Result{Changed: res.Changed[before:], Unapplied: res.Unapplied[counted:]}, 0)
	})
	if err != nil {
		// Rolled back, whatever failed (an item, the summary's audit entry, the commit):
		// what the transaction noted did not happen, and Apply names its tools as not applied.
		res.Changed, res.Unapplied = res.Changed[:before], res.Unapplied[:unapplied]
	}
	return err
}

// unshownChanges are the fields that next, a pending tool planned against what
// discovery found, changes though the plan's pending item (pendingChanges) did not show them.
func unshownChanges(pending Item, next *Item) []string {
	if next == nil {
		return nil
	}
	shown := map[string]bool{}
	for _, c := range pending.Changes {
		shown[c.Field] = true
	}
	var out []string
	for _, c := range next.Changes {
		if !shown[c.Field] {
			out = append(out, c.Field)
		}
	}
	return out
}

// applyItem makes one change through the owning service.
func (s *Service) applyItem(ctx context.Context, tx pgx.Tx, actor audit.Actor, it Item, file string, res *Result) error {
	wrap := func(err error) error {
		return fmt.Errorf("configcode: import %s: %s %s: %w", filepath.Base(file), it.Kind, it.Name, err)
	}
	switch it.Kind {
	case KindCategory:
		if it.Action == registry.PlanDelete {
			if err := s.tools.DeleteCategoryTx(ctx, tx, actor, it.catID); err != nil {
				return wrap(err)
			}
		} else if _, err := s.tools.SaveCategoryTx(ctx, tx, actor, it.catID,
			tools.CategoryInput{Name: it.cat.Name, Description: it.cat.Description, AutoEnable: it.cat.AutoEnable}); err != nil {
			return wrap(err)
		}
	case KindSettings:
		if err := executions.StoreSettings(ctx, tx, actor, settingsOf(it.set)); err != nil {
			return wrap(err)
		}
	case KindTool:
		if err := s.applyTool(ctx, tx, actor, it, file, res); err != nil {
			return wrap(err)
		}
	}
	res.Changed = append(res.Changed, it.label())
	return nil
}

func (s *Service) applyTool(ctx context.Context, tx pgx.Tx, actor audit.Actor, it Item, file string, res *Result) error {
	ft, id := it.tool, it.cur.ID
	if it.patch || it.params != nil {
		risk, cat := ft.Risk, ft.Category
		timeout, rate := ft.TimeoutMS, ft.RateLimit
		p := tools.Patch{Risk: &risk, TimeoutMS: &timeout, RateLimit: &rate, Category: &cat, Tags: ft.Tags, SetTags: true,
			Params: it.params, MayLowerRisk: true, Reason: "imported from " + filepath.Base(file),
			// The file states the tool's state: a category's auto-enable would enable a
			// tool whose plan showed only its category, and the export would not match.
			NoCategoryPolicy: true}
		if _, err := s.tools.UpdateTx(ctx, tx, actor, id, p, "tool.import"); err != nil {
			return err
		}
	}
	if it.state != "" && ft.DefinitionHash != "" && pinApplies(ft, it.state == toolstate.Enabled || it.via) {
		// The file's pin, checked again under the row's lock: a discovery between plan
		// and apply must not slip a definition past it, whatever the plan's own check
		// (unchanged) compared.
		var hash, version, status string
		if err := tx.QueryRow(ctx, `/* configcode.apply.pin */ SELECT COALESCE(definition_hash, ''),
				version_major::text || '.' || version_minor::text, status FROM mcp_tools WHERE id = $1 FOR NO KEY UPDATE`, id).
			Scan(&hash, &version, &status); err != nil {
			return fmt.Errorf("definition: %w", err)
		}
		if !pinIs(ft.DefinitionHash, hash) {
			res.Unapplied = append(res.Unapplied, registry.Problem{File: file, Field: "tools." + it.Name + ".state",
				Message: s.stalePin(ctx, ft, id, status, version, hash)})
			it.state = ""
		}
	}
	if it.state == toolstate.Enabled && unpinnedEnable(ft) {
		// The plan's check of an unpinned enable, made again under the row's lock: a
		// definition a discovery between plan and apply brought since the tool was last
		// enabled is not put in service by a file that pins none.
		var status, version, hash string
		if err := tx.QueryRow(ctx, `/* configcode.apply.unpinned */ SELECT status, version_major::text || '.' || version_minor::text,
				COALESCE(definition_hash, '') FROM mcp_tools WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&status, &version, &hash); err != nil {
			return fmt.Errorf("definition: %w", err)
		}
		why, err := redefined(ctx, tx, []string{id})
		if err != nil {
			return err
		}
		if reason := why[id]; reason != "" && status != toolstate.Enabled {
			res.Unapplied = append(res.Unapplied, registry.Problem{File: file, Field: "tools." + it.Name + ".state",
				Message: redefinedUnpinned(reason, status, version, hash)})
			it.state = ""
		}
	}
	if it.state != "" {
		moves := []bool{it.state == toolstate.Enabled}
		if it.via {
			moves = []bool{true, false}
		}
		reason := "imported from " + filepath.Base(file)
		if it.override {
			reason = ft.Override
		}
		for _, enable := range moves {
			// The definition is the one the plan saw: unchanged locked the row and
			// compared its hash, so no rediscovery slips in before this enable.
			outs, err := s.tools.SetEnabledTx(ctx, tx, actor, []string{id}, enable, reason, it.override && enable)
			if err != nil {
				return err
			}
			if len(outs) == 1 && outs[0].Error != "" {
				res.Unapplied = append(res.Unapplied, registry.Problem{File: file, Field: "tools." + it.Name + ".state", Message: outs[0].Error})
				break
			}
		}
	}
	for _, user := range slices.Sorted(maps.Keys(it.perms)) {
		if _, err := s.tools.SetPermissionTx(ctx, tx, actor, id, user, it.perms[user]); err != nil {
			return err
		}
	}
	if it.comp {
		undoID := ""
		var args map[string]executions.MappedArgument
		if c := ft.Compensation; c != nil {
			// In the import's own transaction: it may have deleted the tool (prune).
			t, err := tools.TargetIn(ctx, tx, c.Undo)
			if err != nil {
				return fmt.Errorf("compensation: undo tool %s: %w", c.Undo, err)
			}
			undoID, args = t.ID, c.Arguments
		}
		if err := executions.StoreCompensation(ctx, tx, actor, id, ft.Name, undoID, args); err != nil {
			return err
		}
	}
	// Removed first: a tool keeps at most tools.MaxTestCases, counting those on their way out.
	for _, name := range it.drop {
		if err := s.tools.DeleteTestCaseTx(ctx, tx, actor, id, name); err != nil {
			return err
		}
	}
	for _, tc := range it.cases {
		if _, err := s.tools.SaveTestCaseTx(ctx, tx, actor, id, tc); err != nil {
			return err
		}
	}
	return nil
}

// summary writes the config.import entry: what the file was, what changed and how much
// was not applied, res being what the entry's transaction covers. Counted from res, not
// from the plan: the apply refuses some of what the plan showed (a pin or an unpinned
// enable checked again under the row lock, the lifecycle's own refusal).
func (s *Service) summary(ctx context.Context, tx pgx.Tx, actor audit.Actor, plan *Plan, res *Result, serverChanges int) error {
	if len(res.Changed)+serverChanges == 0 {
		return nil
	}
	_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "config.import", TargetType: "configuration",
		TargetName: filepath.Base(plan.File), Payload: map[string]any{"file": filepath.Base(plan.File), "format": plan.Format,
			"server_changes": serverChanges, "changed": res.Changed, "not_applied": len(res.Unapplied)}})
	return err
}
