package assistant

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// Understand reads one message against the catalogue: its intent from verb families and
// their synonyms, and its entities (servers and tools from the live names, fuzzy and by
// description words; URLs, names, people, risk levels, tags, categories, settings,
// choices). It never guesses between candidates: every server or tool the words may
// mean is returned, and the conversation asks which.
func Understand(msg string, cat *Catalogue) (u Understanding) {
	if cat == nil {
		cat = &Catalogue{}
	}
	if main, except, ok := splitExcept(msg); ok {
		// "Enable every tool except delete_file": the rest of the message is read alone,
		// and what the clause names is left out of its targets by Decide (or, when that
		// cannot be worked out, nothing is done). Read as a whole, the clause's name was
		// the only one in the message, and its tool was the one changed.
		u = Understand(main, cat)
		u.ExceptRef, u.Except = except, exceptOf(except, cat)
		if u.Intent == IntentYes || u.Intent == IntentPick {
			u.Intent = IntentUnknown // "yes, except X" is not the yes that was asked for
		}
		u.Question = u.Question || isQuestion(newMessage(msg), msg)
		return u
	}
	m := newMessage(msg)
	u = Understanding{Quoted: m.quoted, Numbers: m.numbers, URL: m.url}
	if small(m, &u, cat) {
		return u
	}
	u.Question = isQuestion(m, msg)
	var verbAt int
	u.Intent, verbAt = intentOf(m)
	if negated(m.text, u.Intent, verbAt) {
		// "Please don't disable search": not a request to disable it.
		u.Intent, u.Negated = IntentUnknown, u.Intent
		return u
	}
	u.Pick = pickOf(m.text)
	u.All = allRE.MatchString(m.text)
	u.Kind = kindOf(m.text)
	rest := m.text
	switch u.Intent {
	case IntentAddServer:
		u.Name = nameOf(m, rest)
		if u.URL == "" {
			u.URL = bareTarget(rest)
		}
		return u
	case IntentGrant, IntentRevoke:
		u.Username, rest = userOf(rest, u.Intent, cat)
	case IntentSetRisk:
		u.Risk = riskOf(rest)
		rest = riskWordsRE.ReplaceAllString(rest, " ")
	case IntentTag, IntentUntag:
		u.Tags, rest = tagsOf(rest, u.Intent)
		for i, tg := range u.Tags {
			if q, ok := m.quoteAt(tg); ok {
				u.Tags[i] = q
			}
		}
	case IntentSetCategory:
		u.Category, rest = categoryOf(rest)
	case IntentConfigureTool:
		var values []string
		u.Settings, rest, values = settingsOf(m, rest, cat)
		if len(values) > 0 {
			defer func() { u.Settings = enumSettings(u.Settings, values, u.Tools, cat) }()
		}
	case IntentFindTool, IntentSuggestTools, IntentPreference, IntentForget:
		u.Query = queryOf(rest, u.Intent)
		if u.Intent == IntentFindTool || u.Intent == IntentSuggestTools {
			u.Tools = related(cat, u.Query)
		}
		return u
	case IntentListPreference, IntentHelp, IntentSetup, IntentListServers:
		return u
	}
	if u.Name == "" {
		u.Name = calledOf(m, rest)
	}
	if !serverIntent(u.Intent) || u.Intent == IntentDiscover {
		rest, u.OnServer, u.NearServers, u.NearName = serverQualifier(rest, cat)
		if len(u.NearServers) > 1 {
			return u // "on prod-3" with prod-1 and prod-2: Decide asks which
		}
	}
	if u.Intent == IntentRefresh && u.OnServer != "" {
		u.Intent = IntentDiscover // "refresh the tools on ev2": that server only
	}
	if u.Intent == IntentDiscover {
		u.Kind = "server"
	}
	if u.OnServer != "" && (u.Intent == IntentListTools || u.Intent == IntentDiscover) {
		u.Servers = []string{u.OnServer}
		return u
	}
	if u.Intent == IntentListTools {
		for _, w := range contentWords(rest) {
			id, near := serverNear(cat, w)
			if id != "" {
				u.Servers = []string{id}
			} else if len(near) > 1 {
				u.NearServers, u.NearName = near, w
			}
		}
		if len(u.Servers) > 0 {
			u.NearServers, u.NearName = nil, ""
		}
		return u
	}
	if u.URL != "" {
		if id := serverByURL(cat, u.URL); id != "" {
			u.Servers, u.Kind = []string{id}, "server"
			u.Intent = retargetKind(u.Intent, "server")
			return u
		}
	}
	if u.Pick != 0 {
		// "The first jira tool": the ordinal points into a list, the rest names the
		// thing; a Ref left empty is what lets Decide take the last list's entry.
		if loc := ordinalRE.FindStringIndex(rest); loc != nil {
			rest = rest[:loc[0]] + " " + rest[loc[1]:]
		}
	}
	u.Ref = refOf(rest, m, cat)
	if u.All && u.OnServer != "" && (u.Ref == "" || u.Kind == "tool" && len(contentWords(" "+u.Ref+" ")) == 0) {
		// "disable all tools on ev2": every tool of that server.
		u.Servers = []string{u.OnServer}
		for _, tl := range cat.Tools {
			if tl.ServerID == u.OnServer {
				u.Tools = append(u.Tools, tl.ID)
			}
		}
		u.Kind = "tool"
		return u
	}
	resolve(&u, cat)
	if len(u.Tools) == 0 && len(u.Servers) == 0 {
		// A name written exactly is that name, however many other words surround it
		// ("I don't want write_file to be usable anymore"), even one that reads like a
		// common word ("add").
		for _, w := range strings.Fields(rest) {
			w = strings.Trim(w, ".,:;!?'\"")
			if exactTool(cat, w, u.OnServer) || u.OnServer == "" && exactServer(cat, w) && len(w) > 2 {
				u.Ref = w
				resolve(&u, cat)
				break
			}
		}
	}
	if u.Intent == intentWeakDetails {
		u.Intent = IntentToolDetails
		if len(u.Tools) == 0 && len(u.Servers) == 0 {
			u.Intent = IntentUnknown
		} else if u.Kind == "server" {
			u.Intent = IntentServerStatus
		}
	}
	return u
}

// calledOf is the name a message gives with "called X" or "named X".
func calledOf(m message, t string) string {
	for _, re := range nameREs[:2] {
		if sub := re.FindStringSubmatch(t); sub != nil {
			n := strings.TrimSpace(sub[1])
			if q, ok := m.quoteAt(n); ok {
				return q
			}
			if n != "" && n != "url0" {
				return originalCase(m.raw, n)
			}
		}
	}
	return ""
}

// serverByURL is the server registered at u (a trailing slash aside).
func serverByURL(cat *Catalogue, u string) string {
	for _, s := range cat.Servers {
		if s.URL != "" && strings.TrimRight(s.URL, "/") == strings.TrimRight(u, "/") {
			return s.ID
		}
	}
	return ""
}

// message is a message taken apart: the lower-case text with quoted strings and URLs
// replaced by markers, and the values it contained.
type message struct {
	raw     string
	text    string // lower case; quoted strings are "q0", "q1"…, the URL "url0"
	quoted  []string
	numbers []string
	url     string
}

var (
	// A single quote opens a quoted string only after a space or the start and closes
	// before one (or punctuation), so "ev2's search" is not a quotation.
	quotedRE = regexp.MustCompile("\"([^\"]*)\"|(?:^|[\\s(])'([^']+)'(?:$|[\\s.,;:!?)])|`([^`]*)`|“([^”]*)”")
	urlRE    = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s'"<>]+`)
	numberRE = regexp.MustCompile(`(?:^|\s)#?(\d+)\b`)
	spaceRE  = regexp.MustCompile(`\s+`)
)

func newMessage(raw string) message {
	m := message{raw: raw}
	s := strings.TrimSpace(raw)
	if u := urlRE.FindString(s); u != "" {
		m.url = strings.TrimRight(u, ".,;:!?)`")
		s = strings.Replace(s, u, " url0 ", 1)
	}
	i := 0
	s = quotedRE.ReplaceAllStringFunc(s, func(q string) string {
		sub := quotedRE.FindStringSubmatch(q)
		for _, g := range sub[1:] {
			if g != "" {
				// An apostrophe pair inside words ("bob's … it's") is not a quote.
				m.quoted = append(m.quoted, g)
				i++
				return " q" + strconv.Itoa(i-1) + " "
			}
		}
		return q
	})
	for _, n := range numberRE.FindAllStringSubmatch(s, -1) {
		m.numbers = append(m.numbers, n[1])
	}
	s = strings.ToLower(s)
	s = strings.NewReplacer("’", "'", "?", " ", "!", " ", ",", " , ", ";", " ", "(", " ", ")", " ").Replace(s)
	s = strings.TrimRight(strings.TrimSpace(s), ".")
	m.text = canonical(" " + spaceRE.ReplaceAllString(s, " ") + " ")
	return m
}

// phrasal verbs are rewritten to their one-word meaning before anything else reads the
// text, so "turn the files server back on" is "enable the files server" and the "on"
// is not mistaken for "on <server>".
var phrasal = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(` (?:turn|switch|flip) ((?:\S+ ){0,5}?)(?:back )?on((?: please)?) `), " enable $1$2 "},
	{regexp.MustCompile(` (?:turn|switch|flip|shut) ((?:\S+ ){0,5}?)off((?: please)?) `), " disable $1$2 "},
	{regexp.MustCompile(`^ (\S+) off((?: please| now)?) $`), " disable $1$2 "},
	{regexp.MustCompile(` bring ((?:\S+ ){1,5}?)back(?: online| up| on)? `), " enable $1"},
	{regexp.MustCompile(` ((?:\S+ ){1,5}?)(?:turned|switched) (?:back )?on `), " enable $1"},
	{regexp.MustCompile(` ((?:\S+ ){1,5}?)(?:turned|switched) off `), " disable $1"},
}

func canonical(t string) string {
	for _, p := range phrasal {
		t = p.re.ReplaceAllString(t, p.with)
	}
	return spaceRE.ReplaceAllString(t, " ")
}

// quoteAt is the quoted string a marker stands for ("q0" → its text).
// value is a value as the person wrote it: a quoted string, the URL, or the words in
// their own case ("London", not the "london" the text is matched in).
func (m message) value(v string) string {
	if q, ok := m.quoteAt(v); ok {
		return q
	}
	if v == "url0" && m.url != "" {
		return m.url
	}
	return originalCase(m.raw, v)
}

func (m message) quoteAt(marker string) (string, bool) {
	if len(marker) < 2 || marker[0] != 'q' {
		return "", false
	}
	n, err := strconv.Atoi(marker[1:])
	if err != nil || n >= len(m.quoted) {
		return "", false
	}
	return m.quoted[n], true
}

// The small words: answers to a question the assistant asked.
var (
	yesRE    = regexp.MustCompile(`^ (?:(?:yes|yeah|yep|ok|okay|sure) )?(?:yes|y|yeah|yep|yup|sure|ok|okay|please|please do|do it|go ahead|go for it|confirm|confirmed|correct|right|absolutely|of course|sounds good|yes please|yes do it|yes go ahead|that's right|that one|i do) $`)
	noRE     = regexp.MustCompile(`^ (?:no|n|nope|nah|no thanks|no thank you|not now|don't|do not|i already have one|i have one)(?: (?:thanks|leave it|don't do that|do not do that|not now|keep it))? $`)
	cancelRE = regexp.MustCompile(`^ (?:actually |oh |ok |okay |no )?(?:never ?mind|cancel|cancel that|forget it|forget about it|forget that|abort|stop|stop it|quit|none|none of them|nothing)(?: then)? $`)
	pickOnly = regexp.MustCompile(`^ (?:i'll take |i will take |i want |give me |let's go with |go with |pick |choose )?(?:(?:number|option|choice|#) ?)?(?:the )?(\d+|one|two|three|four|five|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|1st|2nd|3rd|\dth)(?: one| option| choice)?(?: please)? $`)
	pickOnRE = regexp.MustCompile(`^ (?:the )?(?:one|tool|server) (?:on|from) (?:the )?(\S+?)(?: server)?(?: please)? $|^ (?:the )?(\S+) one $`)
)

func small(m message, u *Understanding, cat *Catalogue) bool {
	t := strings.ReplaceAll(m.text, " , ", " ")
	switch {
	case yesRE.MatchString(t):
		u.Intent = IntentYes
	case noRE.MatchString(t):
		u.Intent = IntentNo
	case cancelRE.MatchString(t):
		u.Intent = IntentCancel
	case pickOnly.MatchString(t):
		u.Intent, u.Pick = IntentPick, pickOf(t)
	case pickOnRE.MatchString(t):
		sub := pickOnRE.FindStringSubmatch(t)
		u.Intent, u.Ref = IntentPick, sub[1]+sub[2]
		if id := serverByName(cat, u.Ref); id != "" {
			u.OnServer, u.Servers = id, []string{id}
		}
	default:
		return false
	}
	return true
}

var ordinals = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
	"fifth": 5, "5th": 5, "sixth": 6, "6th": 6, "seventh": 7, "7th": 7, "eighth": 8, "8th": 8, "ninth": 9, "9th": 9,
	"tenth": 10, "last": -1}

var ordinalRE = regexp.MustCompile(` (?:the )?(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|1st|2nd|3rd|[4-9]th)(?: one| tool| server)? |^ (?:number |option |choice |#)?(\d+) $| (?:number|option|choice|#) ?(\d+) `)

// pickOf is the 1-based choice a text refers to (-1: the last; 0: none).
func pickOf(t string) int {
	if sub := pickOnly.FindStringSubmatch(t); sub != nil {
		if n, ok := ordinals[sub[1]]; ok {
			return n
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(sub[1], "st"), "nd"), "rd"), "th")); err == nil {
			return n
		}
	}
	sub := ordinalRE.FindStringSubmatch(t)
	if sub == nil {
		return 0
	}
	if n, ok := ordinals[sub[1]]; ok {
		return n
	}
	for _, g := range sub[2:] {
		if n, err := strconv.Atoi(g); err == nil {
			return n
		}
	}
	return 0
}

var allRE = regexp.MustCompile(` (?:all|every|everything|each|them all|all of them) `)

// verb is one family of words for an intent, tried in order: the first that matches
// the text decides.
type verb struct {
	re     *regexp.Regexp
	intent Intent
}

var verbs = []verb{
	// "Do we have a tool to disable alerts?" asks for a tool, whatever verb follows: read
	// for that verb, it disabled the alerts tool.
	{regexp.MustCompile(`^ (?:(?:so|hey|hi|ok|okay|and|also|quick question)(?: ,)? )*(?:(?:do|does|did) (?:we|you|i|anyone) (?:have|got)|have (?:we|you) got|(?:is|are) there|got|any) (?:a |an |any |some )?(?:tools?|anything|something|mcp tool) (?:to|that|for|which|i can use to|we can use to) |^ (?:which|what) tool (?:can|could|will|does|do|is able to|lets (?:me|us)) `), IntentFindTool},
	{regexp.MustCompile(` (?:stop|quit|no longer|don't|do not|never) (?:automatically |auto-?)?(?:enabling|enable|turning on|activating) | forget (?:my |the )?(?:[\w-]+ ){0,3}preferences? (?:$|about |for |on |of |to |that |regarding )| (?:remove|delete|drop|clear) (?:my |the )?(?:[\w-]+ ){0,3}preferences? (?:$|about |for |on |of |to |that |regarding )`), IntentForget},
	{regexp.MustCompile(` (?:my|what are my|list my|show my|show me my|which) (?:\w+ )?preferences | preferences | (?:what|anything) (?:have|did) i (?:asked|told) you to remember| what do you remember `), IntentListPreference},
	{regexp.MustCompile(` (?:always|automatically|auto-?enable|from now on) .*(?:enable|activate|make)| auto-?enable | whenever .*(?:new|shows up|appears|discovered).* enable | enable .*(?:whenever|every time|each time|automatically|from now on) `), IntentPreference},
	{regexp.MustCompile(` (?:set ?up|configure|create|add|install|get|connect) (?:a |an |my |some )(?:new )?(?:tool|tools)(?: |,)| (?:set ?up|create|install) new tools? | (?:walk|guide|take) me through | step by step | help me (?:set ?up|add|get started)| get started | onboard | set up a new server together `), IntentSetup},
	{regexp.MustCompile(`^ (?:help|help me|\?|what can (?:i|you) do(?: with \S+(?: \S+)?)?|what do you do|how does this work|what are you|hi|hello|hey) $| how (?:do|can|would|should) (?:i|we|you) | what can (?:i|you) do | what (?:sorts?|kinds?) of things | what (?:can|could) you help `), IntentHelp},
	{regexp.MustCompile(` (?:stop|prevent|forbid|block|disallow|ban|bar) \S+ (?:from )?(?:using|running|calling|accessing)| revoke | (?:take away|remove|cut off|withdraw) \S+'s (?:access|permission)| (?:don't|do not) let \S+ (?:use|run|call|access)| no longer let \S+ | deny \S+ | (?:should|may|can|must) no longer (?:be able to |be allowed to )?(?:use|run|call|access)| (?:shouldn't|should not|mustn't|must not|can't|cannot|may not) (?:be allowed to |be able to )?(?:use|run|call|access)`), IntentRevoke},
	{regexp.MustCompile(` (?:let|allow|permit|authori[sz]e|enable) \S+ (?:to )?(?:use|run|call|access|execute) | give \S+ (?:access|permission|the right)| grant (?:\S+ )?(?:access|permission|use)?| (?:let|allow) \S+ have | \S+ (?:needs|should be able|must be able|wants|should be allowed) (?:to )?(?:be able to )?(?:use|run|call|access) `), IntentGrant},
	{regexp.MustCompile(` (?:low|medium|high)[ -]risk | risk (?:level |rating )?(?:of|for|on|to) | risk (?:to|as|at) (?:low|medium|high) | (?:risk|riskiness) `), IntentSetRisk},
	{regexp.MustCompile(` untag | (?:remove|delete|drop|take off|strip) (?:the )?(?:tags?|labels?) | (?:remove|delete|drop|take off|strip) (?:the )?\S+ (?:tag|label) | take (?:the )?\S+ (?:tag|label) off | (?:shouldn't|should not) be (?:tagged|labell?ed) `), IntentUntag},
	{regexp.MustCompile(` tag | (?:add|put|attach|apply|give) (?:the |a )?(?:tags?|labels?) | (?:add|put|attach|apply) (?:the |a )?\S+ (?:tag|label) | label `), IntentTag},
	{regexp.MustCompile(` categor| file \S+ under | (?:in|into|under) (?:the )?\S+(?: \S+)? (?:category|group) | (?:move|put|file|place|assign) .* (?:to|in|into|under) (?:the )?\S+(?: \S+)? (?:category|group) `), IntentSetCategory},
	{regexp.MustCompile(` configur| config | settings? (?:of|for) | (?:set|change|switch|update) (?:the |its |\S+'s )?\S+ (?:to|=) | (?:set|change|switch|update) (?:the )?\S+ (?:of|for|on) .* to | switch \S+ (?:over )?to |=| to use | (?:use|using) \S+ (?:units|mode|format) `), IntentConfigureTool},
	{regexp.MustCompile(` (?:refresh|reload|resync|re-sync|sync|rescan|re-?discover|update) | (?:discover|scan|fetch|look for|pull|find) .*(?:all|every) servers? `), IntentRefresh},
	{regexp.MustCompile(` discover | (?:scan|crawl|probe|inspect) | (?:fetch|pull|get|load|look for|find) (?:the )?(?:new |latest |any )?tools (?:from|on|of) | (?:check|look at|search|go check) .* (?:for|if) (?:new|more|any) tools| for (?:any )?(?:new )?tools it (?:added|has) `), IntentDiscover},
	{regexp.MustCompile(` test | (?:check|see|verify|make sure) (?:if |whether |that )?.* (?:works?|working|up|running|ok|fine) | (?:is|are) .* (?:working|broken) | try (?:out )?`), IntentTestTool},
	{regexp.MustCompile(` (?:add|register|connect|hook up|attach|plug in|onboard|link|set ?up a connection|new) (?:to )?(?:a |an |the |this |my )?(?:new )?(?:\S+ )?(?:mcp |tool )?servers? | (?:add|register|connect to|hook up|attach|plug in|link|set ?up a connection to) .*url0`), IntentAddServer},
	{regexp.MustCompile(` (?:remove|delete|unregister|deregister|drop|get rid of|uninstall|disconnect|detach|forget|destroy|trash|kill) `), IntentRemoveServer},
	{regexp.MustCompile(` (?:disable|turn off|switch off|deactivate|shut off|shut down|suspend|pause|unpublish|hide|block|take down|take offline|put offline|stop) | make .* (?:unavailable|inactive|offline) | (?:off)$`), IntentDisableTool},
	{regexp.MustCompile(` (?:enable|re-?enable|turn on|switch on|activate|reactivate|unpause|resume|unblock|publish|bring back|bring up|put online) | make .* (?:available|active|usable|online) | start (?:using )?`), IntentEnableTool},
	{regexp.MustCompile(` (?:status|health|healthy|online|offline|connected|reachable|up and running|alive|down) |^ is (?:the )?\S+(?: mcp)? server | how (?:is|'s) | check on | any (?:problems?|issues?|trouble|errors?) with `), IntentServerStatus},
	{regexp.MustCompile(` (?:what|which) (?:mcp )?(?:servers|tools) (?:do we|are there|have we|are available|are registered|exist)| (?:what|which) tools does \S+ (?:have|offer)`), IntentListTools},
	{regexp.MustCompile(` (?:tell me|talk) about | describe | details? | info(?:rmation)? | explain | more about | (?:schema|parameters|arguments|inputs) (?:of|for) | what (?:parameters|arguments|inputs) `), IntentToolDetails},
	{regexp.MustCompile(` suggest| recommend| would (?:help|be useful|be good)| (?:help|helps|useful|good) (?:with|for) | what should i use | (?:which|what) tools? (?:should|could|would|can|might) (?:i|we|help)`), IntentSuggestTools},
	{regexp.MustCompile(` do (?:we|you|i) have | is there | are there (?:any )?(?:tools? )?(?:for|that|to) | (?:find|search for|look for|looking for|locate) | which tool (?:can|could|should|would|will|does|do) | any tools? (?:for|that|to) | what tool (?:can|could|should|would|does|do) `), IntentFindTool},
	{regexp.MustCompile(` (?:list|show|display|see|view|give me|get|print|enumerate|what|which|any) .*(?:servers|tools) | (?:servers|tools) (?:do we|are there|have we|are available|are registered)| (?:list|show) (?:all|everything|them) | (?:list|show) (?:every|each|all) (?:tool|server) | (?:a |the )?list of (?:all |every |the )?(?:tools?|servers?) `), IntentListTools},
	{regexp.MustCompile(` what (?:exactly |precisely )?(?:does|is) | what's `), intentWeakDetails},
	{regexp.MustCompile(` show (?:me )?(?:the )?\S+`), IntentToolDetails},
}

// intentWeakDetails is "what is X": details when X names something, else not understood.
const intentWeakDetails Intent = "weak_details"

// intentOf is the intent of a message that is not an answer, before the object's kind
// makes a tool intent a server one (or the other way round), and where in the text the
// verb that says it begins (-1: no verb).
func intentOf(m message) (Intent, int) {
	t := m.text
	for _, v := range verbs {
		if loc := v.re.FindStringIndex(t); loc != nil {
			if v.intent == IntentSetup && m.url != "" {
				continue // "add a new tool server at https://…" names the server
			}
			return retarget(v.intent, t), loc[0]
		}
	}
	if m.url != "" {
		return IntentAddServer, -1
	}
	return IntentUnknown, -1
}

// negationRE is a negation right before a verb ("please don't disable", "do not ever
// remove", "I don't want you to turn off"), read on the text before the verb's match.
var negationRE = regexp.MustCompile(`(?:^| )(?:don'?t|do not|never|not)(?: (?:ever|please|just|yet|you|actually|even|really|want|need|to|try|go|ahead))*$`)

// negated reports whether the verb that gave a message its intent is negated: the
// person asks for that NOT to be done. Questions (status, details, lists, finds) are
// not ("is ev2 not connected?"), nor a verb whose own words hold the negation ("don't
// let bob use X", "never enable new weather tools").
func negated(t string, in Intent, verbAt int) bool {
	if verbAt < 0 || readOnly(in) || in == intentWeakDetails {
		return false
	}
	return negationRE.MatchString(strings.TrimRight(t[:verbAt], " "))
}

// retarget turns the tool intents that also exist for servers into the server ones when
// the message speaks of a server, and the list of tools into the list of servers.
func retarget(in Intent, t string) Intent {
	server := kindOf(t) == "server"
	switch in {
	case IntentEnableTool:
		if server {
			return IntentEnableServer
		}
	case IntentDisableTool:
		if server {
			return IntentDisableServer
		}
	case IntentRemoveServer:
		if kindOf(t) == "tool" {
			return IntentDisableTool
		}
	case IntentListTools:
		if listsServers(t) {
			return IntentListServers
		}
	case IntentToolDetails, IntentTestTool, intentWeakDetails:
		if server {
			return IntentServerStatus
		}
	case IntentServerStatus:
		if kindOf(t) == "tool" {
			return IntentToolDetails
		}
	case IntentDiscover:
		if allRE.MatchString(t) && strings.Contains(t, " servers") {
			return IntentRefresh
		}
	}
	return in
}

var (
	serverWordRE = regexp.MustCompile(` (?:mcp )?servers? `)
	toolWordRE   = regexp.MustCompile(` tools? `)
	// A server named only to say where tools are ("the tools on the weather server").
	whereServerRE = regexp.MustCompile(` (?:on|from|of|in|at) (?:the |all |every |each )?(?:\S+ )?(?:mcp )?servers? `)
)

// kindOf is what the message speaks of: "server", "tool" or "" (neither word).
func kindOf(t string) string {
	stripped := whereServerRE.ReplaceAllString(t, " ")
	switch s, tl := serverWordRE.MatchString(stripped), toolWordRE.MatchString(t); {
	case s && !strings.Contains(stripped, " tool server"):
		return "server"
	case tl:
		return "tool"
	case s:
		return "server"
	}
	return ""
}

func listsServers(t string) bool {
	si, ti := strings.Index(t, " servers"), strings.Index(t, " tools")
	if si < 0 {
		si = strings.Index(t, " server ")
		if si >= 0 && ti >= 0 {
			return false // "the tools on the x server"
		}
	}
	return si >= 0 && (ti < 0 || si < ti && !whereServerRE.MatchString(t))
}

// nameOf is the name given to a new server: quoted, "called X", "named X", or the words
// of "register the X server".
func nameOf(m message, t string) string {
	for _, re := range nameREs {
		if sub := re.FindStringSubmatch(t); sub != nil {
			n := strings.TrimSpace(sub[1])
			if q, ok := m.quoteAt(n); ok {
				return q
			}
			if n != "" && n != "url0" && !stopWord(n) {
				return originalCase(m.raw, n)
			}
		}
	}
	if len(m.quoted) > 0 {
		return m.quoted[0]
	}
	return ""
}

var nameREs = []*regexp.Regexp{
	regexp.MustCompile(` (?:called|named|name it|call it|with the name|with name|under the name|by the name) (.+?)(?: at url0| on url0| with url0)? $`),
	regexp.MustCompile(` (?:called|named|name it|call it) (.+?) (?:at|on|with|from) `),
	regexp.MustCompile(` as (.+?)(?: at url0| on url0| with url0)? $`),
	regexp.MustCompile(` (?:register|add|connect) (?:the |a |an )?(?:new )?(.+?) (?:mcp )?server (?:at|on|from|url0)`),
}

// originalCase finds lower in raw and returns it as written there.
func originalCase(raw, lower string) string {
	// Matched in raw itself: lower-casing changes the length of some characters (İ, Ⱥ),
	// so an offset into the lower-cased text is not one into raw.
	if loc := regexp.MustCompile(`(?i)` + regexp.QuoteMeta(lower)).FindStringIndex(raw); loc != nil {
		return raw[loc[0]:loc[1]]
	}
	return lower
}

// bareTarget is what "add a server at X" names when X is not a URL, so the reply can say
// why it is not one.
func bareTarget(t string) string {
	if sub := regexp.MustCompile(` (?:at|on|to|url) (\S+)`).FindStringSubmatch(t); sub != nil && !stopWord(sub[1]) {
		return sub[1]
	}
	return ""
}

var (
	riskWordsRE = regexp.MustCompile(`\b(?:low|medium|high)(?:[ -]risk)?\b|\brisk(?:iness|y)?(?: level| rating)?\b`)
	riskLevelRE = regexp.MustCompile(` (low|medium|high) `)
)

func riskOf(t string) string {
	if sub := riskLevelRE.FindStringSubmatch(strings.ReplaceAll(t, "-", " ")); sub != nil {
		return strings.ToUpper(sub[1])
	}
	return ""
}

// userOf finds the person of a grant or revoke: a known username anywhere, else the
// word after the verb. It returns the text without it.
func userOf(t string, in Intent, cat *Catalogue) (string, string) {
	for _, w := range strings.Fields(t) {
		w = strings.TrimSuffix(w, "'s")
		for _, name := range cat.Users {
			if strings.EqualFold(w, name) {
				return name, strings.Replace(t, " "+w, " ", 1)
			}
		}
	}
	re := grantUserRE
	if in == IntentRevoke {
		re = revokeUserRE
	}
	if sub := re.FindStringSubmatch(t); sub != nil {
		w := strings.TrimSuffix(sub[1], "'s")
		return w, strings.Replace(t, " "+sub[1], " ", 1)
	}
	return "", t
}

var (
	grantUserRE  = regexp.MustCompile(` (?:let|allow|permit|give|grant|authori[sz]e|enable) (\S+)`)
	revokeUserRE = regexp.MustCompile(` (?:stop|prevent|forbid|block|disallow|ban|bar|let|revoke|deny|from|remove|away) (\S+)`)
)

var (
	tagRE = []*regexp.Regexp{
		regexp.MustCompile(` tag (?P<ref>.+?) (?:with|as) (?:the )?(?:tags? |labels? )?(?P<tags>.+?) $`),
		regexp.MustCompile(` (?:add|put|attach|apply|give) (?:the |a )?(?:tags?|labels?) (?P<tags>.+?) (?:to|on) (?P<ref>.+?) $`),
		regexp.MustCompile(` (?:add|put|attach|apply) (?:the |a )?(?P<tags>\S+) (?:tag|label) (?:to|on) (?P<ref>.+?) $`),
		regexp.MustCompile(` label (?P<ref>.+?) (?:with|as) (?P<tags>.+?) $`),
		regexp.MustCompile(` give (?P<ref>.+?) (?:the |a )?(?:tags?|labels?) (?P<tags>.+?) $`),
		regexp.MustCompile(` give (?P<ref>.+?) (?:the |a )(?P<tags>\S+) (?:tag|label) $`),
	}
	untagRE = []*regexp.Regexp{
		regexp.MustCompile(` (?:remove|delete|drop|take off|strip) (?:the )?(?:tags?|labels?) (?P<tags>.+?) (?:from|on|off) (?P<ref>.+?) $`),
		regexp.MustCompile(` (?:remove|delete|drop|take off|strip) (?:the )?(?P<tags>\S+) (?:tag|label) (?:from|on|off) (?P<ref>.+?) $`),
		regexp.MustCompile(` take (?:the )?(?P<tags>\S+) (?:tag|label) off (?:of )?(?P<ref>.+?) $`),
		regexp.MustCompile(` untag (?P<tags>\S+) from (?P<ref>.+?) $`),
		regexp.MustCompile(` untag (?P<ref>.+?) (?:as) (?P<tags>.+?) $`),
		regexp.MustCompile(` untag (?P<ref>\S+) (?P<tags>\S+) $`),
		regexp.MustCompile(`^ (?P<ref>.+?) (?:shouldn't|should not) be (?:tagged|labell?ed) (?:as |with )?(?P<tags>.+?)(?: anymore| any more| any longer)? $`),
	}
	listSplitRE = regexp.MustCompile(`\s*(?:,|\band\b|&|\+)\s*`)
)

// tagsOf reads the tags of a tag or untag message; the text returned is the tool's part.
func tagsOf(t string, in Intent) ([]string, string) {
	res := tagRE
	if in == IntentUntag {
		res = untagRE
	}
	for _, re := range res {
		sub := re.FindStringSubmatch(t)
		if sub == nil {
			continue
		}
		var tags []string
		for _, tg := range listSplitRE.Split(sub[re.SubexpIndex("tags")], -1) {
			tg = strings.Trim(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tg), "the ")), `"'`)
			tg = strings.TrimSuffix(strings.TrimSuffix(tg, " tag"), " tags")
			if tg != "" && !slices.Contains(tags, tg) {
				tags = append(tags, tg)
			}
		}
		return tags, " " + sub[re.SubexpIndex("ref")] + " "
	}
	return nil, t
}

var categoryREs = []*regexp.Regexp{
	regexp.MustCompile(` file (?P<ref>.+?) under (?:the )?(?P<cat>\S+)(?: category| group)? $`),
	regexp.MustCompile(` (?:category|group) (?:of|for) (?P<ref>.+?) (?:should be|must be|is|to|as) (?:the )?(?P<cat>\S+)(?: category)? $`),
	regexp.MustCompile(` (?:in|into|under|to) (?:the )?(?P<cat>\S+(?: \S+)?) (?:category|group) `),
	regexp.MustCompile(` categor(?:y|i[sz]e) (?P<ref>.+?) (?:as|in|under|to) (?:the )?(?P<cat>.+?) $`),
	regexp.MustCompile(` (?:category|group) (?:of |for )?(?P<ref>.+?) (?:to|as) (?:the )?(?P<cat>.+?) $`),
	regexp.MustCompile(` (?:category|group) (?:to|as) (?:the )?(?P<cat>.+?) $`),
	regexp.MustCompile(` (?:the )?(?P<cat>\S+) (?:category|group) `),
}

// categoryOf reads the category a message files a tool under.
func categoryOf(t string) (string, string) {
	for _, re := range categoryREs {
		sub := re.FindStringSubmatch(t)
		if sub == nil {
			continue
		}
		c := strings.Trim(strings.TrimSpace(sub[re.SubexpIndex("cat")]), `"'`)
		rest := strings.Replace(t, sub[0], " ", 1)
		if i := re.SubexpIndex("ref"); i > 0 {
			rest = " " + sub[i] + " "
		}
		return c, rest
	}
	return "", t
}

var (
	kvRE      = regexp.MustCompile(` ([a-z_][\w.-]*) ?= ?(\S+)`)
	setToRE   = regexp.MustCompile(` (?:set|change|switch|update|make) (?:the |its )?(?:(\S+)'s )?([a-z_][\w-]*) (?:setting |parameter |option )?(?:of (.+?) )?(?:to|as) (\S+)`)
	useUnitRE = regexp.MustCompile(` (?:to )?(?:use|using|in|with) (\S+)(?: units?| mode| format)?`)
)

// settingsOf reads what a configure message sets by name: key=value pairs and "set units
// to metric". It also returns the words that are one of a parameter's allowed values or
// a synonym of one ("to use metric units", "to use Celsius"): which parameter they set
// is known once the target is (enumSettings). The text returned has them removed,
// leaving the tool's words.
// maxSettingWords bounds the words of a message read for enum values.
const maxSettingWords = 40

func settingsOf(m message, t string, cat *Catalogue) (map[string]string, string, []string) {
	out := map[string]string{}
	for _, sub := range kvRE.FindAllStringSubmatch(t, -1) {
		out[sub[1]] = m.value(sub[2])
		t = strings.Replace(t, sub[0], " ", 1)
	}
	params := paramNames(cat)
	if sub := setToRE.FindStringSubmatch(t); sub != nil && params[strings.ToLower(sub[2])] {
		out[sub[2]] = m.value(sub[4])
		t = strings.Replace(t, sub[0], " "+sub[1]+" "+sub[3]+" ", 1)
	}
	words := strings.Fields(t)
	var values []string
	// Each word is tried against every tool's parameters: a sentence of a thousand
	// words and a catalogue of thousands of tools made seconds of work for any user.
	// A setting is said in a few words.
	for _, w := range words[:min(len(words), maxSettingWords)] {
	tools:
		for _, tl := range cat.Tools {
			for _, p := range tl.Params {
				if _, ok := enumValue(p, w); ok {
					values = append(values, w)
					t = strings.Replace(t, " "+w+" ", " ", 1)
					break tools
				}
			}
		}
	}
	if sub := useUnitRE.FindStringSubmatch(t); sub != nil {
		t = strings.Replace(t, sub[0], " ", 1)
	}
	// Every word is looked up in the set of parameter names, built once: compared with
	// each tool's parameters, a long message against thousands of tools took seconds
	// while holding the conversation's lock.
	for _, w := range words {
		if params[w] {
			t = strings.Replace(t, " "+w+" ", " ", 1)
		}
	}
	if len(out) == 0 {
		return nil, t, values
	}
	return out, t, values
}

// enumSettings adds to settings the parameters of the tools ids that the value words
// name. Only the target's parameters: another tool whose enum lists the word (a server
// may list it on purpose) would add a parameter the target lacks, and Update refuses it.
// With no target named ("the first one"), every tool's are tried and Decide narrows
// them (narrowSettings).
func enumSettings(settings map[string]string, values, ids []string, cat *Catalogue) map[string]string {
	tls := cat.Tools
	if len(ids) > 0 {
		tls = make([]Tool, 0, len(ids))
		for _, id := range ids {
			if tl, ok := cat.tool(id); ok {
				tls = append(tls, tl)
			}
		}
	}
	for _, w := range values {
		for _, tl := range tls {
			for _, p := range tl.Params {
				if _, set := settings[p.Name]; set {
					continue
				}
				if e, ok := enumValue(p, w); ok {
					if settings == nil {
						settings = map[string]string{}
					}
					settings[p.Name] = e
				}
			}
		}
	}
	return settings
}

// narrowSettings keeps the settings of parameters the tools ids have, spelled as their
// enum spells the value: a model's proposal, or words read against every tool, may set
// another tool's. A setting the sentence names (key=value, "set lang to xx") is kept
// too, for Update to refuse the message naming it rather than save the rest without
// it. When none is a parameter of theirs, all are kept, for Update's error to name them.
func narrowSettings(settings map[string]string, sentence string, ids []string, cat *Catalogue) map[string]string {
	if len(settings) == 0 {
		return settings
	}
	named := namedSettings(sentence, cat)
	out := map[string]string{}
	for k, v := range settings {
		if named[strings.ToLower(k)] {
			out[k] = v
		}
		for _, id := range ids {
			tl, ok := cat.tool(id)
			if !ok {
				continue
			}
			i := slices.IndexFunc(tl.Params, func(p Param) bool { return strings.EqualFold(p.Name, k) })
			if i < 0 {
				continue
			}
			for _, e := range tl.Params[i].Enum {
				if strings.EqualFold(e, v) {
					v = e
				}
			}
			out[k] = v
			break
		}
	}
	if len(out) == 0 {
		return settings
	}
	return out
}

// namedSettings are the parameters a sentence sets by name, as settingsOf reads them.
func namedSettings(sentence string, cat *Catalogue) map[string]bool {
	t := newMessage(sentence).text
	out := map[string]bool{}
	for _, sub := range kvRE.FindAllStringSubmatch(t, -1) {
		out[sub[1]] = true
	}
	if sub := setToRE.FindStringSubmatch(t); sub != nil && paramNamed(cat, sub[2]) {
		out[strings.ToLower(sub[2])] = true
	}
	return out
}

// valueSynonyms maps words people say to the enum values they may stand for, tried in
// order against a parameter's own enum: "Celsius" is the metric of a weather tool's
// units, the si of another's, the c of a third's. Only values the tool's schema lists
// are ever set, so a synonym cannot invent a value; and only for a parameter whose name
// or description speaks of what the word is about, so that "polite" does not set a
// verbosity to "more", nor "celsius" a language to "c".
var valueSynonyms = map[string]struct{ values, about []string }{
	"celsius":    {[]string{"metric", "si", "celsius", "c"}, unitWords},
	"centigrade": {[]string{"metric", "si", "celsius", "c"}, unitWords},
	"fahrenheit": {[]string{"imperial", "us", "fahrenheit", "f"}, unitWords},
	"kelvin":     {[]string{"standard", "kelvin", "k"}, unitWords},
	"metres":     {[]string{"metric", "si"}, unitWords},
	"meters":     {[]string{"metric", "si"}, unitWords},
	"kilometres": {[]string{"metric", "si"}, unitWords},
	"kilometers": {[]string{"metric", "si"}, unitWords},
	"miles":      {[]string{"imperial", "us"}, unitWords},
	"feet":       {[]string{"imperial", "us"}, unitWords},
	"casual":     {[]string{"informal", "less"}, toneWords},
	"polite":     {[]string{"formal", "more"}, toneWords},
}

var (
	unitWords = []string{"unit", "temperature", "measure", "metric", "imperial", "scale"}
	toneWords = []string{"formal", "tone", "register", "polite", "style"}
)

// enumValue is the value of p's enum that word names: the value itself (any case), or
// the first of its synonyms' values that the enum lists, when p is about what the
// synonym is about.
func enumValue(p Param, word string) (string, bool) {
	for _, e := range p.Enum {
		if strings.EqualFold(e, word) {
			return e, true
		}
	}
	syn, ok := valueSynonyms[strings.ToLower(word)]
	if !ok {
		return "", false
	}
	about := strings.ToLower(p.Name + " " + p.Description)
	if !slices.ContainsFunc(syn.about, func(w string) bool { return strings.Contains(about, w) }) {
		return "", false
	}
	for _, alt := range syn.values {
		for _, e := range p.Enum {
			if strings.EqualFold(e, alt) {
				return e, true
			}
		}
	}
	return "", false
}

// paramNames are the names of every tool's parameters, in lower case.
func paramNames(cat *Catalogue) map[string]bool {
	out := map[string]bool{}
	for _, tl := range cat.Tools {
		for _, p := range tl.Params {
			out[strings.ToLower(p.Name)] = true
		}
	}
	return out
}

func paramNamed(cat *Catalogue, name string) bool {
	for _, tl := range cat.Tools {
		for _, p := range tl.Params {
			if strings.EqualFold(p.Name, name) {
				return true
			}
		}
	}
	return false
}

var queryLeadRE = regexp.MustCompile(` (?:for|with|to|about|that|which|related to|regarding|on|when it comes to) (.+)$`)

// queryOf is the subject of a search or a preference: "weather forecasts" of "do we have
// a tool for weather forecasts", "weather" of "always enable new weather tools".
func queryOf(t string, in Intent) string {
	if in == IntentPreference || in == IntentForget {
		// Again until nothing changes: one match takes the space after its word, so of
		// two noise words in a row ("stop enabling") one pass removes only the first,
		// and "stop enabling new weather tools" would forget "enabling weather".
		for n := ""; n != t; {
			n, t = t, prefNoiseRE.ReplaceAllString(t, " ")
		}
		return strings.Join(contentWords(t), " ")
	}
	if sub := queryLeadRE.FindStringSubmatch(t); sub != nil {
		if ws := contentWords(sub[1]); len(ws) > 0 {
			return strings.Join(ws, " ")
		}
	}
	return strings.Join(contentWords(t), " ")
}

var prefNoiseRE = regexp.MustCompile(` (?:always|automatically|auto-?enable|auto|from now on|enable|enabling|turn on|turning on|activate|activating|switch on|make|available|new|newly|discovered|found|added|when|they're|they are|stop|don't|do not|never|no longer|forget|my|preference|preferences|remove|delete|drop|clear) `)

// related is every tool whose name, description, server, category or tags hold all the
// content words of q (or most of them, for long queries), best first.
func related(cat *Catalogue, q string) []string {
	ws := contentWords(" " + q + " ")
	if len(ws) == 0 {
		return nil
	}
	ws = ws[:min(len(ws), maxRefWords)]
	type hit struct {
		id    string
		score int
	}
	var hits []hit
	for i, tl := range cat.Tools {
		hay := cat.wordsOf(i)
		n := 0
		for _, w := range ws {
			if hay[stem(w)] {
				n++
			}
		}
		need := len(ws)
		if need > 2 {
			need = (len(ws) + 1) / 2
		}
		if n >= need {
			hits = append(hits, hit{tl.ID, n})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.id
	}
	return out
}

// wordsOf is the stemmed words of the catalogue's tool i, worked out once per catalogue
// (a message compares them for every reference and search).
// names are the catalogue's names normalised (norm) once: a message tries many of its
// words as exact names, and normalising 10,000 tool names for each word made one long
// message cost seconds.
type names struct {
	tool, title, full []string            // by index in Tools: name, title, "server name"
	exactTool         map[string][]int    // a tool's name or title → its indexes
	exactServer       map[string][]string // a server's name → the servers of that name
	at                map[string]int      // a tool's id → its index
}

func (c *Catalogue) namesOf() *names {
	if c.names != nil {
		return c.names
	}
	n := &names{tool: make([]string, len(c.Tools)), title: make([]string, len(c.Tools)), full: make([]string, len(c.Tools)),
		exactTool: map[string][]int{}, exactServer: map[string][]string{}, at: make(map[string]int, len(c.Tools))}
	for i, tl := range c.Tools {
		n.at[tl.ID] = i
		n.tool[i], n.full[i] = norm(tl.Name), norm(tl.Server+" "+tl.Name)
		n.exactTool[n.tool[i]] = append(n.exactTool[n.tool[i]], i)
		if tl.Title != "" {
			n.title[i] = norm(tl.Title)
			if n.title[i] != n.tool[i] {
				n.exactTool[n.title[i]] = append(n.exactTool[n.title[i]], i)
			}
		}
	}
	for _, s := range c.Servers {
		n.exactServer[norm(s.Name)] = append(n.exactServer[norm(s.Name)], s.ID)
	}
	c.names = n
	return n
}

func (c *Catalogue) wordsOf(i int) map[string]bool {
	if c.toolWords == nil {
		c.toolWords = make([]map[string]bool, len(c.Tools))
	}
	if c.toolWords[i] == nil {
		c.toolWords[i] = toolWords(c.Tools[i])
	}
	return c.toolWords[i]
}

// toolWords are the stemmed words a tool is known by.
func toolWords(tl Tool) map[string]bool {
	return stems(tl.Name, tl.Title, tl.Description, tl.Category, strings.Join(tl.Tags, " "))
}

// stems are the stemmed words of texts.
func stems(texts ...string) map[string]bool {
	out := map[string]bool{}
	for _, s := range texts {
		for _, w := range words(s) {
			out[stem(w)] = true
		}
	}
	return out
}

var (
	wordRE         = regexp.MustCompile(`[\pL\pN]+`)
	nameSeparators = strings.NewReplacer("_", " ", "-", " ", ".", " ")
)

// words splits a name or a text into lower-case words (get_forecast → get, forecast).
func words(s string) []string {
	return wordRE.FindAllString(strings.ToLower(nameSeparators.Replace(s)), -1)
}

// stem folds plurals and the commonest endings so "forecasts" finds "forecast" and
// "translation" finds "translate" (both become "translat").
func stem(w string) string {
	if len(w) > 4 && strings.HasSuffix(w, "ies") {
		return w[:len(w)-3] + "y"
	}
	for _, suf := range stemEndings {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 4 {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

var stemEndings = []string{"ations", "ation", "ions", "ion", "ings", "ing", "ers", "er", "ed", "es", "s", "e"}

// noise are the words that never name a server or a tool.
var noise = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the this that these those it its it's them they their one ones my our your his her
		me i we you us please can could would should will shall may might must do does did is are was were be been being
		to of on in at for from with by into onto about as and or but if then than so also just now again too very really
		what which who whom whose where when why how all any some every each both either neither no not
		tool tools server servers mcp mcps api apis service services thing things function functions plugin plugins
		enable enabled disable disabled turn on off switch activate deactivate make available unavailable
		show list display see view give get tell about details detail info information status health
		add register connect remove delete drop new named called name want like need hey hi ok okay thanks thank
		let allow use using run call access permission permissions there here up set work working is currently
		kindly go ahead right away quickly back again use able have has had
		configure configured config test testing tested check verify discover refresh reload resync rescan scan inspect
		put move file place assign stop prevent forbid tag tags untag label labels categorize categorise category group
		risk risky level mark rate change update describe explain tell more whether working works fine broken try
		deactivate reactivate unblock revoke grant give take away using units mode format latest list everything
		register unregister deregister disconnect uninstall get rid fetch pull load look whats what's
		set lower raise consider should shouldn't anymore longer be tagged able out doing going running connected
		online offline reachable alive down healthy currently quick sure make needs need actually oh okay
		don't doesn't can't won't rediscover re-discover new parameters arguments inputs take takes accept accepts
		instead above listed shown`) {
		noise[w] = true
	}
}

func stopWord(w string) bool { return noise[w] }

// contentWords are the words of t that may name something.
func contentWords(t string) []string {
	var out []string
	for _, w := range strings.Fields(t) {
		w = strings.Trim(w, ".,:;'\"")
		w = strings.TrimSuffix(w, "'s")
		if w == "" || noise[w] || w == "url0" || isQuoteMarker(w) {
			continue
		}
		if pickWord[w] {
			continue
		}
		out = append(out, w)
	}
	return out
}

var pickWord = map[string]bool{"first": true, "second": true, "third": true, "fourth": true, "fifth": true, "last": true}

// serverQualifier finds "on/from <server>" and "<server>'s" in t: the tools are that
// server's. It returns t without the qualifier and the server's id; or, when the name
// is one letter off several servers, those servers and the name (nobody can tell which).
func serverQualifier(t string, cat *Catalogue) (rest, id string, near []string, name string) {
	for _, re := range []*regexp.Regexp{onServerRE, possessiveRE} {
		for _, sub := range re.FindAllStringSubmatch(t, -1) {
			for _, n := range sub[1:] {
				if n == "" {
					continue
				}
				id, ns := serverNear(cat, n)
				if id != "" {
					return strings.Replace(t, sub[0], " ", 1), id, nil, ""
				}
				if len(ns) > 1 {
					return t, "", ns, n
				}
			}
		}
	}
	return t, "", nil, ""
}

var (
	onServerRE   = regexp.MustCompile(` (?:on|from|of|in|at|provided by|offered by) (?:the )?(\S+?)(?: mcp)?(?: server)? `)
	possessiveRE = regexp.MustCompile(` (\S+?)'s | (\S+?s)' | (\S+?)s' `)
)

// serverByName is the id of the server named n (exact, or one letter off for a long name);
// "" when none is, or when n is one letter off several.
func serverByName(cat *Catalogue, n string) string {
	id, _ := serverNear(cat, n)
	return id
}

// serverNear is the server named n: exactly, else the only one a letter off (for a long
// name). When several are a letter off, id is "" and near lists them: "prod-3" may be
// prod-1 as well as prod-2, and taking the first acted on a server nobody named.
func serverNear(cat *Catalogue, n string) (id string, near []string) {
	n = strings.Trim(n, `"'`)
	for _, s := range cat.Servers {
		if strings.EqualFold(s.Name, n) {
			return s.ID, nil
		}
	}
	if len(n) >= 5 {
		for _, s := range cat.Servers {
			if within(strings.ToLower(s.Name), strings.ToLower(n), 1) {
				near = append(near, s.ID)
			}
		}
	}
	if len(near) == 1 {
		return near[0], nil
	}
	return "", near
}

// refOf is what names the server or tool in t: a quoted name, a word before "tool" or
// "server" that is a name even if it reads as a verb ("the add tool"), else the content
// words.
func refOf(t string, m message, cat *Catalogue) string {
	for _, w := range strings.Fields(t) {
		if q, ok := m.quoteAt(w); ok {
			return q
		}
	}
	for _, sub := range namedRE.FindAllStringSubmatch(t, -1) {
		if exactTool(cat, sub[1], "") || exactServer(cat, sub[1]) {
			return sub[1]
		}
	}
	ws := contentWords(t)
	return strings.Join(ws[:min(len(ws), maxRefWords)], " ")
}

var namedRE = regexp.MustCompile(` (\S+) (?:tool|server) `)

// resolve finds the servers and tools the reference may mean. An exact name wins over a
// name one letter off, which wins over related words.
func resolve(u *Understanding, cat *Catalogue) {
	ref := u.Ref
	if ref == "" {
		return
	}
	wantServer := u.Kind == "server" || serverIntent(u.Intent)
	wantTool := u.Kind == "tool" || toolIntent(u.Intent)
	if !wantServer && !wantTool {
		wantServer, wantTool = true, true
	}
	if wantServer && u.OnServer == "" {
		u.Servers = matchServers(cat, ref)
	}
	if wantTool {
		u.Tools, u.Described = matchToolsBy(cat, ref, u.OnServer)
	}
	if u.Kind == "" && len(u.Servers) > 0 && len(u.Tools) > 0 {
		// Both kinds matched: an exact name decides.
		sExact, tExact := exactServer(cat, ref), exactTool(cat, ref, u.OnServer)
		switch {
		case sExact && !tExact:
			u.Tools, u.Described = nil, nil
		case tExact && !sExact:
			u.Servers = nil
		}
	}
	if u.Kind == "" {
		switch {
		case len(u.Servers) > 0 && len(u.Tools) == 0:
			u.Kind = "server"
		case len(u.Tools) > 0 && len(u.Servers) == 0:
			u.Kind = "tool"
		}
	}
	if u.Kind == "server" {
		u.Intent = retargetKind(u.Intent, "server")
	}
}

// retargetKind moves a tool intent to its server twin once the names said it is a server.
func retargetKind(in Intent, kind string) Intent {
	if kind != "server" {
		return in
	}
	switch in {
	case IntentEnableTool:
		return IntentEnableServer
	case IntentDisableTool:
		return IntentDisableServer
	case IntentToolDetails, IntentTestTool:
		return IntentServerStatus
	}
	return in
}

func serverIntent(in Intent) bool {
	switch in {
	case IntentRemoveServer, IntentEnableServer, IntentDisableServer, IntentServerStatus, IntentDiscover:
		return true
	}
	return false
}

func toolIntent(in Intent) bool {
	switch in {
	case IntentToolDetails, IntentConfigureTool, IntentTestTool, IntentSetRisk, IntentTag, IntentUntag,
		IntentSetCategory, IntentGrant, IntentRevoke:
		return true
	}
	return false
}

// norm is a name as words joined by single spaces ("Get_Forecast" → "get forecast").
func norm(s string) string { return strings.Join(words(s), " ") }

func exactServer(cat *Catalogue, ref string) bool { return len(exactServers(cat, ref)) > 0 }

// exactServers are the servers named ref, as exactServer reads names.
func exactServers(cat *Catalogue, ref string) []string { return cat.namesOf().exactServer[norm(ref)] }

func exactTool(cat *Catalogue, ref, on string) bool {
	for _, i := range cat.namesOf().exactTool[norm(ref)] {
		if on == "" || cat.Tools[i].ServerID == on {
			return true
		}
	}
	return false
}

func matchServers(cat *Catalogue, ref string) []string {
	r := norm(ref)
	var exact, near, rel []string
	for _, s := range cat.Servers {
		n := norm(s.Name)
		switch {
		case n == r:
			exact = append(exact, s.ID)
		case len(r) >= 4 && within(n, r, 1+len(r)/8):
			near = append(near, s.ID)
		case containsAll(words(s.Name+" "+s.Description), contentWords(" "+r+" ")):
			rel = append(rel, s.ID)
		}
	}
	return first(exact, near, rel)
}

func matchTools(cat *Catalogue, ref, on string) []string {
	ids, _ := matchToolsBy(cat, ref, on)
	return ids
}

// matchToolsBy is matchTools, and which of the tools it found only by words their
// upstream server wrote (a title, a description): a server may describe any tool as
// "stock quotes", so a name that only such words give is not taken as the person's.
func matchToolsBy(cat *Catalogue, ref, on string) (ids, described []string) {
	r := norm(ref)
	rw := contentWords(" " + r + " ")
	var exact, near, rel, bySrv []string
	inSrv := map[string]bool{} // bySrv's ids
	nm := cat.namesOf()
	srvWords := map[string][]string{} // a server's words, once per server
	for i, tl := range cat.Tools {
		if on != "" && tl.ServerID != on {
			continue
		}
		if len(rw) > 0 {
			sw, ok := srvWords[tl.Server]
			if !ok {
				sw = words(tl.Server)
				srvWords[tl.Server] = sw
			}
			if containsAll(sw, rw) {
				bySrv = append(bySrv, tl.ID)
				inSrv[tl.ID] = true
			}
		}
		n := nm.tool[i]
		switch {
		case n == r || tl.Title != "" && nm.title[i] == r || nm.full[i] == r:
			exact = append(exact, tl.ID)
		case len(r) >= 5 && within(n, r, 1+len(r)/8):
			near = append(near, tl.ID)
		case len(rw) > 0 && containsAllStem(cat.wordsOf(i), rw):
			rel = append(rel, tl.ID)
		}
	}
	if len(exact) == 0 && len(near) == 0 && len(rel) > 1 {
		// Related by the name beats related by the description.
		var byName []string
		for _, id := range rel {
			tl := toolByID(cat, id)
			if containsAll(words(tl.Name+" "+tl.Title), rw) {
				byName = append(byName, id)
			}
		}
		rel = append(byName, without(rel, byName)...)
	}
	ids = first(exact, near, rel, bySrv)
	if len(exact) > 0 || len(near) == 0 && len(rel) > 0 {
		// Exact by name or by "server name", near by name and by the server's words
		// are names; exact by title and related words are trusted only when the tool's
		// own name, its server's and what an administrator gave it (category, tags) hold
		// them all, or its server is trusted (its annotations set its risk already).
		for _, id := range ids {
			i := nm.at[id]
			if nm.tool[i] == r || nm.full[i] == r || inSrv[id] || cat.Tools[i].ServerTrusted {
				continue
			}
			if !trustedHasAll(trustedWords(cat.Tools[i]), rw) || len(rw) == 0 {
				described = append(described, id)
			}
		}
	}
	return ids, described
}

// trustedHasAll reports whether every word of need is one of hay's, or shares its first
// five letters or more with one of them as a prefix ("generation" and generate_image:
// the stems "gener" and "generat").
func trustedHasAll(hay map[string]bool, need []string) bool {
	for _, w := range need {
		sw := stem(w)
		if hay[sw] {
			continue
		}
		ok := false
		for k := range hay {
			if len(k) >= 5 && len(sw) >= 5 && (strings.HasPrefix(k, sw) || strings.HasPrefix(sw, k)) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// trustedWords are the stemmed words of a tool that are not its upstream server's prose:
// its name, its server's name, its category and tags (set by an administrator).
func trustedWords(tl Tool) map[string]bool {
	return stems(tl.Name, tl.Server, tl.Category, strings.Join(tl.Tags, " "))
}

// toolLookups counts the catalogue entries visited to find tools by id, for tests: a
// message must not cost a scan of the catalogue per tool it matches.
var toolLookups atomic.Int64

func toolByID(cat *Catalogue, id string) Tool {
	t, _ := cat.tool(id)
	return t
}

// tool is the catalogue's tool id, found through the index namesOf builds once per
// catalogue: a scan per tool made a message matching 10,000 tools quadratic.
func (c *Catalogue) tool(id string) (Tool, bool) {
	toolLookups.Add(1)
	if i, ok := c.namesOf().at[id]; ok && i < len(c.Tools) && c.Tools[i].ID == id {
		return c.Tools[i], true
	}
	return Tool{}, false
}

func without(all, drop []string) []string {
	var out []string
	for _, s := range all {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

func first(lists ...[]string) []string {
	for _, l := range lists {
		if len(l) > 0 {
			return l
		}
	}
	return nil
}

func containsAll(hay []string, need []string) bool {
	if len(need) == 0 {
		return false
	}
	for _, w := range need {
		if !slices.Contains(hay, w) {
			return false
		}
	}
	return true
}

func containsAllStem(hay map[string]bool, need []string) bool {
	for _, w := range need {
		if !hay[stem(w)] {
			return false
		}
	}
	return true
}

// within reports whether a and b are at most d edits apart; names of very different
// lengths are not compared at all (a long message against 10,000 names must stay cheap).
func within(a, b string, d int) bool {
	if abs(len(a)-len(b)) > d {
		return false
	}
	return textcheck.EditDistance(a, b) <= d
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// maxRefWords bounds the words a reference or a search is matched by.
const maxRefWords = 12

// isQuoteMarker reports whether w is a marker newMessage put in place of a quoted string
// ("q0", "q12").
func isQuoteMarker(w string) bool {
	if len(w) < 2 || w[0] != 'q' {
		return false
	}
	for _, c := range w[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// exceptRE finds the clause that leaves something out: "except X", "other than X",
// "apart from X", "but not X"… to the end of the message. A bare "but" is one only after
// "all", "every…" or "everything" ("all but X"); elsewhere it joins two sentences.
var (
	exceptRE = regexp.MustCompile(`(?i)(?:^|[\s,;(])(?:except(?:\s+for)?|excepting|excluding|other\s+than|apart\s+from|aside\s+from|besides|save\s+for|not\s+including|with\s+the\s+exception\s+of|leaving\s+out|but\s+not|but\s+(?:leave|keep|skip)(?:\s+out)?)\s+(\S.*)$`)
	butRE    = regexp.MustCompile(`(?i)(?:^|[\s,;(])but\s+(\S.*)$`)
)

// splitExcept splits a message at its except clause (outside quotes and the URL): main
// is the message without it, except the words it leaves out.
func splitExcept(msg string) (main, except string, ok bool) {
	// Quoted strings and the URL are blanked, same length, so a name or a URL holding
	// "except" is not read as the clause.
	blank := []byte(msg)
	for _, re := range []*regexp.Regexp{quotedRE, urlRE} {
		for _, loc := range re.FindAllStringIndex(string(blank), -1) {
			for i := loc[0]; i < loc[1]; i++ {
				if blank[i] != ' ' {
					blank[i] = 'x'
				}
			}
		}
	}
	loc := exceptRE.FindSubmatchIndex(blank)
	if loc == nil {
		if loc = butRE.FindSubmatchIndex(blank); loc == nil || !allRE.MatchString(" "+strings.ToLower(string(blank[:loc[0]]))+" ") {
			return "", "", false
		}
	}
	main, except = strings.TrimSpace(msg[:loc[0]]), strings.TrimSpace(msg[loc[2]:])
	main = strings.TrimRight(main, " ,;(")
	// A main clause that says nothing (no name, no verb, not "all"), or an exception that
	// is empty or another sentence, is no exception.
	mm := newMessage(main)
	in, _ := intentOf(mm)
	if len(contentWords(mm.text)) == 0 && in == IntentUnknown && !allRE.MatchString(mm.text) ||
		strings.Trim(except, " .!?") == "" || thatRE.MatchString(except) {
		return "", "", false // "besides, …": nothing is left out of anything
	}
	return main, strings.TrimRight(except, " .!?"), true
}

// thatRE is "besides that, …", "other than this…": no exception, another sentence.
var thatRE = regexp.MustCompile(`(?i)^(?:that|this|which|it)\b`)

// exceptOf is every server and tool the clause names: each of its parts ("delete_file
// and move_file", "the ones on ev2") by exact name first, else as a reference is. It
// is nil when a part names nothing: leaving out less than was meant would change what
// the person asked to keep.
func exceptOf(clause string, cat *Catalogue) []string {
	m := newMessage(clause)
	var out []string
	add := func(ids ...string) {
		for _, id := range ids {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	for _, part := range exceptSplitRE.Split(m.text, -1) {
		part = " " + strings.TrimSpace(part) + " "
		if strings.TrimSpace(part) == "" {
			continue
		}
		part, on, _, _ := serverQualifier(part, cat)
		var found []string
		for _, w := range strings.Fields(part) {
			w = strings.Trim(w, ".,:;!?'\"")
			w = strings.TrimSuffix(w, "'s")
			if q, ok := m.quoteAt(w); ok {
				w = q
			}
			for _, i := range cat.namesOf().exactTool[norm(w)] {
				if on == "" || cat.Tools[i].ServerID == on {
					found = append(found, cat.Tools[i].ID)
				}
			}
			if on == "" {
				// As exactServer matched the name: serverByName reads names otherwise
				// ("ev_2" is not "ev-2" to it), and found no server.
				for _, id := range exactServers(cat, w) {
					found = append(found, serverTools(cat, id)...)
				}
			}
		}
		if len(found) == 0 {
			ref := strings.Join(contentWords(exceptNoiseRE.ReplaceAllString(part, " ")), " ")
			switch {
			case ref != "":
				found = matchTools(cat, ref, on)
				if on == "" {
					for _, id := range matchServers(cat, ref) {
						found = append(found, serverTools(cat, id)...)
					}
				}
			case on != "":
				found = serverTools(cat, on) // "the ones on ev2": that server's tools
			}
		}
		if len(found) == 0 {
			return nil
		}
		add(found...)
	}
	return out
}

var (
	exceptSplitRE = regexp.MustCompile(`\s*(?:,|\band\b|\bor\b|\bnor\b|&|\+|/)\s*`)
	exceptNoiseRE = regexp.MustCompile(` (?:ones?|alone|untouched|intact|unchanged|as (?:is|they are|it is)|running|out|for now) `)
)

// serverTools is a server's id followed by its tools' ids.
func serverTools(cat *Catalogue, id string) []string {
	out := []string{id}
	for _, tl := range cat.Tools {
		if tl.ServerID == id {
			out = append(out, tl.ID)
		}
	}
	return out
}

// A question about a change: "should I…", "would it be safe to…", "what happens if…",
// "can I…", or any sentence ending in "?" that does not ask the assistant to do it
// ("can you…", "could you…", "please…").
var (
	questionRE = regexp.MustCompile(` (?:should|shall|ought|must) (?:i|we) | (?:would|will|could|might|does|did) (?:it|that|this) | what (?:happens|would happen|will happen|happened|if) | (?:is|isn't|was|it's|its) (?:it |that |this )?(?:safe|ok|okay|alright|all right|fine|wise|a good idea|a bad idea|risky|dangerous|possible|allowed|worth|smart|sensible) | (?:can|could|may|might) (?:i|we) | (?:do|does|did) (?:i|we) (?:need|have) to | is there any (?:risk|harm|danger|reason) | why (?:would|should|did|do|does|is|are) | (?:whether|if) (?:i|we) (?:should|can|could|may|need to) `)
	requestRE  = regexp.MustCompile(`^ (?:(?:hey|hi|ok|okay|so|and|also|now|then|yes|please)(?: ,)? )*(?:can|could|would|will|won't|wouldn't) you | please |^ (?:would you mind|mind|do me a favou?r|i'd like you to|go ahead and) `)
)

// isQuestion reports whether a message asks about what it names rather than asking for
// it; raw is the message as written (newMessage drops the "?").
func isQuestion(m message, raw string) bool {
	t := strings.ReplaceAll(m.text, " , ", " ")
	if questionRE.MatchString(t) {
		return true
	}
	return strings.HasSuffix(strings.TrimRight(strings.TrimSpace(raw), " .!)\"'`"), "?") && !requestRE.MatchString(t)
}
