package builtin

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// lineEditor follows what is typed into a terminal well enough to audit each line as
// the shell will run it: printable characters at the cursor, backspace and delete, the
// cursor keys, Home and End, Ctrl-A/E/U/W/K, and Ctrl-C (the line is dropped). What the
// shell itself puts in the line (history with the up and down keys or Ctrl-R, Tab
// completion) the editor cannot know; such a line is marked so the audit does not
// pretend to know it.
type lineEditor struct {
	line    []rune
	cur     int
	pending []byte // an escape sequence or a UTF-8 character cut between two inputs
	// shellEdited: the shell changed the line in ways not seen here.
	shellEdited bool
	// cut: the line grew past maxAuditLine; what follows was not kept.
	cut bool
	// literal: the next key is taken as it is (after Ctrl-V), Enter included.
	literal bool
}

// maxAuditLine bounds a line the editor keeps.
const maxAuditLine = 4096

// edited is a finished line as it is audited.
type edited struct {
	text string
	// shell: history, completion or an editing key not followed here changed it, or a
	// key changed it once cut (the text is what was typed).
	shell bool
	// cut: longer than maxAuditLine; the text is its start (unless shell).
	cut bool
}

// clone is a copy of the editor that feeding the original leaves as it is.
func (e *lineEditor) clone() lineEditor {
	c := *e
	c.line, c.pending = slices.Clone(e.line), slices.Clone(e.pending)
	return c
}

// feed takes typed bytes and returns the lines they finished.
func (e *lineEditor) feed(b []byte) []edited {
	var out []edited
	data := append(e.pending, b...)
	e.pending = nil
	// A cut line's text is its start only while no key changes it: one deleting or
	// inserting acts on a line the editor does not hold whole (a backspace at the end
	// takes the shell's last character, not the editor's).
	was := len(e.line)
	changedCut := func() {
		if e.cut && len(e.line) != was {
			e.shellEdited = true
		}
		was = len(e.line)
	}
	defer changedCut()
	for i := 0; i < len(data); {
		changedCut()
		c := data[i]
		if e.literal {
			e.literal = false
			if c < 0x20 || c == 0x7f { // a control key put into the line, not acted on
				e.insert(rune(c))
				i++
				continue
			}
		}
		switch {
		case c == '\r' || c == '\n':
			out = e.finish(out)
			e.reset()
			i++
		case c == 0x1b:
			n, ok := e.escape(data[i:])
			if !ok {
				e.pending = append([]byte(nil), data[i:]...)
				return out
			}
			i += n
		case c == 0x7f || c == 0x08: // backspace
			if e.cur > 0 {
				e.line = append(e.line[:e.cur-1], e.line[e.cur:]...)
				e.cur--
			}
			i++
		case c == 0x01: // Ctrl-A
			e.cur = 0
			i++
		case c == 0x02: // Ctrl-B
			e.cur = max(e.cur-1, 0)
			i++
		case c == 0x06: // Ctrl-F
			e.cur = min(e.cur+1, len(e.line))
			i++
		case c == 0x04: // Ctrl-D: the character under the cursor (on an empty line, the end of input)
			if e.cur < len(e.line) {
				e.line = append(e.line[:e.cur], e.line[e.cur+1:]...)
			}
			i++
		case c == 0x05: // Ctrl-E
			e.cur = len(e.line)
			i++
		case c == 0x15: // Ctrl-U: kill to the start
			e.line = append([]rune(nil), e.line[e.cur:]...)
			e.cur = 0
			i++
		case c == 0x0b: // Ctrl-K: kill to the end
			e.line = e.line[:e.cur]
			i++
		case c == 0x17: // Ctrl-W: kill the word before the cursor
			j := e.cur
			for j > 0 && e.line[j-1] == ' ' {
				j--
			}
			for j > 0 && e.line[j-1] != ' ' {
				j--
			}
			e.line = append(e.line[:j], e.line[e.cur:]...)
			e.cur = j
			i++
		case c == 0x03: // Ctrl-C: the shell drops the line
			e.reset()
			i++
		case c == 0x09 || c == 0x12 || c == 0x10 || c == 0x0e: // Tab, Ctrl-R, Ctrl-P, Ctrl-N
			e.shellEdited = true
			i++
		case c == 0x16: // Ctrl-V: the next key goes into the line as it is
			e.shellEdited, e.literal = true, true
			i++
		case c == 0x0f:
			// Ctrl-O runs the line, as Enter does, and puts the next line of the history
			// in its place: the line after it is the shell's.
			out = e.finish(out)
			e.reset()
			e.shellEdited = true
			i++
		case c == 0x0c || c == 0x07: // Ctrl-L redraws, Ctrl-G rings: the line stays
			i++
		case c < 0x20:
			// Any other control key is taken as the shell's edit (Ctrl-Y yanks, Ctrl-T
			// transposes, Ctrl-] searches and moves to a character, Ctrl-X prefixes…):
			// the keys followed here are listed above, the rest are not assumed harmless.
			e.shellEdited = true
			i++
		default:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 && !utf8.FullRune(data[i:]) {
				e.pending = append([]byte(nil), data[i:]...)
				return out
			}
			e.insert(r)
			i += n
		}
	}
	return out
}

// insert puts r at the cursor, up to maxAuditLine.
func (e *lineEditor) insert(r rune) {
	if len(e.line) < maxAuditLine {
		e.line = append(e.line[:e.cur], append([]rune{r}, e.line[e.cur:]...)...)
		e.cur++
	} else {
		e.cut = true
		// Dropped inside the line, the key moved the rest along in the shell's.
		e.shellEdited = e.shellEdited || e.cur < len(e.line)
	}
}

// finish appends the line run now to out. An empty one too: Enter alone answers a
// program's [Y/n] or "press Enter" (one input's lines are one audit entry, however many).
func (e *lineEditor) finish(out []edited) []edited {
	return append(out, edited{text: string(e.line), shell: e.shellEdited, cut: e.cut})
}

func (e *lineEditor) reset() {
	e.line, e.cur, e.shellEdited, e.cut, e.literal = e.line[:0], 0, false, false, false
}

// maxEscapeParams bounds the parameter bytes of a key's escape sequence: real keys
// have a few ("1;5", "200").
const maxEscapeParams = 32

// escape applies the escape sequence at the start of b and returns its length; ok is
// false when b ends before the sequence does.
func (e *lineEditor) escape(b []byte) (n int, ok bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '[', 'O': // CSI or SS3: parameters and intermediates (0x20..0x3f), then a final byte in 0x40..0x7e
		j := 2
		for j < len(b) && j-2 < maxEscapeParams && b[j] >= 0x20 && b[j] <= 0x3f {
			j++
		}
		switch {
		case j-2 >= maxEscapeParams || j < len(b) && (b[j] < 0x20 || b[j] > 0x7e):
			// Not a key: a control byte (Enter, Ctrl-C, another ESC) ends it and is
			// acted on, as a terminal acts on it; kept waiting for a final byte, an
			// unending sequence hid the Enters after it and grew without bound.
			e.shellEdited = true
			return j, true
		case j == len(b):
			return 0, false
		}
		e.key(string(b[2:j]), b[j])
		return j + 1, true
	case 'b', 'f': // Alt-b, Alt-f: a word back or forward
		e.word(b[1] == 'f')
		return 2, true
	}
	// Another Alt key (Alt-d, Alt-u, Alt-., Alt-y, Alt-backspace…): the shell's edit.
	// Before a control byte, the ESC alone: an Enter after it is still an Enter here.
	e.shellEdited = true
	if b[1] < 0x20 {
		return 1, true
	}
	return 2, true
}

// key applies a cursor key (CSI or SS3 with params and final byte). A key with
// modifiers (Ctrl-Left is "1;5D") or one not followed here (Insert toggles overwrite,
// a bracketed paste puts its text in the line as it is) is the shell's edit.
func (e *lineEditor) key(params string, final byte) {
	if params != "" && params != "1" && final != '~' {
		e.shellEdited = true
		return
	}
	switch final {
	case 'D':
		e.cur = max(e.cur-1, 0)
	case 'C':
		e.cur = min(e.cur+1, len(e.line))
	case 'H':
		e.cur = 0
	case 'F':
		e.cur = len(e.line)
	case 'A', 'B': // up, down: the shell's history
		e.shellEdited = true
	case '~':
		switch params {
		case "1", "7":
			e.cur = 0
		case "4", "8":
			e.cur = len(e.line)
		case "3": // Delete
			if e.cur < len(e.line) {
				e.line = append(e.line[:e.cur], e.line[e.cur+1:]...)
			}
		default:
			e.shellEdited = true
		}
	default:
		e.shellEdited = true
	}
}

// word moves the cursor a word back or forward as readline does (bash's Alt-b, Alt-f):
// to the start of the word before it or the end of the word after it, words being
// letters and digits. Where that crosses anything else, or a space-delimited word (zsh's
// words take most punctuation in) would end elsewhere, the line is the shell's edit:
// "rm -f x", two words back and "r" is "rm -rf x" in bash, "rm r-f x" by spaces.
func (e *lineEditor) word(forward bool) {
	to := e.wordStop(forward, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
	spaced := e.wordStop(forward, func(r rune) bool { return r != ' ' })
	crossed := e.line[min(e.cur, to, spaced):max(e.cur, to, spaced)]
	if to != spaced || slices.ContainsFunc(crossed, func(r rune) bool {
		// A non-ASCII letter is a word's in some locales only.
		return r != ' ' && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) {
		e.shellEdited = true
	}
	e.cur = to
}

// wordStop is where a word motion from the cursor ends, inWord telling a word's runes.
func (e *lineEditor) wordStop(forward bool, inWord func(rune) bool) int {
	i := e.cur
	if forward {
		for i < len(e.line) && !inWord(e.line[i]) {
			i++
		}
		for i < len(e.line) && inWord(e.line[i]) {
			i++
		}
		return i
	}
	for i > 0 && !inWord(e.line[i-1]) {
		i--
	}
	for i > 0 && inWord(e.line[i-1]) {
		i--
	}
	return i
}
