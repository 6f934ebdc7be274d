// Package audit is the append-only, hash-chained audit log (docs/security.md). Entries are
// written in the transaction of the action they record: if the entry cannot be
// written, the action does not happen.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
)

// Actor kinds.
const (
	ActorUser      = "user"
	ActorToken     = "token"
	ActorSystem    = "system"
	ActorAnonymous = "anonymous"
)

// Topic is the event topic on which every appended entry is announced.
const Topic = "audit"

// Actor is who did something, and from where.
type Actor struct {
	Kind      string // ActorUser, ActorToken, ActorSystem, ActorAnonymous
	ID        string // user id, empty for system and anonymous
	Name      string // username (or "system")
	IP        string
	RequestID string
	// TokenID is the API token a token actor used (who acted is the token's user), so
	// what it asked for can be dropped once the token is revoked. With TokenName it is
	// recorded in the entry's payload ("token_id", "token_name"), and so is UserAgent
	// ("user_agent"): the entry page's "who" (a key the payload sets itself is kept).
	TokenID   string
	TokenName string
	UserAgent string
	// Said is the sentence that asked for the act (the assistant's message), recorded in
	// the entry's payload as "said".
	Said string
}

// Caller is the actor of a call made by a person (kind ActorUser) or their API token
// (ActorToken, tokenID): a call's callmeta says which, and what the call does is
// recorded under the same actor as the call.
func Caller(kind, id, name, tokenID string) Actor {
	if kind == ActorToken {
		return Actor{Kind: ActorToken, ID: id, Name: name, TokenID: tokenID}
	}
	return Actor{Kind: ActorUser, ID: id, Name: name}
}

// System is the actor for what Toolwarden does on its own (bootstrap, expiry).
var System = Actor{Kind: ActorSystem, Name: "system"}

// The results an entry records (the audit filter of docs/api.md).
const (
	ResultSuccess = "success" // the action happened (the default)
	ResultFailure = "failure" // it was tried and failed (a wrong password)
	ResultDenied  = "denied"  // it was refused: the actor may not do it
)

// Entry is one action to record. Payload must not contain secrets.
type Entry struct {
	Actor      Actor
	Action     string // dotted verb: "user.login", "token.revoke"
	TargetType string
	TargetID   string
	TargetName string // what people call the target ("alice"), shown beside the id
	Payload    any
	// Result is ResultSuccess (when empty), ResultFailure or ResultDenied.
	Result string
}

// Record is a stored entry.
type Record struct {
	ID         int64           `db:"id" json:"id"`
	At         time.Time       `db:"at" json:"at"`
	ActorKind  string          `db:"actor_kind" json:"actor_kind"`
	ActorID    *string         `db:"actor_id" json:"actor_id"`
	ActorName  string          `db:"actor_name" json:"actor_name"`
	Action     string          `db:"action" json:"action"`
	TargetType string          `db:"target_type" json:"target_type"`
	TargetID   string          `db:"target_id" json:"target_id"`
	TargetName string          `db:"target_name" json:"target_name"`
	IP         string          `db:"ip" json:"ip"`
	RequestID  string          `db:"request_id" json:"request_id"`
	Payload    json.RawMessage `db:"payload" json:"payload"`
	Result     string          `db:"result" json:"result"`
	PrevHash   []byte          `db:"prev_hash" json:"-"`
	Hash       []byte          `db:"hash" json:"-"`
}

var genesis = make([]byte, sha256.Size)

// Append writes e to the chain inside tx and announces it on Topic. It takes the
// journal lock, held until tx ends; that is why it needs a transaction, not any Querier
// (on a pool the lock would end with the statement and two appends could share a head).
func Append(ctx context.Context, q pgx.Tx, e Entry) (Record, error) {
	rs, err := AppendBatch(ctx, q, []Entry{e})
	if err != nil {
		return Record{}, err
	}
	return rs[0], nil
}

// AppendAlone appends e in a transaction of its own: for an act whose only trace is its
// audit entry (a connection test, a refused decision, a line typed into a terminal).
func AppendAlone(ctx context.Context, begin db.TxBeginner, e Entry) error {
	return db.WithTx(ctx, begin, func(tx pgx.Tx) error {
		_, err := Append(ctx, tx, e)
		return err
	})
}

// announceEach bounds how many entries of one batch get an audit.appended event each;
// a bigger batch (the router's flush of many calls) announces only its last entry, so
// live activity feeds are not flooded.
const announceEach = 16

// AppendBatch writes entries to the chain in order inside tx with one lock, one read of
// the chain head and one insert, and announces them on Topic.
func AppendBatch(ctx context.Context, q pgx.Tx, entries []Entry) ([]Record, error) {
	rs, announce, err := AppendBatchQuiet(ctx, q, entries)
	if err != nil {
		return nil, err
	}
	if _, err := events.PublishBatch(ctx, q, announce); err != nil {
		return nil, err
	}
	return rs, nil
}

// AppendBatchQuiet is AppendBatch leaving the announcements to its caller, who publishes
// them in tx with its own events: the router's gathered write, whose bus hands its own
// publications to this replica's subscribers directly (events.Bus.PublishBatch), where
// a second publication ahead of them would make it read both back.
// LogExists reports whether the database q reads has the audit log's table (a command
// on a database rolled back below the migration that made it has none to write to).
func LogExists(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var has bool
	err := q.QueryRow(ctx, `/* audit.LogExists */ SELECT to_regclass('audit_log') IS NOT NULL`).Scan(&has)
	return has, err
}

func AppendBatchQuiet(ctx context.Context, q pgx.Tx, entries []Entry) ([]Record, []events.Draft, error) {
	if len(entries) == 0 {
		return nil, nil, nil
	}
	b, err := NewBatch(entries)
	if err != nil {
		return nil, nil, err
	}
	if err := db.LockJournal(ctx, q); err != nil {
		return nil, nil, err
	}
	var head Head
	sql, args := b.HeadQuery()
	if err := q.QueryRow(ctx, sql, args...).Scan(&head.ID, &head.Hash); err != nil {
		return nil, nil, fmt.Errorf("audit: chain head: %w", err)
	}
	rs := b.Seal(head)
	sql, args = b.InsertQuery()
	if _, err := q.Exec(ctx, sql, args...); err != nil {
		return nil, nil, fmt.Errorf("audit: append %d entries: %w", len(rs), err)
	}
	return rs, b.Announcements(), nil
}

// Batch is an append split into statements a caller can pipeline in its own
// transaction: after db.LockJournalSQL, run HeadQuery and pass what it returns to Seal,
// then run InsertQuery and publish Announcements (AppendBatch does exactly that).
type Batch struct {
	recs []Record
}

// NewBatch prepares entries for appending.
func NewBatch(entries []Entry) (*Batch, error) {
	at := time.Now().UTC().Truncate(time.Microsecond)
	rs := make([]Record, len(entries))
	for i, e := range entries {
		if e.Action == "" {
			return nil, errors.New("audit: entry without an action")
		}
		kind := e.Actor.Kind
		if kind == "" {
			kind = ActorAnonymous
		}
		payload := []byte("{}")
		a := e.Actor
		withA := a.Said != "" || a.TokenID != "" || a.TokenName != "" || a.UserAgent != ""
		if m, ok := e.Payload.(map[string]any); ok && withA {
			// The common case (a call's record): the actor's keys join a copy of the map,
			// marshaled once, rather than the payload being marshaled, parsed and marshaled
			// again (the same bytes either way: keys sorted, values compact).
			m = maps.Clone(m)
			for _, f := range actorFields(a) {
				if _, ok := m[f.key]; f.v != "" && (!ok || f.replace) {
					m[f.key] = f.v
				}
			}
			e.Payload, withA = m, false
		}
		if e.Payload != nil {
			var err error
			if payload, err = json.Marshal(e.Payload); err != nil {
				return nil, fmt.Errorf("audit: marshal %s payload: %w", e.Action, err)
			}
		}
		if withA {
			var err error
			if payload, err = withActor(payload, a); err != nil {
				return nil, fmt.Errorf("audit: %s payload: %w", e.Action, err)
			}
		}
		result := e.Result
		switch result {
		case "":
			result = ResultSuccess
		case ResultSuccess, ResultFailure, ResultDenied:
		default:
			return nil, fmt.Errorf("audit: %s: unknown result %q", e.Action, e.Result)
		}
		rs[i] = Record{At: at, ActorKind: kind, ActorName: e.Actor.Name, Action: e.Action, TargetType: e.TargetType,
			TargetID: e.TargetID, TargetName: e.TargetName, IP: e.Actor.IP, RequestID: e.Actor.RequestID, Payload: payload,
			Result: result}
		if e.Actor.ID != "" {
			id := e.Actor.ID
			rs[i].ActorID = &id
		}
	}
	return &Batch{recs: rs}, nil
}

// maxUserAgent bounds the user agent an entry records.
const maxUserAgent = 300

// withActor adds to a payload object what the actor says of the request: "said" (always
// the actor's), and "token_id", "token_name" and "user_agent" unless the payload has
// them (a sign-in records its own user agent). A payload that is not an object is kept
// under "payload".
func withActor(payload []byte, a Actor) ([]byte, error) {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{"payload": payload}
	}
	for _, f := range actorFields(a) {
		if _, ok := m[f.key]; f.v == "" || ok && !f.replace {
			continue
		}
		s, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		m[f.key] = s
	}
	return json.Marshal(m)
}

// actorField is a payload key the actor adds: replace says whether it wins over the
// payload's own.
type actorField struct {
	key, v  string
	replace bool
}

func actorFields(a Actor) [4]actorField {
	return [4]actorField{{"said", a.Said, true}, {"token_id", a.TokenID, false}, {"token_name", a.TokenName, false},
		// Any caller sends it, a refused anonymous one too: bounded as a sign-in's is.
		{"user_agent", clip(strings.ToValidUTF8(a.UserAgent, "\uFFFD"), maxUserAgent), false}}
}

// Len is the number of entries.
func (b *Batch) Len() int { return len(b.recs) }

// Head is the chain's last entry as an appender needs it: its id (0 when the log is
// empty) and its hash (the genesis hash then).
type Head struct {
	ID   int64
	Hash []byte
}

// HeadQuery reads the chain head as a Head's two columns. Only safe under the journal
// lock. Ids are the head's plus one, not drawn from a sequence: under the lock they are
// gap-free, and a writer that remembers the head it wrote last knows the next id
// without asking (InsertAfterQuery).
func (b *Batch) HeadQuery() (string, []any) {
	return `/* audit.AppendBatch.head */
		SELECT coalesce(max(id), 0), coalesce((SELECT hash FROM audit_log ORDER BY id DESC LIMIT 1), $1) FROM audit_log`,
		[]any{genesis}
}

// Seal numbers and chains the entries after head.
func (b *Batch) Seal(head Head) []Record {
	prev := head.Hash
	for i := range b.recs {
		r := &b.recs[i]
		r.ID, r.PrevHash = head.ID+1+int64(i), prev
		r.Hash = r.computeHash()
		prev = r.Hash
	}
	return b.recs
}

// Last is the head once the sealed batch is written.
func (b *Batch) Last() Head {
	r := b.recs[len(b.recs)-1]
	return Head{ID: r.ID, Hash: r.Hash}
}

// InsertQuery writes the sealed entries in one statement.
func (b *Batch) InsertQuery() (string, []any) {
	return b.insert("")
}

// InsertAfterQuery is InsertQuery for a batch sealed after a head the caller remembers
// instead of read: it inserts nothing unless that head is still the chain's last entry,
// so a writer that makes most appends (the router) needs no round trip to read the
// head. Run it under the journal lock and check the rows affected: none means the
// chain moved, and the caller reads the head and seals again.
func (b *Batch) InsertAfterQuery(head Head) (string, []any) {
	sql, args := b.insert(`
		WHERE (SELECT row(id, hash) FROM audit_log ORDER BY id DESC LIMIT 1) = row($16::bigint, $17::bytea)`)
	return sql, append(args, head.ID, head.Hash)
}

func (b *Batch) insert(where string) (string, []any) {
	n := len(b.recs)
	if n == 1 {
		// Most appends are one entry: plain parameters cost the server less than
		// unpacking fifteen one-element arrays (about 40 µs of a call's wait).
		r := b.recs[0]
		return `/* audit.AppendOne */
		INSERT INTO audit_log (id, at, actor_kind, actor_id, actor_name, action, target_type, target_id, target_name, ip, request_id, payload, prev_hash, hash, result)
		SELECT $1::bigint, $2::timestamptz, $3::text, $4::uuid, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text, $11::text,
			$12::json, $13::bytea, $14::bytea, $15::text` + where,
			[]any{r.ID, r.At, r.ActorKind, r.ActorID, r.ActorName, r.Action, r.TargetType, r.TargetID, r.TargetName, r.IP, r.RequestID,
				string(r.Payload), r.PrevHash, r.Hash, r.Result}
	}
	ids, ats := make([]int64, n), make([]time.Time, n)
	actorIDs := make([]*string, n)
	texts := make([][]string, 10)
	for k := range texts {
		texts[k] = make([]string, n)
	}
	prevs, hashes := make([][]byte, n), make([][]byte, n)
	for i, r := range b.recs {
		ids[i], ats[i], actorIDs[i] = r.ID, r.At, r.ActorID
		for k, v := range [...]string{r.ActorKind, r.ActorName, r.Action, r.TargetType, r.TargetID, r.TargetName, r.IP, r.RequestID, string(r.Payload), r.Result} {
			texts[k][i] = v
		}
		prevs[i], hashes[i] = r.PrevHash, r.Hash
	}
	return `/* audit.AppendBatch */
		INSERT INTO audit_log (id, at, actor_kind, actor_id, actor_name, action, target_type, target_id, target_name, ip, request_id, payload, prev_hash, hash, result)
		SELECT id, at, actor_kind, actor_id::uuid, actor_name, action, target_type, target_id, target_name, ip, request_id, payload::json, prev_hash, hash, result
		FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::text[], $10::text[], $11::text[], $12::text[], $13::bytea[], $14::bytea[], $15::text[])
			AS u(id, at, actor_kind, actor_id, actor_name, action, target_type, target_id, target_name, ip, request_id, payload, prev_hash, hash, result)` + where,
		[]any{ids, ats, texts[0], actorIDs, texts[1], texts[2], texts[3], texts[4], texts[5], texts[6], texts[7], texts[8], prevs, hashes, texts[9]}
}

// Announcements are the audit.appended events of the sealed batch.
func (b *Batch) Announcements() []events.Draft {
	announce := b.recs
	if len(announce) > announceEach {
		announce = announce[len(announce)-1:]
	}
	ds := make([]events.Draft, len(announce))
	for i, r := range announce {
		ds[i] = events.AuditAppended.Draft(Topic, r.Summary())
	}
	return ds
}

// computeHash is SHA-256 over the previous hash, then each field as a netstring
// ("<len>:<bytes>,") in a fixed order — unambiguous, and cheap enough that verify is
// bound by reading rows, not hashing them — then the payload's exact bytes.
func (r *Record) computeHash() []byte {
	actorID := ""
	if r.ActorID != nil {
		actorID = *r.ActorID
	}
	fields := [9][]byte{[]byte(r.ActorKind), []byte(actorID), []byte(r.ActorName), []byte(r.Action), []byte(r.TargetType),
		[]byte(r.TargetID), []byte(r.TargetName), []byte(r.IP), []byte(r.RequestID)}
	sum := sumHash(appendHashInput(make([]byte, 0, 256), r.PrevHash, r.ID, r.At.UnixMicro(), &fields, r.Payload, []byte(r.Result)))
	return sum[:]
}

// appendHashInput appends what an entry's hash covers: the previous hash, the id and
// time (Unix microseconds), the nine text fields (actor kind, actor id, actor name,
// action, target type, target id, target name, ip, request id), the payload and the
// result. Record.computeHash and verify share it, so they cannot disagree.
func appendHashInput(buf, prev []byte, id, atMicro int64, fields *[9][]byte, payload, result []byte) []byte {
	buf = append(buf, prev...)
	var num [20]byte
	buf = netstring(buf, strconv.AppendInt(num[:0], id, 10))
	buf = netstring(buf, strconv.AppendInt(num[:0], atMicro, 10))
	for _, f := range fields {
		buf = netstring(buf, f)
	}
	buf = netstring(buf, payload)
	// Entries written before results were recorded are all successes: a success adds
	// nothing, so their hashes still verify; any other result is covered.
	if len(result) != 0 && string(result) != ResultSuccess {
		buf = netstring(buf, result)
	}
	return buf
}

func sumHash(b []byte) [sha256.Size]byte { return sha256.Sum256(b) }

func netstring(buf, b []byte) []byte {
	switch n := len(b); {
	case n < 10:
		buf = append(buf, byte('0'+n))
	case n < 100:
		buf = append(buf, byte('0'+n/10), byte('0'+n%10))
	default:
		buf = strconv.AppendInt(buf, int64(n), 10)
	}
	buf = append(buf, ':')
	buf = append(buf, b...)
	return append(buf, ',')
}

// Summary is what the audit.appended event carries: enough to render a row.
type Summary = events.AuditSummary

// Summary returns the entry's event summary.
func (r Record) Summary() Summary {
	return Summary{ID: r.ID, At: r.At, ActorKind: r.ActorKind, ActorName: r.ActorName, Action: r.Action,
		TargetType: r.TargetType, TargetID: r.TargetID, TargetName: r.TargetName, Result: r.Result}
}

const recordColumns = `id, at, actor_kind, actor_id::text, actor_name, action, target_type, target_id, target_name, ip, request_id, payload, result, prev_hash, hash`

// Recent returns the newest entries, newest first.
func Recent(ctx context.Context, q db.Querier, limit int) ([]Record, error) {
	rows, err := q.Query(ctx, `/* audit.Recent */ SELECT `+recordColumns+` FROM audit_log ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("audit: recent: %w", err)
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Record])
	if err != nil {
		return nil, fmt.Errorf("audit: recent: %w", err)
	}
	return recs, nil
}

// Count is the number of entries.
func Count(ctx context.Context, q db.Querier) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `/* audit.Count */ SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
		return 0, fmt.Errorf("audit: count: %w", err)
	}
	return n, nil
}
