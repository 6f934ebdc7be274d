package configcode

// The configuration as it is stored: what Export writes and what an import is planned
// against. Reading only; every write goes through the owning service.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// storedTool is one available tool with everything an administrator set on it.
type storedTool struct {
	ID, Server, Name, Status string
	ValidationWorst          string
	Override                 string // why an administrator enabled it despite its findings
	Risk                     string
	TimeoutMS, RateLimit     int
	Category                 string
	Tags                     []string
	Config                   tools.Configuration
	Permissions              map[string]bool // username → may use
	Compensation             *storedCompensation
	TestCases                map[string]tools.TestCase // by name
	// DefinitionHash is the definition the plan was made against: an import enables
	// only the one its plan saw, as the tool page's enable does (tools.CodeStaleDefinition).
	DefinitionHash string
	// Version is the definition's version ("1.2"), for people: what a plan names when
	// the file pins another definition (or none).
	Version string
	// ConfigVersion moves with every save of the tool's settings, never with a
	// rotation's re-encryption: apply's check tells a changed secret by it.
	ConfigVersion int
}

func (t *storedTool) qualified() string { return toolname.Join(t.Server, t.Name) }

type storedCompensation struct {
	Undo      string // qualified name
	Arguments map[string]executions.MappedArgument
}

// state is the stored configuration (servers are the registry's).
type state struct {
	Categories map[string]storedCategory
	Tools      map[string]*storedTool // by qualified name
	Servers    map[string]serverInfo  // by name
	Users      map[string]bool
	Settings   executions.Settings
	// Unlisted are the tools their server's last discovery did not list (unavailable):
	// their rows and settings stay, so their server counts as discovered (pendingServers).
	Unlisted map[string]bool // by qualified name
	// Pruned are the servers this import deletes (--prune): their tools are gone.
	Pruned map[string]bool
	// offered are the stored tools' names by server, sorted, and offeredAt the file's
	// first tool each server was found not to offer (see offers).
	offered   map[string][]string
	offeredAt map[string]string
	// Redefined are the tools the file enables without definition_hash whose definition
	// changed since they were last enabled (discovery's move to updating, from enabled or
	// from a person's disabled), with that move's reason, by tool id: read by Plan
	// (loadRedefined), not by load.
	Redefined map[string]string
}

type storedCategory struct {
	ID, Name, Description string
	AutoEnable            bool
}

type serverInfo struct {
	ID      string
	Enabled bool
	Builtin bool
}

func (s *Service) load(ctx context.Context, q db.Querier) (*state, error) {
	st := &state{Categories: map[string]storedCategory{}, Tools: map[string]*storedTool{}, Unlisted: map[string]bool{},
		Servers: map[string]serverInfo{}, Users: map[string]bool{}}
	fail := func(what string, err error) (*state, error) {
		return nil, fmt.Errorf("configcode: read %s: %w", what, err)
	}
	rows, err := q.Query(ctx, `/* configcode.categories */ SELECT id::text, name, description, auto_enable FROM tool_categories`)
	if err != nil {
		return fail("categories", err)
	}
	for rows.Next() {
		var c storedCategory
		if err := rows.Scan(&c.ID, &c.Name, &c.Description, &c.AutoEnable); err != nil {
			rows.Close()
			return fail("categories", err)
		}
		st.Categories[c.Name] = c
	}
	if err := rows.Err(); err != nil {
		return fail("categories", err)
	}
	rows, err = q.Query(ctx, `/* configcode.servers */ SELECT id::text, name, enabled, server_type = 'builtin' FROM mcp_servers`)
	if err != nil {
		return fail("servers", err)
	}
	for rows.Next() {
		var name string
		var sv serverInfo
		if err := rows.Scan(&sv.ID, &name, &sv.Enabled, &sv.Builtin); err != nil {
			rows.Close()
			return fail("servers", err)
		}
		st.Servers[name] = sv
	}
	if err := rows.Err(); err != nil {
		return fail("servers", err)
	}
	byID := map[string]*storedTool{}
	rows, err = q.Query(ctx, `/* configcode.tools */
		SELECT t.id::text, s.name, t.name, t.status, COALESCE(t.validation_worst, ''), COALESCE(t.definition_hash, ''),
			COALESCE(t.enable_override, ''),
			COALESCE(t.risk_override, ''),
			COALESCE(t.timeout_ms, 0), COALESCE(t.rate_limit, 0), COALESCE(c.name, ''),
			-- In byte order, as tools.NormalizeTags sorts a file's tags: a libc or ICU
			-- collation orders read-only and readme the other way (a change every import).
			COALESCE((SELECT array_agg(g.tag ORDER BY g.tag COLLATE "C") FROM tool_tags g WHERE g.tool_id = t.id), '{}'), t.configuration,
			t.configuration_version, t.version_major::text || '.' || t.version_minor::text
		FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id LEFT JOIN tool_categories c ON c.id = t.category_id
		WHERE t.available`)
	if err != nil {
		return fail("tools", err)
	}
	for rows.Next() {
		t := &storedTool{Permissions: map[string]bool{}, TestCases: map[string]tools.TestCase{}}
		var raw []byte
		if err := rows.Scan(&t.ID, &t.Server, &t.Name, &t.Status, &t.ValidationWorst, &t.DefinitionHash, &t.Override, &t.Risk, &t.TimeoutMS,
			&t.RateLimit, &t.Category, &t.Tags, &raw, &t.ConfigVersion, &t.Version); err != nil {
			rows.Close()
			return fail("tools", err)
		}
		t.Config = tools.ParseConfiguration(raw)
		st.Tools[t.qualified()] = t
		byID[t.ID] = t
	}
	if err := rows.Err(); err != nil {
		return fail("tools", err)
	}
	rows, err = q.Query(ctx, `/* configcode.unlisted */
		SELECT s.name, t.name FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id WHERE NOT t.available`)
	if err != nil {
		return fail("unlisted tools", err)
	}
	for rows.Next() {
		var server, name string
		if err := rows.Scan(&server, &name); err != nil {
			rows.Close()
			return fail("unlisted tools", err)
		}
		st.Unlisted[toolname.Join(server, name)] = true
	}
	if err := rows.Err(); err != nil {
		return fail("unlisted tools", err)
	}
	rows, err = q.Query(ctx, `/* configcode.users */ SELECT username FROM users`)
	if err != nil {
		return fail("users", err)
	}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			rows.Close()
			return fail("users", err)
		}
		st.Users[u] = true
	}
	if err := rows.Err(); err != nil {
		return fail("users", err)
	}
	rows, err = q.Query(ctx, `/* configcode.permissions */
		SELECT p.tool_id::text, u.username, p.can_use FROM user_tool_permissions p JOIN users u ON u.id = p.user_id`)
	if err != nil {
		return fail("permissions", err)
	}
	for rows.Next() {
		var id, user string
		var can bool
		if err := rows.Scan(&id, &user, &can); err != nil {
			rows.Close()
			return fail("permissions", err)
		}
		if t := byID[id]; t != nil {
			t.Permissions[user] = can
		}
	}
	if err := rows.Err(); err != nil {
		return fail("permissions", err)
	}
	rows, err = q.Query(ctx, `/* configcode.compensations */
		SELECT c.tool_id::text, s.name, u.name, c.argument_map FROM tool_compensations c
		JOIN mcp_tools u ON u.id = c.undo_tool_id JOIN mcp_servers s ON s.id = u.server_id`)
	if err != nil {
		return fail("compensations", err)
	}
	for rows.Next() {
		var id, server, name string
		var raw []byte
		if err := rows.Scan(&id, &server, &name, &raw); err != nil {
			rows.Close()
			return fail("compensations", err)
		}
		c := &storedCompensation{Undo: toolname.Join(server, name)}
		if err := json.Unmarshal(raw, &c.Arguments); err != nil {
			rows.Close()
			return fail("compensations", err)
		}
		if t := byID[id]; t != nil {
			t.Compensation = c
		}
	}
	if err := rows.Err(); err != nil {
		return fail("compensations", err)
	}
	cases, err := db.All[tools.TestCase](ctx, q, "configcode: test cases", `/* configcode.testcases */
		SELECT id, tool_id, name, arguments, expect, expect_text, created_by, updated_at, last_run_at,
			last_passed, last_duration_ms, last_message FROM tool_test_cases`)
	if err != nil {
		return nil, err
	}
	for _, c := range cases {
		if t := byID[c.ToolID]; t != nil {
			t.TestCases[c.Name] = c
		}
	}
	if st.Settings, err = executions.ReadSettings(ctx, q); err != nil {
		return nil, err
	}
	return st, nil
}

// redefinedSQL reads, for each tool of $1, the first change of its definition since it
// was last enabled: discovery moves a redefined tool to updating from whatever state it
// was in (services/registry's discovery, reason "definition changed (vA → vB)"), so a
// tool enabled, then disabled by a person, then redefined upstream is found too. A tool
// never enabled has no such move to count from; one enabled again after a redefinition
// was reviewed then. The index on (tool_id, id DESC) finds each tool's moves.
const redefinedSQL = `SELECT t.id::text, COALESCE(NULLIF(u.reason, ''), 'definition changed') FROM unnest($1::uuid[]) AS t(id)
	CROSS JOIN LATERAL (SELECT max(h.id) AS id FROM tool_state_history h
		WHERE h.tool_id = t.id AND h.to_status = 'enabled') e
	CROSS JOIN LATERAL (SELECT h.reason FROM tool_state_history h
		WHERE h.tool_id = t.id AND h.id > e.id AND h.to_status = 'updating' ORDER BY h.id LIMIT 1) u`

// redefined returns, by tool id, the tools of ids whose definition changed since they
// were last enabled, with the reason of the first such change: one query however many
// tools. An unpinned enable of such a tool would put a definition nobody reviewed in
// service, undoing what discovery's move to updating is for.
func redefined(ctx context.Context, q db.Querier, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `/* configcode.redefined */ `+redefinedSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("configcode: read state history: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			return nil, fmt.Errorf("configcode: read state history: %w", err)
		}
		out[id] = reason
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("configcode: read state history: %w", err)
	}
	return out, nil
}

// loadRedefined fills st.Redefined for the tools of fts that the file enables without
// pinning a definition and that are not enabled now (only their plan reads it).
func (st *state) loadRedefined(ctx context.Context, q db.Querier, fts []Tool) error {
	var ids []string
	for _, ft := range fts {
		if cur := st.Tools[ft.Name]; cur != nil && unpinnedEnable(&ft) && cur.Status != toolstate.Enabled {
			ids = append(ids, cur.ID)
		}
	}
	var err error
	st.Redefined, err = redefined(ctx, q, ids)
	return err
}

// sortedTools lists the tools by qualified name.
func (st *state) sortedTools() []*storedTool {
	out := make([]*storedTool, 0, len(st.Tools))
	for _, t := range st.Tools {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *storedTool) int { return strings.Compare(a.qualified(), b.qualified()) })
	return out
}

// configured reports whether an administrator set anything on t (tools without
// settings stay out of the file).
func (t *storedTool) configured() bool {
	return t.Status == "enabled" || t.Status == "disabled" || t.Risk != "" || t.TimeoutMS != 0 || t.RateLimit != 0 ||
		t.Category != "" || len(t.Tags) > 0 || len(t.Config.Params) > 0 || len(t.Permissions) > 0 ||
		t.Compensation != nil || len(t.TestCases) > 0
}
