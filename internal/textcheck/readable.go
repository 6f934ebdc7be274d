package textcheck

import (
	"fmt"
	"strings"
	"unicode"
)

// Allow lists what Readable lets through that it refuses by default.
type Allow uint8

const (
	// AllowTab lets a tab through.
	AllowTab Allow = 1 << iota
	// AllowNewlines lets line breaks through: \n, and \r only as part of \r\n (what a
	// browser's textarea sends).
	AllowNewlines
	// AllowJoiners lets the zero-width non-joiner and joiner (U+200C, U+200D) through:
	// Persian and Indic scripts and emoji sequences are written with them, and they
	// reverse nothing and forge no line.
	AllowJoiners
)

// Readable says why s cannot be text that people read (what names it: "a name", "a
// description"), or "": what Bad refuses, a control character (a newline forging a
// line of a log, ESC driving a terminal) or an invisible format character (U+202E
// reversing what follows, a zero-width space making two names look alike, a line or
// paragraph separator), but for what allow lets through.
func Readable(s, what string, allow Allow) string {
	if why := Bad(s); why != "" {
		return why
	}
	for i, r := range s {
		switch {
		case r == '\t' && allow&AllowTab != 0:
		case allow&AllowNewlines != 0 && (r == '\n' || r == '\r' && strings.HasPrefix(s[i+1:], "\n")):
		case unicode.IsControl(r):
			return fmt.Sprintf("contains the control character %U, which is not allowed in %s", r, what)
		case (r == '\u200c' || r == '\u200d') && allow&AllowJoiners != 0:
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			return fmt.Sprintf("contains the invisible format character %U, which is not allowed in %s", r, what)
		}
	}
	return ""
}
