package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	def, err := Parse("", "")
	if err != nil {
		t.Fatal(err)
	}
	strict, err := Parse("10.0.0.0/8, api.example.com, *.corp.example", "10.9.0.0/16, bad.corp.example")
	if err != nil {
		t.Fatal(err)
	}
	loopDenied, err := Parse("", "127.0.0.0/8, ::1/128")
	if err != nil {
		t.Fatal(err)
	}
	hostsOnly, err := Parse("api.example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p      *Policy
		url    string
		refuse string
	}{
		{nil, "http://169.254.169.254/latest/meta-data", "metadata"},
		{def, "http://169.254.169.254/latest/meta-data", "metadata"},
		{def, "http://[fd00:ec2::254]/", "metadata"},
		{def, "http://[::ffff:169.254.169.254]/", "metadata"},
		{def, "http://100.100.100.200/", "metadata"},
		{def, "http://metadata.google.internal/computeMetadata/v1/", "metadata"},
		{def, "http://METADATA.google.internal./", "metadata"},
		{def, "http://127.0.0.1:3001/mcp", ""},
		{def, "http://[::1]:3001/mcp", ""},
		{def, "https://mcp.example.com/mcp", ""},
		{strict, "http://10.1.2.3/mcp", ""},
		{strict, "http://10.9.2.3/mcp", "deny list"},
		{strict, "http://127.0.0.1/mcp", "allow list"},
		{strict, "https://api.example.com/mcp", ""},
		{strict, "https://x.corp.example/mcp", ""},
		{strict, "https://bad.corp.example/mcp", "deny list"},
		{strict, "https://other.example.com/mcp", ""}, // its addresses decide when connecting
		{hostsOnly, "https://other.example.com/mcp", "allow list"},
		{hostsOnly, "https://api.example.com/mcp", ""},
		{strict, "http://169.254.169.254/", "metadata"},
		// A zone does not hide an address from the rules; 0.0.0.0 and :: are this host.
		{def, "http://[fd00:ec2::254%25x]/", "metadata"},
		{def, "http://[fe80::a9fe:a9fe%25eth0]/", "metadata"},
		{def, "http://[fd20:ce::254]/computeMetadata/v1/", "metadata"},
		{def, "http://[fe80::1%25eth0]/", ""},
		{strict, "http://[::1%25lo]/mcp", "allow list"},
		{loopDenied, "http://[::1%25lo]/mcp", "deny list"},
		{loopDenied, "http://0.0.0.0:3001/mcp", "deny list"},
		{loopDenied, "http://[::]:3001/mcp", "deny list"},
		{def, "http://0.0.0.0:3001/mcp", ""},
	} {
		got := tc.p.CheckURL(tc.url)
		if tc.refuse == "" && got != "" || tc.refuse != "" && !strings.Contains(got, tc.refuse) {
			t.Errorf("CheckURL(%s) = %q, want %q", tc.url, got, tc.refuse)
		}
	}
	lifted, err := Parse("169.254.169.254", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := lifted.CheckURL("http://169.254.169.254/"); got != "" {
		t.Errorf("metadata allowed explicitly: %q", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "exa mple.com", "http://x", "*."} {
		if _, err := Parse(bad, ""); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

// The address dialled is checked after resolution: a name that is allowed but
// resolves to a denied address is refused at connect time (DNS rebinding).
func TestDialChecksResolvedAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx := context.Background()

	// Loopback is allowed by default, by address and by name.
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		c, err := (*Policy)(nil).DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("default policy, %s: %v", addr, err)
		}
		c.Close()
	}
	deny, err := Parse("", "127.0.0.0/8, ::1/128")
	if err != nil {
		t.Fatal(err)
	}
	// "localhost" is not denied by name; what it resolves to is.
	if deny.CheckURL("http://localhost:"+port) != "" {
		t.Fatal("the name itself should pass the check at registration")
	}
	_, err = deny.DialContext(ctx, "tcp", "localhost:"+port)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "deny list") {
		t.Fatalf("dial localhost with loopback denied: %v, want the policy's refusal", err)
	}
	// The refusal names the host as given, not what it resolved to: a person testing a
	// URL does not learn what names inside a denied range resolve to.
	if e.Target != "localhost" || strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "::1") {
		t.Fatalf("dial localhost with loopback denied: %v, want the name and not its address", err)
	}
	// An allow list that names other networks refuses loopback at connect time.
	other, _ := Parse("10.0.0.0/8", "")
	if _, err := other.DialContext(ctx, "tcp", "localhost:"+port); !errors.As(err, &e) {
		t.Fatalf("dial outside the allow list: %v", err)
	}
	// A name on the deny list is refused before it is resolved.
	byName, _ := Parse("", "localhost")
	if _, err := byName.DialContext(ctx, "tcp", "localhost:"+port); !errors.As(err, &e) {
		t.Fatalf("dial a denied name: %v", err)
	}
	// Metadata by default, whatever the port.
	if _, err := (*Policy)(nil).DialContext(ctx, "tcp", "169.254.169.254:80"); !errors.As(err, &e) {
		t.Fatalf("dial metadata: %v", err)
	}
}

// IPv4 addresses written in IPv6 are judged as the IPv4 address they reach: a CIDR
// written IPv4-mapped (::ffff:10.0.0.0/104) matches IPv4 addresses, and a NAT64 address
// (64:ff9b::/96) is refused when the IPv4 address it embeds is. Only a rule naming the
// NAT64 address itself allows it.
func TestMappedAndNAT64(t *testing.T) {
	t.Parallel()
	parse := func(allow, deny string) *Policy {
		t.Helper()
		p, err := Parse(allow, deny)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mappedDeny := parse("", "::ffff:10.0.0.0/104")
	mappedAllow := parse("::ffff:10.0.0.0/104", "")
	tenDenied := parse("", "10.0.0.0/8")
	tenAllowed := parse("10.0.0.0/8", "")
	nat64 := parse("64:ff9b::/96", "10.0.0.0/8")
	for _, tc := range []struct {
		p      *Policy
		url    string
		refuse string
	}{
		{mappedDeny, "http://10.1.2.3/", "deny list"},
		{mappedDeny, "http://[::ffff:10.1.2.3]/", "deny list"},
		{mappedDeny, "http://11.1.2.3/", ""},
		{mappedAllow, "http://10.1.2.3/", ""},
		{mappedAllow, "http://11.1.2.3/", "allow list"},
		{tenDenied, "http://[64:ff9b::a00:5]/", "deny list"},
		{tenDenied, "http://[64:ff9b::b00:5]/", ""},
		{nil, "http://[64:ff9b::a9fe:a9fe]/", "metadata"},
		{tenAllowed, "http://[64:ff9b::a00:5]/", "allow list"},
		{nat64, "http://[64:ff9b::808:808]/", ""},
		{nat64, "http://[64:ff9b::a00:5]/", "deny list"},
	} {
		got := tc.p.CheckURL(tc.url)
		if tc.refuse == "" && got != "" || tc.refuse != "" && !strings.Contains(got, tc.refuse) {
			t.Errorf("CheckURL(%s) = %q, want %q", tc.url, got, tc.refuse)
		}
	}
	if got := parse("::ffff:169.254.169.254", "").CheckURL("http://169.254.169.254/"); got != "" {
		t.Errorf("allowing the metadata address written IPv4-mapped does not lift its denial: %q", got)
	}
}

// Naming one metadata endpoint in the allow list lifts the denial of that one alone:
// allowing Alibaba's 100.100.100.200 does not let an allowed name that resolves to
// 169.254.169.254 through, nor the GCP host names; a wildcard names no metadata host.
func TestMetadataLiftedOnlyForWhatIsNamed(t *testing.T) {
	t.Parallel()
	alibaba, err := Parse("100.100.100.200, *.corp.example", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr   string
		byName bool
		refuse string
	}{
		{"100.100.100.200", false, ""},
		{"169.254.169.254", true, "metadata"}, // x.corp.example resolving there
		{"fd00:ec2::254", true, "metadata"},
		{"64:ff9b::a9fe:a9fe", true, "metadata"},
	} {
		err := alibaba.checkAddr(netip.MustParseAddr(tc.addr), tc.byName)
		if got := fmt.Sprint(err); tc.refuse == "" && err != nil || tc.refuse != "" && !strings.Contains(got, tc.refuse) {
			t.Errorf("checkAddr(%s, by name %v) = %v, want %q", tc.addr, tc.byName, err, tc.refuse)
		}
	}
	for _, tc := range []struct {
		p      *Policy
		url    string
		refuse string
	}{
		{alibaba, "http://metadata.google.internal/computeMetadata/v1/", "metadata"},
		{alibaba, "http://169.254.169.254/", "metadata"},
		{alibaba, "http://100.100.100.200/", ""},
	} {
		if got := tc.p.CheckURL(tc.url); tc.refuse == "" && got != "" || tc.refuse != "" && !strings.Contains(got, tc.refuse) {
			t.Errorf("CheckURL(%s) = %q, want %q", tc.url, got, tc.refuse)
		}
	}
	gcp, err := Parse("metadata.google.internal, *.goog", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gcp.hostVerdict("metadata.google.internal"); err != nil {
		t.Errorf("the metadata host named in the allow list: %v", err)
	}
	if _, err := gcp.hostVerdict("metadata.goog"); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("a metadata host matched only by a wildcard: %v, want refused", err)
	}
	// The host name lifts the name, not the metadata address it resolves to.
	if err := gcp.checkAddr(netip.MustParseAddr("169.254.169.254"), true); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("a metadata address reached through an allowed metadata host: %v, want refused", err)
	}
}

// The local-use NAT64 prefix (RFC 8215, 64:ff9b:1::/48) may be used at any RFC 6052
// length from /48 to /96: an address in it is refused when the IPv4 address it embeds
// at any of them is. The vectors are RFC 6052's (section 2.4) for 192.0.2.33, moved
// into the local-use prefix.
func TestNAT64LocalUsePrefix(t *testing.T) {
	t.Parallel()
	target := netip.MustParseAddr("192.0.2.33")
	vectors := map[string]string{
		"/48": "64:ff9b:1:c000:2:2100::",
		"/56": "64:ff9b:1:3c0:0:221::",
		"/64": "64:ff9b:1:344:c0:2:2100:0",
		"/96": "64:ff9b:1:344::192.0.2.33",
	}
	denied, err := Parse("", "192.0.2.33")
	if err != nil {
		t.Fatal(err)
	}
	for pl, v := range vectors {
		a := netip.MustParseAddr(v)
		if !slices.Contains(nat64Reached(a), target) {
			t.Errorf("%s vector %s: reaches %v, want %s among them", pl, v, nat64Reached(a), target)
		}
		if got := denied.CheckURL("http://[" + v + "]/"); !strings.Contains(got, "deny list") {
			t.Errorf("%s vector %s with 192.0.2.33 denied: %q, want refused", pl, v, got)
		}
	}
	for _, tc := range []struct {
		p      *Policy
		url    string
		refuse string
	}{
		// 169.254.169.254 at /96 (the reviewer's) and at /48 (bits 48-63, u, bits 72-87).
		{nil, "http://[64:ff9b:1::a9fe:a9fe]/", "metadata"},
		{nil, "http://[64:ff9b:1:a9fe:a9:fe00::]/", "metadata"},
		{nil, "http://[64:ff9b:1:ffff::a9fe:a9fe]/", "metadata"},
		// 8.8.8.8 at /48; nothing denied.
		{nil, "http://[64:ff9b:1:808:8:800::]/", ""},
		{denied, "http://[64:ff9b:1:808:8:800::]/", ""},
		// Outside both NAT64 prefixes nothing is embedded.
		{denied, "http://[2001:db8:122:c000:2:2100::]/", ""},
		{denied, "http://[64:ff9b:2::c000:221]/", ""},
	} {
		got := tc.p.CheckURL(tc.url)
		if tc.refuse == "" && got != "" || tc.refuse != "" && !strings.Contains(got, tc.refuse) {
			t.Errorf("CheckURL(%s) = %q, want %q", tc.url, got, tc.refuse)
		}
	}
}
