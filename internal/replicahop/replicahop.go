// Package replicahop authenticates a request one replica sends another (a terminal's
// page, websocket or operation forwarded to the replica that runs it; docs/architecture.md,
// Terminals on several replicas). The sender signs the request's method, path and query,
// body and the time with an HMAC under a key derived from the secret keyring, which every replica
// of one database shares and no outside client has; the receiver checks the MAC and
// that the time is recent. A request carrying the header is never forwarded again, so
// forwarding cannot loop.
package replicahop

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Header carries the hop: "v1 <unix milliseconds> <sending replica> <MAC>".
const Header = "Toolwarden-Replica-Hop"

// MaxSkew is how old (or how far ahead) a hop's time may be.
const MaxSkew = 30 * time.Second

// domain separates these MACs from the keyring's other uses.
const domain = "toolwarden/replica-hop/v1\n"

// Keys is what signs and checks: secrets.Keyring.
type Keys interface {
	MAC(data []byte) []byte
	VerifyMAC(data, mac []byte) bool
}

func input(from, method, target string, body []byte, ms int64) []byte {
	sum := sha256.Sum256(body)
	return []byte(domain + strconv.FormatInt(ms, 10) + "\n" + from + "\n" + method + "\n" + target + "\n" +
		base64.RawURLEncoding.EncodeToString(sum[:]))
}

// MaxBody is the largest body a signed request may have.
const MaxBody = 4 << 20

// Sign is the header value for a request of method to target (its path and query,
// url.URL.RequestURI) with body, sent by replica from at time at.
func Sign(k Keys, from, method, target string, body []byte, at time.Time) string {
	ms := at.UnixMilli()
	mac := k.MAC(input(from, method, target, body, ms))
	return "v1 " + strconv.FormatInt(ms, 10) + " " + url.QueryEscape(from) + " " + base64.RawURLEncoding.EncodeToString(mac)
}

// SignRequest sets the hop header of r, whose body is body (nil: none; the request's
// body is set to it).
func SignRequest(k Keys, from string, r *http.Request, body []byte) {
	if len(body) == 0 {
		r.Body, r.ContentLength = http.NoBody, 0
	} else {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	r.Header.Set(Header, Sign(k, from, r.Method, r.URL.RequestURI(), body, time.Now()))
}

// ErrForged: the header is malformed or its MAC is wrong.
var ErrForged = errors.New("replica hop: the signature is not a replica's")

// ErrStale: the header's time is more than MaxSkew away.
var ErrStale = errors.New("replica hop: the signature is stale")

// Verify checks a header value for a request of method to target with body at now,
// and returns the replica that sent it.
func Verify(k Keys, value, method, target string, body []byte, now time.Time) (string, error) {
	parts := strings.Split(value, " ")
	if len(parts) != 4 || parts[0] != "v1" {
		return "", ErrForged
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", ErrForged
	}
	from, err := url.QueryUnescape(parts[2])
	if err != nil {
		return "", ErrForged
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil || !k.VerifyMAC(input(from, method, target, body, ms), mac) {
		return "", ErrForged
	}
	if d := now.Sub(time.UnixMilli(ms)); d > MaxSkew || d < -MaxSkew {
		return "", fmt.Errorf("%w (%s off)", ErrStale, d.Round(time.Second))
	}
	return from, nil
}

// VerifyRequest checks r's hop header, reading its body (at most MaxBody) and putting
// it back: ok false with no error when r has none.
func VerifyRequest(k Keys, r *http.Request) (from string, ok bool, err error) {
	v := r.Header.Get(Header)
	if v == "" {
		return "", false, nil
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
		_ = r.Body.Close()
		if err != nil {
			return "", false, fmt.Errorf("replica hop: read the body: %w", err)
		}
		if len(body) > MaxBody {
			return "", false, ErrForged
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	from, err = Verify(k, v, r.Method, r.URL.RequestURI(), body, time.Now())
	return from, err == nil, err
}
