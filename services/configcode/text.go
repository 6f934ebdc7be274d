package configcode

import (
	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// badName says why s cannot be a name read from a file (a tool, a category, a user, a
// parameter, an argument, a test case), or "": text PostgreSQL cannot store, or a
// control or format character, which a terminal acts on (ESC) or nobody sees (U+202E)
// when the plan names it.
func badName(s string) string { return textcheck.Readable(s, "a name", 0) }
