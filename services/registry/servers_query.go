package registry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/verr"
)

// serverColumns selects a Server; tool_count counts the tools the server still lists,
// undoes_others the other servers' tools one of its tools undoes (their compensations
// go with it when it is deleted).
const serverColumns = `s.id, s.name, s.description, s.server_type, s.command, s.args, s.working_dir, s.url, s.template,
	s.env, s.headers, s.auth_type, s.auth_header, s.auth_token, s.timeout_ms, s.retries, s.health_interval_ms,
	s.enabled, s.trusted, s.auto_enable, s.connection_status, s.last_error, s.last_connected, s.status_changed_at,
	s.server_info, s.resources, s.prompts, s.created_at, s.updated_at,
	(SELECT count(*) FROM mcp_tools t WHERE t.server_id = s.id AND t.available)::int AS tool_count,
	(SELECT count(*) FROM tool_compensations c JOIN mcp_tools u ON u.id = c.undo_tool_id JOIN mcp_tools t ON t.id = c.tool_id
		WHERE u.server_id = s.id AND t.server_id <> s.id)::int AS undoes_others`

func collectServers(rows pgx.Rows) ([]Server, error) {
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[Server])
	for i := range list {
		list[i].fill()
	}
	return list, err
}

// fill derives the public description of the secrets.
func (s *Server) fill() {
	s.EnvNames = slices.Sorted(maps.Keys(s.Env))
	s.HeaderNames = slices.Sorted(maps.Keys(s.Headers))
	s.AuthConfigured = s.AuthToken != ""
	if s.Args == nil {
		s.Args = []string{}
	}
	if s.EnvNames == nil {
		s.EnvNames = []string{}
	}
	if s.HeaderNames == nil {
		s.HeaderNames = []string{}
	}
	s.NameReserved = toolname.Reserved(s.Name) && s.Type != TypeBuiltin
}

// ReportReservedNames logs a warning for each server whose name is kept for
// Toolwarden's own tools (one registered before the name was reserved: migration 22
// could not tell anyone) and returns their names. The app calls it on start.
func (s *Service) ReportReservedNames(ctx context.Context) ([]string, error) {
	names, err := db.Column[string](ctx, s.pool, "registry: reserved names",
		`/* registry.ReportReservedNames */ SELECT name FROM mcp_servers WHERE name = ANY($1) AND server_type <> 'builtin' ORDER BY name`, toolname.ReservedNames())
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		s.log.Warn("the MCP server \""+n+"\" has a name now reserved for Toolwarden's own tools: it keeps working, but rename it "+
			"(Edit on its page, or PATCH /api/v1/servers/:id {\"name\"}); its tools' names would collide with Toolwarden's", "server", n)
	}
	return names, nil
}

// GetServer returns one server by id.
func (s *Service) GetServer(ctx context.Context, id string) (Server, error) {
	return getServer(ctx, s.pool, id, false)
}

func getServer(ctx context.Context, q db.Querier, id string, forUpdate bool) (Server, error) {
	if !uuidtext.Canonical(id) {
		return Server{}, ErrNotFound
	}
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE"
	}
	return oneServer(ctx, q, "get server", `/* registry.GetServer */ SELECT `+serverColumns+` FROM mcp_servers s WHERE s.id = $1`+lock, id)
}

// oneServer runs a query for at most one server; none is ErrNotFound.
func oneServer(ctx context.Context, q db.Querier, what, sql string, args ...any) (Server, error) {
	list, err := db.All[Server](ctx, q, "registry: "+what, sql, args...)
	if err != nil {
		return Server{}, err
	}
	if len(list) == 0 {
		return Server{}, ErrNotFound
	}
	list[0].fill()
	return list[0], nil
}

// GetServerByName returns one server by its name.
func (s *Service) GetServerByName(ctx context.Context, name string) (Server, error) {
	return oneServer(ctx, s.pool, "get server "+strconv.Quote(name),
		`/* registry.GetServerByName */ SELECT `+serverColumns+` FROM mcp_servers s WHERE s.name = $1`, name)
}

// ListQuery filters and pages ListServers.
type ListQuery struct {
	Q       string // matches name and description, case-insensitively
	Status  string // one of Statuses, or "" for all
	Type    string // one of Types, or ""
	Enabled *bool
	Limit   int // default 24, at most 200
	Offset  int
}

// ListServers returns one page of servers by name, and how many match in all.
func (s *Service) ListServers(ctx context.Context, lq ListQuery) ([]Server, int, error) {
	// As the tools list's: each row matches the words again, and a search of a megabyte
	// cost seconds of the database's CPU a request.
	if utf8.RuneCountInString(strings.TrimSpace(lq.Q)) > 200 { // characters, as the message says
		return nil, 0, verr.New("q", "is too long (at most 200 characters)")
	}
	if lq.Limit <= 0 {
		lq.Limit = 24
	}
	lq.Limit = min(lq.Limit, 200)
	lq.Offset = max(lq.Offset, 0)
	where := `WHERE ($1 = '' OR s.name ILIKE '%' || $1 || '%' OR s.description ILIKE '%' || $1 || '%')
		AND ($2 = '' OR s.connection_status = $2) AND ($3 = '' OR s.server_type = $3)
		AND ($4::boolean IS NULL OR s.enabled = $4)`
	q := db.EscapeLike(strings.TrimSpace(lq.Q))
	var total int
	if err := s.pool.QueryRow(ctx, `/* registry.CountServers */ SELECT count(*) FROM mcp_servers s `+where,
		q, lq.Status, lq.Type, lq.Enabled).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("registry: count servers: %w", err)
	}
	rows, err := s.pool.Query(ctx, `/* registry.ListServers */ SELECT `+serverColumns+` FROM mcp_servers s `+where+`
		ORDER BY s.name LIMIT $5 OFFSET $6`, q, lq.Status, lq.Type, lq.Enabled, lq.Limit, lq.Offset)
	if err != nil {
		return nil, 0, fmt.Errorf("registry: list servers: %w", err)
	}
	list, err := collectServers(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("registry: list servers: %w", err)
	}
	return list, total, nil
}

// EnabledServerIDs lists the servers that should have a live session.
func (s *Service) EnabledServerIDs(ctx context.Context) ([]string, error) {
	return db.Column[string](ctx, s.pool, "registry: enabled servers",
		`/* registry.EnabledServerIDs */ SELECT id::text FROM mcp_servers WHERE enabled ORDER BY name`)
}

// CountServers returns how many servers are registered, by status.
func (s *Service) CountServers(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `/* registry.CountServersByStatus */ SELECT connection_status, count(*)::int FROM mcp_servers GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("registry: count servers: %w", err)
	}
	out := map[string]int{}
	var st string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[st] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("registry: count servers: %w", err)
	}
	return out, nil
}
