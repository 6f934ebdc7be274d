// Package audittest fills the audit log with many synthetic entries, for the
// benchmarks of the audit browser (P6: a filtered page at 10 M rows).
package audittest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
)

// Actions are the actions Load spreads its entries over, one in len(Actions) each.
var Actions = []string{"tool.call", "tool.call", "tool.call", "tool.call", "tool.call", "tool.call", "tool.call", "tool.call",
	"execution.create", "execution.approve", "execution.success", "server.update", "server.test", "tool.enable",
	"tool.validate", "user.login", "user.logout", "token.create", "grant.use", "request.denied"}

// Actors is how many actor names Load uses: user0 … user999.
const Actors = 1000

// Targets is how many tool targets Load uses: tool-0 … tool-49999.
const Targets = 50_000

// Load appends n synthetic entries after the log's current head, spread over the last
// n×10 ms: actors user0…user999, the actions of Actions (request.denied ones denied,
// one in 200 of the others a failure), tool targets tool-0…tool-49999, three entries a
// request, a payload with arguments. They are not a valid chain (their hashes are
// stand-ins): what is measured is reading, not verifying. The free-text filter's words
// are indexed for them (audit_search). The secondary indexes of both tables are dropped
// for the load and rebuilt from their own definitions after it, as a bulk load would,
// then the tables are analysed.
func Load(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename IN ('audit_log', 'audit_search') AND indexname NOT LIKE '%_pkey'`)
	if err != nil {
		return err
	}
	var names, defs []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			return err
		}
		names, defs = append(names, name), append(defs, def)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range names {
		if _, err := conn.Exec(ctx, `DROP INDEX `+name); err != nil {
			return err
		}
	}
	var head int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM audit_log`).Scan(&head); err != nil {
		return err
	}
	start := time.Now().Add(-time.Duration(n) * 10 * time.Millisecond).UTC()
	const chunk = 1_000_000
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n)
		_, err := conn.Exec(ctx, `
			INSERT INTO audit_log (id, at, actor_kind, actor_name, action, target_type, target_id, target_name, ip, request_id,
				payload, prev_hash, hash, result)
			SELECT $1 + g, $2::timestamptz + g * interval '10 milliseconds', 'user', 'user' || (g % $5),
				a.action, 'tool', 't' || ((hashint8(-g) & 2147483647) % $6), 'tool-' || ((hashint8(-g) & 2147483647) % $6), '10.0.' || (g % 250) || '.1',
				'req-' || (g / 3),
				json_build_object('arguments', json_build_object('message', 'note ' || g), 'client', 'bench'),
				'\x00'::bytea, decode(md5(g::text), 'hex'),
				CASE WHEN a.action = 'request.denied' THEN 'denied' WHEN g % 200 = 7 THEN 'failure' ELSE 'success' END
			FROM generate_series($3::bigint, $4::bigint) g,
				LATERAL (SELECT ($7::text[])[1 + (hashint8(g) & 2147483647) % array_length($7::text[], 1)] AS action) a`,
			head, start, int64(from+1), int64(to), Actors, Targets, Actions)
		if err != nil {
			return fmt.Errorf("audittest: load rows %d–%d: %w", from+1, to, err)
		}
	}
	// The free-text filter's words, by the server's own indexer (which a running server
	// may be running meanwhile: they take turns).
	if _, err := audit.NewLog(pool).IndexSearch(ctx); err != nil {
		return fmt.Errorf("audittest: %w", err)
	}
	if _, err := conn.Exec(ctx, `SET maintenance_work_mem = '512MB'`); err != nil {
		return err
	}
	for _, def := range defs {
		if _, err := conn.Exec(ctx, def); err != nil {
			return fmt.Errorf("audittest: rebuild %s: %w", def, err)
		}
	}
	if _, err := conn.Exec(ctx, `RESET maintenance_work_mem`); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `VACUUM ANALYZE audit_log, audit_search`)
	return err
}

// LoadLarge appends 48 valid entries (test.big) of half a MiB of payload each, 24 MiB
// in all: more than the sockets between a client and the server hold, so an export of
// them waits on a client that stops reading.
func LoadLarge(ctx context.Context, pool *pgxpool.Pool) error {
	for i := range 48 {
		if err := audit.AppendAlone(ctx, pool, audit.Entry{Actor: audit.System, Action: "test.big", TargetType: "test",
			Payload: map[string]any{"i": i, "blob": strings.Repeat("x", 512<<10)}}); err != nil {
			return err
		}
	}
	return nil
}
