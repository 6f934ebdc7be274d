package planner

import (
	"strings"
)

// name reads a tool name (or a keyword in a name's place).
func (p *parser) name() string {
	at := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[at:p.pos]
}

func isNameByte(c byte) bool {
	return !isSpace(c) && !strings.ContainsRune(`=;,"'{}[]`, rune(c))
}

// atKey reports whether key=value starts at pos. A URL is not a key, though it may
// hold "=" (https://example.com/?q=1).
func (p *parser) atKey() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if k := p.name(); k == "" || strings.Contains(k, "://") {
		return false
	}
	return p.atEquals()
}

// atEquals reports whether "=" follows pos, after spaces.
func (p *parser) atEquals() bool {
	save := p.pos
	defer func() { p.pos = save }()
	p.skipHSpace()
	return !p.eof() && p.src[p.pos] == '='
}

func (p *parser) key() string { return p.name() }

// followedBySeparator reports whether what follows a call may: the end, a separator or a
// rollback clause. A call with no arguments may also be followed directly by ",".
func (p *parser) followedBySeparator() bool {
	save := p.pos
	defer func() { p.pos = save }()
	sep, _ := p.separators()
	return sep || p.eof() || p.atRollback()
}

// atRollback reports whether a rollback clause ("rollback:" or "undo:") starts at pos.
func (p *parser) atRollback() bool {
	save := p.pos
	defer func() { p.pos = save }()
	return p.consumeRollback()
}

func (p *parser) consumeRollback() bool {
	for _, kw := range []string{"rollback", "undo"} {
		if len(p.src)-p.pos >= len(kw) && strings.EqualFold(p.src[p.pos:p.pos+len(kw)], kw) {
			save := p.pos
			p.pos += len(kw)
			p.skipHSpace()
			if !p.eof() && p.src[p.pos] == ':' {
				p.pos++
				return true
			}
			p.pos = save
		}
	}
	return false
}

// word reports whether the keyword w (any case) starts at pos as a whole word.
func (p *parser) word(w string) bool {
	end := p.pos + len(w)
	if end > len(p.src) || !strings.EqualFold(p.src[p.pos:end], w) {
		return false
	}
	return end == len(p.src) || isSpace(p.src[end]) || p.src[end] == ';' || p.src[end] == ','
}

// skipSpace skips whitespace and reports whether it crossed a new line.
func (p *parser) skipSpace() bool {
	nl := false
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) {
		if p.src[p.pos] == '\n' {
			nl = true
		}
		p.pos++
	}
	return nl
}

// skipHSpace skips whitespace within a line.
func (p *parser) skipHSpace() {
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) && p.src[p.pos] != '\n' {
		p.pos++
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// segmentEnd is where the call containing from ends: the next new line, ";" or "then",
// for quoting the part of the prompt at fault.
func (p *parser) segmentEnd(from int) int {
	end := len(p.src)
	for i := from; i < len(p.src); i++ {
		c := p.src[i]
		if c == '\n' || c == ';' {
			end = i
			break
		}
		if i > from && isSpace(p.src[i-1]) && len(p.src)-i >= 4 && strings.EqualFold(p.src[i:i+4], "then") &&
			(i+4 == len(p.src) || isSpace(p.src[i+4])) {
			end = i
			break
		}
	}
	for end > from && (isSpace(p.src[end-1]) || p.src[end-1] == ',') {
		end--
	}
	return end
}
