package replicahop

import (
	"net"
	"net/http"
	"time"
)

// The limits of requests between replicas: a replica that is down, firewalled or
// paused must make a forwarded request fail soon, not hang the page that polls it.
const (
	DialTimeout   = 3 * time.Second
	HeaderTimeout = 10 * time.Second
)

// Transport carries the requests replicas send each other (forwarded pages, polls and
// websockets, terminal operations, test-run questions). It never goes through a proxy
// of the environment (HTTP_PROXY): those requests carry people's cookies and signed
// hops, and replicas reach each other directly. It waits HeaderTimeout at most for an
// answer's headers; a streamed answer or an upgraded websocket, once begun, is not
// bounded.
var Transport = newTransport(HeaderTimeout)

// HeldTransport is Transport without the bound on the wait for headers, for requests
// the other replica holds open on purpose until something happens (a test run's
// watch): bound them with their context.
var HeldTransport = newTransport(0)

func newTransport(headers time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 5 * time.Second
	t.ResponseHeaderTimeout = headers
	t.IdleConnTimeout = 90 * time.Second
	t.MaxIdleConnsPerHost = 16
	return t
}

// MisdirectedText is what a person or agent is told when another replica answers (421)
// at the address of replica name, which holds what: most often a restart of it at the
// same address (a new id), else replicas that share an address.
func MisdirectedText(name, what string) string {
	return "replica " + name + ", which holds " + what + ", did not answer: another process, possibly a restart of it, " +
		"answers at its address; try again shortly (if this lasts, give each replica its own --advertise-url)"
}
