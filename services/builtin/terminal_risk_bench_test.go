package builtin

import "testing"

// BenchmarkCommandRisk rates typical command lines, as every terminal line and
// run_command is rated.
func BenchmarkCommandRisk(b *testing.B) {
	lines := []string{
		"ls -la",
		"cd /srv/app && git pull --rebase && make build 2>&1 | tee build.log",
		"curl -sSLo out.tar.gz https://x.example/release.tar.gz && tar xzf out.tar.gz -C /opt/app && cp -r /opt/app/etc/* /etc/app/",
	}
	for b.Loop() {
		for _, l := range lines {
			CommandRisk(l)
		}
	}
}
