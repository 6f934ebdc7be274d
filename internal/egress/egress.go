// Package egress decides which addresses Toolwarden may connect to for an MCP
// server's URL (and a template tool's HTTP request): an optional policy of allowed and
// denied CIDRs and host names, with the cloud metadata endpoints denied by default so
// that "Test connection" cannot be used to read instance credentials or map the
// internal network (docs/security.md, Egress).
//
// The policy is enforced where connections are made: Dialer checks the host name
// before resolving it, and the address actually dialled in the dialer's Control
// function, after resolution, so a name that resolves to a denied address (DNS
// rebinding included) is refused too. CheckURL applies the same rules to a URL at
// registration, without resolving names.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
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

// nat64 is the well-known NAT64 prefix (RFC 6052): where a NAT64 gateway serves it, an
// address in it reaches the IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// hostVerdict is what the rules say of a host name before it is resolved: an error
// when it is denied, and whether an allow rule names it (then its addresses need only
// not be denied).
func (p *Policy) hostVerdict(host string) (allowedByName bool, err error) {
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
	reached := []netip.Addr{a}
	if nat64.Contains(a) {
		b := a.As16()
		reached = append(reached, netip.AddrFrom4([4]byte(b[12:])))
	}
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
	if a, err := netip.ParseAddr(host); err == nil {
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
	if _, perr := netip.ParseAddr(host); perr != nil {
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
			var e *Error
			if named && errors.As(err, &e) {
				// The refusal names the host as given, not the address it resolved to:
				// whoever may test a URL would otherwise learn what names inside a
				// denied range resolve to.
				return &Error{Target: strings.ToLower(host), Why: "an address it resolves to " + strings.TrimPrefix(e.Why, "it ")}
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
