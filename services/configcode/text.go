package configcode

import (
	"fmt"
	"unicode"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// badName says why s cannot be a name read from a file (a tool, a category, a user, a
// parameter, an argument, a test case), or "": text PostgreSQL cannot store, or a
// control or format character, which a terminal acts on (ESC) or nobody sees (U+202E)
// when the plan names it.
func badName(s string) string {
	if why := textcheck.Bad(s); why != "" {
		return why
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Sprintf("contains the control character %U, which is not allowed in a name", r)
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			return fmt.Sprintf("contains the invisible format character %U, which is not allowed in a name", r)
		}
	}
	return ""
}
