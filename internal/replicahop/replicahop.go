// Package replicahop authenticates a request one replica sends another (a terminal's
// page, websocket or operation forwarded to the replica that runs it; docs/architecture.md,
// Terminals on several replicas). The sender signs the request's method, path and query,
// body, the time, a fresh nonce, the replica it is meant for, the client it came from
// and the request's id, with an HMAC under a key derived from the secret keyring, which
// every replica of one database shares and no outside client has. The receiver (a
// Verifier) checks the MAC, that the time is recent, that the hop is meant for it, and
// that it has not seen the nonce before: a captured hop cannot be sent again, nor to
// another replica. A request carrying the header is never forwarded again, so
// forwarding cannot loop.
package replicahop

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header carries the hop:
// "v3 <unix milliseconds> <nonce> <from> <to> <client address> <client origin> <request id> <MAC>".
// A Verifier still takes the v2 header of an earlier release, which has no request id:
// "v2 <unix milliseconds> <nonce> <from> <to> <client address> <client origin> <MAC>".
const Header = "Toolwarden-Replica-Hop"

// MaxSkew is how old (or how far ahead) a hop's time may be.
const MaxSkew = 30 * time.Second

// MaxBody is the largest body a signed request may have.
const MaxBody = 4 << 20

// maxSeen bounds the nonces a Verifier remembers (those of the last 2×MaxSkew): past it,
// hops are refused rather than forgotten early, which would let a replay through.
const maxSeen = 1 << 17

// maxSeenPerSender bounds the nonces of one sending replica among them: a flood of
// requests through one replica (many people's, or a loop) fills its share, and the
// other replicas' hops still pass.
const maxSeenPerSender = maxSeen / 4

// domain separates these MACs from the keyring's other uses, and each version's from
// the other's: a v3 hop's MAC cannot pass for a v2 one without its request id.
const (
	domain   = "toolwarden/replica-hop/v3\n"
	domainV2 = "toolwarden/replica-hop/v2\n"
)

// Keys is what signs and checks: secrets.Keyring.
type Keys interface {
	MAC(data []byte) []byte
	VerifyMAC(data, mac []byte) bool
}

// Hop is what a signed request says about itself beside the request.
type Hop struct {
	From string // the sending replica's name
	To   string // the receiving replica's id
	// Client is the address of the client the sender served (the person's browser),
	// and Origin the scheme and host that client reached the sender by
	// ("https://tw.example.com"): the receiver answers and audits as if it served the
	// client itself.
	Client string
	Origin string
	// RequestID is the id the sender gave the request, which the receiver records and
	// answers as its own: signed, so no one between the replicas can choose it ("" from
	// a v2 hop, which did not carry one).
	RequestID string
}

type signed struct {
	Hop
	v2    bool // an earlier release's header: no request id, its own MAC input
	ms    int64
	nonce string
}

func (s signed) input(method, target string, body []byte) []byte {
	sum := sha256.Sum256(body)
	head, rid := domain, s.RequestID+"\n"
	if s.v2 {
		head, rid = domainV2, ""
	}
	return []byte(head + strconv.FormatInt(s.ms, 10) + "\n" + s.nonce + "\n" + s.From + "\n" + s.To + "\n" +
		s.Client + "\n" + s.Origin + "\n" + rid + method + "\n" + target + "\n" + base64.RawURLEncoding.EncodeToString(sum[:]))
}

// Sign is the header value for a request of method to target (its path and query,
// url.URL.RequestURI) with body, signed at time at. A client address, origin or request
// id that is not one (ValidClient, ValidOrigin, ValidRequestID) is left out.
func Sign(k Keys, h Hop, method, target string, body []byte, at time.Time) string {
	if !ValidClient(h.Client) {
		h.Client = ""
	}
	if !ValidOrigin(h.Origin) {
		h.Origin = ""
	}
	if !ValidRequestID(h.RequestID) {
		h.RequestID = ""
	}
	var n [16]byte
	_, _ = rand.Read(n[:]) // never fails (crypto/rand)
	s := signed{Hop: h, ms: at.UnixMilli(), nonce: base64.RawURLEncoding.EncodeToString(n[:])}
	mac := k.MAC(s.input(method, target, body))
	return strings.Join([]string{"v3", strconv.FormatInt(s.ms, 10), s.nonce, url.QueryEscape(h.From), url.QueryEscape(h.To),
		url.QueryEscape(h.Client), url.QueryEscape(h.Origin), url.QueryEscape(h.RequestID), base64.RawURLEncoding.EncodeToString(mac)}, " ")
}

// SignRequest sets the hop header of r, whose body is body (nil: none; the request's
// body is set to it), signed at time at: the replicas' shared time (the database's,
// replicas.Service.Now), so hosts whose clocks disagree still agree on it.
func SignRequest(k Keys, h Hop, r *http.Request, body []byte, at time.Time) {
	if len(body) == 0 {
		r.Body, r.ContentLength = http.NoBody, 0
	} else {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	r.Header.Set(Header, Sign(k, h, r.Method, r.URL.RequestURI(), body, at))
}

var (
	// ErrForged: the header is malformed or its MAC is wrong.
	ErrForged = errors.New("replica hop: the signature is not a replica's")
	// ErrMalformed: a replica signed a client address, origin or request id that is not one.
	ErrMalformed = errors.New("replica hop: the signed client address, origin or request id is malformed")
	// ErrStale: the header's time is more than MaxSkew away.
	ErrStale = errors.New("replica hop: the signature is stale")
	// ErrReplayed: this replica already accepted a request with the same signature.
	ErrReplayed = errors.New("replica hop: the signed request was already received")
	// ErrMisdirected: the hop was signed for another replica.
	ErrMisdirected = errors.New("replica hop: the signed request is meant for another replica")
	// ErrBusy: more hops arrived within 2×MaxSkew than a Verifier remembers, in all
	// or from the sending replica.
	ErrBusy = errors.New("replica hop: too many forwarded requests; try again shortly")
)

// Verifier checks the hops sent to one replica and remembers their nonces. It is
// safe for concurrent use.
type Verifier struct {
	keys Keys
	self string // this replica's id
	// Clock is the time VerifyRequest checks hops against: the replicas' shared time
	// (replicas.Service.Now); NewVerifier sets time.Now. Set it before use.
	Clock func() time.Time

	mu     sync.Mutex
	seen   map[string]seenHop // nonce → when it may be forgotten, and its sender
	sender map[string]int     // sending replica → its nonces in seen
	next   time.Time          // the next sweep of seen
}

// seenHop is a remembered nonce: until when, and which replica sent it.
type seenHop struct {
	until time.Time
	from  string
}

// NewVerifier is the verifier of the replica whose id is self.
func NewVerifier(k Keys, self string) *Verifier {
	return &Verifier{keys: k, self: self, seen: map[string]seenHop{}, sender: map[string]int{}, Clock: time.Now}
}

func parse(value string) (signed, []byte, error) {
	parts := strings.Split(value, " ")
	var s signed
	switch {
	case len(parts) == 9 && parts[0] == "v3":
	case len(parts) == 8 && parts[0] == "v2":
		s.v2 = true
	default:
		return signed{}, nil, ErrForged
	}
	var err error
	if s.ms, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
		return signed{}, nil, ErrForged
	}
	s.nonce = parts[2]
	if n, err := base64.RawURLEncoding.DecodeString(s.nonce); err != nil || len(n) != 16 {
		return signed{}, nil, ErrForged
	}
	fields := []*string{&s.From, &s.To, &s.Client, &s.Origin}
	if !s.v2 {
		fields = append(fields, &s.RequestID)
	}
	for i, f := range fields {
		if *f, err = url.QueryUnescape(parts[3+i]); err != nil {
			return signed{}, nil, ErrForged
		}
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[len(parts)-1])
	if err != nil || len(mac) == 0 {
		return signed{}, nil, ErrForged
	}
	return s, mac, nil
}

// ValidOrigin reports whether o is an origin a hop may carry: "http" or "https", a
// host, nothing else (a Host header the server took may not parse as one).
func ValidOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil && u.Opaque == ""
}

// ValidClient reports whether a is a client address a hop may carry.
func ValidClient(a string) bool {
	_, err := netip.ParseAddr(a)
	return err == nil
}

// ValidRequestID reports whether id is a request id a hop may carry: at most 64 of
// [A-Za-z0-9._-] (what a request-id middleware generates; nothing a log or a link must
// escape).
func ValidRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Verify checks a header value for a request of method to target with body at now.
// A hop it accepts once it refuses from then on (ErrReplayed).
func (v *Verifier) Verify(value, method, target string, body []byte, now time.Time) (Hop, error) {
	s, mac, err := parse(value)
	if err != nil || !v.keys.VerifyMAC(s.input(method, target, body), mac) {
		return Hop{}, ErrForged
	}
	if s.Client != "" && !ValidClient(s.Client) || s.Origin != "" && !ValidOrigin(s.Origin) ||
		s.RequestID != "" && !ValidRequestID(s.RequestID) {
		return Hop{}, ErrMalformed
	}
	if err := v.fresh(s, now); err != nil {
		return Hop{}, err
	}
	at := time.UnixMilli(s.ms)
	v.mu.Lock()
	defer v.mu.Unlock()
	if now.After(v.next) { // at most once a second, however full
		for n, h := range v.seen {
			if now.After(h.until) {
				delete(v.seen, n)
				if v.sender[h.from]--; v.sender[h.from] <= 0 {
					delete(v.sender, h.from)
				}
			}
		}
		v.next = now.Add(time.Second)
	}
	if _, ok := v.seen[s.nonce]; ok {
		return Hop{}, ErrReplayed
	}
	if len(v.seen) >= maxSeen || v.sender[s.From] >= maxSeenPerSender {
		return Hop{}, ErrBusy
	}
	// Past at+MaxSkew the time check refuses it anyway; MaxSkew more covers a clock
	// that moves back. Cloned: not slices of the whole header.
	from := strings.Clone(s.From)
	v.seen[strings.Clone(s.nonce)] = seenHop{until: at.Add(2 * MaxSkew), from: from}
	v.sender[from]++
	return s.Hop, nil
}

// precheck refuses, before any MAC, a header that Verify would refuse whatever its
// MAC: unparseable, stale, or for another replica.
func (v *Verifier) precheck(value string, now time.Time) error {
	s, _, err := parse(value)
	if err != nil {
		return ErrForged
	}
	return v.fresh(s, now)
}

// fresh refuses a hop signed more than MaxSkew away from now, or for another replica.
func (v *Verifier) fresh(s signed, now time.Time) error {
	if d := now.Sub(time.UnixMilli(s.ms)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w (%s off)", ErrStale, d.Round(time.Second))
	}
	if s.To != v.self {
		return ErrMisdirected
	}
	return nil
}

// Remembered is how many nonces v keeps (those of hops that are not stale yet).
func (v *Verifier) Remembered() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}

// VerifyRequest checks r's hop header, reading its body (at most MaxBody) and putting
// it back: ok false with no error when r has none. A header that cannot be a valid
// hop here (malformed, stale, or naming another replica) is refused before the body
// is read: anyone can send one, and reading up to MaxBody for it costs this replica.
func (v *Verifier) VerifyRequest(r *http.Request) (h Hop, ok bool, err error) {
	value := r.Header.Get(Header)
	if value == "" {
		return Hop{}, false, nil
	}
	if err := v.precheck(value, v.Clock()); err != nil {
		return Hop{}, false, err
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
		_ = r.Body.Close()
		if err != nil {
			return Hop{}, false, fmt.Errorf("replica hop: read the body: %w", err)
		}
		if len(body) > MaxBody {
			return Hop{}, false, ErrForged
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	h, err = v.Verify(value, r.Method, r.URL.RequestURI(), body, v.Clock())
	return h, err == nil, err
}
