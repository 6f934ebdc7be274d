package planner

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// namedBonus puts a tool the prompt names (server__tool, or server__tool.operation)
// above any that only shares words with it: naming a tool is how a person gets one
// shown that the words alone would not.
const namedBonus = 1000

// relevant is the n of tools the model is shown when there are more: those whose names
// and descriptions share the most words with the prompt, scored as the rules planner
// scores a step against a tool (catalog.fit), a tool the prompt names first, ties in
// the order given. They are returned in the order given, so a request's tools do not
// reorder with the prompt's words alone.
func relevant(prompt string, tools []Tool, n int) []Tool {
	if len(tools) <= n {
		return tools
	}
	c := newCatalog(tools)
	for i := range tools {
		c.words[i] = quickWords(tools[i])
	}
	s := readSentence(prompt)
	sw := readStepWords(s)
	named := make(map[string]bool, len(s.words))
	for _, w := range s.words {
		named[w] = true
		if base, _, dotted := strings.Cut(w, "."); dotted {
			named[base] = true
		}
	}
	type scored struct{ i, score int }
	all := make([]scored, len(tools))
	for i, t := range tools {
		all[i] = scored{i, c.fit(i, s, sw).score}
		if named[strings.ToLower(t.Name)] {
			all[i].score += namedBonus
		}
	}
	slices.SortStableFunc(all, func(a, b scored) int { return b.score - a.score })
	keep := all[:n]
	slices.SortFunc(keep, func(a, b scored) int { return a.i - b.i })
	out := make([]Tool, n)
	for k, sc := range keep {
		out[k] = tools[sc.i]
	}
	return out
}

// quickWords are a tool's words as catalog.wordsOf reads them, its description's split
// at what is not part of a word rather than read by readSentence's pattern, which takes
// a second for 2,000 descriptions of 1 KiB; and only of the description as the model is
// sent it, so a server's page of text costs no more to score than to send.
func quickWords(t Tool) *toolWords {
	server, tool, _ := strings.Cut(t.Name, "__")
	if tool == "" {
		server, tool = "", t.Name
	}
	tw := &toolWords{name: map[string]bool{}, server: map[string]bool{}, desc: map[string]bool{}, lower: strings.ToLower(tool)}
	for _, w := range textcheck.NameWords(tool) {
		tw.name[norm(w)] = true
	}
	for _, w := range textcheck.NameWords(server) {
		tw.server[norm(w)] = true
	}
	desc := strings.ToLower(textcheck.Clip(t.Description, maxDescription, ""))
	for _, w := range strings.FieldsFunc(desc, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '\'' && r != '-' && r != '.'
	}) {
		if w = strings.Trim(w, ".'-"); w != "" && !stopWords[w] {
			tw.desc[norm(w)] = true
		}
	}
	return tw
}

// notShown says, after a refusal, that the model was not shown every tool and how to
// have one shown; "" when it was shown them all.
func notShown(shown, total int) string {
	if total <= shown {
		return ""
	}
	return fmt.Sprintf(" The model was shown %d of the %d tools you may use, those that share the most words with the prompt; "+
		"%d were not shown: name the tool you mean in the prompt (as server__tool) to have it shown.", shown, total, total-shown)
}
