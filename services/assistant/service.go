package assistant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Service runs the assistant: it reads the catalogue the person may see, understands and
// decides, does what was decided through the same services and permission checks as the
// pages (each act audited with the sentence that asked for it), and keeps the
// conversation.
type Service struct {
	pool     *pgxpool.Pool
	auth     *auth.Service
	registry *registry.Service
	tools    *tools.Service
	mcp      *mcpclient.Manager
	router   *router.Router
	log      *slog.Logger
	model    Model
	cache    events.Memo[kept] // the catalogue between events (catalogue.go)

	// A turn holds its conversation's row lock and a pooled connection while it tests a
	// server or discovers tools (seconds each), and holds its turn (not the lock) while
	// it asks a model: turns are bounded, per replica and per person, so the assistant
	// cannot take the pool from the rest.
	turns chan struct{}
	// readings bounds the turns that wait on the model to half of turns (the gate's own
	// bound is the LLM's, shared with plans, and can be more on a small pool), so
	// messages the built-in reading answers are still served.
	readings chan struct{}
	busyMu   sync.Mutex
	busy     map[string]chan struct{} // person (user id) → their turns in progress

	// A model call is the slowest turn and may be paid for: the replica's are bounded
	// apart, so messages the rules answer still get turns, and each person's by a rate.
	// The gate is the model's own when it has one (an LLM planner's), so a person's
	// plans and messages share one budget of model calls.
	gate *planner.Gate

	// configRead, in tests, runs between configure's read of a tool's settings and its
	// save (a save on the tool's page in between).
	configRead func(toolID string)
	// storedRead, in tests, counts the tools whose stored settings a secret check reads.
	storedRead func(toolID string)
	// shownRead, in tests, runs between ShownOf's read of the turn and of the messages.
	shownRead func()
	// connectWaited, in tests, runs each time discovery finds a server not connected yet
	// (before it looks whether the server is still enabled).
	connectWaited func(serverID string)
	// connectWait is how long discovery waits for servers still connecting (connectWait;
	// shorter in tests).
	connectWait time.Duration
	// refreshWait bounds a whole refresh (refreshWait; shorter in tests).
	refreshWait time.Duration
}

// MaxTurns bounds the turns one replica answers at once (turnsFor: fewer on a pool of
// fewer than 32 connections); MaxTurnsPerPerson, one person's.
const (
	MaxTurns          = 8
	MaxTurnsPerPerson = 2
	turnWait          = 30 * time.Second
)

// SetModel lets the assistant ask m what a sentence means when its own reading finds no
// intent (nil: never). A model with a gate of its own (planner.LLM) bounds the
// assistant's calls with it.
func (s *Service) SetModel(m Model) {
	s.model = m
	if g, ok := m.(interface{ Gate() *planner.Gate }); ok && g.Gate() != nil {
		s.gate = g.Gate()
	}
}

// New builds the assistant over the services it acts through.
func New(pool *pgxpool.Pool, a *auth.Service, reg *registry.Service, ts *tools.Service, mcp *mcpclient.Manager,
	r *router.Router, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{pool: pool, auth: a, registry: reg, tools: ts, mcp: mcp, router: r, log: log,
		turns: make(chan struct{}, turnsFor(pool)), readings: make(chan struct{}, max(1, turnsFor(pool)/2)),
		busy: map[string]chan struct{}{}, gate: planner.NewGate(nil), connectWait: connectWait,
		refreshWait: refreshWait}
}

// turnsFor is how many turns the replica answers at once: MaxTurns, fewer on a small
// pool. A turn holds a connection for its conversation's row while its acts take
// another; turns filling the pool would each wait for a connection none gives back.
func turnsFor(pool *pgxpool.Pool) int {
	if pool == nil {
		return MaxTurns
	}
	return min(MaxTurns, max(1, int(pool.Config().MaxConns)/4))
}

// admit reserves a turn for p, waiting up to turnWait for one of theirs and one of the
// replica's (a waiting message holds no database connection), or says why there is none.
func (s *Service) admit(ctx context.Context, p *auth.Principal) (release func(), err error) {
	s.busyMu.Lock()
	mine := s.busy[p.User.ID]
	if mine == nil {
		mine = make(chan struct{}, MaxTurnsPerPerson)
		s.busy[p.User.ID] = mine
	}
	s.busyMu.Unlock()
	t := time.NewTimer(turnWait)
	defer t.Stop()
	select {
	case mine <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, fault.RateLimited(fmt.Sprintf("you already have %d messages being answered: wait for their replies", MaxTurnsPerPerson), time.Second)
	}
	select {
	case s.turns <- struct{}{}:
		return func() { <-s.turns; <-mine }, nil
	case <-ctx.Done():
		<-mine
		return nil, ctx.Err()
	case <-t.C:
		<-mine
		return nil, fault.Unavailable("assistant_busy", "the assistant is answering other messages; try again in a moment")
	}
}

// askModel asks the model what said means, within the replica's model turns and the
// person's rate of model calls (a token's count as its person's). Past either the
// message is refused, not waited on: the turn holds one of the replica's turns
// meanwhile. down reports that the model did not answer (logged; the reply says so).
func (s *Service) askModel(ctx context.Context, p *auth.Principal, said string, cat *Catalogue) (u Understanding, ok, down bool, err error) {
	select {
	case s.readings <- struct{}{}:
		defer func() { <-s.readings }()
	default:
		return Understanding{}, false, false, fault.Unavailable("assistant_busy",
			"the language model is reading other messages; try again in a moment, or say it in words the assistant knows (\"help\" lists them)")
	}
	release, err := s.gate.Enter(p.User.ID)
	if err != nil {
		f, _ := fault.As(err)
		if f != nil && f.Kind == fault.KindRateLimited {
			return Understanding{}, false, false, fault.RateLimited(fmt.Sprintf(
				"the language model may read at most %d of your messages and plans a minute: try again in %s, or say it in words the assistant knows (\"help\" lists them)",
				s.gate.PerMinute(), textcheck.DurationWords(f.RetryAfter)), f.RetryAfter)
		}
		return Understanding{}, false, false, fault.Unavailable("assistant_busy",
			"the language model is reading other messages; try again in a moment, or say it in words the assistant knows (\"help\" lists them)")
	}
	defer release()
	u, ok, err = fromModel(ctx, s.model, said, cat)
	if err != nil {
		// Told apart from a sentence it could not read: an operator needs to know the
		// model is down, and the person that it was not asked.
		s.log.Warn("assistant: the language model did not answer", "err", err)
		return Understanding{}, false, true, nil
	}
	return u, ok, false, nil
}

// Reply is the answer to one message (DESIGN §1).
type Reply struct {
	ConversationID string   `json:"conversation_id"`
	Reply          string   `json:"reply"`
	Choices        []Choice `json:"choices"`
	Actions        []Action `json:"actions"`
	// Question numbers the question the choices answer; sent back as in_reply_to, an
	// answer to a question that is no longer open changes nothing.
	Question int64 `json:"question,omitempty"`
	// Turn numbers the conversation's state after this reply (every reply that moves it
	// on, choices or not); a typed message sends the last one it saw back as seen.
	Turn int64 `json:"turn,omitempty"`
}

// Action is one thing the assistant did (or tried) for a message.
type Action struct {
	Kind       string `json:"kind"` // the intent
	TargetType string `json:"target_type,omitempty"`
	TargetID   string `json:"target_id,omitempty"`
	Name       string `json:"name,omitempty"`
	Href       string `json:"href,omitempty"`
	OK         bool   `json:"ok"`
	Error      string `json:"error,omitempty"`
}

// Message is one line of a conversation, for the page.
type Message struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	Author  string    `json:"author"` // person or assistant
	Body    string    `json:"body"`
	Choices []Choice  `json:"choices"`
	Actions []Action  `json:"actions"`
	// Question is the question the choices answer (Reply.Question).
	Question int64 `json:"question,omitempty"`
}

// MaxMessage bounds a message's length.
const MaxMessage = 2000

var convIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ValidConversationID reports whether id is one a caller may name a conversation by:
// never one holding "~", which only the ids of an API token's conversations do
// (storedID), so a person's page cannot open a token's.
func ValidConversationID(id string) bool { return convIDRE.MatchString(id) }

// readOnly are the intents an API token may use: they change nothing.
func readOnly(in Intent) bool {
	switch in {
	case IntentListServers, IntentServerStatus, IntentListTools, IntentToolDetails, IntentFindTool, IntentSuggestTools,
		IntentHelp, IntentListPreference, IntentUnknown, IntentPick, IntentCancel, IntentNo:
		return true
	}
	return false
}

// Handle answers one message of conversation convID ("" starts a new one). inReplyTo,
// when given, is the question (Reply.Question) the message answers: an answer to a
// question that is no longer the open one changes nothing. seen, when given, is the
// last turn (Reply.Turn) the sender's window showed: a yes, a no or "the second one"
// typed in a window the conversation moved on from (another tab) changes nothing.
func (s *Service) Handle(ctx context.Context, p *auth.Principal, actor audit.Actor, convID, msg string, inReplyTo, seen int64) (Reply, error) {
	msg = strings.TrimSpace(msg)
	switch {
	case msg == "":
		return Reply{}, verr.New("message", "is empty: say what you would like to do, for example \"show me all tools\"")
	case utf8.RuneCountInString(msg) > MaxMessage: // characters, as the form's maxlength counts them
		return Reply{}, verr.New("message", fmt.Sprintf("is longer than %d characters", MaxMessage))
	}
	if convID == "" {
		convID = fmt.Sprintf("c%d", time.Now().UnixNano())
	} else if !convIDRE.MatchString(convID) {
		return Reply{}, verr.New("conversation_id", "must be 1 to 64 letters, digits, '.', '_', ':' or '-'")
	}
	release, err := s.admit(ctx, p)
	if err != nil {
		return Reply{}, err
	}
	defer release()
	// What is kept (the conversation, the audit log, a model's prompt) is the message
	// with secret-looking values masked.
	said, masked := redact(msg)
	out := Reply{ConversationID: convID, Actions: []Action{}, Choices: []Choice{}}
	// The catalogue is read before the turn's transaction (it would take a second
	// connection inside it), and the turn uses the one the model read.
	cat, err := s.Catalogue(ctx, p)
	if err != nil {
		return Reply{}, err
	}
	switch {
	case p.Kind == audit.ActorToken:
		cat.NoSetUp = "an API token asks questions only (sign in to the browser to add one)"
	case !p.Can(auth.PermServerCreate):
		cat.NoSetUp = fmt.Sprintf("it needs the %s permission, which your role (%s) does not have", auth.PermServerCreate, p.User.Role.Label())
	}
	u := Understand(msg, cat)
	// The model is asked before the conversation is locked: it may take seconds, and a
	// turn holding the lock and a connection meanwhile would hold up the person's other
	// messages and the pool. Its reading depends on the message and the catalogue only;
	// the turn uses it if the conversation, once locked, would still ask the model.
	// Not for a message with an exception the rules found: the model's reading would
	// drop it (and do what was to be left out); the rules refuse and say what to say.
	modelMay := u.Intent == IntentUnknown && u.Negated == "" && u.ExceptRef == "" && s.model != nil
	// Nor for an answer to what the conversation asked or showed ("the charging stations
	// one" to "which did you mean?"): the rules read it against the open choice, and the
	// model, which never sees that choice, would replace the pick with a reading of its own.
	// A message that picks none of the choices is a new request, the model's to read.
	wantsModel := func(st State) bool {
		if !modelMay || st.Flow != nil {
			return false
		}
		if p := st.Pending; p != nil && p.Choose && u.Intent == IntentUnknown {
			return !picks(u, p, cat)
		}
		return !answersContext(u, st, said)
	}
	// A message that answers what this window no longer shows is refused as stale (below):
	// a question since closed, or a list or question another window has moved past.
	closed := func(st State) bool { return inReplyTo != 0 && inReplyTo != st.Question }
	elsewhere := func(st State) bool { return seen != 0 && seen != st.Question && answersContext(u, st, said) }
	asked, modelOK, modelDown := false, false, false
	var mu Understanding
	if modelMay {
		st, err := s.peekState(ctx, p, convID)
		if err != nil {
			return Reply{}, err
		}
		if wantsModel(st) && !closed(st) && !elsewhere(st) {
			if mu, modelOK, modelDown, err = s.askModel(ctx, p, said, cat); err != nil {
				return Reply{}, err
			}
			asked = true
		}
	}
	// A refresh the message asks for in its own words is run before the conversation is
	// locked, as the model is asked: its discoveries take up to refreshWait, and a turn
	// holding the conversation's lock and a connection idle in its transaction meanwhile
	// would hold up the person's other messages and the pool. Only what the locked turn
	// would run anyway (the same checks, on the conversation as read): a refresh said yes
	// to runs in the turn, where its yes is spent, so a double click runs it once.
	early, earlyOp := (*refreshed)(nil), (*Op)(nil)
	if u.Intent == IntentRefresh && p.Kind != audit.ActorToken && p.Can(auth.PermServerEdit) && !masked && len(u.Settings) == 0 &&
		len(enabledServers(cat)) <= MaxTargets {
		st, err := s.peekState(ctx, p, convID)
		if err != nil {
			return Reply{}, err
		}
		if d := Decide(said, u, st, cat); !closed(st) && !elsewhere(st) && d.Do != nil && d.Do.Intent == IntentRefresh {
			a := actor
			a.Said = d.Do.Sentence
			if early, earlyOp = s.refreshAll(ctx, a, cat), d.Do; ctx.Err() != nil {
				return Reply{}, ctx.Err() // nobody waits for the reply
			}
		}
	}
	// So is one server's discovery asked for in the person's own words, for the same
	// reason: mcpclient gives it ten minutes. A set-up's discovery (its yes, or the server
	// it picked) runs in the turn, as the set-up's next step depends on the state it locks.
	var found *discovered
	if u.Intent == IntentDiscover && p.Kind != audit.ActorToken && p.Can(auth.PermServerEdit) && !masked && len(u.Settings) == 0 {
		st, err := s.peekState(ctx, p, convID)
		if err != nil {
			return Reply{}, err
		}
		if d := Decide(said, u, st, cat); !closed(st) && !elsewhere(st) && d.Do != nil && d.Do.Intent == IntentDiscover &&
			len(d.Do.IDs) == 1 && d.State.Flow == nil {
			a := actor
			a.Said = d.Do.Sentence
			found, earlyOp = &discovered{}, d.Do
			if found.res, found.err = s.discoverOne(ctx, d.Do.IDs[0], a, time.Now().Add(s.connectWait)); ctx.Err() != nil {
				return Reply{}, ctx.Err()
			}
		}
	}
	err = s.withConversation(ctx, p, convID, func(st *State, keep func(string, Reply) error) error {
		// A message that had something masked may still have it quoted back where a
		// reply reads it from elsewhere than the understanding (an error's text, a name
		// the registry or a discovery returns): the reply kept, and the one returned
		// (which reloads show as kept), are masked as the message is.
		save := func(msg string, r Reply) error {
			if masked {
				maskReply(&r)
				out = r
			}
			return keep(msg, r)
		}
		// stale refuses a message that answers what this window no longer shows. Whether
		// a value it sets is a secret is not looked at: none is kept.
		stale := func(reply string) error {
			if len(u.Settings) > 0 {
				said = maskValues(said, u.Settings)
			}
			out.Reply = reply
			return save(said, out)
		}
		if closed(*st) && early == nil && found == nil {
			return stale("That question is no longer open: nothing was changed. Answer the latest question, or say what you would like to do.")
		}
		if elsewhere(*st) && early == nil && found == nil {
			// The conversation went on in another window (a second tab): a yes or "the
			// second one" typed here would answer a question or a list this one never
			// showed.
			return stale("This conversation went on in another window since this one last showed it, so I can't tell what \"" +
				clip(said, 80) + "\" answers here. Nothing was changed: reload the page to see the latest, or say what you would like by its name.")
		}
		// secret refuses a configure_tool op that sets a secret value: "set password to
		// Hunter2 for db_query" (the words look harmless, the parameter says it is a
		// secret) keeps the value of settings out of every record. When the value cannot
		// be found in the message as written, none of it is kept.
		secret := func(in Intent, ids []string, settings map[string]string) error {
			if len(settings) > 0 {
				if m := maskValues(said, settings); m != said {
					said = m
				} else {
					said = "(a message setting a secret value, not kept)"
				}
			}
			out.Reply = "I don't take secret values in a conversation: they would stay in it and in the audit log. Set them on the tool's page, where they are stored encrypted. Nothing was changed."
			out.Choices = []Choice{}
			for _, id := range ids[:min(len(ids), MaxChoices)] {
				out.Actions = append(out.Actions, Action{Kind: string(in), TargetType: "tool", TargetID: id, Name: nameOf2(cat, id), Href: "/tools/" + id})
			}
			st.Pending = nil
			return save(said, out)
		}
		// Parameters that hold secrets by their schema are checked here, for every tool the
		// words may mean; the settings stored encrypted, which take a query per tool, only
		// for the op decided below (at most MaxChoices tools to choose from, MaxTargets to
		// change).
		if secretSettings(u, cat) {
			return secret(u.Intent, u.Tools, u.Settings)
		}
		if masked && u.Intent == IntentConfigureTool {
			return secret(u.Intent, u.Tools, nil)
		}
		byModel := false
		if wantsModel(*st) {
			if !asked {
				// The conversation moved on, since it was read, to where the model is
				// asked (a set-up ended): asking now would hold the lock meanwhile.
				return stale("This conversation went on in another window while I read your message, so nothing was changed: say it again if you still want it.")
			}
			if modelOK {
				u, byModel = mu, true
			}
		}
		d := Decide(said, u, *st, cat)
		if early != nil || found != nil {
			// The refresh (or discovery) ran before the lock for what the message says:
			// the reply says what it did, whatever another window did to the conversation
			// meanwhile (as a new request, it drops an open question).
			d = Decision{State: *st, Do: earlyOp}
			d.State.Pending, d.State.Flow = nil, nil
		}
		if modelDown && wantsModel(*st) && d.Do == nil && d.State.Pending == nil {
			d.Reply = fmt.Sprintf("I didn't understand %q, and the language model that reads what I don't is unavailable right now. Say it in words I know (\"help\" lists them), or try again later.", clip(said, 200))
		}
		if byModel && d.Do != nil && !readOnly(d.Do.Intent) {
			// A model's reading is a proposal: the person says yes to what it will do.
			d = proposeModel(d, *d.Do, cat)
		} else if byModel {
			if d.State.Pending != nil {
				// A choice or a yes asked first: what it leads to is still the model's
				// reading, put to the person again after a pick and audited as such.
				op := *d.State.Pending
				op.ByModel = true
				d.State.Pending = &op
			}
			d.Reply += " (I read your message with the help of the language model.)"
		}
		var capped *Op
		if op := changeOf(d); op != nil && (targetCount(op, cat) > MaxTargets || op.Unshown > 0) {
			// Each target is its own update and audit entry, done while the turn holds the
			// conversation's lock and a connection: "make all of them high risk" after a
			// list of 10,000 is refused, not run 10,000 times in one turn (nor its stored
			// settings read 10,000 times below). A change to "all of them" of a list that
			// showed some of its entries is refused too: the rest were never seen.
			// Unread, any value it sets may be one a tool stores encrypted: none is kept.
			said = maskValues(said, op.Settings)
			d.Reply, d.Choices = tooMany(op, cat), nil
			d.Do, d.State.Pending, capped = nil, nil, op
		}
		// The op to do (or to ask about) is checked again: its tools may come from the
		// last list ("configure the first one with pin=4921") or the model, not the
		// words the check above read.
		if op := d.Do; op != nil || d.State.Pending != nil {
			if op == nil {
				op = d.State.Pending
			}
			// Stored settings are read only for who may configure tools: run refuses anyone
			// else before anything is read (a guest's "configure all …" read every tool).
			mayConfigure := p.Can(auth.PermToolConfigure)
			if op.Intent == IntentConfigureTool && (secretParams(op.Settings, op.IDs, cat) || secretValues(op.Settings) ||
				mayConfigure && (heldMasked(op.Settings) || s.storedSecret(ctx, op.Intent, op.IDs, op.Settings))) {
				return secret(op.Intent, op.IDs, op.Settings)
			}
			if op.Intent == IntentConfigureTool && len(op.Settings) > 0 && !mayConfigure {
				// Unread, any value may be one a tool stores encrypted: none is kept (the
				// message, the reply, the audit's sentence, a choice waiting), as run
				// refuses the op anyway.
				said, d.Reply, op.Sentence = maskValues(said, op.Settings), maskValues(d.Reply, op.Settings), maskValues(op.Sentence, op.Settings)
				masked := make(map[string]string, len(op.Settings))
				for k := range op.Settings {
					masked[k] = "***"
				}
				op.Settings = masked
			}
		}
		if op := d.State.Pending; op != nil && op.Confirm && op.Intent == IntentEnableTool && !op.Listed && op.Seen == nil {
			// A yes is to the tools as the question named them: one whose definition is
			// rediscovered before the yes is refused (stale), not enabled unseen.
			op.Seen = seenOf(cat, op.IDs)
		}
		out.Reply, out.Choices = d.Reply, d.Choices
		if p.Kind == audit.ActorToken {
			// A token asks questions only, and leaves nothing for a person to confirm or
			// continue: no pending change, no guided set-up.
			var change Intent
			op := capped
			if op == nil {
				op = changeOf(d)
			}
			switch {
			case op != nil:
				change = op.Intent
			case d.State.Flow != nil:
				change = IntentSetup
			}
			if change != "" {
				out.Reply = "An API token may only ask questions of the assistant (list, status, details, find). Sign in to the browser to change things."
				out.Choices = []Choice{}
				s.refuse(ctx, actor, said, change, "an API token asks questions only")
				d.Do, d.State.Pending, d.State.Flow = nil, nil, nil
			}
		}
		if in, perm := forbidden(p, d); perm != "" {
			// A change the person's role forbids is refused now, as run would refuse it,
			// not put to them first: a yes, a choice or a set-up's steps would lead only
			// to "You may not do that".
			out.Reply, out.Choices = mayNot(p, perm), []Choice{}
			out.Actions = append(out.Actions, Action{Kind: string(in), Error: "forbidden"})
			s.refuse(ctx, actor, said, in, "needs the "+string(perm)+" permission")
			d.Do, d.State.Pending, d.State.Flow = nil, nil, nil
		}
		if d.Do != nil {
			// The yes this act answers is spent before the act runs, and the turn is saved
			// even if the request ends meanwhile (withConversation): an old Yes button
			// cannot run it again.
			st.Pending = nil
			actor.Said = d.Do.Sentence
			if d.Do.ByModel {
				actor.Said += " (read by the language model)"
			}
			switch {
			case early != nil:
				early.report(&out)
			case found != nil:
				s.reportFound(ctx, d.Do, found, cat, &d, &out)
			default:
				s.run(ctx, p, actor, d.Do, cat, &d, &out)
			}
		}
		if out.Choices == nil {
			out.Choices = []Choice{}
		}
		// Every turn asks anew: a choice shown before this reply answers nothing now.
		*st = d.State
		st.Question++
		if len(out.Choices) > 0 {
			out.Question = st.Question
		}
		out.Turn = st.Question
		if len(out.Actions) > maxActions {
			// The reply is stored with the conversation and shown again on each load.
			out.Actions = out.Actions[:maxActions:maxActions]
		}
		return save(said, out)
	})
	if err != nil {
		return Reply{}, err
	}
	return out, nil
}

// MaxTargets bounds the tools or servers one message changes, as the pages' bulk actions
// are bounded (tools.MaxLimit); maxActions bounds the actions a reply keeps (MaxTargets
// and the error that stopped them).
const (
	MaxTargets = tools.MaxLimit
	maxActions = MaxTargets + 1
)

// changeOf is the change a decision does or asks a yes to (nil: none).
func changeOf(d Decision) *Op {
	switch {
	case d.Do != nil && !readOnly(d.Do.Intent):
		return d.Do
	case d.State.Pending != nil && !readOnly(d.State.Pending.Intent):
		return d.State.Pending
	}
	return nil
}

// targetCount is how many tools or servers op changes: its targets, or for a refresh,
// which names none, every enabled server (each discovered in turn).
func targetCount(op *Op, cat *Catalogue) int {
	if op.Intent == IntentRefresh {
		return len(enabledServers(cat))
	}
	return len(op.IDs)
}

// tooMany says that op names more targets than one message changes, or entries of a
// list it did not show (Op.Unshown), and how to name them instead.
func tooMany(op *Op, cat *Catalogue) string {
	if op.Intent == IntentRefresh {
		on := enabledServers(cat)
		return fmt.Sprintf("That would discover the tools of %d servers, and I discover at most %d in one message, so nothing was refreshed. "+
			"Name the servers to discover (\"discover new tools on %s\"), or use Discover tools on the Servers page.", len(on), MaxTargets, on[0].Name)
	}
	what, page, narrow := "tools", "Tools", ""
	if _, isTool := cat.tool(op.IDs[0]); !isTool {
		what, page = "servers", "Servers"
	} else if sv := serverOf(cat, op.IDs[0]); sv != "" {
		narrow = fmt.Sprintf(", for example one server's (\"… all tools on %s\")", sv)
	}
	if n := len(op.IDs) + op.Unshown; n > MaxTargets {
		return fmt.Sprintf("That would change %d %s, and I change at most %d in one message, so nothing was changed. "+
			"Name fewer at a time%s, or use the %s page.", n, what, MaxTargets, narrow, page)
	}
	return fmt.Sprintf("The list showed %d of its %d %s, so \"all of them\" would change %d you have not seen here: nothing was changed. "+
		"Name them instead%s, pick the ones shown by their numbers, or use the %s page.",
		len(op.IDs), len(op.IDs)+op.Unshown, what, op.Unshown, narrow, page)
}

// forbidden is the permission p lacks for the change d waits on (a yes, a choice, the
// next step of a guided set-up), and that change ("" when none is forbidden).
func forbidden(p *auth.Principal, d Decision) (Intent, auth.Permission) {
	if op := d.State.Pending; op != nil && !readOnly(op.Intent) {
		for _, perm := range perms(op) {
			if !p.Can(perm) {
				return op.Intent, perm
			}
		}
	}
	if f := d.State.Flow; f != nil {
		if perm := flowPerm(f.Step); !p.Can(perm) {
			return IntentSetup, perm
		}
	}
	return "", ""
}

// flowPerm is the permission a step of the guided set-up leads to: adding a server,
// discovering its tools, enabling them.
func flowPerm(step string) auth.Permission {
	switch step {
	case StepWhichServer, StepDiscover:
		return auth.PermServerEdit
	case StepWhichTools:
		return auth.PermToolEnable
	}
	return auth.PermServerCreate
}

// mayNot says that p's role lacks perm.
func mayNot(p *auth.Principal, perm auth.Permission) string {
	return fmt.Sprintf("You may not do that: it needs the %s permission, which your role (%s) does not have.", perm, p.User.Role.Label())
}

// refuse audits an act the assistant would not do for the principal.
func (s *Service) refuse(ctx context.Context, actor audit.Actor, said string, in Intent, why string) {
	actor.Said = said
	if err := audit.AppendAlone(ctx, s.pool, audit.Entry{Actor: actor, Action: "assistant.refused", TargetType: "assistant",
		Payload: map[string]any{"intent": in, "why": why}, Result: audit.ResultDenied}); err != nil {
		// The refusal stands (nothing was done); its record is what is missing.
		s.log.Error("assistant: a refusal could not be audited", "err", err, "intent", in, "why", why)
	}
}

// secretWordRE finds the words of a message that may be values: key=value pairs, quoted
// strings (read whole, as Understand reads a quoted value), an Authorization scheme with
// the word after it ("Bearer abc…", a credential only together) and single words.
var secretWordRE = regexp.MustCompile(`([A-Za-z_][\w.-]*)\s*=\s*("[^"]*"|'[^']*'|` + schemePair + `|\S+)|"[^"]*"|'[^']*'|` + schemePair + `|\S+`)

// schemePair is an Authorization scheme secrets.LooksSecretValue knows and the word after it.
const schemePair = `(?i:bearer|token|basic)\s+\S+`

var schemePairRE = regexp.MustCompile(`^` + schemePair + `$`)

// redact masks what looks like a secret in msg: the value of a key=value pair whose key
// names a secret (api_key=…), a quoted string, a scheme and its credential or any word
// that looks like a credential. masked reports whether anything was.
func redact(msg string) (string, bool) {
	masked := false
	// word masks one word that looks like a credential.
	word := func(w string) string {
		if secrets.LooksSecretValue(strings.Trim(w, `"'.,;:!?()`)) {
			masked = true
			return "***"
		}
		return w
	}
	// pair masks a scheme and its credential, or else either word that looks like one
	// alone ("token ghp_…" is one; "token limit" is not, and neither word is).
	pair := func(w string) string {
		if secrets.LooksSecretValue(strings.TrimRight(w, `"'.,;:!?()`)) {
			masked = true
			return strings.Fields(w)[0] + " ***"
		}
		const space = " \t\n\f\r" // the pattern's \s
		i, j := strings.IndexAny(w, space), strings.LastIndexAny(w, space)+1
		return word(w[:i]) + w[i:j] + word(w[j:])
	}
	out := secretWordRE.ReplaceAllStringFunc(msg, func(w string) string {
		if m := secretWordRE.FindStringSubmatch(w); m[1] != "" {
			v := strings.Trim(m[2], `"'`)
			if secrets.LooksSecretName(m[1]) || secrets.LooksSecretValue(v) {
				masked = true
				return m[1] + "=***"
			}
			if schemePairRE.MatchString(m[2]) {
				return w[:len(w)-len(m[2])] + pair(m[2])
			}
			return w
		}
		if q := w[0]; len(w) >= 2 && (q == '"' || q == '\'') && w[len(w)-1] == q {
			// "Bearer abc…" is a credential only whole: split into words, no word of it
			// looks like one. A quoted string that is not one may still hold one
			// ("'api_key=… for x'"), so its words are looked at too (its inside has no
			// such quote: at most two levels).
			inner := w[1 : len(w)-1]
			if secrets.LooksSecretValue(inner) {
				masked = true
				return string(q) + "***" + string(q)
			}
			r, m := redact(inner)
			masked = masked || m
			return string(q) + r + string(q)
		}
		if schemePairRE.MatchString(w) {
			return pair(w)
		}
		return word(w)
	})
	return out, masked
}

// maskReply masks what looks like a secret in the words of a reply: its text, its
// actions' names and errors, and its choices' labels and targets.
func maskReply(r *Reply) {
	r.Reply = redacted(r.Reply)
	actions := make([]Action, len(r.Actions))
	for i, a := range r.Actions {
		a.Name, a.Error = redacted(a.Name), redacted(a.Error)
		actions[i] = a
	}
	r.Actions = actions
	choices := make([]Choice, len(r.Choices))
	for i, c := range r.Choices {
		c.Label, c.Target = redacted(c.Label), redacted(c.Target)
		choices[i] = c
	}
	r.Choices = choices
}

// secretSettings reports whether a configure_tool message sets a parameter that holds
// secrets (by its name or its schema's format) on any tool it may mean, or a value the
// tools store keeps encrypted whatever its parameter (secretValues).
func secretSettings(u Understanding, cat *Catalogue) bool {
	return u.Intent == IntentConfigureTool && (secretParams(u.Settings, u.Tools, cat) || secretValues(u.Settings))
}

// secretValues reports whether any value of settings is one saving would store encrypted
// (secrets.HoldsSecret of the value read as text, or as JSON as a parameter that is not a
// string reads it): "set prefix to "Bearer …"" names a harmless parameter, and the value
// is what is secret.
func secretValues(settings map[string]string) bool {
	for _, v := range settings {
		if secrets.LooksSecretValue(v) || secrets.LooksSecretValue(strings.Trim(v, `"'`)) || tools.TypedSecret(v, "json") {
			return true
		}
	}
	return false
}

// secretParams reports whether settings set a parameter that holds secrets on any of the
// tools ids.
func secretParams(settings map[string]string, ids []string, cat *Catalogue) bool {
	for name := range settings {
		if secrets.LooksSecretName(name) {
			return true
		}
		for _, id := range ids {
			for _, pa := range toolByID(cat, id).Params {
				if pa.Secret && strings.EqualFold(pa.Name, name) {
					return true
				}
			}
		}
	}
	return false
}

// storedSecret reports whether a configure_tool message sets a parameter whose value a
// tool already keeps encrypted (it looked like a credential, or a file said secret:).
func (s *Service) storedSecret(ctx context.Context, in Intent, ids []string, settings map[string]string) bool {
	if in != IntentConfigureTool || len(settings) == 0 {
		return false
	}
	for _, id := range ids {
		if s.storedRead != nil {
			s.storedRead(id)
		}
		t, err := s.tools.Target(ctx, id)
		if err != nil {
			// Unread, any value may be one the tool stores encrypted: kept out, as a
			// secret is (the check fails closed).
			s.log.Warn("assistant: a tool's stored settings could not be read", "tool", id, "err", err)
			return true
		}
		cfg := t.Configuration()
		for name := range settings {
			for pname, st := range cfg.Params {
				if st.Secret != "" && strings.EqualFold(pname, name) {
					return true
				}
			}
		}
	}
	return false
}

// heldMasked reports whether a setting's value is the mask: a choice kept for a person
// who could not configure then, picked once they may, must not save "***".
func heldMasked(settings map[string]string) bool {
	for _, v := range settings {
		if v == "***" {
			return true
		}
	}
	return false
}

// maskValues replaces every value of settings in msg (any case) with ***.
func maskValues(msg string, settings map[string]string) string {
	for _, v := range settings {
		if v = strings.Trim(v, `"'`); v != "" {
			msg = regexp.MustCompile(`(?i)`+regexp.QuoteMeta(v)).ReplaceAllString(msg, "***")
		}
	}
	return msg
}

func toolOf(it tools.Item) Tool {
	t := Tool{ID: it.ID, Name: it.Name, Title: it.Title, Description: it.Description, ServerID: it.ServerID, Server: it.Server,
		State: it.Status, Risk: string(it.Risk().Level), Tags: it.Tags, Hash: it.DefinitionHash, ServerTrusted: it.ServerTrusted}
	if it.Category != nil {
		t.Category = *it.Category
	}
	props, isSecret := schema.PropertySchemas(it.InputSchema), tools.SecretParams(it.InputSchema)
	for _, p := range schema.Parameters(it.InputSchema) {
		prop := props[p.Name]
		pa := Param{Name: p.Name, Description: p.Description, Secret: isSecret(p.Name, prop)}
		pa.Type, _ = prop["type"].(string)
		for _, e := range p.Enum {
			if s, ok := e.(string); ok {
				pa.Enum = append(pa.Enum, s)
			}
		}
		t.Params = append(t.Params, pa)
	}
	return t
}

// perms are the permissions an op needs: the routes' own (web/routes.go).
func perms(op *Op) []auth.Permission {
	switch op.Intent {
	case IntentAddServer, IntentSetup:
		return []auth.Permission{auth.PermServerCreate}
	case IntentRemoveServer:
		return []auth.Permission{auth.PermServerDelete}
	case IntentEnableServer, IntentDisableServer, IntentDiscover, IntentRefresh:
		return []auth.Permission{auth.PermServerEdit}
	case IntentListServers, IntentServerStatus:
		return []auth.Permission{auth.PermServerView}
	case IntentEnableTool, IntentDisableTool, IntentPreference:
		return []auth.Permission{auth.PermToolEnable}
	case IntentConfigureTool, IntentSetRisk, IntentTag, IntentUntag, IntentSetCategory:
		return []auth.Permission{auth.PermToolConfigure}
	case IntentGrant, IntentRevoke:
		return []auth.Permission{auth.PermUsers}
	case IntentTestTool:
		return []auth.Permission{auth.PermToolView, auth.PermToolUse}
	}
	return []auth.Permission{auth.PermSignedIn}
}

// run does op and writes what happened into the reply.
func (s *Service) run(ctx context.Context, p *auth.Principal, actor audit.Actor, op *Op, cat *Catalogue, d *Decision, out *Reply) {
	for _, perm := range perms(op) {
		if !p.Can(perm) {
			out.Reply = mayNot(p, perm)
			out.Actions = append(out.Actions, Action{Kind: string(op.Intent), Error: "forbidden"})
			s.refuse(ctx, actor, actor.Said, op.Intent, "needs the "+string(perm)+" permission")
			return
		}
	}
	var err error
	switch op.Intent {
	case IntentAddServer:
		err = s.addServer(ctx, actor, op, d, out)
	case IntentRemoveServer, IntentEnableServer, IntentDisableServer:
		err = s.serverState(ctx, actor, op, cat, out)
	case IntentListServers:
		listServers(cat, d, out)
	case IntentServerStatus:
		s.serverStatus(cat, op, out)
	case IntentListTools:
		listTools(cat, op, d, out)
	case IntentToolDetails:
		toolDetails(cat, op, out)
	case IntentEnableTool, IntentDisableTool:
		err = s.toolState(ctx, actor, op, cat, out)
	case IntentConfigureTool:
		err = s.configure(ctx, actor, op, cat, out)
	case IntentTestTool:
		err = s.test(ctx, actor, p, op, cat, d, out)
	case IntentDiscover:
		err = s.discover(ctx, actor, op, cat, d, out)
	case IntentRefresh:
		s.refreshAll(ctx, actor, cat).report(out)
	case IntentSetRisk, IntentTag, IntentUntag, IntentSetCategory:
		err = s.settings(ctx, actor, p, op, cat, out)
	case IntentGrant, IntentRevoke:
		err = s.permission(ctx, actor, op, cat, out)
	case IntentPreference:
		pr, e := s.tools.SavePreference(ctx, actor, op.Query, op.Sentence)
		err = e
		if e == nil {
			out.Reply = fmt.Sprintf("I'll automatically enable new %s tools when they're discovered (and pass validation).", pr.Words)
			out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "preference", TargetID: pr.ID, Name: pr.Words, OK: true})
		}
	case IntentForget:
		found, e := s.tools.DeletePreference(ctx, actor, op.Query)
		err = e
		switch {
		case e != nil:
		case found:
			out.Reply = fmt.Sprintf("OK: new %s tools will no longer be enabled automatically.", op.Query)
			out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "preference", Name: op.Query, OK: true})
		default:
			out.Reply = fmt.Sprintf("You have no preference about %q. Say \"what are my preferences\" to see them.", op.Query)
		}
	case IntentListPreference:
		prefs, e := s.tools.Preferences(ctx, p.User.ID)
		err = e
		if e == nil {
			if len(prefs) == 0 {
				out.Reply = "You have no preferences yet. For example: \"always enable new weather tools\"."
			} else {
				var ws []string
				for _, pr := range prefs {
					ws = append(ws, pr.Words)
				}
				out.Reply = "New tools about these words are enabled automatically when discovered: " + strings.Join(ws, "; ") + "."
			}
		}
	case IntentSetup:
		d.State.Flow = &Flow{Step: StepURL, Said: op.Sentence}
		out.Reply = "Great! Let's add a server. First, what's the URL of the MCP server you want to add?"
	default:
		out.Reply = notUnderstood(op.Sentence)
	}
	if err != nil {
		out.Reply = s.failure(op, err)
		out.Actions = append(out.Actions, Action{Kind: string(op.Intent), Error: errText(err)})
	}
}

// failure says what went wrong in the person's terms, with the field when there is one.
func (s *Service) failure(op *Op, err error) string {
	return "❌ That didn't work: " + s.failureReason(err)
}

// failureReason is why err refused a change, as the person is told it: the fields and
// what is wrong with each, or the refusal's message.
func (s *Service) failureReason(err error) string {
	var ve *verr.Error
	if errors.As(err, &ve) && len(ve.Fields) > 0 {
		var parts []string
		for _, f := range ve.Fields {
			parts = append(parts, f.Field+" "+f.Message)
		}
		return strings.Join(parts, "; ") + "."
	}
	var f *fault.Error
	if errors.As(err, &f) {
		return f.Message
	}
	if internal(err) {
		s.log.Error("assistant: a change failed", "err", err)
	}
	return errText(err)
}

// internal reports whether err is the database's (a failed statement, a lost
// connection): its text names tables and constraints, not what the person can do about it.
func internal(err error) bool {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	return errors.As(err, &pe) || errors.As(err, &ce) || errors.Is(err, pgx.ErrTxClosed)
}

// errText is err as a reply or its actions may show it: an internal error is logged by
// failureReason and said in general words.
func errText(err error) string {
	if internal(err) {
		return "something went wrong on our side (it was logged)"
	}
	return err.Error()
}

func (s *Service) addServer(ctx context.Context, actor audit.Actor, op *Op, d *Decision, out *Reply) error {
	// The name as the registry takes it; the one typed ("Weather API") is the description.
	// Not a language model's: its name may be any prose, and the question said yes to
	// showed the registered name only (describeOp).
	name, desc := registeredName(op.Name, op.URL), "added by the assistant"
	if name != op.Name && serverName(op.Name) != "" && !op.ByModel {
		desc = clip(op.Name, registry.MaxDescription)
	}
	// Streamable HTTP first, legacy SSE when the server refuses it as a server that only
	// speaks SSE does (400, 404, 405); a URL ending in /sse the other way round.
	types := []string{registry.TypeStreamableHTTP, registry.TypeSSE}
	if p, err := url.Parse(op.URL); err == nil && strings.HasSuffix(strings.TrimRight(p.Path, "/"), "/sse") {
		types[0], types[1] = types[1], types[0]
	}
	var sp registry.Spec
	var res mcpclient.TestResult
	var tried []string
	for i, typ := range types {
		sp = registry.Spec{Name: name, Type: typ, URL: op.URL, Enabled: true, Description: desc, AuthType: registry.AuthNone}
		conn, err := s.registry.PreviewConnection(ctx, "", registry.PatchFromSpec(sp))
		if err != nil {
			return err
		}
		// As the pages do: a connection attempt from this host is on record, reached or not.
		if err := s.registry.AuditTest(ctx, actor, "", conn); err != nil {
			return err
		}
		res = s.mcp.Test(ctx, conn)
		tried = append(tried, transportName(typ)+": "+res.Error)
		if res.OK || res.Busy || i == len(types)-1 || !otherTransport(res.Error) {
			break
		}
	}
	if res.Busy {
		d.State.Flow = nil
		out.Reply = fmt.Sprintf("Too many connection tests are running right now, so I did not try the server at `%s` and nothing was added. Ask me again in a few seconds.", quoteURL(op.URL))
		out.Actions = append(out.Actions, Action{Kind: string(op.Intent), Name: name, Error: res.Error})
		return nil
	}
	if !res.OK {
		d.State.Flow = nil
		why := ": " + res.Error + "."
		if len(tried) > 1 {
			why = " with either transport (" + strings.Join(tried, "; ") + ")."
		}
		if res.TimedOutAfter > 0 { // seed 004's connection-timeout reply
			why = ". The connection timed out after " + textcheck.DurationWords(res.TimedOutAfter) + "."
		}
		out.Reply = fmt.Sprintf("I couldn't connect to the server at `%s`%s Please check that the server is running and accessible, or try again later. Nothing was added.", quoteURL(op.URL), why)
		if needsAuth(res.Error) {
			// The assistant adds servers without credentials (a secret is never taken in
			// a conversation): the Servers page takes headers and authentication.
			out.Reply = fmt.Sprintf("The server at `%s` refused the connection without credentials (%s). Add it on the Servers page (/servers/new), "+
				"where headers and authentication can be set and are stored encrypted. Nothing was added.", quoteURL(op.URL), res.Error)
		}
		out.Actions = append(out.Actions, Action{Kind: string(op.Intent), Name: name, Error: res.Error})
		return nil
	}
	sv, err := s.registry.CreateServer(ctx, actor, sp)
	if err != nil {
		return err
	}
	out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "server", TargetID: sv.ID, Name: sv.Name,
		Href: "/servers/" + sv.ID, OK: true})
	// Which transport it was added with, when it is not the usual one or not the one
	// tried first.
	via := ""
	switch {
	case sv.Type == registry.TypeSSE && types[0] == registry.TypeSSE:
		via = "connected over legacy SSE, as its URL ends in /sse; "
	case sv.Type == registry.TypeSSE:
		via = "connected over legacy SSE, as it refused streamable HTTP; "
	case types[0] == registry.TypeSSE:
		via = "connected over streamable HTTP, as it refused legacy SSE; "
	}
	out.Reply = fmt.Sprintf("✅ I've added the %s MCP server at %s (%sit offers %d tools). Would you like me to discover available tools on this server?", sv.Name, quoteURL(sv.URL), via, res.ToolCount)
	if sv.Name != op.Name && serverName(op.Name) != "" && !op.ByModel {
		out.Reply = fmt.Sprintf("✅ I've added the %s MCP server at %s as %s (server names are lower-case letters, digits and '-'); %sit offers %d tools. Would you like me to discover available tools on this server?",
			clip(op.Name, 80), quoteURL(sv.URL), sv.Name, via, res.ToolCount)
	}
	// The last list shown is not about this server: "enable all of them" now would act
	// on it.
	d.State.shows("", nil, 0, "", nil)
	d.State.Pending = &Op{Intent: IntentDiscover, Kind: "server", IDs: []string{sv.ID}, Confirm: true, Sentence: op.Sentence}
	if d.State.Flow != nil {
		// Which tools to enable is asked once the discovery asked about has run.
		d.State.Flow = &Flow{Step: StepDiscover, ServerID: sv.ID, Said: op.Sentence}
	}
	d.Choices, out.Choices = []Choice{{"Yes, discover them", "yes"}, {"Not now", "no"}}, []Choice{{"Yes, discover them", "yes"}, {"Not now", "no"}}
	return nil
}

// transportName is a server type as a reply names it.
func transportName(typ string) string {
	if typ == registry.TypeSSE {
		return "legacy SSE"
	}
	return "streamable HTTP"
}

// otherTransport reports whether a connection test's error is an HTTP refusal that the
// other transport may not get: an SSE-only server answers streamable HTTP's POST with
// 400, 404 or 405, and a streamable-HTTP-only one SSE's GET likewise. The test result
// carries the SDK's error text only, which ends in the status's text.
func otherTransport(msg string) bool {
	for _, st := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed} {
		if strings.HasSuffix(msg, http.StatusText(st)) || strings.Contains(msg, fmt.Sprintf("(HTTP %d", st)) {
			return true
		}
	}
	return false
}

// needsAuth reports whether a connection test's error is a 401 or 403.
func needsAuth(msg string) bool {
	for _, st := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		if strings.HasSuffix(msg, http.StatusText(st)) || strings.Contains(msg, fmt.Sprintf("(HTTP %d", st)) {
			return true
		}
	}
	return false
}

func (s *Service) serverState(ctx context.Context, actor audit.Actor, op *Op, cat *Catalogue, out *Reply) error {
	s.eachTarget("server", op, cat, out, func(id string) error {
		if op.Intent == IntentRemoveServer {
			if nameOf2(cat, id) == registry.BuiltinName {
				return fault.Conflict("builtin_server", "the built-in server cannot be removed (it can be disabled)")
			}
			return s.registry.DeleteServer(ctx, actor, id)
		}
		_, err := s.registry.SetEnabled(ctx, actor, id, op.Intent == IntentEnableServer)
		return err
	}, func(ids []string) string {
		verb := map[Intent]string{IntentRemoveServer: "removed", IntentEnableServer: "enabled", IntentDisableServer: "disabled"}[op.Intent]
		return fmt.Sprintf("I've %s the server %s", verb, labels(cat, ids))
	})
	return nil
}

func listServers(cat *Catalogue, d *Decision, out *Reply) {
	if len(cat.Servers) == 0 {
		out.Reply = "There are no MCP servers yet. Say \"add a new MCP server at https://example.com/mcp\" to add one."
		return
	}
	shown := cat.Servers[:min(len(cat.Servers), MaxChoices)]
	ids := make([]string, 0, len(shown))
	for _, sv := range shown {
		ids = append(ids, sv.ID)
	}
	// What the list shows is what its numbers and "all of them" can mean (State.LastIDs).
	d.State.shows("server", ids, len(cat.Servers)-len(shown), "", nil)
	out.Reply = fmt.Sprintf("Here are the %d MCP servers:", len(cat.Servers))
	if len(cat.Servers) == 1 {
		out.Reply = "There is one MCP server:"
	}
	if len(shown) < len(cat.Servers) {
		out.Reply += fmt.Sprintf(" (the first %d; the Servers page has them all)", len(shown))
	}
	for i, sv := range shown {
		state := sv.Status
		if !sv.Enabled {
			state = "disabled"
		}
		out.Choices = append(out.Choices, Choice{Label: fmt.Sprintf("%d. %s (%s)", i+1, sv.Name, state),
			Target: pickTarget("what's the status of", i+1)})
	}
	if len(cat.Servers) == 1 {
		out.Reply += " Say \"enable the first one\" or \"tell me about the first one\"."
	} else {
		out.Reply += " Say \"enable the first one\" or \"tell me about the second one\"."
	}
}

func (s *Service) serverStatus(cat *Catalogue, op *Op, out *Reply) {
	var lines []string
	for _, id := range op.IDs {
		for _, sv := range cat.Servers {
			if sv.ID != id {
				continue
			}
			n := 0
			enabled := 0
			for _, t := range cat.Tools {
				if t.ServerID == id {
					n++
					if t.State == "enabled" {
						enabled++
					}
				}
			}
			st := "enabled"
			if !sv.Enabled {
				st = "disabled"
			}
			where := sv.URL
			if where == "" {
				where = sv.Type
			}
			lines = append(lines, fmt.Sprintf("%s (%s) is %s and %s, with %d tools (%d enabled).", sv.Name, where, st, sv.Status, n, enabled))
			out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "server", TargetID: id, Name: sv.Name,
				Href: "/servers/" + id, OK: true})
		}
	}
	out.Reply = strings.Join(lines, " ")
}

func listTools(cat *Catalogue, op *Op, d *Decision, out *Reply) {
	var ids []string
	for _, t := range cat.Tools {
		if len(op.IDs) == 0 || containsID(op.IDs, t.ServerID) {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		out.Reply = "There are no tools yet. Add a server and discover its tools: say \"I want to set up a new tool\"."
		return
	}
	shown := ids
	if len(shown) > MaxChoices {
		shown = shown[:MaxChoices:MaxChoices]
	}
	// Only the tools shown are kept: "number 300" of 3,000 tools is refused, not done to
	// a tool never seen, and the state saved each turn stays small.
	more := ""
	if len(shown) < len(ids) {
		more = serverOf(cat, ids[len(shown)])
	}
	d.State.shows("tool", shown, len(ids)-len(shown), more, seenOf(cat, shown))
	out.Reply = fmt.Sprintf("Here are the %d tools", len(ids))
	if len(ids) == 1 {
		out.Reply = "There is one tool"
	}
	if len(op.IDs) == 1 {
		out.Reply += " on " + nameOf2(cat, op.IDs[0])
	}
	out.Reply += ":"
	if len(shown) < len(ids) {
		out.Reply += fmt.Sprintf(" (the first %d; the Tools page has them all)", len(shown))
	}
	for i, id := range shown {
		t := toolByID(cat, id)
		out.Choices = append(out.Choices, Choice{Label: fmt.Sprintf("%d. %s on %s (%s, %s)", i+1, t.Name, t.Server, t.State, t.Risk),
			Target: pickTarget("tell me about", i+1)})
	}
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func toolDetails(cat *Catalogue, op *Op, out *Reply) {
	var lines []string
	for _, id := range op.IDs {
		t := toolByID(cat, id)
		// A description is the upstream server's to write, of any length.
		desc := textcheck.Clip(strings.TrimSpace(t.Description), maxDescription, "…")
		line := fmt.Sprintf("%s on %s: %s It is %s, risk %s.", t.Name, t.Server, desc, t.State, t.Risk)
		if t.Category != "" {
			line += " Category: " + t.Category + "."
		}
		if len(t.Tags) > 0 {
			line += " Tags: " + strings.Join(t.Tags, ", ") + "."
		}
		if len(t.Params) > 0 {
			var ps []string
			for _, p := range t.Params {
				ps = append(ps, p.Name)
			}
			line += " Parameters: " + strings.Join(ps, ", ") + "."
		}
		lines = append(lines, line)
		out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "tool", TargetID: id, Name: t.Name,
			Href: "/tools/" + id, OK: true})
	}
	out.Reply = strings.Join(lines, "\n") + leftOut(op)
}

// maxDescription bounds a tool's description in a reply, as the LLM planner's prompt does.
const maxDescription = 1024

func (s *Service) toolState(ctx context.Context, actor audit.Actor, op *Op, cat *Catalogue, out *Reply) error {
	enable := op.Intent == IntentEnableTool
	reason := "asked the assistant: " + clip(op.Sentence, 200)
	var outs []tools.Outcome
	ids := op.IDs
	if enable && op.Listed && op.Seen != nil {
		// Tools picked from a list are enabled as the list showed them, as the pages
		// do; one it did not show is not enabled at all.
		ids = nil
		for _, id := range op.IDs {
			if _, shown := op.Seen[id]; !shown {
				outs = append(outs, tools.Outcome{ID: id, Name: nameOf2(cat, id),
					Error: "it was not among the tools shown here; name it, or enable it on its page"})
				continue
			}
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 || len(outs) == 0 {
		// op.Seen is the definition of each tool as the list, or the question a yes
		// answers, showed it: a definition rediscovered since is refused (stale) for that
		// tool, in the one transaction that moves the others.
		var seen map[string]string
		if enable {
			seen = op.Seen
		}
		o, err := s.tools.SetEnabledSeenEach(ctx, actor, ids, enable, reason, false, seen)
		if err != nil {
			return err
		}
		outs = append(outs, o...)
	}
	var done, already, failed []string
	for _, o := range outs {
		a := Action{Kind: string(op.Intent), TargetType: "tool", TargetID: o.ID, Name: o.Name, Href: "/tools/" + o.ID, OK: o.Error == "", Error: o.Error}
		out.Actions = append(out.Actions, a)
		switch {
		case o.Error != "":
			failed = append(failed, o.Name+": "+o.Error)
		case o.From == o.To:
			already = append(already, o.Name) // nothing moved, nothing was written
		default:
			done = append(done, o.Name)
		}
	}
	verb := "disabled"
	if enable {
		verb = "enabled"
	}
	switch {
	case len(failed) == 0 && len(done) == 0 && len(already) == 1:
		out.Reply = fmt.Sprintf("The %s tool is already %s; nothing changed.", already[0], verb)
	case len(failed) == 0 && len(done) == 0:
		out.Reply = fmt.Sprintf("These tools are already %s; nothing changed: %s.", verb, strings.Join(already, ", "))
	case len(failed) == 0 && len(done) == 1 && len(already) == 0:
		out.Reply = fmt.Sprintf("✅ The %s tool has been %s", done[0], verb)
		if enable {
			out.Reply += " and is ready to use."
		} else {
			out.Reply += "."
		}
	case len(failed) == 0:
		n := fmt.Sprintf("%d tools", len(done))
		if len(done) == 1 {
			n = "1 tool"
		}
		out.Reply = fmt.Sprintf("✅ I've %s %s: %s.", verb, n, strings.Join(done, ", "))
		if len(already) > 0 {
			out.Reply += fmt.Sprintf(" Already %s: %s.", verb, strings.Join(already, ", "))
		}
	default:
		out.Reply = ""
		if len(done) > 0 {
			out.Reply = fmt.Sprintf("✅ %s: %s. ", verb, strings.Join(done, ", "))
		}
		if len(already) > 0 {
			out.Reply += fmt.Sprintf("Already %s: %s. ", verb, strings.Join(already, ", "))
		}
		out.Reply += "❌ Not changed: " + strings.Join(failed, "; ") + "."
	}
	if op.LeftOut > 0 && enable {
		out.Reply += fmt.Sprintf("\n%d more were not shown here, so I left them out: enable them by name or on their server's page.", op.LeftOut)
	}
	return nil
}

func (s *Service) configure(ctx context.Context, actor audit.Actor, op *Op, cat *Catalogue, out *Reply) error {
	for _, id := range op.IDs {
		// The configuration and its version in one read: the whole map is sent back, so
		// a save on the tool's page since then must fail (stale), not be undone.
		tg, err := s.tools.Target(ctx, id)
		if err != nil {
			return err
		}
		if s.configRead != nil {
			s.configRead(id)
		}
		cur, version := tg.Configuration(), tg.ConfigVersion
		in := map[string]tools.ParamInput{}
		// Only the parameters the tool still has are sent back: a setting of one its
		// definition dropped would be refused, and with it every change from here.
		for name, set := range cur.Declared(tg.InputSchema).Params {
			in[name] = tools.ParamInput{Mode: set.Mode, Value: set.Value}
		}
		for name, v := range op.Settings {
			mode := tools.ModeDefault
			if c, ok := cur.Params[name]; ok && c.Mode == tools.ModeFixed {
				mode = tools.ModeFixed
			}
			in[name] = tools.ParamInput{Mode: mode, Text: &v}
		}
		_, err = s.tools.Update(ctx, actor, id, tools.Patch{Params: in, ExpectVersion: &version, Reason: "asked the assistant: " + clip(op.Sentence, 200)})
		if f, _ := fault.As(err); f != nil && f.Code == tools.CodeStale {
			return fault.Stale(tools.CodeStale, fmt.Sprintf("someone changed the settings of %s while I was changing them, so I changed nothing there; say it again to apply yours to the new settings", label(cat, id)))
		}
		if err != nil {
			return err
		}
		out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "tool", TargetID: id, Name: nameOf2(cat, id),
			Href: "/tools/" + id, OK: true})
	}
	var parts []string
	for k, v := range op.Settings {
		parts = append(parts, k+" = "+v)
	}
	out.Reply = fmt.Sprintf("✅ I've updated %s: %s (used when a caller gives no value).", labels(cat, op.IDs), strings.Join(parts, ", "))
	return nil
}

// test runs a tool's saved test cases through the router, as the test panel's "Run all"
// does (a person who may enable tools verifies a tool that is not enabled yet); a tool
// without cases is reported with its server's state and a link to its test panel.
func (s *Service) test(ctx context.Context, actor audit.Actor, p *auth.Principal, op *Op, cat *Catalogue, d *Decision, out *Reply) error {
	var lines []string
	for _, id := range op.IDs {
		t := toolByID(cat, id)
		a := Action{Kind: string(op.Intent), TargetType: "tool", TargetID: id, Name: t.Name, Href: "/tools/" + id + "/test", OK: true}
		cases, err := s.tools.TestCases(ctx, id)
		if err != nil {
			return err
		}
		// The definition the cases run against: a run that ends on another one (a
		// discovery meanwhile) verifies nothing.
		before, err := s.tools.Get(ctx, id)
		if err != nil {
			return err
		}
		if len(cases) == 0 || s.router == nil {
			lines = append(lines, fmt.Sprintf("%s on %s has no saved test cases, so I can't tell whether it works without calling it with made-up arguments. Its server is %s and the tool is %s; try it on its test panel and save a test case.",
				t.Name, t.Server, s.mcp.Snapshot(t.ServerID).Status, t.State))
			out.Actions = append(out.Actions, a)
			continue
		}
		// A yes to medium cases is for the cases it was asked for, at the tool's risk
		// then: a case added or edited since, or a risk changed, is asked about again.
		snap, level := casesSeen(cases), string(before.Risk().Level)
		confirmed := op.Confirmed && maps.Equal(snap, op.Cases) && level == op.CasesRisk
		results, err := s.router.RunCases(ctx, router.Call{Tool: id, Actor: actor, Role: p.User.Role, Source: router.SourceTestPanel,
			Test: p.Can(auth.PermToolEnable), Approval: router.Approval{Confirmed: confirmed}}, cases)
		var re *router.Error
		if errors.As(err, &re) && re.Code == router.CodeApprovalRequired && len(op.IDs) == 1 {
			// As on the test panel, by each case's own level (the router checked them all
			// before running any): medium cases run once the person confirms; a high one
			// needs its phrase typed there, and another approver is asked there too.
			switch need, _ := re.Details.(router.ApprovalNeeded); need.Needs {
			case "confirm":
				next := *op
				next.Confirm, next.Confirmed = true, true
				next.Cases, next.CasesRisk = snap, level
				d.State.Pending = &next
				out.Reply = fmt.Sprintf("%s of the %d test cases of %s on %s are medium risk, so running them needs your confirmation. Run them?",
					s.countCases(ctx, id, cases, risk.Medium), len(cases), t.Name, t.Server)
				if op.Confirmed {
					out.Reply = "Its test cases or its risk changed since you said yes, so nothing was run. " + out.Reply
				}
				out.Choices = []Choice{{"Yes, run them", "yes"}, {"No", "no"}}
			case "phrase":
				out.Reply = fmt.Sprintf("%s of the test cases of %s on %s are high risk: they run only from its test panel, where you type the confirmation phrase.",
					s.countCases(ctx, id, cases, risk.High), t.Name, t.Server)
			default:
				out.Reply = fmt.Sprintf("The test cases of %s on %s did not run: %s. Load a case on its test panel and use Ask for approval.",
					t.Name, t.Server, re.Message)
			}
			out.Actions = append(out.Actions, a)
			return nil
		}
		if stopped := (*router.CasesStopped)(nil); errors.As(err, &stopped) && len(results) > 0 {
			// Those that ran reached the server: recorded as the test panel records them,
			// verifying nothing, since the rest did not run.
			if _, rerr := s.tools.RecordTestRun(context.WithoutCancel(ctx), actor, id, before.DefinitionHash, results, false, false); rerr != nil {
				return rerr
			}
			passed := 0
			for _, r := range results {
				if r.Passed {
					passed++
				}
			}
			a.OK, a.Error = false, stopped.Message()
			out.Actions = append(out.Actions, a)
			lines = append(lines, fmt.Sprintf("❌ %s on %s: %s; %d of the %d that ran passed, and a run that did not finish does not change the tool's state.",
				t.Name, t.Server, stopped.Message(), passed, len(results)))
			continue
		}
		if err != nil {
			a.OK, a.Error = false, errText(err)
			out.Actions = append(out.Actions, a)
			lines = append(lines, fmt.Sprintf("❌ %s on %s: its test cases did not run: %s", t.Name, t.Server, err.Error()))
			continue
		}
		verify := p.Can(auth.PermToolEnable)
		rec, err := s.tools.RecordTestRun(ctx, actor, id, before.DefinitionHash, results, verify, p.Can(auth.PermToolOverride))
		if err != nil {
			return err
		}
		status := rec.Status
		passed := 0
		var failed []string
		for _, r := range results {
			if r.Passed {
				passed++
			} else {
				failed = append(failed, r.Name+": "+r.Message)
			}
		}
		line := fmt.Sprintf("%s on %s: %d of %d test cases passed.", t.Name, t.Server, passed, len(results))
		if passed == len(results) {
			line = "✅ " + line
		} else {
			line = "❌ " + line + " " + strings.Join(failed, "; ")
			a.OK = false
		}
		if rec.DefinitionChanged {
			line += " Its definition changed while they ran, so they did not verify it: run them again."
		} else if rec.CasesChanged {
			line += " Its cases changed while they ran, so they did not verify it: run them again."
		} else if rec.OverrideNeeded != "" {
			line += " The tool stays " + status + ": " + rec.OverrideNeeded + "."
		} else if verify && status != t.State {
			line += " The tool is now " + status + "."
		}
		lines = append(lines, line)
		out.Actions = append(out.Actions, a)
	}
	out.Reply = strings.Join(lines, "\n") + leftOut(op)
	return nil
}

// casesSeen is each case's id and last change: what a yes to run them was given for.
func casesSeen(cases []tools.TestCase) map[string]string {
	out := make(map[string]string, len(cases))
	for _, tc := range cases {
		out[tc.ID] = tc.UpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// countCases says how many of a tool's cases the router rates at level, as a word for a
// reply ("Some" when it cannot tell).
func (s *Service) countCases(ctx context.Context, toolID string, cases []tools.TestCase, level risk.Level) string {
	n := 0
	for _, tc := range cases {
		d, err := s.router.RiskOf(ctx, toolID, tc.Arguments)
		if err != nil {
			return "Some"
		}
		if d.Level == level {
			n++
		}
	}
	if n == 0 {
		return "Some"
	}
	return fmt.Sprint(n)
}

func (s *Service) discover(ctx context.Context, actor audit.Actor, op *Op, cat *Catalogue, d *Decision, out *Reply) error {
	if len(op.IDs) > 1 {
		return s.discoverMany(ctx, actor, op, cat, d, out)
	}
	for _, id := range op.IDs {
		res, err := s.discoverOne(ctx, id, actor, time.Now().Add(s.connectWait))
		if err != nil {
			d.State.Flow = nil
			return err
		}
		if err := s.listFound(ctx, op, id, res, cat, d, out); err != nil {
			return err
		}
	}
	return nil
}

// discovered is a server's discovery run before the turn locked its conversation.
type discovered struct {
	res registry.DiscoveryResult
	err error
}

// reportFound writes what a discovery run before the lock found into the reply, as run
// would have written the discovery it ran.
func (s *Service) reportFound(ctx context.Context, op *Op, f *discovered, cat *Catalogue, d *Decision, out *Reply) {
	err := f.err
	if err == nil {
		err = s.listFound(ctx, op, op.IDs[0], f.res, cat, d, out)
	}
	if err != nil {
		d.State.Flow = nil
		out.Reply = s.failure(op, err)
		out.Actions = append(out.Actions, Action{Kind: string(op.Intent), Error: errText(err)})
	}
}

// listFound answers a discovery of server id that found res: its counts and the first
// of its tools, numbered, for the next message (or the set-up's "which ones?") to pick.
func (s *Service) listFound(ctx context.Context, op *Op, id string, res registry.DiscoveryResult, cat *Catalogue, d *Decision, out *Reply) error {
	out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "server", TargetID: id, Name: nameOf2(cat, id),
		Href: "/servers/" + id, OK: true})
	// One page of what is listed, and the count: a server may store twenty
	// thousand tools with their schemas, and the reply shows MaxChoices.
	page, err := s.registry.ServerToolsPage(ctx, id, MaxChoices, "")
	if err != nil {
		return err
	}
	ts := page.Tools
	// In a set-up (a server just added, or one picked), "which ones?" picks among
	// exactly the tools found here.
	setup := d.State.Flow != nil && (d.State.Flow.Step == StepWhichTools || d.State.Flow.Step == StepDiscover)
	var ids []string // the tools listed: the first MaxChoices (State.LastIDs)
	seen := map[string]string{}
	for i, t := range ts {
		if i >= MaxChoices {
			break
		}
		ids = append(ids, t.ID)
		seen[t.ID] = t.DefinitionHash
		target := fmt.Sprint(i + 1) // the guided set-up's "which ones?"
		if !setup {
			target = pickTarget("tell me about", i+1)
		}
		out.Choices = append(out.Choices, Choice{Label: fmt.Sprintf("%d. %s (%s)", i+1, t.Name, t.Status), Target: target})
	}
	d.State.shows("tool", ids, page.Total-len(ids), nameOf2(cat, id), seen)
	if setup {
		f := *d.State.Flow
		f.Step, f.ToolIDs, f.More, f.Seen = StepWhichTools, ids, page.Total-len(ids), seen
		d.State.Flow = &f
	}
	out.Reply = fmt.Sprintf("I found %d tools on %s (%d new, %d updated).", res.Total, nameOf2(cat, id), res.Added, res.Updated)
	if page.Total > len(ids) {
		out.Reply += fmt.Sprintf(" The first %d are listed; the server's page has them all.", MaxChoices)
	}
	if d.State.Flow != nil && d.State.Flow.Step == StepWhichTools && len(ids) > 0 {
		out.Reply += " Which ones would you like to enable? Say their numbers (\"1 and 3\"), \"all of them\", or \"none\"."
		out.Choices = append(out.Choices, Choice{Label: "All of them", Target: "all of them"}, Choice{Label: "None", Target: "no"})
	} else {
		d.State.Flow = nil
		out.Reply += " Say \"enable the first one\" or \"enable all of them\"."
	}
	return nil
}

// discoverMany discovers several servers' tools and answers with each server's counts,
// as refresh does: numbered tools over several servers would be read back as one list
// ("the first one"), so there are none, and what the last list was is the servers.
// Servers still connecting are waited for within one deadline for them all.
func (s *Service) discoverMany(ctx context.Context, actor audit.Actor, op *Op, cat *Catalogue, d *Decision, out *Reply) error {
	d.State.Flow = nil
	// One deadline for them all, as a refresh has (refreshWait).
	parent := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, s.refreshWait, errRefreshLate)
	defer cancel()
	deadline := time.Now().Add(s.connectWait)
	var parts, unreached, late []string
	for _, id := range op.IDs {
		name := nameOf2(cat, id)
		a := Action{Kind: string(op.Intent), TargetType: "server", TargetID: id, Name: name, Href: "/servers/" + id, OK: true}
		var res registry.DiscoveryResult
		err := ctx.Err()
		if err == nil {
			res, err = s.discoverOne(ctx, id, actor, deadline)
		}
		switch {
		case err != nil && parent.Err() != nil:
			return err
		case err != nil && ctx.Err() != nil:
			late = append(late, name)
			a.OK, a.Error = false, errRefreshLate.Error()
		case notConnected(err):
			unreached = append(unreached, name+" ("+s.failureReason(err)+")")
			a.OK, a.Error = false, errText(err)
		case err != nil:
			parts = append(parts, name+": "+s.failure(op, err))
			a.OK, a.Error = false, errText(err)
		default:
			parts = append(parts, fmt.Sprintf("%s: %d tools (%d new, %d updated)", name, res.Total, res.Added, res.Updated))
		}
		out.Actions = append(out.Actions, a)
	}
	shown := op.IDs[:min(len(op.IDs), MaxChoices):min(len(op.IDs), MaxChoices)]
	d.State.shows("server", shown, len(op.IDs)-len(shown), "", nil)
	out.Reply = fmt.Sprintf("I discovered the tools of %d servers.", len(op.IDs))
	if len(late) > 0 {
		out.Reply = fmt.Sprintf("I discovered the tools of %d of the %d servers.", len(op.IDs)-len(late), len(op.IDs))
	}
	if len(parts) > 0 {
		out.Reply += " " + strings.Join(parts, "; ") + "."
	}
	out.Reply += notReached(unreached) + notInTime(s.refreshWait, late)
	out.Reply += fmt.Sprintf(" Say \"show me the tools on %s\" to see and pick one server's tools.", nameOf2(cat, op.IDs[0]))
	return nil
}

// connectWait bounds how long discovery waits for servers still connecting (one added a
// moment ago): one server's discovery, or all of a refresh's together.
const connectWait = 10 * time.Second

// notConnected reports whether err is discovery's refusal of a server without a session.
func notConnected(err error) bool {
	var fe *fault.Error
	return errors.As(err, &fe) && fe.Code == "not_connected"
}

// notReached says which servers discovery did not reach, with each one's state ("" when
// it reached them all).
func notReached(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf(" ❌ Not reached, so their tools were not discovered (%d): %s.", len(names), strings.Join(names, "; "))
}

// connecting reports whether a server's session is being opened for the first time (added
// or enabled a moment ago; no status yet is a session only starting), so it may connect
// shortly. One in error, backing off or with its circuit open has failed already: its
// state is the answer, not a wait.
func connecting(sn mcpclient.Snapshot) bool {
	return sn.Status == "" || sn.Status == registry.StatusConnecting && sn.Failures == 0 && !sn.BreakerOpen
}

// discoverOne discovers a server's tools. A server that is enabled and still connecting
// for the first time is waited for until deadline; one that is not connected otherwise
// (in error, backing off) is answered at once with its state: a refresh of many
// unreachable servers holds the conversation's lock and a connection meanwhile. A
// disabled server is not waited for: it will not connect until someone enables it, so
// it is looked up again each time (someone may disable or delete it meanwhile).
func (s *Service) discoverOne(ctx context.Context, id string, actor audit.Actor, deadline time.Time) (registry.DiscoveryResult, error) {
	for {
		res, err := s.mcp.Discover(ctx, id, actor)
		if err == nil || !notConnected(err) {
			return res, err
		}
		if s.connectWaited != nil {
			s.connectWaited(id)
		}
		sv, gerr := s.registry.GetServer(ctx, id)
		if gerr != nil {
			return res, gerr
		}
		if !sv.Enabled {
			return res, fault.Conflict("server_disabled", fmt.Sprintf(
				"the server %s is disabled, so its tools cannot be discovered: enable it first (say \"enable the server %s\")", sv.Name, sv.Name)).About("server")
		}
		// Connected by now: it connected after Discover looked, so it is asked again.
		if sn := s.mcp.Snapshot(id); !connecting(sn) && sn.Status != registry.StatusConnected || time.Now().After(deadline) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// refreshWait bounds a whole refresh: one server's discovery may take mcpclient's ten
// minutes, and the turn holds one of the replica's turns meanwhile (and, for a refresh
// said yes to, the conversation's lock and a connection). The servers not refreshed by
// then are named in the reply. As long as a model's reading may take.
const refreshWait = 60 * time.Second

// errRefreshLate ends the discoveries of a refresh that took refreshWait.
var errRefreshLate = errors.New("not refreshed in time")

// refreshed is what a refresh found: each server's counts or failure, the servers it did
// not reach (with why) and those it had no time left for.
type refreshed struct {
	parts, unreached, late []string
	actions                []Action
	wait                   time.Duration
}

// enabledServers are the servers a refresh discovers.
func enabledServers(cat *Catalogue) []Server {
	var on []Server
	for _, sv := range cat.Servers {
		if sv.Enabled {
			on = append(on, sv)
		}
	}
	return on
}

// refreshAll discovers every enabled server's tools, one after the other, all within
// refreshWait: one slow upstream cannot hold the turn for its ten minutes, nor thirty
// slow ones for hours.
func (s *Service) refreshAll(ctx context.Context, actor audit.Actor, cat *Catalogue) *refreshed {
	r := &refreshed{wait: s.refreshWait}
	ctx, cancel := context.WithTimeoutCause(ctx, s.refreshWait, errRefreshLate)
	defer cancel()
	// One deadline for every server still connecting: each waited for in turn, thirty
	// of them would hold the turn for minutes.
	deadline := time.Now().Add(s.connectWait)
	for _, sv := range enabledServers(cat) {
		late := Action{Kind: string(IntentRefresh), TargetType: "server", TargetID: sv.ID, Name: sv.Name, Error: errRefreshLate.Error()}
		if ctx.Err() != nil {
			r.late = append(r.late, sv.Name)
			r.actions = append(r.actions, late)
			continue
		}
		res, err := s.discoverOne(ctx, sv.ID, actor, deadline)
		switch {
		case err != nil && ctx.Err() != nil:
			// Cut short by the deadline (or the request's end): not a failure of the server's.
			r.late = append(r.late, sv.Name)
			r.actions = append(r.actions, late)
		case err != nil:
			if notConnected(err) {
				r.unreached = append(r.unreached, sv.Name+" ("+s.failureReason(err)+")")
			} else {
				r.parts = append(r.parts, sv.Name+": "+s.failure(&Op{}, err))
			}
			r.actions = append(r.actions, Action{Kind: string(IntentRefresh), TargetType: "server", TargetID: sv.ID, Name: sv.Name, Error: errText(err)})
		default:
			r.parts = append(r.parts, fmt.Sprintf("%s: %d tools (%d new, %d updated, %d removed)", sv.Name, res.Total, res.Added, res.Updated, res.Removed))
			r.actions = append(r.actions, Action{Kind: string(IntentRefresh), TargetType: "server", TargetID: sv.ID, Name: sv.Name, OK: true})
		}
	}
	return r
}

// report writes what the refresh found into the reply.
func (r *refreshed) report(out *Reply) {
	out.Actions = append(out.Actions, r.actions...)
	if len(r.actions) == 0 {
		out.Reply = "No server is enabled, so there was nothing to refresh."
		return
	}
	out.Reply = "I refreshed the tools of every enabled server."
	if len(r.late) > 0 {
		out.Reply = "I refreshed the tools of the enabled servers I had time for."
	}
	if len(r.parts) > 0 {
		out.Reply += " " + strings.Join(r.parts, "; ") + "."
	}
	out.Reply += notReached(r.unreached) + notInTime(r.wait, r.late)
}

// notInTime says which servers a discovery of several had no time left for ("" when
// none), and how to discover them.
func notInTime(wait time.Duration, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf(" ⏱ Not discovered within %s, so their tools were not refreshed (%d): %s. Discover them one at a time (\"discover new tools on %s\").",
		textcheck.DurationWords(wait), len(names), strings.Join(names, "; "), names[0])
}

func (s *Service) settings(ctx context.Context, actor audit.Actor, p *auth.Principal, op *Op, cat *Catalogue, out *Reply) error {
	switch op.Intent {
	case IntentTag, IntentUntag:
		if _, err := s.tools.Tag(ctx, actor, op.IDs, op.Tags, op.Intent == IntentUntag); err != nil {
			return err
		}
		what := "tagged " + labels(cat, op.IDs) + " with " + strings.Join(op.Tags, ", ")
		if op.Intent == IntentUntag {
			what = "removed the tags " + strings.Join(op.Tags, ", ") + " from " + labels(cat, op.IDs)
		}
		for _, id := range op.IDs {
			out.Actions = append(out.Actions, Action{Kind: string(op.Intent), TargetType: "tool", TargetID: id, Name: nameOf2(cat, id),
				Href: "/tools/" + id, OK: true})
		}
		out.Reply = "✅ I've " + what + "."
		return nil
	}
	s.eachTarget("tool", op, cat, out, func(id string) error {
		patch := tools.Patch{Reason: "asked the assistant: " + clip(op.Sentence, 200), MayLowerRisk: p.Can(auth.PermToolOverride)}
		if op.Intent == IntentSetRisk {
			r := strings.ToLower(op.Risk)
			patch.Risk = &r
		} else {
			c := op.Category
			patch.Category = &c
		}
		_, err := s.tools.Update(ctx, actor, id, patch)
		return err
	}, func(ids []string) string {
		if op.Intent == IntentSetCategory {
			return "I've put " + labels(cat, ids) + " in the " + op.Category + " category"
		}
		return "I've made " + labels(cat, ids) + " " + strings.ToLower(op.Risk) + " risk"
	})
	return nil
}

// eachTarget applies op to each of its targets (kind "tool" or "server"), each in its
// own transaction (and audited there): one refused does not undo those done before it,
// so each is an action as it goes, and the reply says which changed (said, of those)
// and which did not, and why.
func (s *Service) eachTarget(kind string, op *Op, cat *Catalogue, out *Reply, apply func(id string) error, said func(ids []string) string) {
	var done, failed []string
	var firstErr error
	same := true // every failure for the same reason (a category that does not exist)
	for _, id := range op.IDs {
		a := Action{Kind: string(op.Intent), TargetType: kind, TargetID: id, Name: nameOf2(cat, id), Href: "/" + kind + "s/" + id, OK: true}
		if err := apply(id); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			same = same && err.Error() == firstErr.Error()
			a.OK, a.Error = false, errText(err)
			failed = append(failed, label(cat, id)+": "+strings.TrimSuffix(s.failureReason(err), "."))
		} else {
			done = append(done, id)
		}
		out.Actions = append(out.Actions, a)
	}
	switch {
	case len(failed) == 0:
		out.Reply = "✅ " + said(done) + "."
	case len(done) == 0 && same:
		out.Reply = s.failure(op, firstErr)
	default:
		out.Reply = ""
		if len(done) > 0 {
			out.Reply = "✅ " + said(done) + ". "
		}
		if len(failed) > maxFailuresSaid {
			failed = append(failed[:maxFailuresSaid:maxFailuresSaid], fmt.Sprintf("and %d more (see the actions)", len(failed)-maxFailuresSaid))
		}
		out.Reply += "❌ Not changed: " + strings.Join(failed, "; ") + "."
	}
}

// maxFailuresSaid bounds the failures a reply spells out; each is among the actions.
const maxFailuresSaid = 8

func (s *Service) permission(ctx context.Context, actor audit.Actor, op *Op, cat *Catalogue, out *Reply) error {
	can := op.Intent == IntentGrant
	s.eachTarget("tool", op, cat, out, func(id string) error {
		return s.tools.SetPermission(ctx, actor, id, op.Username, &can)
	}, func(ids []string) string {
		if can {
			return fmt.Sprintf("%s may now use %s", op.Username, labels(cat, ids))
		}
		return fmt.Sprintf("%s may no longer use %s", op.Username, labels(cat, ids))
	})
	return nil
}

// storedID is the id a conversation is stored under: the person's own id, or for an
// API token one of the token's own (ids a person picks cannot hold "~"), so a token's
// conversations are never the ones a person's page opens.
func storedID(p *auth.Principal, convID string) string {
	if p.Kind == audit.ActorToken {
		return "~" + p.TokenID + "~" + convID
	}
	return convID
}

// capPrefix is what the ids of the conversations capped together with p's begin with:
// "" for a person's own, and "~" for all of the person's API tokens together. Each
// token's apart would let a person keep any number by creating, using and revoking
// tokens (a revoked token's conversations stay until the next prune).
func capPrefix(p *auth.Principal) string {
	if p.Kind == audit.ActorToken {
		return "~"
	}
	return ""
}

// peekState reads a conversation's state without locking it (a new one's is empty): what
// a turn expects to find before it waits on the model.
func (s *Service) peekState(ctx context.Context, p *auth.Principal, convID string) (State, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `/* assistant.peek */ SELECT state FROM assistant_conversations
		WHERE user_id = $1 AND id = $2`, p.User.ID, storedID(p, convID)).Scan(&raw)
	var st State
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("assistant: read conversation: %w", err)
	}
	_ = json.Unmarshal(raw, &st) // as withConversation reads it
	return st, nil
}

// withConversation runs fn with the conversation's state locked for the message's whole
// turn (two answers sent at once are taken one after the other, so a yes cannot run its
// op twice); save stores the new state and both messages in the same transaction.
func (s *Service) withConversation(ctx context.Context, p *auth.Principal, convID string,
	fn func(st *State, save func(msg string, out Reply) error) error) error {
	id := storedID(p, convID)
	// Once the turn has its lock, it is saved and committed even when the person's
	// request is gone: an act done for it has committed in its own transaction, and the
	// state that says so (its yes spent) must be too, or the old Yes button would do it
	// again. Waiting for the lock still ends with the request.
	kept := context.WithoutCancel(ctx)
	return db.WithTx(kept, s.pool, func(tx pgx.Tx) error {
		// Opened and locked in one statement: between an insert that did nothing and a
		// SELECT … FOR UPDATE, another turn's cap on conversations could delete the row.
		// DO UPDATE waits for a lock as FOR UPDATE does, and inserts anew if the row it
		// waited on was deleted.
		var raw []byte
		if err := tx.QueryRow(ctx, `/* assistant.open */ INSERT INTO assistant_conversations (user_id, id) VALUES ($1, $2)
			ON CONFLICT (user_id, id) DO UPDATE SET state = assistant_conversations.state
			RETURNING state`, p.User.ID, id).Scan(&raw); err != nil {
			return fmt.Errorf("assistant: open conversation: %w", err)
		}
		var st State
		_ = json.Unmarshal(raw, &st) // a state an older version wrote starts afresh
		return fn(&st, func(msg string, out Reply) error {
			return saveTurn(kept, tx, p.User.ID, id, capPrefix(p), msg, st, out)
		})
	})
}

// A conversation keeps its newest maxMessagesKept messages (the page shows 100, and
// nothing reads older ones: a turn's context is its state); a person keeps their
// maxConversations most recently used, and their API tokens together as many apart. Without
// them, one conversation kept in use, or a loop starting new ones, grows without end.
const (
	maxMessagesKept  = 200
	maxConversations = 100
)

// saveTurn stores the new state and both messages, and trims the conversation and the
// conversations of its owner to the bounds above: the person's own (prefix ""), or all
// of the person's API tokens' together (prefix "~", capPrefix).
func saveTurn(ctx context.Context, q db.Querier, userID, id, prefix, msg string, st State, out Reply) error {
	state, err := json.Marshal(st)
	if err != nil {
		return err
	}
	choices, _ := json.Marshal(out.Choices)
	actions, _ := json.Marshal(out.Actions)
	if _, err := q.Exec(ctx, `/* assistant.save */ UPDATE assistant_conversations SET state = $3, updated_at = now()
		WHERE user_id = $1 AND id = $2`, userID, id, state); err != nil {
		return fmt.Errorf("assistant: save: %w", err)
	}
	if _, err := q.Exec(ctx, `/* assistant.save.messages */
		INSERT INTO assistant_messages (user_id, conversation_id, author, body, choices, actions, question)
		VALUES ($1, $2, 'person', $3, '[]', '[]', 0), ($1, $2, 'assistant', $4, $5, $6, $7)`,
		userID, id, msg, out.Reply, choices, actions, out.Question); err != nil {
		return fmt.Errorf("assistant: save: %w", err)
	}
	if _, err := q.Exec(ctx, `/* assistant.save.trim */ DELETE FROM assistant_messages
		WHERE user_id = $1 AND conversation_id = $2 AND id < (SELECT id FROM assistant_messages
			WHERE user_id = $1 AND conversation_id = $2 ORDER BY id DESC OFFSET $3 LIMIT 1)`,
		userID, id, maxMessagesKept-1); err != nil {
		return fmt.Errorf("assistant: trim conversation: %w", err)
	}
	// Conversations another turn has locked are skipped, not waited on (two turns each
	// waiting on the other's would deadlock); a conversation in use is among the newest
	// once saved anyway.
	// The prefix is compared whole, not with LIKE: a token's loop trims its person's
	// other tokens' conversations (they are capped together), never the person's own.
	if _, err := q.Exec(ctx, `/* assistant.save.cap */ DELETE FROM assistant_conversations
		WHERE (user_id, id) IN (SELECT user_id, id FROM assistant_conversations
			WHERE (user_id, id) IN (SELECT user_id, id FROM assistant_conversations
				WHERE user_id = $1 AND id <> $2
					AND CASE WHEN $4 = '' THEN id NOT LIKE '~%' ELSE left(id, length($4)) = $4 END
				ORDER BY updated_at DESC, id OFFSET $3)
			FOR UPDATE SKIP LOCKED)`,
		userID, id, maxConversations-1, prefix); err != nil {
		return fmt.Errorf("assistant: cap conversations: %w", err)
	}
	return nil
}

// History is a conversation's last messages, oldest first.
func (s *Service) History(ctx context.Context, userID, convID string, limit int) ([]Message, error) {
	rows, err := s.pool.Query(ctx, `/* assistant.History */
		SELECT id, at, author, body, choices, actions, question FROM (
			SELECT * FROM assistant_messages WHERE user_id = $1 AND conversation_id = $2 ORDER BY id DESC LIMIT $3) m
		ORDER BY id`, userID, convID, limit)
	if err != nil {
		return nil, fmt.Errorf("assistant: history: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) {
		var m Message
		var ch, ac []byte
		if err := r.Scan(&m.ID, &m.At, &m.Author, &m.Body, &ch, &ac, &m.Question); err != nil {
			return m, err
		}
		_ = json.Unmarshal(ch, &m.Choices)
		_ = json.Unmarshal(ac, &m.Actions)
		return m, nil
	})
}

// Turn is the conversation's last turn (Reply.Turn; 0 for none): what a window showing
// it sends back as seen.
func (s *Service) Turn(ctx context.Context, userID, convID string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `/* assistant.Turn */
		SELECT coalesce((state->>'question')::bigint, 0) FROM assistant_conversations WHERE user_id = $1 AND id = $2`,
		userID, convID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// LatestConversation is the id of the person's most recent conversation ("" if none).
func (s *Service) LatestConversation(ctx context.Context, userID string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `/* assistant.LatestConversation */
		SELECT id FROM assistant_conversations WHERE user_id = $1 AND id NOT LIKE '~%' ORDER BY updated_at DESC LIMIT 1`, userID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// Prune removes the conversations nobody wrote in for keep, and those of API tokens no
// longer live, with their messages.
func (s *Service) Prune(ctx context.Context, keep time.Duration) (int64, error) {
	// An API token's conversations (storedID: "~<token id>~<id>") go with the token too,
	// once it is revoked, expired or deleted: nothing can read them any more, and they
	// would hold their person's share of the tokens' conversations for the rest of keep.
	tag, err := s.pool.Exec(ctx, `/* assistant.Prune */
		DELETE FROM assistant_conversations c WHERE c.updated_at < now() - $1::interval
			OR c.id LIKE '~%' AND NOT EXISTS (SELECT 1 FROM api_tokens t
				WHERE t.id = CASE WHEN split_part(c.id, '~', 2) ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
						THEN split_part(c.id, '~', 2)::uuid END -- the key, by its index
					AND t.user_id = c.user_id
					AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()))`, keep)
	if err != nil {
		return 0, fmt.Errorf("assistant: prune: %w", err)
	}
	return tag.RowsAffected(), nil
}
