package textcheck

import (
	"bytes"
	"strings"
)

// nulReplacement stands for a NUL a peer sent: PostgreSQL stores no U+0000 in text,
// nor the escape \u0000 in jsonb.
const nulReplacement = "\ufffd"

// Storable is s with each NUL replaced by U+FFFD.
func Storable(s string) string {
	if !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(s, "\x00", nulReplacement)
}

// StorableJSON is the JSON b (as encoding/json writes it) with each \u0000 escape
// replaced by \ufffd, and b itself when it has none.
func StorableJSON(b []byte) []byte {
	const esc = `\u0000`
	if !bytes.Contains(b, []byte(esc)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		// Every backslash of valid JSON starts an escape: read it whole, so the \\ of
		// an escaped backslash is never taken for the start of another.
		if bytes.HasPrefix(b[i:], []byte(esc)) {
			out = append(out, `\ufffd`...)
			i += len(esc) - 1
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}
