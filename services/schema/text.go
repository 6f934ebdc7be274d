package schema

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file holds the security checks on text a model will read: hidden
// characters, instructions aimed at the model (tool poisoning) and requests for
// secrets. They are heuristics. Each rule looks for a phrase together with the
// context that makes it an instruction (an imperative verb, a target such as
// "the user" or "other tools", a credential file), because a critical finding
// blocks the tool and honest descriptions ("Reads a file", "never pass the API
// key as an argument", "pagination token") must pass. The tests list the near
// misses each rule was tuned against.

// isHidden reports whether r is invisible or changes how the text around it
// is displayed, so a reviewer would not see what the model sees.
func isHidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t' || r == '\r':
		// \r is allowed too: Windows line endings are common and harmless.
		return false
	case r >= 0x200B && r <= 0x200F, // zero-width space/joiners, LRM, RLM
		r >= 0x2060 && r <= 0x2064,   // word joiner, invisible operators
		r == 0xFEFF,                  // zero-width no-break space (BOM)
		r >= 0x202A && r <= 0x202E,   // bidi embeddings and overrides
		r >= 0x2066 && r <= 0x2069,   // bidi isolates
		r >= 0xE0000 && r <= 0xE007F: // tag characters: invisible ASCII
		return true
	case r >= 0xFE00 && r <= 0xFE0D, r >= 0xE0100 && r <= 0xE01EF:
		// Variation selectors carry no meaning in prose and can smuggle bytes;
		// U+FE0E and U+FE0F (text/emoji presentation, as in "⚠️") are allowed.
		return true
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0:
		// Combining grapheme joiner and Hangul fillers: blank "letters".
		return true
	}
	return unicode.Is(unicode.Cf, r) || unicode.IsControl(r)
}

// hiddenScan is what scanHidden found in one text.
type hiddenScan struct {
	runes   []rune // distinct hidden code points, in order of appearance
	first   int    // byte offset of the first one, -1 when there is none
	tagText string // ASCII spelled by tag characters, if any
	clean   string // the text without hidden characters
}

func scanHidden(s string) hiddenScan {
	h := hiddenScan{first: -1}
	var clean, tags strings.Builder
	prev := rune(-1)
	for i, r := range s {
		if isHidden(r) && !emojiJoiner(s, i, r, prev) {
			if h.first < 0 {
				h.first = i
			}
			if !containsRune(h.runes, r) {
				h.runes = append(h.runes, r)
			}
			if r >= 0xE0020 && r <= 0xE007E {
				tags.WriteRune(r - 0xE0000)
			}
		} else {
			clean.WriteRune(r)
		}
		prev = r
	}
	h.clean = clean.String()
	h.tagText = strings.TrimSpace(tags.String())
	return h
}

// emojiJoiner allows U+200D between two pictographs, where it builds one emoji
// out of several (👨‍👩‍👧) instead of hiding anything.
func emojiJoiner(s string, i int, r, prev rune) bool {
	if r != 0x200D || prev < 0 {
		return false
	}
	next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
	pict := func(r rune) bool { return r > 0x2000 && (unicode.Is(unicode.So, r) || r == 0xFE0F) }
	return pict(prev) && pict(next)
}

func containsRune(rs []rune, r rune) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// visible renders text for a message: hidden characters become <U+XXXX> and
// line breaks become spaces.
func visible(s string) string {
	var b strings.Builder
	prev := rune(-1)
	for i, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case isHidden(r) && !emojiJoiner(s, i, r, prev):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// excerpt cuts s around the byte range [from, to), with a little context on
// each side, to at most max runes, marking cuts with an ellipsis.
func excerpt(s string, from, to, max int) string {
	const pad = 40
	start, end := from, to
	for n := 0; start > 0 && n < pad; n++ {
		_, w := utf8.DecodeLastRuneInString(s[:start])
		start -= w
	}
	for n := 0; end < len(s) && n < pad; n++ {
		_, w := utf8.DecodeRuneInString(s[end:])
		end += w
	}
	out := strings.Join(strings.Fields(visible(s[start:end])), " ")
	cut := end < len(s)
	if r := []rune(out); len(r) > max {
		out, cut = string(r[:max]), true
	}
	if start > 0 {
		out = "…" + out
	}
	if cut {
		out += "…"
	}
	return out
}

func codePoints(rs []rune) string {
	parts := make([]string, 0, len(rs))
	for i, r := range rs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(rs)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("U+%04X", r))
	}
	return strings.Join(parts, ", ")
}

// sentences splits text at sentence ends (., !, ?, ; followed by a space) and
// line breaks, so that "~/.ssh" and ".env" stay whole but a phrase in one
// sentence is not paired with a word from the next.
func sentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		end := c == '\n'
		if c == '.' || c == '!' || c == '?' || c == ';' {
			end = i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t' || s[i+1] == '\n' || s[i+1] == '\r'
		}
		if end {
			if seg := normalize(s[start : i+1]); seg != "" {
				out = append(out, seg)
			}
			start = i + 1
		}
	}
	if seg := normalize(s[start:]); seg != "" {
		out = append(out, seg)
	}
	return out
}

var quoteFolder = strings.NewReplacer("\u2018", "'", "\u2019", "'", "\u201C", `"`, "\u201D", `"`, "`", "'")

// normalize collapses white space and folds typographic quotes, so that one
// pattern covers "don't" and "don’t".
func normalize(s string) string {
	return strings.Join(strings.Fields(quoteFolder.Replace(s)), " ")
}

// rule is one heuristic: re finds a candidate in a sentence and ok, when set,
// decides from the submatch indexes whether it really is one. words are
// lower-case fragments of which re needs at least one; checking them first
// keeps the scan cheap for the honest text that is nearly all text
// (discovery validates thousands of tools at once).
type rule struct {
	why   string
	words []string
	re    *regexp.Regexp
	ok    func(s string, m []int) bool
}

func mentions(lower string, words []string) bool {
	for _, w := range words {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// ci compiles a case-insensitive pattern.
func ci(s string) *regexp.Regexp { return regexp.MustCompile(`(?i)` + s) }

// group returns submatch n of m in s, or "".
func group(s string, m []int, n int) string {
	if 2*n+1 >= len(m) || m[2*n] < 0 {
		return ""
	}
	return s[m[2*n]:m[2*n+1]]
}

var (
	strongModifier = ci(`\b(all|your|previous|prior|above|earlier|preceding|former|original|existing|system|safety|initial)\b`)

	// Words after "user" that make it a thing ("the user ID"), not the person.
	userNouns = map[string]bool{
		"interface": true, "id": true, "ids": true, "name": true, "names": true, "account": true,
		"accounts": true, "agent": true, "data": true, "input": true, "record": true, "records": true,
		"profile": true, "profiles": true, "object": true, "list": true, "table": true, "session": true,
		"sessions": true, "settings": true, "directory": true, "group": true, "groups": true,
		"role": true, "roles": true, "ui": true, "manual": true, "guide": true, "email": true,
		"password": true, "model": true, "type": true, "field": true, "fields": true,
	}

	alwaysTargets = ci(`\b(other|another|all|any|every|each)\s+(other\s+)?tools?\b|\binstead\b|\bregardless\b|\b(respond|reply|answer)\b|\b(bcc|cc)\b|\bbefore\s+(any|every|each|all|other|using|calling|you)\b|\b(call|use|invoke|run)\s+this\s+tool\s+(first|before)\b`)
	neverTargets  = ci(`\b(tell|mention|inform|notify|reveal|show|alert|ask|let)\b.*\busers?\b|\b(confirmation|permission|approval|consent)\b|\b(other|another|all|any|every|each)\s+tools?\b|\b(mention|reveal|disclose)\s+(this|that|it|these)\b|\brefuse\b`)

	pathLike = ci(`~/|/etc/|\$home\b|%userprofile%|(^|[\s'"(/])\.(ssh|aws|env|config|cursor|npmrc|netrc|pgpass|kube|docker|gnupg)\b|\b[\w-]+\.(json|env|pem|key|yaml|yml|toml|ini|conf|cfg|txt|db|sqlite)\b|\bid_(rsa|dsa|ecdsa|ed25519)\b`)
	readVerb = ci(`\b(read|open|cat|load)\b`)
	sendVerb = ci(`\b(send|pass|include|upload|forward|attach|paste|share|copy|provide)\b`)
	sendWhat = ci(`\b(contents?|conversation|history|messages|file)\b`)
)

// userTarget reports whether "user" ends s[:end] as the person, not as the
// first word of "user ID", "user's password" and the like.
func userTarget(s string, end int) bool {
	rest := strings.TrimLeft(s[end:], " ")
	if strings.HasPrefix(rest, "'") {
		return false
	}
	next := strings.ToLower(strings.TrimRight(strings.SplitN(rest, " ", 2)[0], ".,;:!?)'\""))
	return !userNouns[next]
}

var injectionRules = []rule{
	{
		why:   "tells the model to ignore its instructions",
		words: []string{"ignore", "disregard", "forget", "override", "bypass"},
		re:    ci(`\b(ignore|disregard|forget|override|bypass)\s+((?:(?:all|any|every|of|the|your|these|those|my|its|previous|prior|above|earlier|preceding|former|original|existing|system|safety|initial|other)\s+){1,5})(instructions?|prompts?|directives|guidelines|guardrails|rules|policies|constraints)\b`),
		ok:    func(s string, m []int) bool { return strongModifier.MatchString(group(s, m, 2)) },
	},
	{
		why:   "tells the model to ignore what came before",
		words: []string{"ignore", "disregard", "forget"},
		re:    ci(`\b(ignore|disregard|forget)\s+((all|any|of|the|everything|anything|what|whatever|was|is|you\s+were|said|written|stated|told)\s+){0,4}(above|previous(ly)?|prior|earlier|before|so\s+far)\s*([.,;:!]|$)`),
	},
	{
		why:   "tells the model to disregard rules or the user",
		words: []string{"disregard"},
		re:    ci(`\bdisregard\b.{0,40}?\b(instructions?|rules|guidelines|polic(y|ies)|safety|restrictions|warnings|the\s+user)\b`),
	},
	{
		why:   "contains prompt markup aimed at the model",
		words: []string{"<", "["},
		re:    ci(`<\s*/?\s*(important|system|instructions?|secret|hidden|admin|sys|system[-_]\w+)\s*>|\[\s*/?\s*(system|inst|important)\s*\]|<\|\s*(im_start|im_end|system|endoftext)\s*\|>`),
	},
	{
		why:   "targets the model's system prompt",
		words: []string{"system"},
		re:    ci(`\b(your|reveal|print|output|repeat|leak|dump|disclose|ignore|disregard|override|bypass|forget)\b.{0,30}?\bsystem\s+(prompt|message|instructions)\b|\bnew\s+system\s+(prompt|instructions?)\b`),
	},
	{
		why:   "gives the model standing orders",
		words: []string{"you"},
		re:    ci(`\byou\s+(must|should|shall|will|have\s+to|need\s+to|are\s+required\s+to)\s+(always|never)\b(.*)`),
		ok: func(s string, m []int) bool {
			tail := group(s, m, 3)
			if strings.EqualFold(group(s, m, 2), "always") {
				return alwaysTargets.MatchString(tail)
			}
			return neverTargets.MatchString(tail)
		},
	},
	{
		why:   "asks the model to keep something from the user",
		words: []string{"user"},
		re:    ci(`\b(do\s+not|don'?t|never)\s+(tell|inform|mention|notify|reveal|alert|show|let|disclose|report)\b.{0,40}?\busers?\b`),
		ok:    func(s string, m []int) bool { return userTarget(s, m[1]) },
	},
	{
		why:   "asks the model to keep something from the user",
		words: []string{"user"},
		re:    ci(`\b(hide|conceal|keep)\b.{0,30}?\bfrom\s+(the\s+)?users?\b`),
		ok:    func(s string, m []int) bool { return userTarget(s, m[1]) },
	},
	{
		why:   "asks the model to keep something from the user",
		words: []string{"user", "secretly", "silently", "quietly", "covertly"},
		re:    ci(`\busers?\s+(should|must|need|does|do)\s*(not|n't)\s+(know|see|find\s+out|be\s+(told|informed|notified|aware))\b|\b(secretly|silently|quietly|covertly)\s+(send|forward|upload|include|add|copy|call|read|bcc|cc)\b`),
	},
	{
		why:   "tells the model to skip asking for confirmation",
		words: []string{"confirmation", "permission", "approval", "consent"},
		re:    ci(`\b(do\s+not|don'?t|never)\s+(ask|wait\s+for|request|seek)\b.{0,30}?\b(confirmation|permission|approval|consent)\b`),
	},
	{
		why:   "tells the model what to do before it may use the tool",
		words: []string{"before", "prior"},
		re:    ci(`\b(before|prior\s+to)\s+(using|calling|invoking|running|executing|you\s+(use|call|invoke|run))\s+(this|the|any|other|another)\b(.*)`),
		ok: func(s string, m []int) bool {
			tail := group(s, m, 5)
			if readVerb.MatchString(tail) && pathLike.MatchString(tail) {
				return true
			}
			return sendVerb.MatchString(tail) && (sendWhat.MatchString(tail) || pathLike.MatchString(tail) || secretNoun.MatchString(tail))
		},
	},
	{
		why:   "tries to change how another tool behaves (tool shadowing)",
		words: []string{"side effect", "affect", "invoked", "called", "used"},
		re:    ci(`\b(side[\s-]+effects?|affects?)\s+(on\s+)?(the\s+)?(also\s+present\s+|other\s+)?[\w.-]+\s+tool\b|\bwhen\b.{0,60}?\b(is|are)\s+(invoked|called|used)\b.{0,80}?\b(change|replace|redirect|set|add|bcc|cc|forward)\b.{0,40}?\b(recipients?|address|number|destination|url|email|phone|endpoint|webhook)\b`),
	},
	{
		why:   "sends data to a fixed address",
		words: []string{"@"},
		re:    ci(`\b(send|forward|bcc|cc|copy|redirect|route)\b.{0,40}?\b(all|every|each|any)\b.{0,40}?\bto\s+[\w.+-]+@[\w-]+\.[\w.]+`),
	},
	{
		why:   "tries to replace the model's instructions",
		words: []string{"instruction", "you"},
		re:    ci(`\bnew\s+instructions?\s*:|\byou\s+are\s+now\s+(a|an|in|acting|operating|free|unrestricted|jailbroken|dan|going\s+to)\b|\bfrom\s+now\s+on\b.{0,40}?\byou\b|\b(this|these)\s+(is|are)\s+(your\s+)?new\s+instructions\b`),
	},
}

var (
	// secretWords are fragments of which secretNoun needs at least one.
	secretWords = []string{"key", "pass", "secret", "token", "credential", "ssh", "id_", "env", "netrc", "npmrc",
		"pgpass", "mcp.json", "claude_desktop", "/etc/", "phrase", "mnemonic", "cookie"}

	// secretNoun matches names of secrets and of files that hold them.
	secretNoun = ci(`\b(api[\s_-]?keys?|passwords?|passwd|passphrases?|private[\s_-]?keys?|secret[\s_-]?keys?|client[\s_-]?secrets?|access[\s_-]?tokens?|auth(entication)?[\s_-]?tokens?|bearer[\s_-]?tokens?|refresh[\s_-]?tokens?|session[\s_-]?(tokens?|cookies?)|credentials?|ssh[\s_-]?keys?|seed[\s_-]?phrases?|recovery[\s_-]?phrases?|mnemonic(\s+phrase)?)\b|~/\.ssh\b|\.ssh/|\bid_(rsa|dsa|ecdsa|ed25519)\b|(^|[\s'"(/])\.env\b|\.aws/credentials|\.netrc\b|\.npmrc\b|\.pgpass\b|\.git-credentials\b|\bmcp\.json\b|\bclaude_desktop_config\.json\b|/etc/(passwd|shadow)\b`)

	// Words after a secret's name that make it about the secret, not the
	// secret itself: "password reset", "API key rotation", "credentials provider".
	secretModifiers = map[string]bool{
		"reset": true, "resets": true, "policy": true, "policies": true, "strength": true, "expiry": true,
		"expiration": true, "rotation": true, "rules": true, "requirements": true, "complexity": true,
		"manager": true, "field": true, "fields": true, "prompt": true, "length": true, "protected": true,
		"hint": true, "hints": true, "name": true, "names": true, "id": true, "ids": true, "format": true,
		"scope": true, "scopes": true, "type": true, "types": true, "count": true, "age": true,
		"metadata": true, "label": true, "labels": true, "status": true, "provider": true, "providers": true,
		"chain": true, "helper": true,
	}

	requestVerb = ci(`\b(send|include|pass|read|provide|upload|attach|paste|forward|share|give|supply|enter|post|submit|copy|cat|reveal|leak|exfiltrate|extract|dump|print|output|collect|gather|retrieve|fetch|grab|append|embed|put)\b`)

	// Verbs that describe the tool consuming a secret ("the key to read
	// private repositories") rather than the model handing one over.
	consumeVerbs = map[string]bool{"read": true, "fetch": true, "retrieve": true, "extract": true, "collect": true, "gather": true, "print": true, "output": true, "cat": true}

	negations = map[string]bool{
		"not": true, "never": true, "don't": true, "dont": true, "doesn't": true, "no": true, "without": true,
		"nor": true, "cannot": true, "can't": true, "won't": true, "shouldn't": true, "mustn't": true,
		"avoid": true, "neither": true,
	}
	// Words just before a verb that make it a description (passive, future,
	// modal) instead of an order: "the key is read from", "it will send".
	describers = map[string]bool{
		"is": true, "are": true, "was": true, "were": true, "be": true, "been": true, "being": true,
		"will": true, "would": true, "can": true, "could": true, "may": true, "might": true,
		"does": true, "did": true, "get": true, "gets": true, "got": true,
	}
)

// secretRequest reports whether a sentence asks for a secret: it names a
// secret or a credential file and gives an order to fetch or hand one over
// (not negated, not a description such as "is read from"). It also returns
// the byte range to quote.
func secretRequest(sentence string) (bool, int, int) {
	if !mentions(strings.ToLower(sentence), secretWords) {
		return false, 0, 0
	}
	nouns := secretNoun.FindAllStringSubmatchIndex(sentence, -1)
	var kept [][]int
	strongFile := false
	for _, m := range nouns {
		rest := strings.TrimLeft(sentence[m[1]:], " ")
		next := strings.ToLower(strings.TrimRight(strings.SplitN(rest, " ", 2)[0], ".,;:!?)'\""))
		if secretModifiers[next] {
			continue
		}
		if !wordy(sentence[m[0]:m[1]]) {
			strongFile = true
		}
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		return false, 0, 0
	}
	for _, v := range requestVerb.FindAllStringIndex(sentence, -1) {
		verb := strings.ToLower(sentence[v[0]:v[1]])
		before := strings.Fields(strings.ToLower(sentence[:v[0]]))
		if negated(before) {
			continue
		}
		if n := len(before); n > 0 {
			prev := strings.Trim(before[n-1], ",:;()\"'")
			if describers[prev] {
				continue
			}
			if prev == "to" && consumeVerbs[verb] && !strongFile {
				continue
			}
			if consumeVerbs[verb] && endsWithNoun(kept, v[0], sentence) {
				continue // "API key read from the environment"
			}
		}
		return true, min(kept[0][0], v[0]), max(kept[0][1], v[1])
	}
	return false, 0, 0
}

// wordy reports whether a secret-noun match is a word ("password") rather
// than a file or path (".env", "~/.ssh"), which is suspicious in any order.
func wordy(s string) bool {
	return !strings.ContainsAny(s, "./~") && !strings.HasPrefix(strings.ToLower(s), "id_")
}

func negated(before []string) bool {
	for i := len(before) - 1; i >= 0 && i >= len(before)-4; i-- {
		if negations[strings.Trim(before[i], ",:;()\"'")] {
			return true
		}
	}
	if n := len(before); n >= 2 && before[n-2] == "do" && before[n-1] == "not" {
		return true
	}
	return false
}

func endsWithNoun(nouns [][]int, at int, s string) bool {
	for _, m := range nouns {
		if m[1] <= at && strings.TrimSpace(s[m[1]:at]) == "" {
			return true
		}
	}
	return false
}

// scanText runs every text check on one string a model will read and records
// at most one finding per code. what names the text in messages
// ("description", "description of parameter \"path\"").
func (c *checker) scanText(ptr, what, s string) {
	if s == "" {
		return
	}
	h := c.hiddenText(ptr, what, s)
	texts := []string{h.clean}
	if h.tagText != "" {
		texts = append(texts, h.tagText)
	}
	injected, asked := false, false
	for _, t := range texts {
		for _, sent := range sentences(t) {
			// The rules read the text as a model does (look-alike letters
			// folded to Latin); findings quote it as written.
			folded, at := foldText(sent)
			if !injected {
				if why, from, to, ok := injection(folded); ok {
					injected = true
					from, to = unfold(sent, at, from, to)
					c.add(ptr, "prompt_injection", SeverityCritical, fmt.Sprintf(
						"%s %s: %q. Text like this is how tool poisoning works; do not enable the tool unless the text is harmless and the server trusted.",
						what, why, excerpt(sent, from, to, 160)))
				}
			}
			if !asked {
				if ok, from, to := secretRequest(folded); ok {
					asked = true
					from, to = unfold(sent, at, from, to)
					c.add(ptr, "secret_request", SeverityCritical, fmt.Sprintf(
						"%s asks for secrets or credential files: %q. A tool must never ask the model to fetch or pass credentials; they belong in the server's configuration.",
						what, excerpt(sent, from, to, 160)))
				}
			}
		}
	}
	if ws := mixedWords(h.clean); len(ws) > 0 {
		msg := fmt.Sprintf("%s mixes alphabets in the word %q (%s U+%04X)", what, truncate(visible(ws[0].word), 64), ws[0].script, ws[0].odd)
		if len(ws) > 1 {
			msg += fmt.Sprintf(" and in %d more", len(ws)-1)
		}
		c.add(ptr, "mixed_script", SeverityWarning, msg+
			". Letters that look like Latin ones but are not read one way to a person and another to a model or a filter; write each word in one alphabet.")
	}
}

// hiddenText runs only the hidden-characters check, for text that names something
// rather than says something (a type, a reference, a required property's name), and
// returns what it found.
func (c *checker) hiddenText(ptr, what, s string) hiddenScan {
	h := scanHidden(s)
	if h.first >= 0 {
		msg := fmt.Sprintf("%s contains hidden characters (%s): %q. Invisible text can carry instructions that a reviewer never sees; remove them.",
			what, codePoints(h.runes), excerpt(s, h.first, h.first, 120))
		if h.tagText != "" {
			msg += fmt.Sprintf(" The tag characters spell %q.", truncate(h.tagText, 120))
		}
		c.add(ptr, "hidden_characters", SeverityCritical, msg)
	}
	return h
}

func injection(sentence string) (why string, from, to int, ok bool) {
	lower := strings.ToLower(sentence)
	for _, r := range injectionRules {
		if !mentions(lower, r.words) {
			continue
		}
		for _, m := range r.re.FindAllStringSubmatchIndex(sentence, -1) {
			if r.ok == nil || r.ok(sentence, m) {
				return r.why, m[0], m[1], true
			}
		}
	}
	return "", 0, 0, false
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
