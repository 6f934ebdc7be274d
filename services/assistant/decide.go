package assistant

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolwarden/toolwarden/services/registry"
)

// State is what a conversation remembers between messages: the last list it showed
// ("enable the first one"), the question it asked (a choice or a yes), and the step of
// a guided set-up.
type State struct {
	LastKind string `json:"last_kind,omitempty"` // "server" or "tool"
	// LastIDs are the entries the last list showed, in order (at most MaxChoices), and
	// LastMore counts those it had past them, not shown: "number 300" of a list that
	// showed 25 is refused, not done to an entry the person never saw (and the state,
	// saved each turn, does not grow with the catalogue).
	LastIDs  []string `json:"last_ids,omitempty"`
	LastMore int      `json:"last_more,omitempty"`
	// LastMoreOn is the server of the first tool the list did not show, for a reply
	// that says how to name the rest ("… all tools on files").
	LastMoreOn string `json:"last_more_on,omitempty"`
	Pending    *Op    `json:"pending,omitempty"`
	Flow       *Flow  `json:"flow,omitempty"`
	// Question numbers the last reply that offered choices (Reply.Question).
	Question int64 `json:"question,omitempty"`
	// Seen is the definition hash of each tool the last list showed, as it showed it:
	// an enable of "the first one" is of that definition or refused (stale), and "all of
	// them" takes the tools shown only.
	Seen map[string]string `json:"seen,omitempty"`
}

// Op is one thing to do, decided: the intent, what it acts on and its arguments. Pending
// ops wait for a choice among IDs (Choose) or for a yes (Confirm).
type Op struct {
	Intent   Intent            `json:"intent"`
	Kind     string            `json:"kind,omitempty"`
	IDs      []string          `json:"ids,omitempty"`
	URL      string            `json:"url,omitempty"`
	Name     string            `json:"name,omitempty"`
	Username string            `json:"username,omitempty"`
	Risk     string            `json:"risk,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	Category string            `json:"category,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
	Query    string            `json:"query,omitempty"`
	// Sentence is the message that asked for it, recorded in the audit log.
	Sentence string `json:"sentence"`
	Choose   bool   `json:"choose,omitempty"`
	Confirm  bool   `json:"confirm,omitempty"`
	// Confirmed is the person's yes to running a tool that asks for a confirmation.
	Confirmed bool `json:"confirmed,omitempty"`
	// ByModel: a language model read the sentence (recorded with the act).
	ByModel bool `json:"by_model,omitempty"`
	// Ask is why the op waits for a yes although it is not destructive: AskQuestion,
	// AskDescribed or AskExcept.
	Ask string `json:"ask,omitempty"`
	// Listed: the tools are the entries of a list the conversation showed (or the
	// set-up's), and Seen the definition hash each had when shown: an enable is of
	// those definitions only.
	// Seen is kept even when empty (no omitempty): a list that showed none of the tools
	// is not a state from before lists kept their hashes.
	Listed bool              `json:"listed,omitempty"`
	Seen   map[string]string `json:"seen"`
	// Cases are the test cases a yes to run medium-risk cases was asked for (id →
	// last change), and CasesRisk the tool's risk then: the yes runs those only.
	Cases     map[string]string `json:"cases,omitempty"`
	CasesRisk string            `json:"cases_risk,omitempty"`
	// LeftOut counts the tools past the first MaxChoices that details or tests of "all
	// of them" do not take (bound), and LeftOn names a server of theirs, for the reply.
	LeftOut int    `json:"left_out,omitempty"`
	LeftOn  string `json:"left_on,omitempty"`
	// Unshown counts the entries of the list "all of them" points at that the list did
	// not show: a change to them is refused (the Service says how to name them all).
	Unshown int `json:"unshown,omitempty"`
}

// Flow is a guided set-up in progress (seed 004 §7 Guided Workflows).
type Flow struct {
	Step     string `json:"step"`
	URL      string `json:"url,omitempty"`
	Name     string `json:"name,omitempty"`
	ServerID string `json:"server_id,omitempty"`
	// Said is the person's words since the set-up began ("I want to set up a new tool →
	// https://… → Example API"): what its acts are audited with.
	Said string `json:"said,omitempty"`
	// ToolIDs are the tools the set-up's own discovery found and listed (at most
	// MaxChoices): the only ones "which tools to enable?" picks from (never an older list
	// the conversation showed); More counts those it found past them, not shown.
	ToolIDs []string `json:"tool_ids,omitempty"`
	More    int      `json:"more,omitempty"`
	// Seen is the definition hash of each of ToolIDs the set-up listed (State.Seen).
	Seen map[string]string `json:"seen,omitempty"`
}

// Why an op that is not destructive waits for a yes (Op.Ask).
const (
	AskQuestion  = "question"  // the message asked about the change
	AskDescribed = "described" // its tool was found by its server's words only
	AskExcept    = "except"    // its targets are a set with some left out
)

// The steps of the guided set-up.
const (
	StepHaveServer  = "have_server"  // do you already have a server?
	StepWhichServer = "which_server" // which of your servers?
	StepURL         = "url"          // what is its URL?
	StepName        = "name"         // what should it be called?
	StepDiscover    = "discover"     // added: discover its tools?
	StepWhichTools  = "which_tools"  // which tools to enable?
)

// Choice is one answer the person can click or type.
type Choice struct {
	Label  string `json:"label"`
	Target string `json:"target"` // what to send to choose it
}

// Decision is what to answer: a reply with choices, and, when something is to be done,
// the op (which the Service runs and reports on).
type Decision struct {
	Reply   string
	Choices []Choice
	Do      *Op
	State   State
}

// Decide answers an understood message in the conversation's state. It asks whenever
// the message may mean more than one thing, and asks for a yes before what cannot be
// undone by a click (removing a server, disabling several tools, revoking a permission).
func Decide(msg string, u Understanding, st State, cat *Catalogue) Decision {
	d := Decision{State: st}
	sentence := strings.TrimSpace(msg)
	// The words quoted back ("couldn't find a tool named …", "… match …") were read
	// from the message as written: what looks like a secret in them is masked too.
	u.Ref, _ = redact(u.Ref)
	u.Query, _ = redact(u.Query)
	// So are the words an op keeps and a reply or a failure quotes: a server's name (its
	// description), tags and a category ("tag echo with ghp_…" is refused quoting the tag).
	u.Name, _ = redact(u.Name)
	u.Category, _ = redact(u.Category)
	if len(u.Tags) > 0 {
		tags := make([]string, len(u.Tags))
		for i, tg := range u.Tags {
			tags[i], _ = redact(tg)
		}
		u.Tags = tags
	}
	if u.Intent == IntentCancel {
		d.State.Pending, d.State.Flow = nil, nil
		d.Reply = "OK, I dropped that. Nothing was changed."
		return d
	}
	if u.Negated != "" {
		// "Please don't disable search" is not a request to disable it; an open yes
		// or choice is not answered by it either.
		d.State.Pending = nil
		d.Reply = fmt.Sprintf("You said not to %s, so I did nothing. What would you like me to do? For example: \"show me all tools\".",
			negatedVerb(u.Negated))
		return d
	}
	// A yes or no to a question asked (the guided set-up's "discover its tools?") answers
	// that question before the set-up's next one.
	confirming := st.Pending != nil && st.Pending.Confirm && (u.Intent == IntentYes || u.Intent == IntentNo)
	if st.Flow != nil && answersFlow(u, st.Flow.Step, sentence) && !confirming {
		return flowStep(sentence, u, st, cat)
	}
	if p := st.Pending; p != nil {
		switch {
		case p.Confirm && u.Intent == IntentYes:
			op := *p
			op.Confirm = false
			d.State.Pending = nil
			d.Do = &op
			return d
		case p.Confirm && u.Intent == IntentNo:
			d.State.Pending, d.State.Flow = nil, nil
			d.Reply = "OK, nothing was changed."
			if p.Intent == IntentDiscover && len(p.IDs) == 1 {
				d.Reply = notDiscovered(cat, p.IDs[0]) // the server asked about was added, though
			}
			return d
		case p.Choose && (u.Intent == IntentPick || u.Intent == IntentUnknown || u.Pick != 0 && !changes(u.Intent)):
			return choose(d, p, u, cat)
		}
	}
	if u.Intent == IntentYes || u.Intent == IntentNo || u.Intent == IntentPick {
		d.State.Pending = nil
		d.Reply = "I haven't asked anything to answer. What would you like to do? For example: \"show me all tools\"."
		return d
	}
	d.State.Pending, d.State.Flow = nil, nil
	if len(u.NearServers) > 1 {
		return nearServers(d, u, sentence, cat)
	}
	op := Op{Intent: u.Intent, Kind: u.Kind, URL: u.URL, Name: u.Name, Username: u.Username, Risk: u.Risk, Tags: u.Tags,
		Category: u.Category, Settings: u.Settings, Query: u.Query, Sentence: sentence}
	if u.Question && asksFirst(u.Intent) {
		// "Should I disable get_forecast?" is not "disable get_forecast": what it would
		// do is said, and done on a yes only.
		op.Ask = AskQuestion
	}
	if u.ExceptRef != "" {
		switch u.Intent {
		case IntentAddServer, IntentRefresh, IntentPreference, IntentForget, IntentSetup:
			// These act on no list of targets to leave anything out of.
			d.Reply = fmt.Sprintf("I can't leave %q out of that, so nothing was changed. Say what to do without the exception, or name the servers or tools one by one.", redacted(u.ExceptRef))
			return d
		case IntentUnknown:
			d.Reply = fmt.Sprintf("I didn't understand what to do apart from %q, so nothing was changed. For example: \"enable all the files tools except delete_file\".", redacted(u.ExceptRef))
			return d
		}
	}
	switch u.Intent {
	case IntentUnknown:
		d.Reply = notUnderstood(msg)
		return d
	case IntentHelp:
		return help(d, msg, cat)
	case IntentSetup:
		d.State.Flow = &Flow{Step: StepHaveServer, Said: sentence}
		d.Reply = "I can help you set up a new tool. Do you already have an MCP server, or do you need to add one first?"
		d.Choices = []Choice{{"I need to add one", "I need to add one"}, {"I already have one", "I already have one"}}
		return d
	case IntentAddServer:
		d = addServer(d, op)
		if d.Do != nil && op.Ask != "" {
			return confirmOrDo(Decision{State: d.State}, *d.Do, cat)
		}
		return d
	case IntentListServers, IntentListTools, IntentRefresh, IntentListPreference, IntentPreference, IntentForget:
		if u.Intent == IntentListTools {
			op.IDs = u.Servers
		}
		if (u.Intent == IntentPreference || u.Intent == IntentForget) && op.Query == "" {
			d.Reply = "Which tools should I enable when they are discovered? For example: \"always enable new weather tools\"."
			return d
		}
		if op.Ask != "" {
			return confirmOrDo(d, op, cat)
		}
		d.Do = &op
		return d
	case IntentFindTool, IntentSuggestTools:
		return found(d, u, cat)
	}
	ids, kind, listed, past, more := targets(u, st)
	if past != 0 {
		return pastShown(d, past, st)
	}
	if kind != "" {
		op.Kind = kind
		op.Intent = retargetKind(op.Intent, kind)
		if kind == "tool" {
			op.Intent = toolTwin(op.Intent)
		}
	}
	if more > 0 {
		unshown(&op, more, ids, st, cat)
	}
	if u.ExceptRef != "" && !readOnly(op.Intent) {
		return except(d, op, u, ids, listed, st, cat)
	}
	if len(ids) == 0 {
		return missing(d, op, u, cat)
	}
	if missingArg(&d, op) {
		return d
	}
	if listed {
		ids = fromShown(&op, ids, st.Seen)
	}
	op.IDs = ids
	if op.Ask == "" && !readOnly(op.Intent) && op.Intent != IntentTestTool && len(u.Described) > 0 && !listed &&
		slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(u.Described, id) }) {
		// A hostile server may describe its tool as "stock quotes": a change to a tool
		// found by such words alone is put to the person with its name and server.
		op.Ask = AskDescribed
	}
	if op.Intent == IntentConfigureTool {
		op.Settings = narrowSettings(op.Settings, op.Sentence, ids, cat)
	}
	if len(ids) > 1 && !u.All && !fromList(u, st) {
		op.Choose = true
		d.State.Pending = &op
		d.State.shows(op.Kind, ids, 0, "", nil)
		what := op.Kind + "s"
		if op.Kind == "" {
			what = "servers and tools"
		}
		d.Reply = fmt.Sprintf("I found %d %s that match %q. Did you mean:", len(ids), what, u.Ref)
		if len(ids) > MaxChoices {
			// Thousands of choices help nobody (and each is a form on the page).
			op.IDs = ids[:MaxChoices]
			d.State.shows(op.Kind, op.IDs, len(ids)-MaxChoices, serverOf(cat, ids[MaxChoices]), nil)
			d.Reply = fmt.Sprintf("I found %d %s that match %q; here are the first %d (say more of the name to narrow it down). Did you mean:",
				len(ids), what, u.Ref, MaxChoices)
		}
		op.Seen = seenOf(cat, op.IDs)
		d.State.Seen = op.Seen
		d.Choices = choicesFor(cat, op.Kind, op.IDs)
		return d
	}
	return confirmOrDo(d, op, cat)
}

// answersContext reports whether a message answers what the conversation showed last
// (a yes or no, a position in a list, "all of them", a step of a set-up) rather than
// naming what it is about.
func answersContext(u Understanding, st State, sentence string) bool {
	switch {
	case u.Intent == IntentYes || u.Intent == IntentNo || u.Intent == IntentPick:
		return true
	case u.Pick != 0 && u.Ref == "", fromList(u, st):
		return true
	case st.Pending != nil && st.Pending.Choose && u.Intent == IntentUnknown:
		return true
	case st.Flow != nil && answersFlow(u, st.Flow.Step, sentence):
		return true
	}
	return false
}

// changes reports whether an intent does something (a new request, not an answer).
func changes(in Intent) bool {
	switch in {
	case IntentPick, IntentUnknown, IntentYes, IntentNo, IntentCancel:
		return false
	}
	return true
}

// fromList reports whether the targets are the last list's, chosen as a whole ("them").
func fromList(u Understanding, st State) bool {
	return len(u.Servers) == 0 && len(u.Tools) == 0 && u.Ref == "" && u.All && len(st.LastIDs) > 0
}

// shows records the list a reply shows: its kind, the entries shown (at most
// MaxChoices), how many it had past them and the server of the first of those (tools),
// and the definition hash of each tool shown.
func (st *State) shows(kind string, shown []string, more int, moreOn string, seen map[string]string) {
	st.LastKind, st.LastIDs, st.LastMore, st.LastMoreOn, st.Seen = kind, shown, more, moreOn, seen
}

// shownOf is the entries the last list showed and how many it had past them. A state
// saved when LastIDs kept every entry of a list is read as the list showed it: its
// first MaxChoices.
func shownOf(st State) (shown []string, more int) {
	shown, more = st.LastIDs, st.LastMore
	if len(shown) > MaxChoices {
		shown, more = shown[:MaxChoices:MaxChoices], more+len(shown)-MaxChoices
	}
	return shown, more
}

// pastShown refuses a position past the entries the last list showed ("disable number
// 300" of a list that showed 25): whatever it would act on, the person never saw.
func pastShown(d Decision, pick int, st State) Decision {
	shown, more := shownOf(st)
	one, many := "entry", "entries"
	switch st.LastKind {
	case "tool", "server":
		one, many = st.LastKind, st.LastKind+"s"
	}
	d.State.Pending = nil
	d.Reply = fmt.Sprintf("Number %d was not among the %d %s shown here, so I did nothing. Say a number from 1 to %d, or name the %s.",
		pick, len(shown), many, len(shown), one)
	if len(shown) == 1 {
		d.Reply = fmt.Sprintf("Number %d was not among the %s shown here (there was one), so I did nothing. Say \"the first one\", or name the %s.",
			pick, many, one)
	}
	switch {
	case more > 0 && st.LastKind == "tool" && st.LastMoreOn != "":
		d.Reply += fmt.Sprintf(" The list had %d more that were not shown: name the one you mean, or narrow the list (for example \"show me the tools on %s\").", more, st.LastMoreOn)
	case more > 0:
		d.Reply += fmt.Sprintf(" The list had %d more that were not shown: name the one you mean.", more)
	}
	return d
}

// unshown marks op as acting on "all of them" of a list that did not show more of its
// entries: an enable, details or a test take the ones shown and say how many were left
// out; any other change is refused (Op.Unshown), as it would change entries never seen.
func unshown(op *Op, more int, ids []string, st State, cat *Catalogue) {
	switch {
	case op.Intent == IntentEnableTool || op.Intent == IntentTestTool || readOnly(op.Intent):
		op.LeftOut += more
		if op.LeftOn = st.LastMoreOn; op.LeftOn == "" && len(ids) > 0 {
			op.LeftOn = serverOf(cat, ids[len(ids)-1])
		}
	default:
		op.Unshown = more
	}
}

// toolTwin moves a server intent that only exists for servers back to the tools when the
// target turned out to be tools (from the last list).
func toolTwin(in Intent) Intent {
	switch in {
	case IntentEnableServer:
		return IntentEnableTool
	case IntentDisableServer, IntentRemoveServer:
		return IntentDisableTool
	case IntentServerStatus:
		return IntentToolDetails
	}
	return in
}

// targets are what an op acts on: the servers or tools named, else the last list's
// entry the message points at ("the first one", "all of them"). A message that names
// something the catalogue does not have ("all tools on ev3", "the first jira tool") is
// not about the last list: it finds nothing, and the reply says so. past is a position
// past the entries the last list showed (nothing is targeted), and more, for "all of
// them", how many entries the list had past those it showed.
func targets(u Understanding, st State) (ids []string, kind string, listed bool, past, more int) {
	switch {
	case len(u.Tools) > 0 && (u.Kind != "server" || len(u.Servers) == 0):
		if len(u.Servers) > 0 && u.Kind == "" {
			return append(append([]string{}, u.Servers...), u.Tools...), "", false, 0, 0 // both kinds: ask
		}
		return u.Tools, "tool", false, 0, 0
	case len(u.Servers) > 0:
		return u.Servers, "server", false, 0, 0
	case u.OnServer != "" && u.All:
		return nil, "", false, 0, 0
	case u.Ref != "":
		return nil, "", false, 0, 0
	case len(st.LastIDs) > 0 && u.Pick != 0:
		shown, _ := shownOf(st)
		i := u.Pick - 1
		if u.Pick < 0 {
			i = len(shown) - 1
		}
		if i >= 0 && i < len(shown) {
			return []string{shown[i]}, st.LastKind, true, 0, 0
		}
		if u.Pick > 0 {
			return nil, "", false, u.Pick, 0
		}
	case len(st.LastIDs) > 0 && refersBack(u):
		shown, more := shownOf(st)
		return shown, st.LastKind, true, 0, more
	}
	return nil, "", false, 0, 0
}

// seenOf is the definition hash of each of the tools ids as the catalogue has them: what
// a list that shows them stands for.
func seenOf(cat *Catalogue, ids []string) map[string]string {
	var out map[string]string
	for _, id := range ids {
		if t, ok := cat.tool(id); ok && t.Hash != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[id] = t.Hash
		}
	}
	return out
}

// fromShown marks op as acting on entries of the list the conversation showed, with the
// definition hash each had then (seen, State.Seen). An enable takes only the tools the
// list showed: "all of them" of a list of 300 showed 25, and the rest were never seen. A
// state saved before lists kept their hashes has none, and is taken as it is.
func fromShown(op *Op, ids []string, seen map[string]string) []string {
	op.Listed = true
	if seen == nil {
		return ids
	}
	op.Seen = map[string]string{}
	var shown []string
	for _, id := range ids {
		if h, ok := seen[id]; ok {
			op.Seen[id] = h
			shown = append(shown, id)
		}
	}
	if op.Intent == IntentEnableTool && len(shown) > 0 && len(shown) < len(ids) {
		op.LeftOut += len(ids) - len(shown)
		return shown
	}
	return ids
}

// asksFirst reports whether a question about an intent is answered with what it would do
// and a yes: every change but a test (running its saved cases is how "is X working?" is
// answered; medium and high cases ask on their own) and a set-up (which asks anyway).
func asksFirst(in Intent) bool {
	return !readOnly(in) && in != IntentTestTool && in != IntentSetup && in != IntentYes
}

// redacted is s with what looks like a secret masked, for a reply that quotes it.
func redacted(s string) string {
	s, _ = redact(s)
	return s
}

// except answers a change to a set with some left out ("enable all the files tools
// except delete_file"): the difference when the set and what is left out are both
// known, put to the person with what is left out; otherwise nothing is done and the
// reply says what to say instead.
func except(d Decision, op Op, u Understanding, ids []string, listed bool, st State, cat *Catalogue) Decision {
	ref := redacted(u.ExceptRef)
	what := "tools"
	if op.Kind == "server" || serverIntent(op.Intent) {
		what = "servers"
	}
	switch {
	case len(u.Except) == 0:
		d.Reply = fmt.Sprintf("I couldn't find what %q names, so I can't leave it out: nothing was changed. Name the %s to leave out exactly, or name the ones to change.", ref, what)
		return d
	case len(ids) == 0:
		d.Reply = fmt.Sprintf("I can't tell which %s you mean to leave %q out of, so nothing was changed. Say \"show me all %s\" (or \"show me the tools on files\") first and then \"… all of them except %s\", or name the ones to change.",
			what, ref, what, ref)
		return d
	case len(ids) > 1 && !u.All && !listed:
		d.Reply = fmt.Sprintf("%q fits %d %s. Say \"all\" if you mean all of them except %q, or name the ones to change: nothing was changed.", redacted(u.Ref), len(ids), what, ref)
		return d
	}
	if missingArg(&d, op) {
		return d
	}
	if listed {
		ids = fromShown(&op, ids, st.Seen)
	}
	kept := without(ids, u.Except)
	if len(kept) == 0 {
		d.Reply = fmt.Sprintf("Leaving out %q leaves nothing to change, so nothing was changed.", ref)
		return d
	}
	op.IDs, op.Ask = kept, AskExcept
	if op.Intent == IntentConfigureTool {
		op.Settings = narrowSettings(op.Settings, op.Sentence, kept, cat)
	}
	return exceptConfirm(d, op, without(ids, kept), ref, cat)
}

// exceptConfirm asks for a yes to op, whose targets are a set less the ids left out.
func exceptConfirm(d Decision, op Op, left []string, ref string, cat *Catalogue) Decision {
	bound(&op, cat)
	op.Confirm = true
	d.State.Pending = &op
	out := fmt.Sprintf("%q is not among them, so nothing is left out", ref)
	if len(left) > 0 {
		out = "leaving out " + labels(cat, left)
	}
	d.Reply = fmt.Sprintf("I'll %s (%d in all), %s. Say yes to confirm.", describeOp(op, cat), len(op.IDs), out)
	d.Choices = []Choice{{"Yes", "yes"}, {"No", "no"}}
	return d
}

// facts says what the person may want to know before a change they asked about: the
// state and risk of the tools, the state of the servers (the first few).
func facts(op Op, cat *Catalogue) string {
	var out []string
	for _, id := range op.IDs[:min(len(op.IDs), 3)] {
		if t, ok := cat.tool(id); ok {
			out = append(out, fmt.Sprintf(" '%s' on %s is %s now and rated %s risk.", t.Name, t.Server, t.State, t.Risk))
			continue
		}
		for _, sv := range cat.Servers {
			if sv.ID == id {
				state := "enabled"
				if !sv.Enabled {
					state = "disabled"
				}
				out = append(out, fmt.Sprintf(" '%s' is %s and %s now.", sv.Name, state, sv.Status))
			}
		}
	}
	return strings.Join(out, "")
}

var backRE = regexp.MustCompile(` (?:them|those|these|it|that one|this one) `)

func refersBack(u Understanding) bool {
	return u.Ref == "" && backRE.MatchString(" "+u.Ref+" ") || u.All
}

// negatedVerb says what a negated intent would have done, for the reply.
func negatedVerb(in Intent) string {
	if v, ok := map[Intent]string{IntentAddServer: "add a server", IntentRemoveServer: "remove it", IntentEnableServer: "enable it",
		IntentDisableServer: "disable it", IntentEnableTool: "enable it", IntentDisableTool: "disable it",
		IntentConfigureTool: "change its settings", IntentTestTool: "test it", IntentDiscover: "discover its tools",
		IntentRefresh: "refresh the tools", IntentSetRisk: "change its risk", IntentTag: "tag it", IntentUntag: "remove its tags",
		IntentSetCategory: "change its category", IntentGrant: "give that access", IntentRevoke: "take that access away",
		IntentPreference: "save that preference", IntentForget: "forget that preference", IntentSetup: "start a set-up"}[in]; ok {
		return v
	}
	return "do that"
}

// nearServers asks which server a name one letter off several of them means: each
// choice is the message again with that server's name, read afresh when sent.
func nearServers(d Decision, u Understanding, sentence string, cat *Catalogue) Decision {
	var names []string
	written := originalCase(sentence, u.NearName)
	for _, id := range u.NearServers {
		n := nameOf2(cat, id)
		names = append(names, n)
		d.Choices = append(d.Choices, Choice{Label: n, Target: strings.Replace(sentence, written, n, 1)})
	}
	d.Reply = fmt.Sprintf("There is no server named %q, and it is one letter off %d servers (%s). Which one did you mean? Nothing was changed.",
		u.NearName, len(names), strings.Join(names, ", "))
	return d
}

// missing answers an op whose target was not found.
func missing(d Decision, op Op, u Understanding, cat *Catalogue) Decision {
	what := "tool"
	if op.Kind == "server" || serverIntent(op.Intent) {
		what = "server"
	}
	if u.Ref == "" {
		if u.Pick != 0 {
			d.Reply = "I haven't shown a list to choose from yet. Say \"show me all " + what + "s\" first, or name the " + what + "."
			return d
		}
		d.Reply = fmt.Sprintf("Which %s? Name it, for example: %q.", what, example(op.Intent, what, cat))
		return d
	}
	d.Reply = fmt.Sprintf("❌ I couldn't find a %s named %q. Would you like to see a list of available %ss?", what, u.Ref, what)
	list := IntentListTools
	if what == "server" {
		list = IntentListServers
	}
	d.State.Pending = &Op{Intent: list, Confirm: true, Sentence: op.Sentence}
	d.Choices = []Choice{{"Yes, show them", "yes"}, {"No", "no"}}
	return d
}

// missingArg asks for what an op cannot do without (the risk level, the tags...).
func missingArg(d *Decision, op Op) bool {
	switch {
	case op.Intent == IntentSetRisk && op.Risk == "":
		d.Reply = "Which risk level: low, medium or high? For example: \"make translate_text high risk\"."
	case (op.Intent == IntentTag || op.Intent == IntentUntag) && len(op.Tags) == 0:
		d.Reply = "Which tags? For example: \"tag get_forecast with beta\" or \"remove the beta tag from get_forecast\"."
	case op.Intent == IntentSetCategory && op.Category == "":
		d.Reply = "Which category? For example: \"put get_forecast in the weather category\"."
	case (op.Intent == IntentGrant || op.Intent == IntentRevoke) && op.Username == "":
		d.Reply = "Who? Name the person, for example: \"let bob use get_forecast\"."
	case op.Intent == IntentConfigureTool && len(op.Settings) == 0:
		d.Reply = "What should I set? Name the parameter and its value, for example: \"set units to metric for get_forecast\" or \"configure get_forecast with units=metric\"."
	default:
		return false
	}
	return true
}

func example(in Intent, what string, cat *Catalogue) string {
	name := "get_forecast"
	if what == "server" {
		name = "weather"
		if len(cat.Servers) > 0 {
			name = cat.Servers[0].Name
		}
	} else if len(cat.Tools) > 0 {
		name = cat.Tools[0].Name
	}
	verb := map[Intent]string{IntentEnableTool: "enable", IntentDisableTool: "disable", IntentEnableServer: "enable",
		IntentDisableServer: "disable", IntentRemoveServer: "remove", IntentServerStatus: "what's the status of",
		IntentToolDetails: "tell me about", IntentTestTool: "test", IntentDiscover: "discover new tools on",
		IntentConfigureTool: "configure", IntentSetRisk: "make", IntentTag: "tag", IntentUntag: "untag",
		IntentSetCategory: "put", IntentGrant: "let bob use", IntentRevoke: "stop bob from using"}[in]
	if verb == "" {
		verb = "tell me about"
	}
	s := verb + " " + name
	switch in {
	case IntentSetRisk:
		s += " high risk"
	case IntentTag:
		s += " with beta"
	case IntentSetCategory:
		s += " in the weather category"
	case IntentConfigureTool:
		s += " with units=metric"
	}
	return s
}

// choose resolves the answer to a numbered question and goes on with the pending op.
// pickedByName is what of the choices p offers u names: by a server's or a tool's name,
// or by the servers and tools the message names.
func pickedByName(u Understanding, p *Op, cat *Catalogue) []string {
	var picked []string
	ref := strings.ToLower(strings.TrimSpace(u.Ref))
	for _, id := range p.IDs {
		if ref != "" && (strings.EqualFold(serverOf(cat, id), ref) || strings.EqualFold(nameOf2(cat, id), ref)) {
			picked = append(picked, id)
		}
	}
	for _, id := range append(u.Tools, u.Servers...) {
		if slices.Contains(p.IDs, id) && !slices.Contains(picked, id) {
			picked = append(picked, id)
		}
	}
	return picked
}

// picks reports whether a message the rules understand no intent in picks one of the
// choices p offers (or all of them), as choose reads it: such an answer is the rules'
// to read, and one that picks none of them is a new request in other words.
func picks(u Understanding, p *Op, cat *Catalogue) bool {
	return u.Pick != 0 || u.All || u.ExceptRef != "" || len(pickedByName(u, p, cat)) > 0
}

func choose(d Decision, p *Op, u Understanding, cat *Catalogue) Decision {
	var picked []string
	switch {
	case u.ExceptRef != "" && (len(u.Except) == 0 || !u.All):
		// "All except X" where X names nothing, or an exception to one pick.
		d.Reply = fmt.Sprintf("I can't tell what to leave out with %q, so nothing was changed. Pick one by its number, or say \"all of them except\" and the exact name.", redacted(u.ExceptRef))
		d.Choices = choicesFor(cat, p.Kind, p.IDs)
		return d
	case u.ExceptRef != "":
		picked = without(p.IDs, u.Except)
		if len(picked) == 0 || len(picked) == len(p.IDs) {
			d.Reply = fmt.Sprintf("%q leaves %d of the %d, so nothing was changed. Pick one by its number, or name the ones to leave out exactly.", redacted(u.ExceptRef), len(picked), len(p.IDs))
			d.Choices = choicesFor(cat, p.Kind, p.IDs)
			return d
		}
	case u.Pick > 0 && u.Pick <= len(p.IDs):
		picked = []string{p.IDs[u.Pick-1]}
	case u.Pick < 0:
		picked = []string{p.IDs[len(p.IDs)-1]}
	case u.All && p.Kind == "" && mixedKinds(cat, p.IDs):
		d.Reply = "These are servers and tools, which cannot be changed as one: pick one of them by its number."
		d.Choices = choicesFor(cat, p.Kind, p.IDs)
		return d
	case u.All:
		picked = p.IDs
	default:
		picked = pickedByName(u, p, cat)
	}
	if len(picked) != 1 && !u.All {
		d.Reply = fmt.Sprintf("Please pick one of the %d: say its number (1 to %d), or \"never mind\".", len(p.IDs), len(p.IDs))
		d.Choices = choicesFor(cat, p.Kind, p.IDs)
		return d
	}
	op := *p
	op.Choose = false
	op.IDs = picked
	op.Listed = true // picked from the choices shown
	if op.Ask == AskDescribed {
		op.Ask = "" // the choices named each tool and its server
	}
	if u.ExceptRef != "" {
		op.Ask = AskExcept
		d.State.Pending = nil
		return exceptConfirm(d, op, without(p.IDs, picked), redacted(u.ExceptRef), cat)
	}
	if op.Intent == IntentConfigureTool {
		op.Settings = narrowSettings(op.Settings, op.Sentence, picked, cat)
	}
	if op.Kind == "" { // the choice was between servers and tools: the pick says which
		op.Kind = "tool"
		if isServer(cat, picked[0]) {
			op.Kind = "server"
		}
		op.Intent = retargetKind(op.Intent, op.Kind)
		if op.Kind == "tool" {
			op.Intent = toolTwin(op.Intent)
		}
	}
	d.State.Pending = nil
	if op.ByModel && !readOnly(op.Intent) && !destructive(op) {
		// The language model's reading is still a proposal after the pick: the person
		// says yes to what it will do (destructive ops ask below in any case).
		return proposeModel(d, op, cat)
	}
	return confirmOrDo(d, op, cat)
}

// proposeModel puts a change read by the language model to the person first; their yes
// runs it, audited as read by the model.
func proposeModel(d Decision, op Op, cat *Catalogue) Decision {
	op.Confirm, op.ByModel, op.Choose = true, true, false
	d.Do, d.State.Pending = nil, &op
	d.Reply = "I read this, with the help of the language model, as: " + describeOp(op, cat) + ". Shall I do that?"
	d.Choices = []Choice{{"Yes", "yes"}, {"No", "no"}}
	return d
}

// confirmOrDo asks for a yes before a destructive op, and decides to do any other.
func confirmOrDo(d Decision, op Op, cat *Catalogue) Decision {
	bound(&op, cat)
	if destructive(op) || op.Ask != "" {
		op.Confirm = true
		d.State.Pending = &op
		d.Reply = confirmText(op, cat)
		d.Choices = []Choice{{"Yes", "yes"}, {"No", "no"}}
		return d
	}
	d.Do = &op
	return d
}

// bound keeps details and tests to the first MaxChoices tools: of "all of them" they
// would be one stored reply as long as every description (and one turn running every
// tool's cases).
func bound(op *Op, cat *Catalogue) {
	if (op.Intent == IntentToolDetails || op.Intent == IntentTestTool) && len(op.IDs) > MaxChoices {
		op.LeftOut, op.LeftOn = len(op.IDs)-MaxChoices, serverOf(cat, op.IDs[MaxChoices])
		op.IDs = op.IDs[:MaxChoices:MaxChoices]
	}
}

// leftOut says how many tools bound left out and how to name fewer ("" when none were).
func leftOut(op *Op) string {
	if op.LeftOut == 0 {
		return ""
	}
	verb := "tell me about"
	if op.Intent == IntentTestTool {
		verb = "test"
	}
	return fmt.Sprintf("\nThat is the first %d; %d more were left out. Name fewer at a time, for example \"%s all tools on %s\".",
		len(op.IDs), op.LeftOut, verb, op.LeftOn)
}

// destructive ops ask for a yes first.
func destructive(op Op) bool {
	switch op.Intent {
	case IntentRemoveServer, IntentRevoke:
		return true
	case IntentDisableTool:
		return len(op.IDs) > 1
	case IntentDisableServer:
		return len(op.IDs) > 1
	}
	return false
}

func confirmText(op Op, cat *Catalogue) string {
	names := labels(cat, op.IDs)
	switch op.Ask {
	case AskQuestion:
		return "You asked about this rather than asking me to do it, so nothing was changed. If you say yes, I will " +
			describeOp(op, cat) + "." + facts(op, cat) + " Shall I do it?"
	case AskDescribed:
		return fmt.Sprintf("I found %s only by what its server wrote about it (its title or description), not by its name: "+
			"make sure it is the one you mean. Shall I %s? Say yes to confirm.", names, describeOp(op, cat))
	}
	switch op.Intent {
	case IntentRemoveServer:
		return fmt.Sprintf("Remove the server %s and all its tools? This cannot be undone. Say yes to remove it.", names)
	case IntentRevoke:
		return fmt.Sprintf("Stop %s from using %s? Say yes to confirm.", op.Username, names)
	case IntentDisableTool:
		return fmt.Sprintf("Disable %d tools (%s)? Say yes to confirm.", len(op.IDs), names)
	}
	return fmt.Sprintf("Do that to %s? Say yes to confirm.", names)
}

// labels names ids for a sentence: "get_forecast on weather, search on ev2".
func labels(cat *Catalogue, ids []string) string {
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		if i == 8 {
			out = append(out, fmt.Sprintf("and %d more", len(ids)-8))
			break
		}
		out = append(out, label(cat, id))
	}
	return strings.Join(out, ", ")
}

func label(cat *Catalogue, id string) string {
	for _, s := range cat.Servers {
		if s.ID == id {
			return "'" + s.Name + "'"
		}
	}
	if t, ok := cat.tool(id); ok {
		return "'" + t.Name + "' on " + t.Server
	}
	return id
}

func mixedKinds(cat *Catalogue, ids []string) bool {
	servers := 0
	for _, id := range ids {
		if isServer(cat, id) {
			servers++
		}
	}
	return servers > 0 && servers < len(ids)
}

func isServer(cat *Catalogue, id string) bool {
	for _, s := range cat.Servers {
		if s.ID == id {
			return true
		}
	}
	return false
}

func serverOf(cat *Catalogue, id string) string {
	return toolByID(cat, id).Server
}

func nameOf2(cat *Catalogue, id string) string {
	for _, s := range cat.Servers {
		if s.ID == id {
			return s.Name
		}
	}
	return toolByID(cat, id).Name
}

// choicesFor numbers ids as choices: "get_forecast on weather — Get the forecast".
// MaxChoices bounds the choices of one reply.
const MaxChoices = 25

func choicesFor(cat *Catalogue, kind string, ids []string) []Choice {
	out := make([]Choice, 0, len(ids))
	for i, id := range ids {
		l := strings.Replace(label(cat, id), "'", "", 2) // "'echo' on ev1" → "echo on ev1"
		if t, ok := cat.tool(id); ok && t.Description != "" {
			l += " — " + clip(t.Description, 80)
		}
		out = append(out, Choice{Label: strconv.Itoa(i+1) + ". " + l, Target: strconv.Itoa(i + 1)})
	}
	return out
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// addServer checks the URL of a new server (seed 004's invalid-URL reply) and adds it, or
// asks for what is missing through the guided flow.
func addServer(d Decision, op Op) Decision {
	if op.URL == "" {
		d.State.Flow = &Flow{Step: StepURL, Name: op.Name, Said: op.Sentence}
		d.Reply = "What's the URL of the MCP server? For example: `https://example.com/mcp`."
		return d
	}
	if msg := badURL(op.URL); msg != "" {
		d.Reply = msg
		return d
	}
	if serverName(op.Name) == "" {
		op.Name = nameFromURL(op.URL)
	}
	d.Do = &op
	return d
}

// serverName is a name as the registry takes it (lower-case letters, digits and '-', at
// most 48): seed 004's "Weather API" is registered as weather-api.
func serverName(typed string) string {
	n := strings.Trim(nameCleanRE.ReplaceAllString(strings.ToLower(typed), "-"), "-")
	if len(n) > 48 {
		n = strings.TrimRight(n[:48], "-")
	}
	return n
}

// badURL says why u is not an MCP server's URL ("" when it is one).
func badURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Sprintf("The URL '%s' doesn't appear to be valid. URLs should start with http:// or https:// and include a domain name. For example: `https://example.com/mcp`", quoteURL(u))
	}
	if k, ok := registry.SecretInURL(u); ok {
		// Refused here, as the registry would refuse it, so that it is never kept in the
		// conversation's state (a set-up's URL, a proposal waiting for a yes).
		where := "its path"
		if k != "" {
			where = "its query (" + k + ")"
		}
		return fmt.Sprintf("The URL '%s' carries a secret in %s, and URLs are stored and shown in plain text: "+
			"add the server on the Servers page and send the secret as a header or with Authentication instead, which are stored encrypted. "+
			"Nothing was kept; give me the URL without the secret to go on.", quoteURL(u), where)
	}
	return ""
}

// quoteURL is u as a reply may quote it: a password in it masked, and masked whole when
// the rest still looks like a secret (?api_key=…), as the kept message is.
func quoteURL(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		if _, ok := p.User.Password(); ok {
			p.User = url.UserPassword(p.User.Username(), "***")
			u = p.String()
		}
	}
	if masked, ok := redact(u); ok {
		return masked
	}
	return u
}

var nameCleanRE = regexp.MustCompile(`[^a-z0-9]+`)

// nameFromURL is a server name from a URL's host: https://api.weather.example.com/mcp →
// "weather".
func nameFromURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "server"
	}
	host := p.Hostname()
	for _, part := range strings.Split(host, ".") {
		switch part {
		case "www", "api", "mcp", "app", "localhost", "127", "0", "1":
			continue
		}
		if n := strings.Trim(nameCleanRE.ReplaceAllString(strings.ToLower(part), "-"), "-"); n != "" {
			return n
		}
	}
	if port := p.Port(); port != "" {
		return "server-" + port
	}
	return "server"
}

// notDiscovered is the answer to a no to "discover its tools?".
func notDiscovered(cat *Catalogue, serverID string) string {
	return "OK, I didn't discover its tools. Say \"discover tools on " + nameOf2(cat, serverID) + "\" when you want them."
}

// answersFlow reports whether a message answers the guided set-up's question rather than
// asking for something new.
func answersFlow(u Understanding, step, sentence string) bool {
	switch step {
	case StepWhichTools:
		// Numbers, "all of them" or "none" only: a sentence that holds a digit (a URL's
		// port, "what does number 2 do?") is not a choice of tools.
		return u.Intent == IntentNo || allTools(u, sentence) || whichToolsRE.MatchString(strings.ToLower(sentence)) ||
			u.Intent == IntentUnknown && (len(u.Tools) > 0 || u.All)
	case StepURL:
		return u.Intent == IntentUnknown || u.Intent == IntentAddServer
	case StepDiscover:
		// "Discover its tools?" is answered by a yes ("yes, enable all of them" too, or
		// "yes, discover them") or by numbers said too early (asked again).
		return u.Intent == IntentDiscover && len(u.Servers) == 0 || allTools(u, sentence) ||
			whichToolsRE.MatchString(strings.ToLower(sentence)) || answersFlow(u, "", sentence)
	}
	switch u.Intent {
	case IntentUnknown, IntentYes, IntentNo, IntentPick:
		return true
	}
	return false
}

// allTools reports whether a message asks to enable every tool the set-up found: "all of
// them", "enable them all". "Disable all of them", "no, not all of them" or "don't enable
// all" do not.
func allTools(u Understanding, sentence string) bool {
	if !u.All || len(u.Tools) > 0 || negatedRE.MatchString(" "+strings.ToLower(sentence)+" ") {
		return false
	}
	switch u.Intent {
	case IntentUnknown, IntentPick, IntentEnableTool, IntentYes:
		return true
	}
	return false
}

// negatedRE finds a negation in a sentence (padded with spaces).
var negatedRE = regexp.MustCompile(`[^a-z](?:no|not|none|never|nope|nah|don'?t|doesn'?t|won'?t|except|but|disable|without)[^a-z]`)

// whichToolsRE is an answer of numbers: "1 and 3", "2, 4", "#1".
var whichToolsRE = regexp.MustCompile(`^\s*(?:(?:numbers?|#)\s*)?\d+(?:\s*(?:,|and|&|\+)?\s*#?\d+)*\s*(?:please)?\s*$`)

// flowStep moves the guided set-up on: URL → name → add → discover → which tools.
func flowStep(sentence string, u Understanding, st State, cat *Catalogue) Decision {
	d := Decision{State: st}
	f := *st.Flow
	f.Said = clip(strings.TrimPrefix(f.Said+" → "+sentence, " → "), 500)
	d.State.Flow = &f
	switch f.Step {
	case StepHaveServer:
		// "Do you already have an MCP server?": yes (or "I already have one") picks one
		// of them; no (or "I need to add one") adds one.
		low := strings.ToLower(sentence)
		if u.Intent == IntentYes || strings.Contains(low, "already") || strings.Contains(low, "have one") && !strings.Contains(low, "need") {
			f.Step = StepWhichServer
			d.Reply = "Which server? Say its name."
			for i, s := range cat.Servers {
				if !s.Builtin {
					d.Choices = append(d.Choices, Choice{Label: s.Name, Target: s.Name})
				}
				if i > 20 {
					break
				}
			}
			return d
		}
		f.Step = StepURL
		d.Reply = "What's the URL of the MCP server?"
		return d
	case StepWhichServer:
		id := serverByName(cat, strings.Trim(strings.TrimSpace(sentence), `"'.`))
		if id == "" && len(u.Servers) == 1 {
			id = u.Servers[0]
		}
		if id == "" {
			d.Reply = fmt.Sprintf("I couldn't find a server named %q. Say one of the names below, or \"never mind\".", sentence)
			return d
		}
		f.ServerID = id
		f.Step = StepWhichTools
		d.Do = &Op{Intent: IntentDiscover, Kind: "server", IDs: []string{id}, Sentence: f.Said}
		return d
	case StepURL:
		raw := u.URL
		if raw == "" {
			raw = strings.Trim(strings.TrimSpace(sentence), "`'\".")
		}
		if msg := badURL(raw); msg != "" {
			d.Reply = msg
			return d
		}
		f.URL = raw
		if f.Name != "" {
			d.Do = &Op{Intent: IntentAddServer, Kind: "server", URL: f.URL, Name: f.Name, Sentence: f.Said}
			return d
		}
		f.Step = StepName
		d.Reply = "What would you like to name this server?"
		d.Choices = []Choice{{nameFromURL(raw), nameFromURL(raw)}}
		return d
	case StepName:
		name := strings.Trim(strings.TrimSpace(sentence), "`'\".")
		switch {
		case u.Intent == IntentNo:
			// "No" to "what would you like to name it?" is not a name: it stops.
			d.State.Flow = nil
			d.Reply = "OK, I stopped setting up the server. Nothing was added."
			return d
		case serverName(name) == "" || u.Intent == IntentYes || u.Intent == IntentPick:
			// Nor is "yes" or "the first one": ask for the name again.
			d.Reply = "What would you like to name this server? Say the name, for example \"" + nameFromURL(f.URL) + "\"."
			d.Choices = []Choice{{nameFromURL(f.URL), nameFromURL(f.URL)}}
			return d
		}
		f.Name = name
		d.Do = &Op{Intent: IntentAddServer, Kind: "server", URL: f.URL, Name: f.Name, Sentence: f.Said}
		return d
	case StepDiscover:
		// The server was added and its tools not discovered yet: a yes discovers them
		// (which ones to enable is asked once they are listed); there is nothing to pick
		// from before that.
		switch {
		case u.Intent == IntentNo:
			d.State.Flow, d.State.Pending = nil, nil
			d.Reply = notDiscovered(cat, f.ServerID)
			return d
		case u.Intent == IntentYes || u.Intent == IntentDiscover || allTools(u, sentence):
			d.State.Pending = nil
			d.Do = &Op{Intent: IntentDiscover, Kind: "server", IDs: []string{f.ServerID}, Sentence: f.Said}
			return d
		}
		d.Reply = "I haven't discovered the tools of this server yet, so there is nothing to choose from. Shall I discover them now?"
		d.Choices = []Choice{{"Yes, discover them", "yes"}, {"Not now", "no"}}
		return d
	case StepWhichTools:
		var ids []string
		switch {
		case allTools(u, sentence):
			ids = f.ToolIDs
		case u.Intent == IntentNo:
			d.State.Flow = nil
			d.Reply = "OK, the tools stay as they are. You can enable them later on the Tools page or by asking me."
			return d
		case negatedRE.MatchString(" " + strings.ToLower(sentence) + " "):
			// "All but 3", "not 2": the numbers said are the ones not wanted; ask plainly.
		default:
			numbers := whichToolsRE.MatchString(strings.ToLower(sentence)) // "1 and 3", not a name holding digits
			for _, n := range numbersIn(sentence) {
				if numbers && n > len(f.ToolIDs) {
					// A tool past the ones listed was never seen here: none is enabled.
					d.Reply = fmt.Sprintf("Number %d was not among the %d tools shown here, so I enabled nothing. Say numbers from 1 to %d (\"1 and 3\"), \"all of them\", or \"none\".",
						n, len(f.ToolIDs), len(f.ToolIDs))
					return d
				}
				if n >= 1 && n <= len(f.ToolIDs) {
					ids = append(ids, f.ToolIDs[n-1])
				}
			}
			for _, id := range u.Tools {
				if slices.Contains(f.ToolIDs, id) && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
		if len(ids) == 0 {
			d.Reply = "Which ones? Say their numbers (\"1 and 3\"), \"all of them\", or \"none\"."
			return d
		}
		d.State.Flow = nil
		op := &Op{Intent: IntentEnableTool, Kind: "tool", Sentence: f.Said}
		// The tools as the set-up listed them: "all of them" is the ones it showed, each
		// enabled only if its definition is still the one shown.
		op.IDs = fromShown(op, ids, f.Seen)
		if allTools(u, sentence) {
			op.LeftOut += f.More // found but not listed: "all of them" is the ones listed
		}
		d.Do = op
		return d
	}
	d.State.Flow = nil
	d.Reply = notUnderstood(sentence)
	return d
}

var numRE = regexp.MustCompile(`\d+`)

func numbersIn(s string) []int {
	var out []int
	for _, m := range numRE.FindAllString(s, -1) {
		if n, err := strconv.Atoi(m); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// found answers find and suggest from the catalogue.
func found(d Decision, u Understanding, cat *Catalogue) Decision {
	if u.Query == "" {
		d.Reply = "What should the tool do? For example: \"do we have a tool for weather forecasts?\""
		return d
	}
	if len(u.Tools) == 0 {
		d.Reply = fmt.Sprintf("I found no tool for %q. Try other words, or say \"show me all tools\".", u.Query)
		return d
	}
	ids := u.Tools
	if len(ids) > 10 {
		ids = ids[:10]
	}
	more := ""
	if len(ids) < len(u.Tools) {
		more = serverOf(cat, u.Tools[len(ids)])
	}
	d.State.shows("tool", ids, len(u.Tools)-len(ids), more, seenOf(cat, ids))
	lead := "Yes: "
	if u.Intent == IntentSuggestTools {
		lead = "These could help: "
	}
	d.Reply = fmt.Sprintf("%s%d tool(s) match %q. Say \"tell me about the first one\" or \"enable the second one\".", lead, len(u.Tools), u.Query)
	d.Choices = choicesFor(cat, "tool", ids)
	for i := range d.Choices {
		d.Choices[i].Target = pickTarget("tell me about", i+1)
	}
	return d
}

// pickTarget is the message a choice sends: "tell me about the third one", and past
// the tenth "tell me about number 11" (which pickOf reads; "the 11 one" it did not).
func pickTarget(prefix string, n int) string {
	if n > 10 {
		return prefix + " number " + strconv.Itoa(n)
	}
	return prefix + " the " + ordinalWord(n) + " one"
}

func ordinalWord(n int) string {
	w := []string{"", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"}
	if n < len(w) {
		return w[n]
	}
	return strconv.Itoa(n)
}

// help is the progressive disclosure of seed 004: what one can do, then how, then an
// offer to guide (to those who may add a server: Catalogue.NoSetUp).
func help(d Decision, msg string, cat *Catalogue) Decision {
	t := " " + strings.ToLower(msg) + " "
	if strings.Contains(t, " server") && (strings.Contains(t, " add") || strings.Contains(t, " connect") || strings.Contains(t, " register")) ||
		strings.Contains(t, " set up") || strings.Contains(t, " setup") {
		if cat.NoSetUp != "" {
			d.Reply = "To add a server, one says something like \"Add a new MCP server at `https://example.com/mcp`\". You can't add one here, though: " + cat.NoSetUp + "."
			return d
		}
		d.Reply = "To add a server, you can say something like \"Add a new MCP server at `https://example.com/mcp`\". Would you like me to guide you through adding a server?"
		d.State.Pending = &Op{Intent: IntentSetup, Confirm: true, Sentence: strings.TrimSpace(msg)}
		d.Choices = []Choice{{"Yes please", "yes"}, {"No", "no"}}
		return d
	}
	if strings.Contains(t, " enable") || strings.Contains(t, " disable") || strings.Contains(t, " turn on") {
		d.Reply = "Say \"enable get_forecast\" or \"turn off the search tool on ev2\". If a name fits several tools I'll ask which one you mean."
		return d
	}
	d.Reply = "You can manage MCP servers and tools. For example, you can add servers, discover tools, enable/disable tools, and configure them. What would you like to do?"
	d.Choices = []Choice{{"Show me all servers", "show me all servers"}, {"Show me all tools", "show me all tools"}}
	if cat.NoSetUp == "" {
		d.Choices = append(d.Choices, Choice{"Set up a new tool", "I want to set up a new tool"})
	}
	return d
}

func notUnderstood(msg string) string {
	return fmt.Sprintf("I didn't understand %q. You can say things like \"show me all tools\", \"enable get_forecast\", \"add a new MCP server at https://example.com/mcp\", or \"help\".", strings.TrimSpace(msg))
}

// describeOp says what an op will do, for a confirmation: "disable 'get_forecast' on
// weather", "add a server at "https://…", registered as "stocks"". A language model's
// proposal is asked through it, so every word that is not the catalogue's own (a name,
// URL, tag, category, value or preference) is quoted with %q, and a server by the name
// it will be registered under: a proposal's text must not read as the question's.
func describeOp(op Op, cat *Catalogue) string {
	what := labels(cat, op.IDs)
	switch op.Intent {
	case IntentAddServer:
		return fmt.Sprintf("add a server at %q, registered as %q", quoteURL(op.URL), registeredName(op.Name, op.URL))
	case IntentRemoveServer:
		return "remove the server " + what
	case IntentEnableServer, IntentEnableTool:
		return "enable " + what
	case IntentDisableServer, IntentDisableTool:
		return "disable " + what
	case IntentConfigureTool:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(op.Settings)) {
			parts = append(parts, k+" = "+quoted(op.Settings[k], maxQuoted))
		}
		return "set " + strings.Join(parts, ", ") + " on " + what
	case IntentTestTool:
		return "run the test cases of " + what
	case IntentDiscover:
		return "discover the tools of " + what
	case IntentRefresh:
		return "discover the tools of every enabled server"
	case IntentSetRisk:
		return "make " + what + " " + strings.ToLower(op.Risk) + " risk"
	case IntentTag:
		return "tag " + what + " with " + quotedList(op.Tags)
	case IntentUntag:
		return "remove the tags " + quotedList(op.Tags) + " from " + what
	case IntentSetCategory:
		return "put " + what + " in the category " + quoted(op.Category, maxQuoted)
	case IntentGrant:
		return "let " + op.Username + " use " + what
	case IntentRevoke:
		return "stop " + op.Username + " from using " + what
	case IntentPreference:
		return "enable new tools about " + quoted(op.Query, maxQuoted) + " automatically when they are discovered"
	case IntentForget:
		return "stop enabling new tools about " + quoted(op.Query, maxQuoted) + " automatically"
	case IntentSetup:
		return "start the guided set-up"
	}
	return string(op.Intent) + " " + what
}

// registeredName is the name a server added with the typed name and URL is registered
// under (service.go addServer): the typed one as the registry takes it, else one from the
// URL's host.
func registeredName(typed, u string) string {
	if n := serverName(typed); n != "" {
		return n
	}
	return nameFromURL(u)
}

// maxQuoted bounds a value quoted back in a question (a model's proposal may carry 8 KiB).
const maxQuoted = 200

// quoted is s in Go quotes (%q: a quote or line break in it cannot end the quotation),
// cut to n characters with "…" after the closing quote.
func quoted(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return fmt.Sprintf("%q…", string(r[:n]))
	}
	return fmt.Sprintf("%q", s)
}

func quotedList(ss []string) string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, quoted(s, maxQuoted))
	}
	return strings.Join(out, ", ")
}
