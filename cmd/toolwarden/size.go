package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/mcpclient"
)

// Bounds of --max-message-size: below 64 KiB ordinary initialize and tools/list answers
// stop fitting; above 1 GiB one message could take the memory of the whole machine.
const (
	minMessageSize = 64 << 10
	maxMessageSize = 1 << 30
)

// sizeUnits are the units a size may carry, case-insensitively: KB, MB and GB are powers
// of 1000 and KiB, MiB and GiB powers of 1024, as their standards define them.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30,
}

// parseSize reads a byte count ("16777216") or a whole number with a unit ("16MiB",
// "512 KB"), at most maxMessageSize.
func parseSize(s string) (int64, error) { return parseSizeUpTo(s, maxMessageSize) }

// parseSizeUpTo is parseSize with another largest size, a whole number of GiB: what is
// not far past it (so cannot overflow); the flag's Set refuses past it exactly.
func parseSizeUpTo(s string, most int64) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if i == 0 || !ok {
		return 0, fmt.Errorf("%q is not a size: want a byte count or a whole number with a unit, like 512KiB, 16MiB or 64MB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > most/unit+1 {
		return 0, fmt.Errorf("%q is too large: want at most %dGiB", s, most>>30)
	}
	return n * unit, nil
}

// maxMessageFlag adds --max-message-size to fs: serve's cap on what MCP servers send, and
// import's for the discoveries it runs (a server serve discovers must not fail there). Its
// variable is read after parsing, with envMaxMessage.
func maxMessageFlag(fs *flag.FlagSet) *byteSize {
	v := byteSize(mcpclient.DefaultMaxMessageBytes)
	fs.Var(&v, "max-message-size", "the largest message an MCP server may send (a stdio line, an SSE event, a JSON body); "+
		"a larger result answers result_too_large. A byte count or a size like 512KiB, 16MiB or 64MB (env TOOLWARDEN_MAX_MESSAGE_SIZE)")
	return &v
}

// envMaxMessage sets v from TOOLWARDEN_MAX_MESSAGE_SIZE unless the flag was given.
func envMaxMessage(fs *flag.FlagSet, v *byteSize) error {
	return envSize(fs, "max-message-size", "TOOLWARDEN_MAX_MESSAGE_SIZE", os.LookupEnv, v)
}

// byteSize is a message size flag (--max-message-size): a byte count or a size with a
// unit, between minMessageSize and maxMessageSize.
type byteSize int64

// String implements flag.Value, in the form Set takes.
func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// Set implements flag.Value.
func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	switch {
	case n < minMessageSize:
		return fmt.Errorf("%q is too small: want at least 64KiB, or servers' ordinary answers (initialize, tools/list) stop fitting", s)
	case n > maxMessageSize:
		return fmt.Errorf("%q is too large: want at most 1GiB", s)
	}
	*b = byteSize(n)
	return nil
}

// flagGiven reports whether flag name was given on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// envSize sets v from environment variable env (read through lookup) unless flag name
// was given on the command line (the flag wins), and names both when the value is wrong.
// An empty variable counts as unset, as envFlags and the docs have it.
func envSize(fs *flag.FlagSet, name, env string, lookup func(string) (string, bool), v flag.Value) error {
	s, ok := lookup(env)
	if flagGiven(fs, name) || !ok || s == "" {
		return nil
	}
	if err := v.Set(s); err != nil {
		return fmt.Errorf("%s (the default of --%s): %w", env, name, err)
	}
	return nil
}

// Bounds of --snapshot-budget: below 16 MiB a few writes of large files would remove
// every snapshot of the hour; 1 TiB is past any disk a replica would give them.
const (
	minSnapshotBudget = 16 << 20
	maxSnapshotBudget = 1 << 40
)

// budgetSize is the --snapshot-budget flag: a size from minSnapshotBudget to
// maxSnapshotBudget.
type budgetSize int64

// String implements flag.Value, in the form Set takes.
func (b *budgetSize) String() string { return (*byteSize)(b).String() }

// Set implements flag.Value.
func (b *budgetSize) Set(s string) error {
	n, err := parseSizeUpTo(s, maxSnapshotBudget)
	if err != nil {
		return err
	}
	switch {
	case n < minSnapshotBudget:
		return fmt.Errorf("%q is too small: want at least 16MiB, or a few writes of large files would remove every snapshot", s)
	case n > maxSnapshotBudget:
		return fmt.Errorf("%q is too large: want at most 1TiB", s)
	}
	*b = budgetSize(n)
	return nil
}

// snapshotBudgetFlag adds --snapshot-budget to fs; its variable is read after parsing,
// with envSize.
func snapshotBudgetFlag(fs *flag.FlagSet) *budgetSize {
	v := budgetSize(builtin.DefaultSnapshotBudget)
	fs.Var(&v, "snapshot-budget", "the bound of the built-in tools' snapshot store (what each write changed, for rollback): "+
		"once past it, the next write first removes the oldest snapshots, whatever their age. A size like 512MiB or 2GiB (env TOOLWARDEN_SNAPSHOT_BUDGET)")
	return &v
}
