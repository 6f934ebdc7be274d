package tools

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// RotateSecrets re-encrypts the secret values of every tool's configuration, the
// current one and every stored version, under the keyring's primary key; one tool a
// transaction with its row locked. It returns how many values it re-encrypted.
func (s *Service) RotateSecrets(ctx context.Context) (int, error) {
	n, _, err := s.RotateSecretsKeeping(ctx, nil)
	return n, err
}

// RotateSecretsKeeping is RotateSecrets leaving the values under a key in lost (lost for
// good: the keyring does not hold it, so they cannot be opened; past versions from before
// the key was lost, say) as they are; left counts them.
func (s *Service) RotateSecretsKeeping(ctx context.Context, lost []string) (rotated, left int, err error) {
	rows, err := s.pool.Query(ctx, `/* tools.RotateSecrets.ids */ SELECT id::text FROM mcp_tools
		WHERE configuration::text LIKE '%"secret"%' OR EXISTS (SELECT 1 FROM tool_configurations c WHERE c.tool_id = mcp_tools.id AND c.configuration::text LIKE '%"secret"%')
		ORDER BY id`)
	if err != nil {
		return 0, 0, fmt.Errorf("tools: rotate secrets: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, 0, fmt.Errorf("tools: rotate secrets: %w", err)
	}
	total := 0
	for _, id := range ids {
		err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
			var cur []byte
			if err := tx.QueryRow(ctx, `/* tools.RotateSecrets.lock */ SELECT configuration FROM mcp_tools WHERE id = $1::uuid FOR UPDATE`, id).Scan(&cur); err != nil {
				if err == pgx.ErrNoRows {
					return nil
				}
				return err
			}
			next, n, kept, err := s.rotateConfig(id, cur, lost)
			if err != nil {
				return err
			}
			left += kept
			if n > 0 {
				total += n
				if _, err := tx.Exec(ctx, `/* tools.RotateSecrets */ UPDATE mcp_tools SET configuration = $2 WHERE id = $1::uuid`, id, next); err != nil {
					return err
				}
			}
			vrows, err := tx.Query(ctx, `/* tools.RotateSecrets.versions */ SELECT id, configuration FROM tool_configurations WHERE tool_id = $1::uuid`, id)
			if err != nil {
				return err
			}
			vs, err := pgx.CollectRows(vrows, pgx.RowToStructByName[storedVersion])
			if err != nil {
				return err
			}
			for _, v := range vs {
				next, n, kept, err := s.rotateConfig(id, v.Configuration, lost)
				if err != nil {
					return err
				}
				left += kept
				if n == 0 {
					continue
				}
				total += n
				if _, err := tx.Exec(ctx, `/* tools.RotateSecrets.version */ UPDATE tool_configurations SET configuration = $2 WHERE id = $1`, v.ID, next); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, left, fmt.Errorf("tools: rotate secrets: %w", err)
		}
	}
	return total, left, nil
}

// rotateConfig re-encrypts the secrets of one stored configuration of tool id; what
// else it holds (a version's risk, timeout, category, tags) is kept as it was, and so
// are the values under a key in lost, which kept counts.
func (s *Service) rotateConfig(id string, raw []byte, lost []string) (_ []byte, n, kept int, _ error) {
	c := parseConfiguration(raw)
	for name, st := range c.Params {
		if st.Secret == "" || !s.keys.NeedsRotation(st.Secret) {
			continue
		}
		if kid := secrets.KeyOf(st.Secret); slices.Contains(lost, kid) && !slices.Contains(s.keys.IDs(), kid) {
			kept++
			continue
		}
		out, err := s.keys.Rotate(st.Secret, configAAD(id, name))
		if err != nil {
			return nil, 0, 0, fmt.Errorf("tool %s, parameter %s: %w", id, name, err)
		}
		st.Secret = out
		c.Params[name] = st
		n++
	}
	if n == 0 {
		return raw, 0, kept, nil
	}
	b, err := withParams(raw, c.Params)
	return b, n, kept, err
}

// KeyUsage counts the stored secret values of tool configurations (current and past
// versions) by the id of the key that sealed them.
func (s *Service) KeyUsage(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `/* tools.KeyUsage */
		SELECT p.value->>'secret' FROM mcp_tools, jsonb_each(configuration->'params') AS p WHERE p.value ? 'secret'
		UNION ALL SELECT p.value->>'secret' FROM tool_configurations, jsonb_each(configuration->'params') AS p WHERE p.value ? 'secret'`)
	if err != nil {
		return nil, fmt.Errorf("tools: key usage: %w", err)
	}
	return secrets.CountByKey(rows)
}
