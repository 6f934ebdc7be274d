package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/toolname"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Patch changes a tool's settings. Nil fields stay as they are.
type Patch struct {
	Risk      *string // "low", "medium", "high"; "" removes the override (annotations decide)
	TimeoutMS *int    // 100..600000; 0 removes it (the server's timeout applies)
	RateLimit *int    // calls a minute across callers, 1..1000000; 0 removes it
	Category  *string // a category name; "" removes it
	// CreateCategory: a Category not there yet is made (the API's PATCH, which names
	// categories by name, DESIGN §1); otherwise it is refused (a page's or the
	// assistant's typo must not file the tool under a new category).
	CreateCategory bool
	Tags           []string // the new tags (replacing the old ones) when SetTags
	SetTags        bool
	// Params replaces the whole parameter configuration when not nil (parameters left
	// out lose their setting), unless MergeParams.
	Params map[string]ParamInput
	// MergeParams: Params are defaults to set, and every other parameter keeps its
	// setting (the flat form of the API's configuration). A fixed parameter is not
	// turned into a default this way.
	MergeParams bool
	Reason      string // why, for the version history
	// ExpectVersion, when set, is the configuration version the change was based on: a
	// newer one (someone saved meanwhile) fails with a CodeStale fault instead of undoing it.
	ExpectVersion *int
	// MayLowerRisk allows a risk level below the one in force, or below what the
	// annotations give (on an untrusted server, for a level set where none was): it
	// removes confirmations, so administrators only (auth.PermToolOverride).
	MayLowerRisk bool
	// NoCategoryPolicy: putting a validated tool in an auto-enable category does not
	// enable it (enableByCategory). An import sets it: its file states the tool's state
	// (or leaves it), and a plan showing only the category must not enable the tool.
	NoCategoryPolicy bool
	// resetting: a risk override this patch may not clear stays instead of failing (Reset).
	resetting bool
}

// CodeStale is the code of a configuration that changed since the form was loaded.
const CodeStale = "stale_configuration"

// StaleVersion is the details of a CodeStale fault: the version the tool is at now.
type StaleVersion struct {
	Current int `json:"current_version"`
}

// stale: the configuration changed since the form was loaded.
func stale(tool string, seen, current int) *fault.Error {
	return fault.Stale(CodeStale, fmt.Sprintf("the configuration of %s changed since you opened it (version %d, now %d); reload to see the changes and apply yours again", tool, seen, current)).
		About("configuration").WithDetails(StaleVersion{Current: current})
}

// Limits of tool settings.
const (
	MinTimeoutMS = 100
	MaxTimeoutMS = 600000
	// MaxRateLimit bounds a tool's calls a minute (the column's check).
	MaxRateLimit = 1000000
	MaxTags      = 20
)

var tagRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// NormalizeTags lowercases, trims, sorts and de-duplicates tags and checks each one.
func NormalizeTags(tags []string) ([]string, error) {
	out := []string{}
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			continue
		}
		if !tagRE.MatchString(t) {
			// Clipped: the message may travel in a cookie (the bulk form's flash).
			return nil, verr.New("tags", fmt.Sprintf("%q is not a tag: use 1 to 32 lowercase letters, digits and dashes, starting with a letter or digit", textcheck.Clip(t, 40, "…")))
		}
		out = append(out, t)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxTags {
		return nil, verr.New("tags", fmt.Sprintf("a tool has at most %d tags", MaxTags))
	}
	return out, nil
}

// ConfigVersion is one stored version of a tool's settings.
type ConfigVersion struct {
	Version       int             `db:"version" json:"version"`
	Configuration json.RawMessage `db:"configuration" json:"configuration"` // secret values masked
	Actor         string          `db:"actor" json:"actor"`
	Reason        string          `db:"reason" json:"reason"`
	CreatedAt     time.Time       `db:"created_at" json:"created_at"`
}

// snapshot is what a version stores: every setting (secret values as ciphertexts).
type snapshot struct {
	Params    map[string]Setting `json:"params"`
	Risk      *string            `json:"risk"`
	TimeoutMS *int               `json:"timeout_ms"`
	RateLimit *int               `json:"rate_limit,omitempty"`
	Category  *string            `json:"category"`
	Tags      []string           `json:"tags"`
}

func snapshotOf(t Item, c Configuration) snapshot {
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	return snapshot{Params: c.Params, Risk: t.RiskOverride, TimeoutMS: t.TimeoutMS, RateLimit: t.RateLimit, Category: t.Category, Tags: tags}
}

// masked shows a snapshot with secret values masked, as the tool's current input schema
// decides them too (Configuration.SecretIn).
func (s snapshot) masked(inputSchema json.RawMessage) map[string]any {
	return map[string]any{"params": Configuration{Params: s.Params}.masked(inputSchema), "risk": s.Risk,
		"timeout_ms": s.TimeoutMS, "rate_limit": s.RateLimit, "category": s.Category, "tags": s.Tags}
}

// Configuration returns a tool's current parameter configuration (secrets encrypted).
func (s *Service) Configuration(ctx context.Context, id string) (Configuration, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `/* tools.Configuration */ SELECT configuration FROM mcp_tools WHERE id = $1`, id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return Configuration{}, ErrNotFound
	}
	if err != nil {
		return Configuration{}, fmt.Errorf("tools: configuration: %w", err)
	}
	return parseConfiguration(raw), nil
}

// Update changes a tool's settings: one new configuration version, one audit row and, when
// a validated tool gets its first parameter settings, the move validated → configured, all
// in one transaction. Invalid input changes nothing and names each bad field.
func (s *Service) Update(ctx context.Context, actor audit.Actor, id string, p Patch) (Item, error) {
	return s.updateAs(ctx, actor, id, p, "tool.configure")
}

// Reset returns a tool to its defaults: no parameter settings, no risk override, no
// timeout. Its category and tags stay (they file the tool; they do not change calls).
// A risk override that clearing would lower stays: that takes an administrator (ResetAll).
func (s *Service) Reset(ctx context.Context, actor audit.Actor, id string) (Item, error) {
	return s.reset(ctx, actor, id, false)
}

// ResetAll is Reset by someone who may lower risks (auth.PermToolOverride): the risk
// override goes whatever it is.
func (s *Service) ResetAll(ctx context.Context, actor audit.Actor, id string) (Item, error) {
	return s.reset(ctx, actor, id, true)
}

func (s *Service) reset(ctx context.Context, actor audit.Actor, id string, mayLower bool) (Item, error) {
	empty, zero := "", 0
	return s.updateAs(ctx, actor, id, Patch{Risk: &empty, TimeoutMS: &zero, RateLimit: &zero, Params: map[string]ParamInput{},
		Reason: "reset to defaults", MayLowerRisk: mayLower, resetting: true}, "tool.configure.reset")
}

func (s *Service) updateAs(ctx context.Context, actor audit.Actor, id string, p Patch, action string) (Item, error) {
	var out Item
	// Again when PostgreSQL ends it as a deadlock's victim: a change of settings that
	// moves the tool's state takes its row, then the audit journal, while a discovery
	// of its server may hold the journal and wait for the row.
	err := db.WithTxRetry(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		out, err = s.update(ctx, tx, actor, id, p, action)
		return err
	})
	return out, err
}

func (s *Service) update(ctx context.Context, tx pgx.Tx, actor audit.Actor, id string, p Patch, action string) (Item, error) {
	t, err := getItem(ctx, tx, id, true)
	if err != nil {
		return Item{}, err
	}
	var rawCfg []byte
	if err := tx.QueryRow(ctx, `/* tools.update.configuration */ SELECT configuration FROM mcp_tools WHERE id = $1`, id).Scan(&rawCfg); err != nil {
		return Item{}, fmt.Errorf("tools: configuration: %w", err)
	}
	cur := parseConfiguration(rawCfg)
	before := snapshotOf(t, cur)
	e := &verr.Error{}
	if utf8.RuneCountInString(strings.TrimSpace(p.Reason)) > MaxReason { // characters, as SetEnabled counts them
		e.Add("reason", fmt.Sprintf("is too long (at most %d characters)", MaxReason))
	}
	if p.ExpectVersion != nil && *p.ExpectVersion != t.ConfigVersion {
		return Item{}, stale(t.QualifiedName(), *p.ExpectVersion, t.ConfigVersion)
	}
	next := t
	if p.Risk != nil {
		// Without MayLowerRisk nothing may lower the level in force: an administrator's
		// override above the annotations' level is theirs to remove.
		current := t.Risk().Level
		switch l, ok := risk.Parse(strings.ToLower(strings.TrimSpace(*p.Risk))); {
		case strings.TrimSpace(*p.Risk) == "":
			next.RiskOverride = nil
			// The built-in server's tools rate their own operations once nobody set a level
			// (router Options.OperationRisk: a file read is low), so clearing the level of
			// one of them may remove confirmations, as lowering it would.
			builtin := t.Server == toolname.Builtin
			derived := risk.Decide(risk.Input{Annotations: t.Annotations, Trusted: t.ServerTrusted}).Level
			if t.RiskOverride != nil && !p.MayLowerRisk && (builtin || risk.Max(current, derived) != derived) {
				switch {
				case p.resetting:
					next.RiskOverride = t.RiskOverride
				case builtin:
					e.Add("risk", "only an administrator may clear this level: without it, the built-in tool's own operations decide, and its reads run without asking")
				default:
					e.Add("risk", fmt.Sprintf("only an administrator may clear this level: it would lower the risk from %s to the %s its annotations give (it removes confirmations)",
						current.Label(), derived.Label()))
				}
			}
		case ok:
			v := string(l)
			next.RiskOverride = &v
			// Nor may it set a level below what the annotations give without trust: the level
			// would outlast the trust it rests on, as an administrator's (raising an
			// administrator's level is anyone's).
			untrusted := risk.Decide(risk.Input{Annotations: t.Annotations}).Level
			switch {
			case p.MayLowerRisk || deref(t.RiskOverride) == v:
			case risk.Max(l, current) != l:
				e.Add("risk", fmt.Sprintf("only an administrator may lower the risk below the %s in force (it removes confirmations)", current.Label()))
			case t.RiskOverride == nil && risk.Max(l, untrusted) != l:
				e.Add("risk", fmt.Sprintf("only an administrator may set the risk below the %s its annotations give on an untrusted server (the level would stay if the server stopped being trusted)",
					untrusted.Label()))
			}
		default:
			e.Add("risk", "must be low, medium or high (or empty to let the annotations decide)")
		}
	}
	if p.TimeoutMS != nil {
		switch v := *p.TimeoutMS; {
		case v == 0:
			next.TimeoutMS = nil
		case v < MinTimeoutMS || v > MaxTimeoutMS:
			e.Add("timeout_ms", fmt.Sprintf("must be between %d and %d milliseconds (or 0 for the server's timeout)", MinTimeoutMS, MaxTimeoutMS))
		default:
			next.TimeoutMS = &v
		}
	}
	if p.RateLimit != nil {
		switch v := *p.RateLimit; {
		case v == 0:
			next.RateLimit = nil
		case v < 1 || v > MaxRateLimit:
			e.Add("rate_limit", fmt.Sprintf("must be between 1 and %d calls a minute (or 0 for no limit of its own)", MaxRateLimit))
		default:
			next.RateLimit = &v
		}
	}
	var categoryID *string
	newCategory := "" // a category the patch names that is not there yet: made with the change
	if p.Category != nil {
		name := strings.ToLower(strings.TrimSpace(*p.Category))
		if name == "" {
			next.Category = nil
		} else {
			var cid string
			err := tx.QueryRow(ctx, `/* tools.update.category */ SELECT id::text FROM tool_categories WHERE name = $1`, name).Scan(&cid)
			switch {
			case errors.Is(err, pgx.ErrNoRows) && !p.CreateCategory:
				e.Add("category", fmt.Sprintf("there is no category %q; create it first", name))
			case errors.Is(err, pgx.ErrNoRows):
				// The API's PATCH files a tool under a category by name (DESIGN §1), and
				// whoever may configure a tool may create a category: one not there yet is
				// made, audited as category.create in this transaction.
				in := CategoryInput{Name: name}
				var ve *verr.Error
				if err := in.check(); errors.As(err, &ve) {
					e.Add("category", fmt.Sprintf("there is no category %q, and it cannot be made: %s", name, ve.For("name")))
				} else {
					next.Category, newCategory = &name, in.Name
				}
			case err != nil:
				return Item{}, fmt.Errorf("tools: category: %w", err)
			default:
				next.Category, categoryID = &name, &cid
			}
		}
	}
	if p.SetTags {
		tags, err := NormalizeTags(p.Tags)
		var ve *verr.Error
		if errors.As(err, &ve) {
			e.Fields = append(e.Fields, ve.Fields...)
		} else {
			next.Tags = tags
		}
	}
	params := p.Params
	if p.MergeParams {
		params = mergeParams(t.InputSchema, cur, p.Params, e)
	}
	cfg, err := s.applyParams(t, cur, params, e)
	if err != nil {
		return Item{}, err
	}
	if err := e.Err(); err != nil {
		return Item{}, err
	}
	after := snapshotOf(next, cfg)
	changed := changedFields(before, after)
	if len(changed) == 0 {
		return t, nil // nothing to record
	}
	if newCategory != "" && slices.Contains(changed, "category") {
		c, err := saveCategoryTx(ctx, tx, actor, "", CategoryInput{Name: newCategory})
		if err != nil {
			return Item{}, err
		}
		categoryID = &c.ID
	}
	if next.Category != nil && categoryID == nil {
		if err := tx.QueryRow(ctx, `/* tools.update.category_id */ SELECT category_id::text FROM mcp_tools WHERE id = $1`, id).Scan(&categoryID); err != nil {
			return Item{}, fmt.Errorf("tools: category: %w", err)
		}
	}
	cfgJSON, _ := json.Marshal(cfg)
	var version int
	if err := tx.QueryRow(ctx, `/* tools.update */ UPDATE mcp_tools SET risk_override = $2, timeout_ms = $3,
		category_id = $4, configuration = $5, rate_limit = $6, configuration_version = configuration_version + 1, updated_at = now()
		WHERE id = $1 RETURNING configuration_version`,
		id, next.RiskOverride, next.TimeoutMS, categoryID, cfgJSON, next.RateLimit).Scan(&version); err != nil {
		return Item{}, fmt.Errorf("tools: update: %w", err)
	}
	if slices.Contains(changed, "tags") {
		if _, err := tx.Exec(ctx, `/* tools.update.tags */ WITH gone AS (
				DELETE FROM tool_tags WHERE tool_id = $1 AND NOT tag = ANY($2::text[]))
			INSERT INTO tool_tags (tool_id, tag) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, id, after.Tags); err != nil {
			return Item{}, fmt.Errorf("tools: tags: %w", err)
		}
	}
	snap, _ := json.Marshal(after)
	if _, err := tx.Exec(ctx, `/* tools.update.version */ INSERT INTO tool_configurations (tool_id, version, configuration, actor, reason)
		VALUES ($1, $2, $3, $4, $5)`, id, version, snap, actor.Name, strings.TrimSpace(p.Reason)); err != nil {
		return Item{}, fmt.Errorf("tools: version: %w", err)
	}
	status := t.Status
	if slices.Contains(changed, "params") && len(cfg.Params) > 0 && t.Status == toolstate.Validated {
		if err := ApplyMoves(ctx, tx, []toolstate.Move{{ToolID: id, From: t.Status, To: toolstate.Configured,
			Actor: actor.Name, Reason: "configuration saved"}}); err != nil {
			return Item{}, err
		}
		status = toolstate.Configured
	}
	if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: "tool", TargetID: id,
		TargetName: t.QualifiedName(), Payload: map[string]any{"version": version, "changed": changed,
			"before": before.masked(t.InputSchema), "after": after.masked(t.InputSchema), "reason": strings.TrimSpace(p.Reason)}}); err != nil {
		return Item{}, err
	}
	if slices.Contains(changed, "category") && categoryID != nil && status == toolstate.Validated && !p.NoCategoryPolicy {
		if err := enableByCategory(ctx, tx, t, *categoryID); err != nil {
			return Item{}, err
		}
	}
	if _, err := events.ToolChanged.Publish(ctx, tx, Topic, events.ToolVersion{ID: id, Version: version}); err != nil {
		return Item{}, err
	}
	return getItem(ctx, tx, id, false)
}

// enableByCategory enables a validated tool just put in category categoryID when the
// category has auto-enable on, the tool was never enabled, and its last validation
// found no fixed setting dropped (autoEnable): discovery stores new tools
// without a category, so this is where a category's policy meets its new tools. One a
// person enabled or disabled before (or enabled with an override) waits for a person.
func enableByCategory(ctx context.Context, tx pgx.Tx, t Item, categoryID string) error {
	var name string
	err := tx.QueryRow(ctx, `/* tools.update.auto_enable */
		SELECT c.name FROM mcp_tools t JOIN tool_categories c ON c.id = t.category_id
		WHERE t.id = $1 AND c.id = $2 AND c.auto_enable AND t.status = 'validated' AND t.enable_override IS NULL
			AND `+neverEnabled+`
			AND NOT coalesce((SELECT v.findings @> jsonb_build_array(jsonb_build_object('code', $3::text)) FROM tool_validations v
				WHERE v.tool_id = t.id AND v.validation_type = 'schema' ORDER BY v.id DESC LIMIT 1), false)`,
		t.ID, categoryID, CodeFixedParamDropped).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tools: category auto-enable: %w", err)
	}
	return enableByPolicy(ctx, tx, []policy{{toolID: t.ID, tool: t.QualifiedName(), kind: "category", name: name}})
}

// neverEnabled is true of a tool t that never reached enabled (nor disabled, which
// only an enabled tool reaches), by its state history.
const neverEnabled = `NOT EXISTS (SELECT 1 FROM tool_state_history h WHERE h.tool_id = t.id AND h.to_status IN ('enabled', 'disabled'))`

// Vetting reports whether t is being vetted: not enabled now and never enabled before,
// so its test runs (by someone who may enable it) are how it is vetted before anyone
// else can call it (the separation-of-duties exemption). A disabled tool, or one back in
// validation after a change, was in use.
// The tool is named by its id and the status it has now.
func (s *Service) Vetting(ctx context.Context, id, status string) (bool, error) {
	if status == "enabled" || status == "disabled" {
		return false, nil
	}
	var never bool
	err := s.pool.QueryRow(ctx, `/* tools.Vetting */ SELECT `+neverEnabled+` FROM mcp_tools t WHERE t.id = $1`, id).Scan(&never)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("tools: never enabled: %w", err)
	}
	return never, nil
}

// changedFields names the settings that differ between two snapshots.
func changedFields(a, b snapshot) []string {
	var out []string
	if deref(a.Risk) != deref(b.Risk) {
		out = append(out, "risk")
	}
	if (a.TimeoutMS == nil) != (b.TimeoutMS == nil) || a.TimeoutMS != nil && *a.TimeoutMS != *b.TimeoutMS {
		out = append(out, "timeout_ms")
	}
	if (a.RateLimit == nil) != (b.RateLimit == nil) || a.RateLimit != nil && *a.RateLimit != *b.RateLimit {
		out = append(out, "rate_limit")
	}
	if deref(a.Category) != deref(b.Category) {
		out = append(out, "category")
	}
	if !slices.Equal(slices.Sorted(slices.Values(a.Tags)), slices.Sorted(slices.Values(b.Tags))) {
		out = append(out, "tags")
	}
	if !maps.EqualFunc(a.Params, b.Params, func(x, y Setting) bool {
		return x.Mode == y.Mode && x.Secret == y.Secret && jsonSame(x.Value, y.Value)
	}) {
		out = append(out, "params")
	}
	return out
}

// ConfigVersions lists a tool's configuration versions, newest first, secrets masked
// (a value an older version kept in clear too, when the current definition marks its
// parameter secret).
func (s *Service) ConfigVersions(ctx context.Context, id string, limit int) ([]ConfigVersion, error) {
	vs, err := db.All[ConfigVersion](ctx, s.pool, "tools: configuration versions", `/* tools.ConfigVersions */
		SELECT version, configuration, actor, reason, created_at FROM tool_configurations
		WHERE tool_id = $1 ORDER BY version DESC LIMIT $2`, id, limit)
	if err != nil || len(vs) == 0 {
		return vs, err
	}
	var inputSchema json.RawMessage
	if err := s.pool.QueryRow(ctx, `/* tools.ConfigVersions.schema */ SELECT input_schema FROM mcp_tools WHERE id = $1`, id).Scan(&inputSchema); errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound // deleted since: its versions went with it
	} else if err != nil {
		return nil, fmt.Errorf("tools: configuration versions: schema: %w", err)
	}
	for i, v := range vs {
		var sn snapshot
		if json.Unmarshal(v.Configuration, &sn) == nil {
			vs[i].Configuration, _ = json.Marshal(sn.masked(inputSchema))
		}
	}
	return vs, nil
}

// mergeParams is the whole configuration after setting the defaults in set: the other
// parameters keep their settings (a secret its stored value). A parameter that is fixed
// stays so: a flat configuration names defaults, and loosening a fixed value is asked
// for in the form that says so. A parameter the tool's input schema no longer has (its
// definition changed) is dropped unless set names it: its setting cannot be made again.
func mergeParams(inputSchema json.RawMessage, cur Configuration, set map[string]ParamInput, e *verr.Error) map[string]ParamInput {
	pr := props(inputSchema)
	out := make(map[string]ParamInput, len(cur.Params)+len(set))
	for name, st := range cur.Params {
		if _, ok := pr[name]; !ok {
			continue
		}
		in := ParamInput{Mode: st.Mode, Value: st.Value}
		if st.Secret != "" {
			in.Value = nil // kept as stored
		}
		out[name] = in
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if _, ok := pr[name]; ok && cur.Params[name].Mode == ModeFixed {
			e.Add("params."+name, `is fixed; a flat configuration sets defaults only: send {"defaults": {...}, "fixed": {...}} to change it`)
			continue
		}
		out[name] = set[name]
	}
	return out
}
