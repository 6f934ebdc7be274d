package registry

// Planning: what importing a Config would change in the database as it is.

import (
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

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/template"
	"github.com/toolwarden/toolwarden/services/verr"
)

// ImportOptions tunes PlanImport.
type ImportOptions struct {
	// Prune deletes registered servers the file does not list; without it they are kept.
	Prune bool
	// CompareSecrets lets the plan say that a secret value in the file equals the stored
	// one (and leave it alone). Without it every value given counts as replaced, so the
	// plan cannot be used to check a guess of a stored secret: only callers who could
	// read the secrets anyway (the command line, administrators) set it.
	CompareSecrets bool
	// Actor is who will apply the plan. A server pruned whose tools have per-user
	// refusals that Actor may not lift (mayLiftRefusals) is an error of the plan, as
	// applying would refuse it: a clean plan must apply. The zero Actor lifts none.
	Actor audit.Actor
}

// Plan actions.
const (
	PlanCreate    = "create"
	PlanUpdate    = "update"
	PlanUnchanged = "unchanged"
	PlanKeep      = "keep"   // registered, not in the file, kept
	PlanDelete    = "delete" // registered, not in the file, pruned
)

// Plan is what importing a configuration would do, computed against the database
// without changing it. Apply it with ApplyImport; a plan with Errors cannot be applied.
type Plan struct {
	File     string     `json:"file"`
	Format   string     `json:"format"`
	Items    []PlanItem `json:"items"` // by server name
	Warnings []Problem  `json:"warnings"`
	Errors   []Problem  `json:"errors"`
}

// PlanItem is what happens to one server.
type PlanItem struct {
	Action  string        `json:"action"` // PlanCreate, PlanUpdate, PlanUnchanged, PlanKeep or PlanDelete
	Name    string        `json:"name"`
	Type    string        `json:"type"`
	ID      string        `json:"id,omitempty"`      // "" for a server to create
	Changes []FieldChange `json:"changes,omitempty"` // PlanUpdate: what changes; PlanCreate: what is set
	// PlanDelete: what else deleting the server removes (ON DELETE CASCADE), as the
	// server page's Delete warns: compensations of other servers' tools that its tools
	// undo, and the per-user rules on its tools.
	LostUndo []LostUndo    `json:"lost_undo,omitempty"`
	Rules    []RemovedRule `json:"rules_removed,omitempty"`

	d   draft  // the registration to store (create, update)
	cur Server // the registration as planned against (update, delete)
}

// LostUndo is the compensation of another server's tool whose undo tool is on a server
// the import deletes: it goes with the undo tool (tool_compensations.undo_tool_id
// cascades), and the tool's steps have nothing to undo them.
type LostUndo struct {
	Tool string `json:"tool"` // qualified: the tool that loses its compensation
	Undo string `json:"undo"` // qualified: its undo tool, on the server deleted
}

// RemovedRule is a per-user rule on a tool of a server the import deletes.
type RemovedRule struct {
	Tool   string `json:"tool"` // qualified
	User   string `json:"user"`
	CanUse bool   `json:"can_use"`
}

// maxRuleLines is how many removed per-user rules a deletion's lines name; a count
// stands for the rest (a server's rules are its tools times the users).
const maxRuleLines = 20

// Removes says, a line each, what deleting the item's server removes beyond it and
// its tools (PlanDelete; none otherwise).
func (it PlanItem) Removes() []string {
	var out []string
	for _, l := range it.LostUndo {
		out = append(out, fmt.Sprintf("removes the compensation of %s: its undo tool %s goes with this server, so a rollback has nothing to undo its steps",
			Printable(l.Tool), Printable(l.Undo)))
	}
	for i, r := range it.Rules {
		if i == maxRuleLines {
			out = append(out, fmt.Sprintf("and %s more", plural(len(it.Rules)-i, "per-user rule")))
			break
		}
		what := "refusing it to " + Printable(r.User)
		if r.CanUse {
			what = "granting it to " + Printable(r.User)
		}
		out = append(out, fmt.Sprintf("removes the per-user rule on %s %s", Printable(r.Tool), what))
	}
	return out
}

// FieldChange is one changed field. Secrets never carry values: From is empty and To
// says what happens ("set", "replaced" or "removed").
type FieldChange struct {
	Field  string `json:"field"`          // "url", "env API_KEY", "auth token"
	From   string `json:"from,omitempty"` // the old value, formatted; "" for secrets and new servers
	To     string `json:"to"`
	Secret bool   `json:"secret,omitempty"`
}

func (c FieldChange) String() string {
	// Printable: the names and values come from a file, or were stored from one.
	if c.Secret || c.From == "" {
		return Printable(c.Field) + ": " + Printable(c.To)
	}
	return Printable(c.Field) + ": " + Printable(c.From) + " → " + Printable(c.To)
}

// HasErrors reports whether the plan cannot be applied.
func (p *Plan) HasErrors() bool { return len(p.Errors) > 0 }

// CommandChanges names the servers whose stdio command, args, working directory or env
// the plan sets (see ChangesCommand): applying it needs auth.PermServerCommand.
func (p *Plan) CommandChanges() []string {
	var names []string
	for _, it := range p.Items {
		var cur *draft
		switch it.Action {
		case PlanCreate:
		case PlanUpdate:
			d := draftOf(it.cur)
			cur = &d
		default:
			continue
		}
		if commandChanged(cur, it.d) {
			names = append(names, it.Name)
		}
	}
	return names
}

// TrustChanges names the servers the plan would mark trusted (new ones), whose trust it
// changes, or that are trusted and whose target it changes: only administrators may
// import those (ErrTrustChange, ErrTrustedTargetChange).
func (p *Plan) TrustChanges() []string {
	var names []string
	for _, it := range p.Items {
		switch {
		case it.Action == PlanCreate && it.d.trusted,
			it.Action == PlanUpdate && it.d.trusted != it.cur.Trusted,
			it.Action == PlanUpdate && it.cur.Trusted && targetChanged(ptr(draftOf(it.cur)), it.d):
			names = append(names, it.Name)
		}
	}
	return names
}

// Digest identifies what the plan does: the same file planned against the same
// registrations gives the same digest. The import page shows a plan and applies it
// only while the digest of a fresh plan still matches, so nobody applies a plan they
// did not see.
func (p *Plan) Digest() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, it := range p.Items {
		// What a deletion takes along too: a compensation set to undo with the server's tool
		// after the preview would go unseen.
		_ = enc.Encode([]any{it.Action, it.Name, it.ID, it.Changes, it.cur.UpdatedAt.UnixNano(), it.LostUndo, it.Rules})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Count returns how many servers get action.
func (p *Plan) Count(action string) int {
	n := 0
	for _, it := range p.Items {
		if it.Action == action {
			n++
		}
	}
	return n
}

// PlanImport computes what importing cfg would change. Servers are matched by name.
// Every resulting registration is validated as CreateServer and UpdateServer would, and
// every problem is reported at once in Plan.Errors. Stored secrets are decrypted to be
// compared, never shown.
func (s *Service) PlanImport(ctx context.Context, cfg *Config, opts ImportOptions) (*Plan, error) {
	if cfg == nil {
		return nil, errors.New("registry: plan import: no configuration")
	}
	stored, err := allServers(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]Server, len(stored))
	for _, sv := range stored {
		byName[sv.Name] = sv
	}
	plan := &Plan{File: cfg.File, Format: cfg.Format, Warnings: slices.Clone(cfg.Warnings)}
	inFile := map[string]bool{}
	for _, sc := range cfg.Servers {
		inFile[sc.Name] = true
		cur, exists := byName[sc.Name]
		it, err := s.planServer(ctx, plan, sc, cur, exists, opts.CompareSecrets)
		if err != nil {
			return nil, err
		}
		plan.Items = append(plan.Items, it)
	}
	for _, sv := range stored {
		if inFile[sv.Name] || sv.Type == TypeBuiltin { // the built-in server is Toolwarden's, not the file's
			continue
		}
		it := PlanItem{Action: PlanKeep, Name: sv.Name, Type: sv.Type, ID: sv.ID, cur: sv}
		if opts.Prune {
			it.Action = PlanDelete
		}
		plan.Items = append(plan.Items, it)
	}
	slices.SortFunc(plan.Items, func(a, b PlanItem) int { return strings.Compare(a.Name, b.Name) })
	if plan.Count(PlanDelete) > 0 {
		if err := s.planDeletions(ctx, plan, opts.Actor); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// planDeletions notes on each server the plan deletes what goes with it (LostUndo,
// Rules), and adds an error where a per-user refusal among its rules is one actor may
// not lift: applying would refuse it (deleteLockedServer, CodeUserRules), and a clean
// plan must apply, a dry run say what would be refused. It reads what userRulesOf and
// compensationsUndoneBy read at apply, in one read-only snapshot and without their
// locks: a plan changes nothing, and applying checks again.
func (s *Service) planDeletions(ctx context.Context, plan *Plan, actor audit.Actor) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("registry: plan import: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for i := range plan.Items {
		it := &plan.Items[i]
		if it.Action != PlanDelete {
			continue
		}
		rules, err := serverRules(ctx, tx, it.cur)
		if err != nil {
			return err
		}
		comps, err := compensationsUndoneBy(ctx, tx, it.cur)
		if err != nil {
			return err
		}
		for _, c := range comps {
			it.LostUndo = append(it.LostUndo, LostUndo{Tool: toolname.Join(c.Server, c.Tool), Undo: toolname.Join(it.cur.Name, c.Undo)})
		}
		for _, r := range rules {
			it.Rules = append(it.Rules, RemovedRule{Tool: toolname.Join(it.cur.Name, r.Tool), User: r.Username, CanUse: r.CanUse})
		}
		err = mayLiftRulesOf(ctx, tx, actor, it.cur, rules)
		if f, ok := fault.As(err); ok && f.Code == CodeUserRules {
			plan.Errors = append(plan.Errors, Problem{File: plan.File, Server: it.Name, Message: f.Message})
		} else if err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) planServer(ctx context.Context, plan *Plan, sc ServerConfig, cur Server, exists, compare bool) (PlanItem, error) {
	it := PlanItem{Name: sc.Name, Action: PlanCreate}
	if exists && cur.Type == TypeBuiltin {
		// Toolwarden's own server: only enabling it is anyone's to change (ErrBuiltinFixed),
		// and an import would store whatever the file gives it, unchecked.
		it.Action, it.ID, it.Type, it.cur = PlanUnchanged, cur.ID, cur.Type, cur
		plan.Errors = append(plan.Errors, Problem{File: plan.File, Server: sc.Name, Field: "name",
			Message: sc.Name + " is Toolwarden's own server and cannot be imported over: remove this entry or give it another name"})
		return it, nil
	}
	var d, before draft
	if exists {
		it.Action, it.ID, it.cur = PlanUpdate, cur.ID, cur
		d, before = draftOf(cur), draftOf(cur)
	} else {
		d = newDraft(uuid.NewString())
		before = newDraft(d.id)
	}
	warn := func(field, msg string) {
		plan.Warnings = append(plan.Warnings, Problem{File: plan.File, Server: sc.Name, Field: field, Message: msg})
	}
	p := sc.patch(d, warn)
	d.apply(p)
	var prev *draft
	if exists {
		prev = &before
	}
	err := d.validateChange(prev, s.egress)
	if err == nil && prev != nil {
		err = movedToolSecrets(ctx, s.pool, d.id, prev, &d)
	}
	if err != nil {
		var ve *verr.Error
		if !errors.As(err, &ve) {
			return it, err
		}
		for _, f := range ve.Fields {
			msg := f.Message
			if f.Field == "auth_token" && (sc.Auth == nil || sc.Auth.Token == nil) && !d.authToken.set() {
				msg += "; secret values are not exported, so write it in the file (token: ${env:NAME} is expanded by 'toolwarden import') or add the authentication after import"
			}
			plan.Errors = append(plan.Errors, Problem{File: plan.File, Server: sc.Name, Field: fileField(f.Field), Message: msg})
		}
	}
	it.Type = d.typ
	secretChanges, err := s.compareSecrets(&d, cur, exists, compare)
	if err != nil {
		return it, err
	}
	if exists {
		it.Changes = fieldChanges(before, d)
	} else {
		for _, c := range fieldChanges(before, d) {
			if c.Field != "type" {
				c.From = ""
				it.Changes = append(it.Changes, c)
			}
		}
	}
	it.Changes = append(it.Changes, secretChanges...)
	if exists && len(it.Changes) == 0 {
		it.Action = PlanUnchanged
	}
	it.d = d
	return it, nil
}

// patch is the change that makes a stored registration (d, or a new one) what sc says.
// Secrets named with a null value keep their stored value; on a new server (or a name
// not stored yet) they are skipped, with a warning. Names not in sc are removed.
func (sc ServerConfig) patch(d draft, warn func(field, msg string)) Patch {
	p := Patch{Name: &sc.Name, Type: &sc.Type, Command: &sc.Command, Args: &sc.Args, URL: &sc.URL, Template: &sc.Template,
		Description: sc.Description, WorkingDir: sc.WorkingDir, TimeoutMS: sc.TimeoutMS, Retries: sc.Retries,
		HealthIntervalMS: sc.HealthIntervalMS, Enabled: sc.Enabled, Trusted: sc.Trusted,
		AutoEnable: sc.AutoEnable}
	if p.Args == nil || *p.Args == nil {
		p.Args = &[]string{}
	}
	p.Env = secretPatch("env", d.env, sc.Env, warn)
	p.Headers = secretPatch("headers", d.headers, sc.Headers, warn)
	switch {
	case sc.Auth != nil:
		p.AuthType, p.AuthHeader = &sc.Auth.Type, &sc.Auth.Header
		if sc.Auth.Token != nil {
			p.AuthToken = sc.Auth.Token
		}
	case sc.Type == TypeStdio:
		// A format without authentication settings moved the server to stdio, which has none.
		none, empty := AuthNone, ""
		p.AuthType, p.AuthHeader, p.AuthToken = &none, &empty, &empty
	}
	return p
}

func secretPatch(field string, stored map[string]secretValue, file map[string]*string, warn func(field, msg string)) map[string]*string {
	out := map[string]*string{}
	for k := range stored {
		if _, ok := file[k]; !ok {
			out[k] = nil // removed
		}
	}
	for _, k := range slices.Sorted(maps.Keys(file)) {
		v := file[k]
		if v != nil {
			out[k] = v
			continue
		}
		if _, ok := stored[k]; !ok {
			warn(field+"."+k, fmt.Sprintf("has no value in the file and none is stored: it is skipped; set %s %s after import", field, k))
		}
	}
	return out
}

// compareSecrets lists how the secrets of d differ from the stored ones. A new value
// equal to the stored one is not a change: d keeps the stored ciphertext.
func (s *Service) compareSecrets(d *draft, cur Server, exists, compare bool) ([]FieldChange, error) {
	var out []FieldChange
	cmp := func(field, label, name string, v secretValue, storedCipher string, stored bool) (secretValue, error) {
		switch {
		case v.plain == nil:
			return v, nil
		case !stored:
			out = append(out, FieldChange{Field: label, To: "set", Secret: true})
			return v, nil
		case !compare:
			out = append(out, FieldChange{Field: label, To: "replaced", Secret: true})
			return v, nil
		}
		if s.keys == nil {
			return v, errors.New("registry: plan import: a secret key is needed to compare secrets")
		}
		old, err := s.openValue(cur.ID, field, name, secretValue{cipher: storedCipher})
		if err == nil && old == *v.plain {
			return secretValue{cipher: storedCipher}, nil
		}
		out = append(out, FieldChange{Field: label, To: "replaced", Secret: true})
		return v, nil
	}
	for _, spec := range []struct {
		field  string
		now    map[string]secretValue
		stored map[string]string
	}{{"env", d.env, cur.Env}, {"headers", d.headers, cur.Headers}} {
		for _, k := range slices.Sorted(maps.Keys(spec.now)) {
			c, ok := spec.stored[k]
			v, err := cmp(spec.field, spec.field+" "+k, k, spec.now[k], c, ok && exists)
			if err != nil {
				return nil, err
			}
			spec.now[k] = v
		}
		if exists {
			for _, k := range slices.Sorted(maps.Keys(spec.stored)) {
				if _, ok := spec.now[k]; !ok {
					out = append(out, FieldChange{Field: spec.field + " " + k, To: "removed", Secret: true})
				}
			}
		}
	}
	if d.authToken.plain != nil && *d.authToken.plain == "" {
		d.authToken = secretValue{} // an empty token is no token
	}
	stored := exists && cur.AuthToken != ""
	switch {
	case d.authToken.plain != nil:
		v, err := cmp("auth_token", "auth token", "", d.authToken, cur.AuthToken, stored)
		if err != nil {
			return nil, err
		}
		d.authToken = v
	case stored && !d.authToken.set():
		out = append(out, FieldChange{Field: "auth token", To: "removed", Secret: true})
	}
	return out, nil
}

// fieldChanges lists the non-secret fields that differ, in the file's order.
func fieldChanges(a, b draft) []FieldChange {
	var out []FieldChange
	add := func(field string, x, y any) {
		fx, fy := formatValue(x), formatValue(y)
		if fx != fy {
			out = append(out, FieldChange{Field: field, From: fx, To: fy})
		}
	}
	add("type", a.typ, b.typ)
	add("description", a.description, b.description)
	add("command", a.command, b.command)
	add("args", a.args, b.args)
	add("working_dir", a.workingDir, b.workingDir)
	add("url", a.url, b.url)
	if a.template != b.template {
		// The YAML itself is too long for a line of the plan: its tools and a digest.
		out = append(out, FieldChange{Field: "template", From: describeTemplate(a.template), To: describeTemplate(b.template)})
	}
	add("auth.type", a.authType, b.authType)
	add("auth.header", a.authHeader, b.authHeader)
	add("timeout_ms", a.timeoutMS, b.timeoutMS)
	add("retries", a.retries, b.retries)
	add("health_interval_ms", a.healthIntervalMS, b.healthIntervalMS)
	add("enabled", a.enabled, b.enabled)
	add("trusted", a.trusted, b.trusted)
	add("auto_enable", a.autoEnable, b.autoEnable)
	return out
}

// describeTemplate sums a template up for a plan: its tools and the start of its
// SHA-256, so two versions with the same tools still read differently.
func describeTemplate(t string) string {
	if t == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(t))
	tools := "does not parse"
	if names := template.ToolNames(t); names != nil {
		tools = "tools " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s (%d lines, sha256 %s)", tools, strings.Count(strings.TrimRight(t, "\n"), "\n")+1, hex.EncodeToString(sum[:4]))
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// fileField turns a validation field ("auth_token", "env/API_KEY", "args/0") into the
// file's spelling ("auth.token", "env.API_KEY", "args[0]").
func fileField(f string) string {
	switch f {
	case "auth_type":
		return "auth.type"
	case "auth_header":
		return "auth.header"
	case "auth_token":
		return "auth.token"
	}
	if rest, ok := strings.CutPrefix(f, "args/"); ok {
		return "args[" + rest + "]"
	}
	return strings.Replace(f, "/", ".", 1)
}

// String renders the plan for people: one line per server (+ create, ~ update,
// = unchanged, - delete), the changed fields indented below, then warnings, errors and
// a summary. It is deterministic and never holds a secret value.
func (p *Plan) String() string {
	var b strings.Builder
	title := formatTitles[p.Format]
	if title == "" {
		title = p.Format
	}
	fmt.Fprintf(&b, "Import plan for %s (%s)\n", Printable(p.File), title)
	if len(p.Items) == 0 {
		b.WriteString("  no servers in the file and none registered\n")
	}
	for _, it := range p.Items {
		switch it.Action {
		case PlanCreate:
			fmt.Fprintf(&b, "+ create %s (%s)\n", it.Name, it.Type)
			for _, c := range it.Changes {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		case PlanUpdate:
			fmt.Fprintf(&b, "~ update %s (%s)\n", it.Name, it.Type)
			for _, c := range it.Changes {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		case PlanUnchanged:
			fmt.Fprintf(&b, "= unchanged %s\n", it.Name)
		case PlanKeep:
			fmt.Fprintf(&b, "  kept %s (not in file)\n", it.Name)
		case PlanDelete:
			fmt.Fprintf(&b, "- delete %s (%s)\n", it.Name, it.Type)
			for _, r := range it.Removes() {
				fmt.Fprintf(&b, "    %s\n", r)
			}
		}
	}
	if len(p.Warnings) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, w := range p.Warnings {
			b.WriteString("  ! " + w.String() + "\n")
		}
	}
	if len(p.Errors) > 0 {
		b.WriteString("\nErrors (nothing can be imported until they are fixed):\n")
		for _, e := range p.Errors {
			b.WriteString("  ✗ " + e.String() + "\n")
		}
	}
	fmt.Fprintf(&b, "\n%d to create, %d to update, %d to delete, %d unchanged, %d kept",
		p.Count(PlanCreate), p.Count(PlanUpdate), p.Count(PlanDelete), p.Count(PlanUnchanged), p.Count(PlanKeep))
	if len(p.Errors) > 0 {
		fmt.Fprintf(&b, "; %d errors", len(p.Errors))
	}
	b.WriteString(".\n")
	return b.String()
}
