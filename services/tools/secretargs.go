package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/toolwarden/toolwarden/services/usage"
)

// MaskSecretArgs masks, as usage.Mask, the top-level arguments whose property in the
// tool's input schema holds a secret (IsSecretParam: writeOnly, format "password"),
// whatever their look: a password typed with send_input is a plain word that
// usage.Redact would keep. args is returned as is when nothing is masked.
func MaskSecretArgs(schema, args json.RawMessage) json.RawMessage {
	return MaskArgs(args, SecretArgNames(schema))
}

// SecretArgNames names the top-level properties of an input schema that hold a secret
// (MaskSecretArgs), for callers that keep them per tool rather than decode the schema
// per call.
func SecretArgNames(schema json.RawMessage) []string {
	if !bytes.Contains(schema, []byte("writeOnly")) && !bytes.Contains(schema, []byte("password")) {
		return nil // most schemas mark nothing: skip decoding them
	}
	var s struct {
		Properties map[string]any `json:"properties"` // a property may be true, not an object
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var names []string
	for name, v := range s.Properties {
		if p, ok := v.(map[string]any); ok && IsSecretParam(name, p) {
			names = append(names, name)
		}
	}
	return names
}

// MaskArgs masks the top-level arguments named in names that are not null; args is
// returned as is when nothing is masked.
func MaskArgs(args json.RawMessage, names []string) json.RawMessage {
	if len(names) == 0 {
		return args
	}
	var a map[string]json.RawMessage
	if json.Unmarshal(args, &a) != nil {
		return args
	}
	masked := false
	for _, name := range names {
		if v, ok := a[name]; ok && string(v) != "null" {
			a[name], _ = json.Marshal(usage.Mask)
			masked = true
		}
	}
	if !masked {
		return args
	}
	out, err := json.Marshal(a)
	if err != nil {
		return args
	}
	return out
}

// ArgMasker masks, in step arguments shown (plans, executions, rollbacks), the
// top-level arguments each step's tool schema marks secret (MaskSecretArgs): send_input's
// text may be a password typed at a hidden prompt; and, as the call's records are
// (usage.Redact), every value under a secret-looking name (api_key) or shaped like a
// credential, which no schema needs to mark. It reads each tool once.
type ArgMasker struct {
	s     *Service
	names map[string][]string // secret argument names, by tool reference
}

// NewArgMasker returns a masker for one page or response.
func (s *Service) NewArgMasker() *ArgMasker {
	return &ArgMasker{s: s, names: map[string][]string{}}
}

// Mask is args with the secrets of the tool toolID (else the one named tool) masked.
func (m *ArgMasker) Mask(ctx context.Context, toolID, tool string, args json.RawMessage) (json.RawMessage, error) {
	ref := toolID
	if ref == "" {
		ref = tool
	}
	if ref == "" || len(args) == 0 {
		return args, nil
	}
	names, ok := m.names[ref]
	if !ok {
		t, err := m.s.Target(ctx, ref)
		switch {
		case errors.Is(err, ErrNotFound): // a deleted tool: no schema says what is secret
		case err != nil:
			return nil, err
		default:
			names = SecretArgNames(t.InputSchema)
		}
		m.names[ref] = names
	}
	return usage.Redact(MaskArgs(args, names)), nil
}
