// Package risk decides how risky a tool is (docs/architecture.md, The path of a tool call). Toolwarden decides, never the
// caller or the model: an administrator's per-tool setting wins; otherwise the tool's
// annotations decide, believed only as far as its server is trusted.
package risk

import (
	"encoding/json"
	"fmt"
)

// Level is a risk level. Levels order as Low < Medium < High.
type Level string

const (
	Low    Level = "low"
	Medium Level = "medium"
	High   Level = "high"
)

// Levels lists the levels from least to most risky.
var Levels = []Level{Low, Medium, High}

// Parse reads a level as stored or typed ("low", "medium", "high"); ok is false otherwise.
func Parse(s string) (Level, bool) {
	switch Level(s) {
	case Low, Medium, High:
		return Level(s), true
	}
	return "", false
}

func (l Level) rank() int {
	switch l {
	case Low:
		return 1
	case Medium:
		return 2
	case High:
		return 3
	}
	return 0
}

// Max is the riskier of a and b (a plan's risk is its riskiest step).
func Max(a, b Level) Level {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// Label is the level as badges show it.
func (l Level) Label() string {
	switch l {
	case Low:
		return "Low"
	case Medium:
		return "Medium"
	case High:
		return "High"
	}
	return "Unknown"
}

// Sources of a decision.
const (
	SourceOverride    = "override"    // an administrator set the level for this tool
	SourceAnnotations = "annotations" // derived from the tool's annotations and the server's trust
	SourceArguments   = "arguments"   // raised by what one call's arguments say (a built-in terminal's command)
	SourceOperation   = "operation"   // the level of the built-in operation the call names (a file read), in place of the annotations
)

// Decision is a tool's risk and why.
type Decision struct {
	Level  Level  `json:"level"`
	Source string `json:"source"`
	Why    string `json:"why"`
}

// Input is what a tool's risk is decided from.
type Input struct {
	Override    string          // the administrator's setting; "" when none
	Annotations json.RawMessage // the tool's MCP annotations as the server sent them; nil when none
	Trusted     bool            // an administrator marked the tool's server trusted
}

// hint reads one boolean annotation. A hint that is absent or not a JSON boolean counts
// as unset (MCP: readOnlyHint defaults to false, destructiveHint to true), the same rule
// SQL applies, so a list filtered by risk agrees with the risk each tool shows.
func hint(a map[string]json.RawMessage, name string) (value, set bool) {
	switch string(a[name]) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// Decide returns the tool's risk (docs/architecture.md, The path of a tool call):
//   - an administrator's override wins;
//   - on a trusted server: readOnlyHint → low; destructiveHint:false → medium;
//     destructive, unannotated or unreadable annotations → high;
//   - on an untrusted server the annotations are believed only so far: read-only or
//     non-destructive → medium at best; anything else → high.
func Decide(in Input) Decision {
	if l, ok := Parse(in.Override); ok {
		return Decision{Level: l, Source: SourceOverride,
			Why: fmt.Sprintf("An administrator set this tool's risk to %s.", l.Label())}
	}
	var a map[string]json.RawMessage
	if err := json.Unmarshal(in.Annotations, &a); err != nil || a == nil {
		return Decision{Level: High, Source: SourceAnnotations,
			Why: "The tool declares no annotations, so nothing says it is safe: it is treated as destructive."}
	}
	readOnly, _ := hint(a, "readOnlyHint")
	destructive, set := hint(a, "destructiveHint")
	nonDestructive := set && !destructive
	switch {
	case readOnly && in.Trusted:
		return Decision{Level: Low, Source: SourceAnnotations,
			Why: "The tool says it only reads (readOnlyHint) and its server is trusted."}
	case readOnly:
		return Decision{Level: Medium, Source: SourceAnnotations,
			Why: "The tool says it only reads (readOnlyHint), but its server is not trusted, so it is at best medium risk."}
	case nonDestructive && in.Trusted:
		return Decision{Level: Medium, Source: SourceAnnotations,
			Why: "The tool changes things but says it is not destructive (destructiveHint: false), and its server is trusted."}
	case nonDestructive:
		return Decision{Level: Medium, Source: SourceAnnotations,
			Why: "The tool says it is not destructive (destructiveHint: false); its server is not trusted, so it is not rated lower."}
	}
	return Decision{Level: High, Source: SourceAnnotations,
		Why: "The tool may change or delete things (it does not say it is read-only or non-destructive)."}
}

// SQL is Decide as a SQL expression over a tool's risk override, its annotations (jsonb)
// and its server's trusted flag, for filtering lists by risk. TestSQLAgrees keeps the two
// in step.
func SQL(override, annotations, trusted string) string {
	return fmt.Sprintf(`(CASE
		WHEN %[1]s IN ('low', 'medium', 'high') THEN %[1]s
		WHEN jsonb_typeof(%[2]s) IS DISTINCT FROM 'object' THEN 'high'
		WHEN %[2]s->'readOnlyHint' = 'true'::jsonb THEN CASE WHEN %[3]s THEN 'low' ELSE 'medium' END
		WHEN %[2]s->'destructiveHint' = 'false'::jsonb THEN 'medium'
		ELSE 'high' END)`, override, annotations, trusted)
}
