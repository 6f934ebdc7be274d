package configcode

// Export: the whole configuration as one YAML file, deterministic byte for byte.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
)

// header opens every exported file.
const header = `# Toolwarden configuration: written by 'toolwarden export', read by 'toolwarden import'.
#
# Secret values are never exported.
#   - servers: env and headers list each secret by name with a null value, and an auth
#     block never holds its token. A null value keeps the value stored for that name; a
#     name not stored yet is skipped with a warning; a value written here replaces it
#     ('toolwarden import' expands ${env:NAME}).
#   - tools: a secret parameter is a reference, secret: ${env:NAME}. 'toolwarden import'
#     stores the value of that environment variable when it is set; otherwise the value
#     already stored stays, and a parameter with neither is reported as not applied.
#   - test cases and compensations: an argument the tool's (or the undo tool's) current
#     input schema marks secret, saved before it did, is written as ******** with a
#     comment; 'toolwarden import' applies no case or compensation holding one and keeps
#     the stored one.
# Tools are listed by qualified name (server__tool) with what an administrator set on
# them; a listed tool gets exactly these settings, tools not listed are left as they are.
# definition_hash is the tool's definition its state and override were decided on: an
# import enables, or overrides the findings of, that definition only. A tool its server
# has redefined since stays as it is: review the new definition on the tool's page, then
# export again.
`

type fileOut struct {
	Version    int                    `yaml:"version"`
	Servers    []registry.ServerEntry `yaml:"servers"`
	Categories []categoryOut          `yaml:"categories,omitempty"`
	Tools      []toolOut              `yaml:"tools,omitempty"`
	Settings   settingsOut            `yaml:"settings"`
}

type categoryOut struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	AutoEnable  bool   `yaml:"auto_enable,omitempty"`
}

type toolOut struct {
	Tool     string `yaml:"tool"`
	State    string `yaml:"state,omitempty"`
	Override string `yaml:"override,omitempty"`
	// DefinitionHash pins State and Override to the definition they were decided on
	// (Tool.DefinitionHash): re-applied after an upstream change, the file enables nothing unseen.
	DefinitionHash string              `yaml:"definition_hash,omitempty"`
	Risk           string              `yaml:"risk,omitempty"`
	TimeoutMS      int                 `yaml:"timeout_ms,omitempty"`
	RateLimit      int                 `yaml:"rate_limit,omitempty"`
	Category       string              `yaml:"category,omitempty"`
	Tags           []string            `yaml:"tags,omitempty,flow"`
	Config         map[string]paramOut `yaml:"config,omitempty"`
	Permissions    map[string]bool     `yaml:"permissions,omitempty"`
	Compensation   *compensationOut    `yaml:"compensation,omitempty"`
	TestCases      []testCaseOut       `yaml:"test_cases,omitempty"`
}

type paramOut struct {
	Mode   string `yaml:"mode"`
	Value  any    `yaml:"value,omitempty"`
	Secret string `yaml:"secret,omitempty"`
}

type compensationOut struct {
	Undo      string                 `yaml:"undo"`
	Arguments map[string]argumentOut `yaml:"arguments,omitempty"`
}

type argumentOut struct {
	From  string `yaml:"from,omitempty"`
	Value any    `yaml:"value,omitempty"`
}

type testCaseOut struct {
	Name       string         `yaml:"name"`
	Arguments  map[string]any `yaml:"arguments,omitempty"`
	Expect     string         `yaml:"expect"`
	ExpectText string         `yaml:"expect_text,omitempty"`
}

type settingsOut struct {
	ApprovalTTLSeconds int64  `yaml:"approval_ttl_seconds"`
	HighSeparation     string `yaml:"high_separation"`
}

// Export writes the whole configuration. The output depends only on what is stored:
// lists sorted by name, mappings by key, no ids or timestamps, so exporting twice gives
// identical bytes, and exporting a database an export was imported into gives the same
// file again. It decrypts nothing: no secret value can reach the file.
func (s *Service) Export(ctx context.Context) ([]byte, error) {
	servers, err := s.reg.ExportServers(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.load(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	f := fileOut{Version: registry.ConfigVersion, Servers: servers,
		Settings: settingsOut{ApprovalTTLSeconds: int64(st.Settings.ApprovalTTL / time.Second), HighSeparation: string(st.Settings.HighSeparation)}}
	for _, name := range slices.Sorted(maps.Keys(st.Categories)) {
		c := st.Categories[name]
		f.Categories = append(f.Categories, categoryOut{Name: c.Name, Description: c.Description, AutoEnable: c.AutoEnable})
	}
	var listed []*storedTool
	for _, t := range st.sortedTools() {
		if t.configured() {
			listed = append(listed, t)
		}
	}
	schemas, undoSchemas, err := s.exportSchemas(ctx, listed)
	if err != nil {
		return nil, err
	}
	secret := secretSettings(listed, schemas)
	refs, err := secretRefs(listed, secret)
	if err != nil {
		return nil, err
	}
	for _, t := range listed {
		f.Tools = append(f.Tools, toolEntry(t, refs, schemas[t.ID], undoSchemas[t.ID]))
	}
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("configcode: export: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("configcode: export: %w", err)
	}
	return buf.Bytes(), nil
}

// toolEntry is t as the file gives it. schema is its current input schema and undoSchema
// its undo tool's, read when it has test cases or fixed compensation values: what they
// mark secret is masked (maskedArgs).
func toolEntry(t *storedTool, refs map[[2]string]string, schema, undoSchema json.RawMessage) toolOut {
	o := toolOut{Tool: t.qualified(), DefinitionHash: t.DefinitionHash, Risk: t.Risk, TimeoutMS: t.TimeoutMS, RateLimit: t.RateLimit,
		Category: t.Category, Tags: t.Tags}
	if t.Status == "enabled" || t.Status == "disabled" {
		o.State, o.Override = t.Status, t.Override
	}
	if len(t.Config.Params) > 0 {
		o.Config = map[string]paramOut{}
		for name, p := range t.Config.Params {
			po := paramOut{Mode: p.Mode}
			if env, ok := refs[[2]string{t.qualified(), name}]; ok {
				po.Secret = "${env:" + env + "}"
			} else {
				po.Value = yamlValue(p.Value)
			}
			o.Config[name] = po
		}
	}
	if len(t.Permissions) > 0 {
		o.Permissions = t.Permissions
	}
	if c := t.Compensation; c != nil {
		co := &compensationOut{Undo: c.Undo}
		if len(c.Arguments) > 0 {
			// The fixed values, masked together as the undo tool's arguments. (Masking is
			// by name, key by key; one that is not JSON is left out so that it cannot fail
			// the others' marshalling.)
			fixed := map[string]json.RawMessage{}
			for k, a := range c.Arguments {
				if len(a.Value) > 0 && json.Valid(a.Value) {
					fixed[k] = a.Value
				}
			}
			var masked map[string]any
			if len(fixed) > 0 {
				if args, err := json.Marshal(fixed); err == nil {
					v, ok := maskedArgs(undoSchema, args, "secret (the undo tool's input schema marks it): not exported; an import keeps the stored compensation")
					if ok {
						masked, _ = v.(map[string]any)
					}
				}
			}
			co.Arguments = map[string]argumentOut{}
			for k, a := range c.Arguments {
				ao := argumentOut{From: a.From, Value: yamlValue(a.Value)}
				if v := masked[k]; v != nil {
					ao.Value = v // else yamlValue's explicit null stays
				}
				co.Arguments[k] = ao
			}
		}
		o.Compensation = co
	}
	for _, name := range slices.Sorted(maps.Keys(t.TestCases)) {
		c := t.TestCases[name]
		tc := testCaseOut{Name: c.Name, Expect: c.Expect, ExpectText: c.ExpectText}
		v, _ := maskedArgs(schema, c.Arguments, "secret (the tool's input schema marks it): not exported; an import keeps the stored case")
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			tc.Arguments = m
		}
		o.TestCases = append(o.TestCases, tc)
	}
	return o
}

// envUnsafe are the characters an environment variable name cannot hold.
var envUnsafe = regexp.MustCompile(`[^A-Z0-9_]`)

// SecretEnv is the environment variable whose reference (${env:…}) Export writes for the
// secret parameter param of the tool with the qualified name tool:
// TOOLWARDEN_SECRET_<TOOL>__<PARAM>, upper case, other characters as "_". It is derived
// from names only, so it is the same in every database and export, except where two
// parameters of one export share it (secretRefs).
func SecretEnv(tool, param string) string {
	return "TOOLWARDEN_SECRET_" + envUnsafe.ReplaceAllString(strings.ToUpper(tool+"__"+param), "_")
}

// exportSchemas are the current input schemas the file needs, by tool id: of each tool
// of ts with a setting stored in clear (secretSettings) or a test case, and, in undo, of
// the undo tool of each with a fixed compensation value (maskedArgs). One query each,
// made only when some tool needs it.
func (s *Service) exportSchemas(ctx context.Context, ts []*storedTool) (own, undo map[string]json.RawMessage, err error) {
	var ids, compensated []string
	for _, t := range ts {
		needs := len(t.TestCases) > 0
		for _, p := range t.Config.Params {
			needs = needs || p.Secret == ""
		}
		if needs {
			ids = append(ids, t.ID)
		}
		if c := t.Compensation; c != nil {
			for _, a := range c.Arguments {
				if len(a.Value) > 0 {
					compensated = append(compensated, t.ID)
					break
				}
			}
		}
	}
	type toolSchema struct {
		ID     string          `db:"id"`
		Schema json.RawMessage `db:"input_schema"`
	}
	read := func(ids []string, what, sql string) (map[string]json.RawMessage, error) {
		out := map[string]json.RawMessage{}
		if len(ids) == 0 {
			return out, nil
		}
		found, err := db.All[toolSchema](ctx, s.pool, what, sql, ids)
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			out[f.ID] = f.Schema
		}
		return out, nil
	}
	if own, err = read(ids, "configcode: export: input schemas",
		`/* configcode.export.schemas */ SELECT id::text AS id, input_schema FROM mcp_tools WHERE id = ANY($1::uuid[])`); err != nil {
		return nil, nil, err
	}
	if undo, err = read(compensated, "configcode: export: undo tools' input schemas",
		`/* configcode.export.undo_schemas */ SELECT c.tool_id::text AS id, u.input_schema
		FROM tool_compensations c JOIN mcp_tools u ON u.id = c.undo_tool_id WHERE c.tool_id = ANY($1::uuid[])`); err != nil {
		return nil, nil, err
	}
	return own, undo, nil
}

// secretSettings are the settings of ts, by qualified tool name and parameter, that the
// file gives as references rather than values: each stored encrypted, and each stored in
// clear under a parameter the tool's current input schema (schemas, by tool id) marks
// secret (tools.Configuration.SecretIn: a value saved before a new definition said so,
// which the tool page and the API hide too).
func secretSettings(ts []*storedTool, schemas map[string]json.RawMessage) map[[2]string]bool {
	out := map[[2]string]bool{}
	for _, t := range ts {
		secret := t.Config.SecretIn(schemas[t.ID])
		for name := range t.Config.Params {
			if secret(name) {
				out[[2]string{t.qualified(), name}] = true
			}
		}
	}
	return out
}

// maskedArgs is yamlValue of a saved case's or compensation's arguments with each value
// the current input schema marks secret (tools.SecretArgNames: saved before the schema
// said so, as a clear setting may be) written as ******** and a comment: the export
// needs only tool.inspect. An import finds the mask where the schema marks a secret
// (tools.SecretsHeld), applies nothing holding it and keeps the stored one. It reports
// whether it masked anything.
func maskedArgs(schema, args json.RawMessage, comment string) (any, bool) {
	masked := tools.MaskArgs(args, tools.SecretArgNames(schema))
	if bytes.Equal(masked, args) {
		return yamlValue(args), false
	}
	return noteMasks(decodeJSON(args), yamlValue(masked), comment), true
}

// noteMasks puts comment beside each mask in masked (yamlValue of orig masked) where
// orig held something else.
func noteMasks(orig, masked any, comment string) any {
	switch m := masked.(type) {
	case string:
		if o, ok := orig.(string); m == usage.Mask && (!ok || o != usage.Mask) {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: m, LineComment: comment}
		}
	case map[string]any:
		o, _ := orig.(map[string]any)
		for k, v := range m {
			m[k] = noteMasks(o[k], v, comment)
		}
	case []any:
		o, _ := orig.([]any)
		for i, v := range m {
			if i < len(o) {
				m[i] = noteMasks(o[i], v, comment)
			}
		}
	}
	return masked
}

// secretRefs names the variable of each secret setting of ts (secretSettings), by
// qualified tool name and parameter: SecretEnv, unless two parameters share that name
// (s__get-user and s__get_user, or tool b__c's d and tool b's c__d); each of those then
// gets a hash of its exact names appended, or the import would store one value into both.
func secretRefs(ts []*storedTool, secret map[[2]string]bool) (map[[2]string]string, error) {
	var keys [][2]string
	byEnv := map[string]int{}
	for _, t := range ts {
		for _, name := range slices.Sorted(maps.Keys(t.Config.Params)) {
			if secret[[2]string{t.qualified(), name}] {
				k := [2]string{t.qualified(), name}
				keys = append(keys, k)
				byEnv[SecretEnv(k[0], k[1])]++
			}
		}
	}
	out := make(map[[2]string]string, len(keys))
	owner := map[string][2]string{}
	for _, k := range keys {
		env := SecretEnv(k[0], k[1])
		if byEnv[env] > 1 {
			sum := sha256.Sum256([]byte(k[0] + "\x00" + k[1]))
			env += "__" + strings.ToUpper(hex.EncodeToString(sum[:5]))
		}
		if o, ok := owner[env]; ok {
			return nil, fmt.Errorf("configcode: export: the secret parameters %s of %s and %s of %s would both read ${env:%s}: clear the secret of one of them on its tool's page, export, and set it again after the import",
				o[1], o[0], k[1], k[0], env)
		}
		owner[env], out[k] = k, env
	}
	return out, nil
}

// yamlValue turns a JSON value into what the YAML encoder writes naturally: objects as
// mappings (keys sorted by the encoder), numbers with their JSON text unchanged, and a
// null as an explicit null.
func yamlValue(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	if v == nil {
		// A node, not nil: omitempty would drop the key, and a value left out is not a
		// null one (the import refuses a parameter or mapped argument without a value).
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
	return numbers(v)
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		// The stored text itself: through float64, 2.50 became 2.5 and 1.0 became 1 (a
		// change at every re-import, the plan comparing number text) and integers beyond
		// int64 lost digits. The encoder writes the tag only when the plain text would
		// read as something else (!!int 123456789012345678901234567890).
		tag := "!!int"
		if strings.ContainsAny(x.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: x.String()}
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
