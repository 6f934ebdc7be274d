package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// SpecMeta is the _meta key under which a tool's listing carries the SHA-256 of what it
// does (specHash). registry.DefinitionHash covers it: the MCP definition alone (name,
// description, schemas, annotations) would let an edit of the template change what an
// approved tool does while it stays approved.
const SpecMeta = "io.toolwarden/spec"

// specHash is the SHA-256 (hex) of the canonical JSON of what tool does when called:
// its command or HTTP request with their timeouts, and its response parser p (nil for
// none). Texts are as written (Text.String), lines and the parser's name are left out:
// they do not change behaviour. The input schema (defaults included) is in the
// definition already.
func specHash(tool *Tool, p *Parser) string {
	spec := map[string]any{}
	if c := tool.Command; c != nil {
		argv := make([]string, len(c.Argv))
		for i, a := range c.Argv {
			argv[i] = a.String()
		}
		spec["command"] = map[string]any{"argv": argv, "stdin": textOrNil(c.Stdin), "timeout": c.Timeout.String()}
	}
	if h := tool.HTTP; h != nil {
		headers := make([][2]string, len(h.Headers))
		for i, hd := range h.Headers {
			headers[i] = [2]string{hd.Name, hd.Value.String()}
		}
		var form [][2]string
		if h.Form != nil {
			form = make([][2]string, len(h.Form))
			for i, f := range h.Form {
				form[i] = [2]string{f.Name, f.Value.String()}
			}
		}
		var body any
		if h.JSON != nil {
			body = h.JSON.spec()
		}
		spec["http"] = map[string]any{"method": h.Method, "url": h.URL.Raw.String(), "headers": headers,
			"json": body, "body": textOrNil(h.Body), "form": form, "timeout": h.Timeout.String()}
	}
	if p != nil {
		ps := map[string]any{"type": p.Type, "group": p.Group, "all": p.All, "from_column": p.FromColumn,
			"unique": p.Unique, "header": p.Header, "separator": p.Separator}
		if p.Pattern != nil {
			ps["pattern"] = p.Pattern.String()
		}
		if p.Path != nil {
			ps["path"] = p.Path.String()
		}
		spec["parser"] = ps
	}
	// Maps marshal with their keys sorted: the same spec gives the same bytes.
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func textOrNil(t *Text) any {
	if t == nil {
		return nil
	}
	return t.String()
}

// spec is v as canonical JSON values: members in the order written (the order sent),
// each node tagged with its kind so that a string and a literal never look alike.
func (v *jsonValue) spec() any {
	switch v.kind {
	case jsonObject:
		members := make([]any, len(v.object))
		for i, m := range v.object {
			members[i] = []any{m.key, m.value.spec()}
		}
		return map[string]any{"object": members}
	case jsonArray:
		items := make([]any, len(v.array))
		for i, a := range v.array {
			items[i] = a.spec()
		}
		return map[string]any{"array": items}
	case jsonString:
		return map[string]any{"string": v.str.String()}
	}
	return map[string]any{"literal": v.lit}
}
