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

	// The same keys as a program reading the terminal without a line editor gets them:
	// sh, dash, bash after "set +o emacs" or with --noediting, a read loop. The kernel's
	// canonical mode then edits the line, with other keys (canonKeys): Ctrl-A is a
	// character there, which a backspace erases ("rm \x01\x7f-rf x" is rm -rf x, and
	// "-rf xrm " to readline). Which of the two reads the keys, the keys do not show (a
	// shell turns readline off and on between inputs), so a line is rated as both read it.
	canon []byte
	// pushed: the start of canon a Ctrl-D handed to the program, which no erase takes back.
	pushed int
	// canonLiteral: the next byte goes into canon as it is (after Ctrl-V).
	canonLiteral bool
	// canonEdited: an erase, a kill or a Ctrl-D acted on canon.
	canonEdited bool
	// plain: the line's bytes without its control bytes, for a program that drops them.
	plain []byte
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
	// others: the line as canonical mode builds it, and without its control bytes, where
	// they differ from text (lineEditor.canon, plain); rated as text is.
	others []string
}

// clone is a copy of the editor that feeding the original leaves as it is.
func (e *lineEditor) clone() lineEditor {
	c := *e
	c.line, c.pending = slices.Clone(e.line), slices.Clone(e.pending)
	c.canon, c.plain = slices.Clone(e.canon), slices.Clone(e.plain)
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
		c, start := data[i], i
		literal := e.literal && (c < 0x20 || c == 0x7f)
		e.literal = false
		switch {
		case literal: // a control key put into the line, not acted on
			e.insert(rune(c))
			i++
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
		// The bytes readline took, as canonical mode takes them (Enter has reset both).
		if e.canonKeys(data[start:i]) {
			// Ctrl-D ran the canonical line, where readline's goes on: a line that runs only
			// without a line editor, and after it a canonical line starts afresh.
			l := e.current()
			l.shell = true
			out = append(out, l)
			e.canon, e.pushed, e.canonLiteral, e.canonEdited, e.plain = e.canon[:0], 0, false, false, e.plain[:0]
		}
	}
	return out
}

// canonKeys applies keys to canon and plain as the kernel's canonical mode does (with
// the default stty: erase ^? (and ^H, which some set: left as a character, it puts a
// \b in a word, which names no file or option), kill ^U, werase ^W, lnext ^V,
// eof ^D, intr ^C, quit ^\, susp ^Z, start/stop ^Q/^S and reprint ^R; any other byte is
// a character of the line). ran: a Ctrl-D at an empty line that a Ctrl-D handed some
// text of, which the program then runs (bash does, and goes on reading).
func (e *lineEditor) canonKeys(b []byte) (ran bool) {
	for _, c := range b {
		if c >= 0x20 && c != 0x7f && len(e.plain) < maxAuditLine {
			e.plain = append(e.plain, c)
		}
		if e.canonLiteral {
			e.canonLiteral = false
			e.canonPut(c)
			continue
		}
		switch c {
		case 0x7f, 0x08:
			e.canonErase(false)
		case 0x17:
			e.canonErase(true)
		case 0x15:
			e.canon, e.canonEdited = e.canon[:e.pushed], true
		case 0x16:
			e.canonLiteral = true
		case 0x04: // at an empty line the end of input, which ends the shell
			if len(e.canon) > e.pushed {
				e.pushed = len(e.canon)
			} else if e.pushed > 0 {
				ran = true
			}
		case 0x03, 0x1c, 0x1a: // a signal's key flushes the line
			e.canon, e.pushed = e.canon[:0], 0
		case 0x11, 0x13, 0x12, '\r', '\n':
			// Flow control and reprint change nothing; Enter ended the line (feed).
		default:
			e.canonPut(c)
		}
	}
	return ran
}

// canonPut adds c to canon, which holds maxAuditLine bytes as the kernel holds 4095.
func (e *lineEditor) canonPut(c byte) {
	if len(e.canon) < maxAuditLine {
		e.canon = append(e.canon, c)
	}
}

// canonErase takes back a character of canon, or a word (ALTWERASE, as Linux does: the
// letters, digits and _ before the cursor, and what else lies between them and it). The
// kernel counts bytes or, with iutf8, UTF-8 characters; where that would differ (a byte
// past ASCII), the line is marked the shell's.
func (e *lineEditor) canonErase(word bool) {
	e.canonEdited = true
	alnums := false
	for len(e.canon) > e.pushed {
		c := e.canon[len(e.canon)-1]
		if c >= 0x80 {
			e.shellEdited = true
		}
		if word {
			if isAlnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'; isAlnum {
				alnums = true
			} else if alnums {
				return
			}
		}
		e.canon = e.canon[:len(e.canon)-1]
		if !word {
			return
		}
	}
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
	return append(out, e.current())
}

// current is the line as it stands, finished or not.
func (e *lineEditor) current() edited {
	l := edited{text: string(e.line), shell: e.shellEdited, cut: e.cut}
	for _, r := range []string{string(e.canon), string(e.plain)} {
		if r != l.text && !slices.Contains(l.others, r) {
			l.others = append(l.others, r)
		}
	}
	// Erased, killed or handed over by Ctrl-D otherwise than readline did it: which line
	// runs depends on the program reading, so the text is not known to be the one.
	if e.canonEdited && string(e.canon) != l.text {
		l.shell = true
	}
	return l
}

// empty reports whether the editor holds nothing of a line, in either mode.
func (e *lineEditor) empty() bool {
	return len(e.line) == 0 && len(e.pending) == 0 && !e.shellEdited && !e.cut && !e.literal &&
		len(e.canon) == 0 && len(e.plain) == 0 && e.pushed == 0 && !e.canonLiteral && !e.canonEdited
}

func (e *lineEditor) reset() {
	e.line, e.cur, e.shellEdited, e.cut, e.literal = e.line[:0], 0, false, false, false
	e.canon, e.pushed, e.canonLiteral, e.canonEdited, e.plain = e.canon[:0], 0, false, false, e.plain[:0]
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
