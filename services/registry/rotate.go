package registry

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// RotateSecrets re-encrypts every stored secret of every server (environment values,
// header values, the credential) under the keyring's primary key, one server a
// transaction with its row locked, so it runs beside a serving Toolwarden. The values
// do not change, so nothing reconnects. It returns how many values it re-encrypted.
func (s *Service) RotateSecrets(ctx context.Context) (int, error) {
	n, _, err := s.RotateSecretsKeeping(ctx, nil)
	return n, err
}

// RotateSecretsKeeping is RotateSecrets leaving the values under a key in lost (lost for
// good: the keyring does not hold it, so they cannot be opened) as they are; left counts
// them.
func (s *Service) RotateSecretsKeeping(ctx context.Context, lost []string) (rotated, left int, err error) {
	ids, err := s.serverIDs(ctx)
	if err != nil {
		return 0, 0, err
	}
	total := 0
	for _, id := range ids {
		kept := 0
		err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
			var env, headers map[string]string
			var token string
			err := tx.QueryRow(ctx, `/* registry.RotateSecrets.lock */ SELECT env, headers, auth_token FROM mcp_servers WHERE id = $1::uuid FOR UPDATE`, id).
				Scan(&env, &headers, &token)
			if err == pgx.ErrNoRows {
				return nil // deleted meanwhile
			}
			if err != nil {
				return err
			}
			n := 0
			rot := func(v, field, name string) (string, error) {
				if !secrets.IsCiphertext(v) || !s.keys.NeedsRotation(v) {
					return v, nil
				}
				if kid := secrets.KeyOf(v); slices.Contains(lost, kid) && !slices.Contains(s.keys.IDs(), kid) {
					kept++
					return v, nil
				}
				out, err := s.keys.Rotate(v, aad(id, field, name))
				if err != nil {
					return "", fmt.Errorf("server %s, %s %s: %w", id, field, name, err)
				}
				n++
				return out, nil
			}
			for k, v := range env {
				if env[k], err = rot(v, "env", k); err != nil {
					return err
				}
			}
			for k, v := range headers {
				if headers[k], err = rot(v, "headers", k); err != nil {
					return err
				}
			}
			if token, err = rot(token, "auth_token", ""); err != nil {
				return err
			}
			if n == 0 {
				return nil
			}
			total += n
			_, err = tx.Exec(ctx, `/* registry.RotateSecrets */ UPDATE mcp_servers SET env = $2, headers = $3, auth_token = $4 WHERE id = $1::uuid`,
				id, env, headers, token)
			return err
		})
		if err != nil {
			return total, left, fmt.Errorf("registry: rotate secrets: %w", err)
		}
		left += kept
	}
	return total, left, nil
}

// KeyUsage counts the stored server secrets by the id of the key that sealed them.
func (s *Service) KeyUsage(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `/* registry.KeyUsage */
		SELECT v FROM mcp_servers, jsonb_each_text(env) AS e(k, v)
		UNION ALL SELECT v FROM mcp_servers, jsonb_each_text(headers) AS h(k, v)
		UNION ALL SELECT auth_token FROM mcp_servers WHERE auth_token <> ''`)
	if err != nil {
		return nil, fmt.Errorf("registry: key usage: %w", err)
	}
	return secrets.CountByKey(rows)
}

func (s *Service) serverIDs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `/* registry.serverIDs */ SELECT id::text FROM mcp_servers ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("registry: list servers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("registry: list servers: %w", err)
	}
	return ids, nil
}
