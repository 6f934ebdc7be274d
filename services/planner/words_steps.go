package planner

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxSteps is the most steps a plan may have (docs/api.md), on either side of a
// rollback clause. A longer prompt is refused before any step is read, since each
// step is matched against every tool.
const maxSteps = 50

// span is a piece of the prompt and its byte offset there.
type span struct {
	text string
	at   int
}

// stepSpans is a prompt cut into steps.
type stepSpans struct {
	run, undo []span // the steps to run and those that undo them, trimmed, none empty
	undoAt    int    // where the rollback clause starts, -1 when there is none
	again     int    // where a second rollback clause starts, -1 when there is none
	open      int    // where a quote that is never closed starts, -1 when all are
}

// splitSteps cuts a prompt into steps at "then" ("and then", ", then"), ";" and new
// lines, and into the steps to run and those that undo them at "rollback:" or
// "undo:". None of these count inside a quoted string: a quote's text is a value,
// never a step. Quotes are those readSentence reads: ' and " with backslash escapes,
// ' right after a letter or digit being an apostrophe (don't); backticks are not.
func splitSteps(prompt string) stepSpans {
	out := stepSpans{undoAt: -1, again: -1, open: -1}
	start := 0
	cut := func(end int, then bool) {
		text := prompt[start:end]
		if then { // ", then" and "and then" join steps as "then" does
			text = strings.TrimRightFunc(text, unicode.IsSpace)
			if n := len(text) - len("and"); n >= 0 && strings.EqualFold(text[n:], "and") && (n == 0 || !isASCIIWord(text[n-1])) {
				text = strings.TrimRightFunc(text[:n], unicode.IsSpace)
			}
			text = strings.TrimSuffix(text, ",")
		}
		lead := len(text) - len(strings.TrimLeftFunc(text, unicode.IsSpace))
		if text = strings.TrimSpace(text); text == "" {
			return
		}
		s := span{text: text, at: start + lead}
		if out.undoAt < 0 {
			out.run = append(out.run, s)
		} else {
			out.undo = append(out.undo, s)
		}
	}
	var quote byte
	for i := 0; i < len(prompt); {
		c := prompt[i]
		if quote != 0 {
			switch c {
			case '\\':
				i += 2
			case quote:
				quote, out.open = 0, -1
				i++
			default:
				i++
			}
			continue
		}
		switch {
		case c == '"' || c == '\'' && !letterBefore(prompt, i):
			quote, out.open = c, i
			i++
		case c == ';' || c == '\n':
			cut(i, false)
			i++
			start = i
		case atWordFold(prompt, i, "then"):
			cut(i, true)
			i += len("then")
			start = i
		default:
			n := rollbackAt(prompt, i)
			if n == 0 {
				i++
				continue
			}
			cut(i, false)
			if out.undoAt < 0 {
				out.undoAt = i
			} else if out.again < 0 {
				out.again = i
			}
			i += n
			start = i
		}
	}
	cut(len(prompt), false)
	return out
}

// isASCIIWord reports whether b is a letter, digit or "_" in ASCII, as a regular
// expression's \b sees words.
func isASCIIWord(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// letterBefore reports whether a letter, number or "_" ends s[:i], so that a ' at i
// continues a word as readSentence reads it.
func letterBefore(s string, i int) bool {
	r, n := utf8.DecodeLastRuneInString(s[:i])
	return n > 0 && (r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r))
}

// atWordFold reports whether the word w (any case) stands alone at s[i:].
func atWordFold(s string, i int, w string) bool {
	end := i + len(w)
	return end <= len(s) && strings.EqualFold(s[i:end], w) &&
		(i == 0 || !isASCIIWord(s[i-1])) && (end == len(s) || !isASCIIWord(s[end]))
}

// rollbackAt is the length of a rollback clause's opening ("rollback:", "Undo :") at
// s[i:], 0 when none starts there.
func rollbackAt(s string, i int) int {
	if i > 0 && isASCIIWord(s[i-1]) {
		return 0
	}
	for _, kw := range []string{"rollback", "undo"} {
		end := i + len(kw)
		if end > len(s) || !strings.EqualFold(s[i:end], kw) {
			continue
		}
		for end < len(s) && isSpace(s[end]) {
			end++
		}
		if end < len(s) && s[end] == ':' {
			return end + 1 - i
		}
	}
	return 0
}
