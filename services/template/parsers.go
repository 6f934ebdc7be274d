package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// apply turns out into the parser's result.
func (p *Parser) apply(out string, max int) (string, error) {
	switch p.Type {
	case ParserRegex:
		return p.regex(out, max)
	case ParserJSON:
		return p.json(out, max)
	case ParserTable:
		return p.table(out, max)
	}
	return "", fmt.Errorf("unknown parser type %q", p.Type)
}

// regex returns the group of the first match, or with All of every match as a JSON
// array of at most max bytes: one-character matches made an array four times the output.
func (p *Parser) regex(out string, max int) (string, error) {
	if !p.All {
		m := p.Pattern.FindStringSubmatch(out)
		if m == nil {
			return "", fmt.Errorf("pattern %s did not match", p.Pattern)
		}
		return m[p.Group], nil
	}
	// Each value takes at least 3 bytes of the array (its quotes and a comma), so more
	// than max/3 matches cannot fit: they are not looked for.
	most := max / 3
	matches := p.Pattern.FindAllStringSubmatchIndex(out, most+1)
	if matches == nil {
		return "", fmt.Errorf("pattern %s did not match", p.Pattern)
	}
	tooMuch := func(values string) error {
		return fmt.Errorf("pattern %s matches more than %s (%s values): match less, for example without all: true or with a pattern for longer values", p.Pattern, byteCount(max), values)
	}
	if len(matches) > most {
		return "", tooMuch(fmt.Sprintf("more than %d", most))
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range matches {
		var v string
		if m[2*p.Group] >= 0 { // a group that took no part in the match is ""
			v = out[m[2*p.Group]:m[2*p.Group+1]]
		}
		s, err := marshal(v)
		if err != nil {
			return "", err
		}
		if b.Len()+len(s)+2 > max {
			return "", tooMuch(fmt.Sprint(len(matches)))
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	b.WriteByte(']')
	return b.String(), nil
}

// json selects with the parser's path. Its result is at most max bytes: a descendant
// path ($..items) selects nested subtrees that overlap, and their copies grow as the
// depth times the output (450 KB of nesting became 2 GB).
func (p *Parser) json(out string, max int) (string, error) {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return "", fmt.Errorf("the output is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("the output is not one JSON value: more follows it")
	}
	nodes := p.Path.Select(doc)
	switch len(nodes) {
	case 0:
		return "", fmt.Errorf("path %s selected nothing", p.Path)
	case 1:
		if s, ok := nodes[0].(string); ok {
			return s, nil
		}
		return marshal(nodes[0])
	}
	// One node at a time: each is a part of the output, the whole could be far larger.
	var b strings.Builder
	b.WriteByte('[')
	for i, n := range nodes {
		s, err := marshal(n)
		if err != nil {
			return "", err
		}
		if b.Len()+len(s)+2 > max {
			return "", fmt.Errorf("path %s selects more than %s (%d values): select less, for example without ..", p.Path, byteCount(max), len(nodes))
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	b.WriteByte(']')
	return b.String(), nil
}

// table reads a text table: one row a line, cells split by the separator, by "|" when
// the row has one (a leading and a trailing "|" frame the row), else by white space.
// Rules such as "----" or "+---+---+" are skipped, as is the header row unless the
// parser says there is none. It returns the cells of one column, as a JSON array.
// table returns a column's cells as a JSON array of at most max bytes (escaped control
// characters make it up to six times the output it came from).
func (p *Parser) table(out string, max int) (string, error) {
	var cells []string
	seen := map[string]bool{}
	first := true
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(strings.TrimRight(line, "\r"))
		if line == "" || isRule(line) {
			continue
		}
		if first {
			first = false
			if p.Header {
				continue
			}
		}
		var row []string
		switch {
		case p.Separator != "":
			row = strings.Split(line, p.Separator)
		case strings.Contains(line, "|"):
			row = strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
		default:
			row = strings.Fields(line)
		}
		if p.FromColumn >= len(row) {
			continue
		}
		v := strings.TrimSpace(row[p.FromColumn])
		if v == "" || p.Unique && seen[v] {
			continue
		}
		seen[v] = true
		cells = append(cells, v)
	}
	if cells == nil {
		cells = []string{}
	}
	js, err := marshal(cells)
	if err == nil && len(js) > max {
		return "", fmt.Errorf("column %d of the table has more than %s of cells (%d of them): select less, for example with unique: true",
			p.FromColumn, byteCount(max), len(cells))
	}
	return js, err
}

// isRule reports whether line only draws the table: dashes, equals signs, plus signs,
// pipes, colons and spaces, with at least one dash or equals sign.
func isRule(line string) bool {
	if strings.Trim(line, "-=+|: ") != "" {
		return false
	}
	return strings.ContainsAny(line, "-=")
}

func marshal(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n"), nil
}
