package main

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
)

// The address other replicas reach this one at: the listen address when it is a
// specific one, the host name with the port when it listens on every address; a bad
// --advertise-url is a usage error naming the flag, before anything starts.
func TestAdvertiseURL(t *testing.T) {
	host, _ := os.Hostname()
	for _, tt := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}, "http://127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 9000}, "http://10.1.2.3:9000"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 8080}, "http://[::1]:8080"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "http://" + net.JoinHostPort(host, "8080")},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8081}, "http://" + net.JoinHostPort(host, "8081")},
	} {
		if got := defaultAdvertiseURL(tt.addr); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.addr, got, tt.want)
		}
	}
	for _, ok := range []string{"http://r0.internal:8080", "https://tw-1.example.com", "http://10.0.0.5:8080/"} {
		if err := checkAdvertiseURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"r0.internal:8080", "ftp://r0", "http://", "http://r0/?x=1", "http://u:p@r0", "http://10.0.0.11:8080/tw"} {
		if err := checkAdvertiseURL(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	_, stderr, err := runCmd(t, "", "serve", "--data-dir", t.TempDir(), "--advertise-url", "r0:8080")
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--advertise-url:") {
		t.Fatalf("serve --advertise-url r0:8080: %v\n%s", err, stderr)
	}
}
