package tools

// What configuration as code (services/configcode) needs to apply many tools' settings
// in one transaction: the same writes as the pages make, each audited as they are.

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
)

// UpdateTx is Update in the caller's transaction, audited as action.
func (s *Service) UpdateTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id string, p Patch, action string) (Item, error) {
	return s.update(ctx, tx, actor, id, p, action)
}

// SameSecret reports whether the stored secret setting cipher of tool toolID's parameter
// param holds value (JSON): an import that states the value already stored changes nothing.
func (s *Service) SameSecret(toolID, param, cipher string, value json.RawMessage) bool {
	if s.keys == nil || cipher == "" {
		return false
	}
	plain, err := s.keys.Decrypt(cipher, configAAD(toolID, param))
	return err == nil && jsonSame(plain, value)
}

// ParseConfiguration reads a tool's stored configuration (mcp_tools.configuration).
func ParseConfiguration(raw []byte) Configuration { return parseConfiguration(raw) }

// SameJSON reports whether two JSON texts hold the same value.
func SameJSON(a, b json.RawMessage) bool { return jsonSame(a, b) }
