package tools

import (
	"bytes"
	"encoding/json"

	"github.com/toolwarden/toolwarden/services/usage"
)

// MaskSecretArgs masks, as usage.Mask, the top-level arguments whose property in the
// tool's input schema holds a secret (IsSecretParam: writeOnly, format "password"),
// whatever their look: a password typed with send_input is a plain word that
// usage.Redact would keep. args is returned as is when nothing is masked.
func MaskSecretArgs(schema, args json.RawMessage) json.RawMessage {
	if !bytes.Contains(schema, []byte("writeOnly")) && !bytes.Contains(schema, []byte("password")) {
		return args // most schemas mark nothing: skip decoding them
	}
	var s struct {
		Properties map[string]any `json:"properties"` // a property may be true, not an object
	}
	var a map[string]json.RawMessage
	if json.Unmarshal(schema, &s) != nil || json.Unmarshal(args, &a) != nil {
		return args
	}
	masked := false
	for name, v := range a {
		if p, ok := s.Properties[name].(map[string]any); ok && string(v) != "null" && IsSecretParam(name, p) {
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
