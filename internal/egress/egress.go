// Package egress decides which addresses Toolwarden may connect to for an MCP
// server's URL (and a template tool's HTTP request): an optional policy of allowed and
// denied CIDRs and host names, with the cloud metadata endpoints denied by default so
// that "Test connection" cannot be used to read instance credentials or map the
// internal network (docs/security.md, Egress).
//
// The policy is enforced where connections are made: Dialer checks the host name
// before resolving it, and the address actually dialled in the dialer's Control
// function, after resolution, so a name that resolves to a denied address (DNS
// rebinding included) is refused too. Through a forward proxy (HTTP_PROXY) the dialer
// only sees the proxy's address: Proxy then checks the request's host, resolving it
// here, before the request goes to the proxy. CheckURL applies the same rules to a URL
// at registration, without resolving names.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// MetadataPrefixes are the cloud metadata addresses denied by default: AWS, GCP, Azure
// and OpenStack's 169.254.169.254, the IPv6 ones of AWS (fd00:ec2::254), GCP
// (fd20:ce::254) and OpenStack (fe80::a9fe:a9fe, on any interface), and Alibaba's
// 100.100.100.200.
var MetadataPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.169.254/32"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("fd20:ce::254/128"),
	netip.MustParsePrefix("fe80::a9fe:a9fe/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// MetadataHosts are the metadata host names denied by default.
var MetadataHosts = []string{"metadata.google.internal", "metadata.goog"}

// Policy is the set of rules. The zero value and nil deny only the metadata
// endpoints; everything else, loopback included, is allowed.
type Policy struct {
	allowNets, denyNets   []netip.Prefix
	allowHosts, denyHosts []string // lower case; "*.example.com" matches subdomains
	// allowedMetadata are the metadata addresses the allow list names, and
	// allowedMetadataHosts the metadata host names: the default denial is lifted for
	// those alone, so that allowing Alibaba's endpoint does not open AWS's to a name
	// that resolves to it.
	allowedMetadata      []netip.Prefix
	allowedMetadataHosts []string

	// lookup resolves a proxied request's host (tests); nil, net.DefaultResolver's.
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// now is the clock of Proxy's cache of verdicts (tests); nil, time.Now.
	now func() time.Time
	// proxy is the forward proxy settings Transport sends requests through (WithProxy);
	// nil, every request goes direct.
	proxy *httpproxy.Config
}

// WithProxy returns a copy of p whose Transport sends requests through the proxies env
// names (the command line passes httpproxy.FromEnvironment: HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY as it started with). A nil p gives the default policy with those proxies.
func (p *Policy) WithProxy(env *httpproxy.Config) *Policy {
	c := &Policy{}
	if p != nil {
		*c = *p
	}
	c.proxy = env
	return c
}

// Parse builds a policy from comma-separated lists of CIDRs, addresses and host names
// ("10.0.0.0/8", "192.168.1.5", "api.example.com", "*.corp.example"). Deny wins over
// allow; a non-empty allow list allows only what it names. Each metadata endpoint is
// denied unless allow names it exactly (an address, or a host name without "*.").
func Parse(allow, deny string) (*Policy, error) {
	p := &Policy{}
	var err error
	if p.allowNets, p.allowHosts, err = parseList("--egress-allow", allow); err != nil {
		return nil, err
	}
	if p.denyNets, p.denyHosts, err = parseList("--egress-deny", deny); err != nil {
		return nil, err
	}
	for _, n := range p.allowNets {
		if slices.Contains(MetadataPrefixes, n) {
			p.allowedMetadata = append(p.allowedMetadata, n)
		}
	}
	for _, h := range p.allowHosts {
		if slices.Contains(MetadataHosts, h) {
			p.allowedMetadataHosts = append(p.allowedMetadataHosts, h)
		}
	}
	return p, nil
}

func parseList(flag, list string) ([]netip.Prefix, []string, error) {
	var nets []netip.Prefix
	var hosts []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if pr, err := netip.ParsePrefix(f); err == nil {
			// Addresses are unmapped before they are matched, so an IPv4-mapped CIDR
			// (::ffff:10.0.0.0/104) must be too, or it would match nothing.
			if pr.Addr().Is4In6() && pr.Bits() >= 96 {
				pr = netip.PrefixFrom(pr.Addr().Unmap(), pr.Bits()-96)
			}
			nets = append(nets, pr.Masked())
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			a = a.Unmap()
			nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		h := strings.TrimSuffix(strings.ToLower(f), ".")
		if !validHost(strings.TrimPrefix(h, "*.")) {
			return nil, nil, fmt.Errorf("%s: %q is neither a CIDR (10.0.0.0/8), an address (10.0.0.1) nor a host name (api.example.com, *.example.com)", flag, f)
		}
		if numericHost(h) {
			// A host is never judged by such a rule (a numeric host is refused), so
			// "--egress-deny=10.1" would deny nothing.
			return nil, nil, fmt.Errorf("%s: %q is a numeric host name (an IPv4 address in another notation): write the address in dotted decimal (10.0.0.1) or a CIDR (10.0.0.0/8)", flag, f)
		}
		hosts = append(hosts, h)
	}
	return nets, hosts, nil
}

func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// literalAddr is the address host writes, if it is one in a form netip parses (dotted
// decimal IPv4, IPv6). One trailing dot is dropped: resolvers read "169.254.169.254."
// as the address, so it is judged as the address.
func literalAddr(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSuffix(host, "."))
	return a, err == nil
}

// numericHost reports whether host, not a literalAddr, ends in a label of decimal digits
// or a 0x hexadecimal number: inet_aton, and so getaddrinfo at a proxy (or any C
// resolver), reads such a host as an IPv4 address ("2852039166", "0xa9.0xfe.0xa9.0xfe",
// "0251.0376.0251.0376", "169.254.43518" are all 169.254.169.254), where Go's resolver
// looks it up as a name. No top-level domain is numeric, so it is no name either.
func numericHost(host string) bool {
	host = strings.TrimRight(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// Error is a refused connection or URL.
type Error struct {
	Target string // the host or address refused
	Why    string
}

func (e *Error) Error() string {
	return "the egress policy refuses " + e.Target + ": " + e.Why
}

func hostMatch(rules []string, host string) bool {
	for _, r := range rules {
		if suffix, ok := strings.CutPrefix(r, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == r {
			return true
		}
	}
	return false
}

// netMatch reports whether a rule contains one of addrs.
func netMatch(rules []netip.Prefix, addrs ...netip.Addr) bool {
	for _, r := range rules {
		for _, a := range addrs {
			if r.Contains(a) {
				return true
			}
		}
	}
	return false
}

// The NAT64 prefixes: where a NAT64 gateway serves one, an address in it reaches the
// IPv4 address it embeds (RFC 6052). The well-known prefix is used as a /96 only; the
// local-use prefix (RFC 8215) may be used at any RFC 6052 length from /48 to /96.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
)

// nat64Reached returns the IPv4 addresses a NAT64 address may reach, or nil. Which
// length a network uses the local-use prefix at is not known here, so an address in it
// reaches the IPv4 address embedded at each (RFC 6052, section 2.2): the octet at bits
// 64-71 (u) is never part of it.
func nat64Reached(a netip.Addr) []netip.Addr {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:]))}
	case nat64Local.Contains(a):
		return []netip.Addr{
			netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}),  // /48: bits 48-63 and 72-87
			netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]}), // /56: bits 56-63 and 72-95
			netip.AddrFrom4([4]byte(b[9:13])),                  // /64: bits 72-103
			netip.AddrFrom4([4]byte(b[12:])),                   // /96: bits 96-127
		}
	}
	return nil
}

// hostVerdict is what the rules say of a host name before it is resolved: an error
// when it is denied, and whether an allow rule names it (then its addresses need only
// not be denied).
func (p *Policy) hostVerdict(host string) (allowedByName bool, err error) {
	if numericHost(host) {
		return false, &Error{Target: strings.ToLower(host), Why: "it is a numeric host name (an IPv4 address in another notation): write the address in dotted decimal"}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if p == nil {
		p = &Policy{}
	}
	if hostMatch(MetadataHosts, host) && !slices.Contains(p.allowedMetadataHosts, host) {
		return false, &Error{Target: host, Why: "it is a cloud metadata endpoint"}
	}
	if hostMatch(p.denyHosts, host) {
		return false, &Error{Target: host, Why: "it is on the deny list (--egress-deny)"}
	}
	return hostMatch(p.allowHosts, host), nil
}

// checkAddr is what the rules say of an address to connect to.
func (p *Policy) checkAddr(a netip.Addr, allowedByName bool) error {
	if p == nil {
		p = &Policy{}
	}
	// A zone (fe80::1%eth0) would make no prefix contain the address; 0.0.0.0 and ::
	// reach this host, as its loopback addresses do.
	a = a.Unmap().WithZone("")
	switch {
	case a == netip.IPv4Unspecified():
		a = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case a == netip.IPv6Unspecified():
		a = netip.IPv6Loopback()
	}
	// A NAT64 address is denied when the IPv4 address it reaches is; only a rule naming
	// the NAT64 address itself allows it (an IPv4 rule allows that address, not every
	// route to it).
	reached := append([]netip.Addr{a}, nat64Reached(a)...)
	for _, r := range reached {
		if netMatch(MetadataPrefixes, r) && !netMatch(p.allowedMetadata, r) {
			return &Error{Target: a.String(), Why: "it is a cloud metadata address"}
		}
	}
	if netMatch(p.denyNets, reached...) {
		return &Error{Target: a.String(), Why: "it is on the deny list (--egress-deny)"}
	}
	if allowedByName || len(p.allowNets)+len(p.allowHosts) == 0 || netMatch(p.allowNets, a) {
		return nil
	}
	return &Error{Target: a.String(), Why: "it is not on the allow list (--egress-allow)"}
}

// CheckURL applies the policy to a URL's host as given (a name is not resolved; its
// addresses are checked when connecting). It returns the reason the URL is refused, or "".
func (p *Policy) CheckURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if a, ok := literalAddr(host); ok {
		if err := p.checkAddr(a, false); err != nil {
			return err.Error()
		}
		return ""
	}
	byName, err := p.hostVerdict(host)
	if err != nil {
		return err.Error()
	}
	// With only host names allowed, a name not among them is refused now; with CIDRs
	// allowed too, its addresses decide when connecting.
	if !byName && p != nil && len(p.allowHosts) > 0 && len(p.allowNets) == 0 {
		return (&Error{Target: strings.ToLower(host), Why: "it is not on the allow list (--egress-allow)"}).Error()
	}
	return ""
}

// DialContext connects like a net.Dialer, refusing what the policy denies: the host name
// before it is resolved, and the address actually dialled (after resolution, so a name
// that resolves to a denied address is refused whatever DNS says at registration).
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	byName, named := false, false
	if _, ok := literalAddr(host); !ok {
		named = true
		if byName, err = p.hostVerdict(host); err != nil {
			return nil, err
		}
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, addr string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return &Error{Target: addr, Why: "not an address"}
			}
			err = p.checkAddr(ap.Addr(), byName)
			if named {
				return namedRefusal(host, err)
			}
			return err
		}}
	c, err := d.DialContext(ctx, network, address)
	var e *Error
	if named && errors.As(err, &e) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: e} // net's error would name the address
	}
	return c, err
}

// namedRefusal is err, a refusal of an address host resolves to, as a refusal of host:
// it names the host as given, not the address, since whoever may test a URL would
// otherwise learn what names inside a denied range resolve to.
func namedRefusal(host string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return &Error{Target: strings.ToLower(host), Why: "an address it resolves to " + strings.TrimPrefix(e.Why, "it ")}
	}
	return err
}

// resolveTimeout bounds the lookup of a proxied request's host.
const resolveTimeout = 10 * time.Second

// Proxy's cache of verdicts: net/http asks Proxy on every request, a reused connection's
// too, so without it each request through a proxy would wait for a lookup. A verdict is
// kept for verdictTTL (a name's addresses are checked again after that), for at most
// verdictMax hosts.
const (
	verdictTTL = 5 * time.Second
	verdictMax = 1024
)

// verdicts caches checkProxied's verdict on the addresses of a host name; safe for
// concurrent use. A nil *verdicts keeps nothing.
type verdicts struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]verdict
}

type verdict struct {
	err error // nil: allowed
	at  time.Time
}

func newVerdicts(now func() time.Time) *verdicts {
	if now == nil {
		now = time.Now
	}
	return &verdicts{now: now, m: map[string]verdict{}}
}

func (c *verdicts) get(host string) (verdict, bool) {
	if c == nil {
		return verdict{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[host]
	if !ok || c.now().Sub(v.at) >= verdictTTL {
		return verdict{}, false
	}
	return v, true
}

func (c *verdicts) put(host string, err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.m) >= verdictMax {
		for h, v := range c.m {
			if now.Sub(v.at) >= verdictTTL {
				delete(c.m, h)
			}
		}
		if len(c.m) >= verdictMax {
			clear(c.m) // more hosts than that within a TTL: each is looked up again
		}
	}
	c.m[host] = verdict{err: err, at: now}
}

// Transport is a clone of http.DefaultTransport whose every connection goes through
// the policy: DialContext, and Proxy for the proxies WithProxy gave (none: every
// request goes direct, whatever the environment says). When they name a proxy, log
// gets a warning, once per process.
func (p *Policy) Transport(log *slog.Logger) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy, t.DialContext = nil, p.DialContext // not the clone's http.ProxyFromEnvironment
	if p != nil && p.proxy != nil && (p.proxy.HTTPProxy != "" || p.proxy.HTTPSProxy != "") {
		t.Proxy = p.Proxy(p.proxy)
		p.warnProxy(log, p.proxy)
	}
	return t
}

// Proxy is an http.Transport's Proxy function for the proxy settings env. The
// connection to a proxy is to the proxy's address, all the dialer checks; so a request
// that goes through one is checked here first, as DialContext would check it: its host
// name, then a literal address or each address the name resolves to here. A request
// that goes direct (no proxy, NO_PROXY) is left to DialContext.
//
// A name that does not resolve here (the proxy may resolve names this host cannot) goes
// through only when the metadata denial is the only rule its addresses would be checked
// against (no CIDR of --egress-deny, and --egress-allow unset or naming the host):
// refusing it would stop every proxied server where only the proxy resolves names, and
// the metadata host names are still refused by name. Where the admin set network rules,
// an unchecked address is refused.
//
// The verdict on a name's addresses is kept for a few seconds (verdictTTL), since
// net/http asks on every request, a reused connection's too.
func (p *Policy) Proxy(env *httpproxy.Config) func(*http.Request) (*url.URL, error) {
	choose := env.ProxyFunc()
	var now func() time.Time
	if p != nil {
		now = p.now
	}
	cache := newVerdicts(now)
	return func(req *http.Request) (*url.URL, error) {
		proxy, err := choose(req.URL)
		if proxy == nil || err != nil {
			return proxy, err
		}
		if err := p.checkProxied(req.Context(), req.URL.Hostname(), cache); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: e} // as DialContext's refusal reads
			}
			return nil, err
		}
		return proxy, nil
	}
}

// checkProxied applies the policy to the host of a request sent through a proxy. The
// verdict on a name's addresses is taken from cache, and kept there, unless ctx is done.
func (p *Policy) checkProxied(ctx context.Context, host string, cache *verdicts) error {
	if a, ok := literalAddr(host); ok {
		return p.checkAddr(a, false)
	}
	byName, err := p.hostVerdict(host)
	if err != nil {
		return err
	}
	// Not without its trailing dot: "name." is absolute, "name" may take a search domain.
	key := strings.ToLower(host)
	if v, ok := cache.get(key); ok {
		return v.err
	}
	err = p.checkAddrsOf(ctx, host, byName)
	if ctx.Err() == nil {
		cache.put(key, err)
	}
	return err
}

// checkAddrsOf resolves host here and applies the policy to its addresses.
func (p *Policy) checkAddrsOf(ctx context.Context, host string, byName bool) error {
	lookup := net.DefaultResolver.LookupNetIP
	if p != nil && p.lookup != nil {
		lookup = p.lookup
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := lookup(rctx, "ip", host)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil || len(addrs) == 0 {
		if p == nil || len(p.denyNets) == 0 && (byName || len(p.allowNets)+len(p.allowHosts) == 0) {
			return nil
		}
		return &Error{Target: strings.ToLower(host), Why: "its addresses cannot be checked: it does not resolve here, and the proxy the request would go through (HTTP_PROXY, HTTPS_PROXY) resolves it itself"}
	}
	for _, a := range addrs {
		if err := namedRefusal(host, p.checkAddr(a, byName)); err != nil {
			return err
		}
	}
	return nil
}

// proxyWarned makes warnProxy's warning once per process.
var proxyWarned atomic.Bool

// warnProxy logs, once, that requests go through a proxy, so that the policy relies on
// names resolving here as they do at the proxy.
func (p *Policy) warnProxy(log *slog.Logger, env *httpproxy.Config) {
	if log == nil || env.HTTPProxy == "" && env.HTTPSProxy == "" || proxyWarned.Swap(true) {
		return
	}
	log.Warn("egress: HTTP_PROXY/HTTPS_PROXY is set: the egress policy checks a proxied request's host by resolving it here, "+
		"and the proxy resolves it again itself (a name that resolves differently there escapes the check); "+
		"a name that does not resolve here is refused when --egress-deny or --egress-allow names networks, "+
		"and let through otherwise, its addresses unchecked",
		"http_proxy", env.HTTPProxy != "", "https_proxy", env.HTTPSProxy != "", "no_proxy", env.NoProxy)
}
