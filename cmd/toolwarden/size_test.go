package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"16777216", 16 << 20, ""},
		{"16MiB", 16 << 20, ""},
		{"16 mib", 16 << 20, ""},
		{"16Mi", 16 << 20, ""},
		{"512KB", 512_000, ""},
		{"512kib", 512 << 10, ""},
		{"64MB", 64_000_000, ""},
		{"1GiB", 1 << 30, ""},
		{" 2g ", 2_000_000_000, ""},
		{"100B", 100, ""},
		{"", 0, "not a size"},
		{"lots", 0, "not a size"},
		{"16 MiBs", 0, "not a size"},
		{"1.5MiB", 0, "not a size"},
		{"-1", 0, "not a size"},
		{"99999999999999999999", 0, "too large"},
		{"9999999999GiB", 0, "too large"},
	} {
		got, err := parseSize(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("%q: got %d, %v, want %d", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: got %d, %v, want an error saying %q", tc.in, got, err, tc.err)
		}
	}
}

func TestByteSizeFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want, err string
	}{
		{"16MiB", "16MiB", ""},
		{"64KiB", "64KiB", ""},
		{"1000000", "1000000", ""},
		{"1GiB", "1GiB", ""},
		{"65535", "", "too small"},
		{"1025MiB", "", "too large"},
	} {
		var b byteSize
		err := b.Set(tc.in)
		if tc.err == "" && (err != nil || b.String() != tc.want) {
			t.Errorf("%q: got %s, %v, want %s", tc.in, b.String(), err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: got %v, want an error saying %q", tc.in, err, tc.err)
		}
	}
}

// The environment sets the default, the flag wins over it, and a bad value names both
// the variable and the flag.
func TestMaxMessageSizeFromEnv(t *testing.T) {
	t.Parallel()
	const env = "TOOLWARDEN_MAX_MESSAGE_SIZE"
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    byteSize
		wantErr string
	}{
		{"default", nil, nil, 16 << 20, ""},
		{"env", nil, map[string]string{env: "2MiB"}, 2 << 20, ""},
		{"flag wins", []string{"--max-message-size", "1MiB"}, map[string]string{env: "2MiB"}, 1 << 20, ""},
		{"flag wins over a bad env", []string{"--max-message-size", "1MiB"}, map[string]string{env: "lots"}, 1 << 20, ""},
		{"bad env", nil, map[string]string{env: "lots"}, 0, env + " (the default of --max-message-size): \"lots\" is not a size"},
		{"env too small", nil, map[string]string{env: "1KB"}, 0, "too small"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		v := byteSize(16 << 20)
		fs.Var(&v, "max-message-size", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := envSize(fs, "max-message-size", env, func(k string) (string, bool) { s, ok := tc.env[k]; return s, ok }, &v)
		if tc.wantErr == "" && (err != nil || v != tc.want) {
			t.Errorf("%s: got %d, %v, want %d", tc.name, v, err, tc.want)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

// A bad --max-message-size stops serve before it starts anything, naming the flag.
func TestServeRefusesBadMaxMessageSize(t *testing.T) {
	t.Parallel()
	_, stderr, err := runCmd(t, "", "serve", "--max-message-size", "lots", "--data-dir", t.TempDir())
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, `invalid value "lots" for flag -max-message-size: "lots" is not a size`) {
		t.Errorf("got %v\n%s\nwant a usage error naming -max-message-size", err, stderr)
	}
}

// --snapshot-budget takes sizes up to 1 TiB and refuses ones too small to keep an
// hour's snapshots; TOOLWARDEN_SNAPSHOT_BUDGET is its default.
func TestSnapshotBudgetFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want, err string
	}{
		{"2GiB", "2GiB", ""},
		{"16MiB", "16MiB", ""},
		{"1024GiB", "1024GiB", ""},
		{"500 GB", "488281250KiB", ""},
		{"15MiB", "", "too small"},
		{"1025GiB", "", "too large"},
		{"99999999999999999999", "", "too large"},
		{"lots", "", "not a size"},
	} {
		var b budgetSize
		err := b.Set(tc.in)
		if tc.err == "" && (err != nil || b.String() != tc.want) {
			t.Errorf("%q: got %s, %v, want %s", tc.in, b.String(), err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: got %v, want an error saying %q", tc.in, err, tc.err)
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	v := snapshotBudgetFlag(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := envSize(fs, "snapshot-budget", "TOOLWARDEN_SNAPSHOT_BUDGET", func(string) (string, bool) { return "512MiB", true }, v); err != nil || *v != 512<<20 {
		t.Fatalf("from the environment: %d %v", *v, err)
	}
	if err := envSize(fs, "snapshot-budget", "TOOLWARDEN_SNAPSHOT_BUDGET", func(string) (string, bool) { return "1MiB", true }, v); err == nil ||
		!strings.Contains(err.Error(), "TOOLWARDEN_SNAPSHOT_BUDGET (the default of --snapshot-budget)") {
		t.Fatalf("a bad value from the environment: %v", err)
	}
}
