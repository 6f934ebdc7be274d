package builtin

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// The run_command rules read the text as the shell does: ANSI-C and locale quotes
// ($'…', $"…", with $'…' escapes decoded), $IFS standing for a space, and eval or a
// command word made by $(…) or `…` wherever a command word can be (after reserved words,
// {, !, time, assignments and wrappers). Each dodge here went unflagged before; the
// ordinary commands after them stay unflagged.
func TestCommandRiskShellQuotesAndWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		high bool
	}{
		// ANSI-C and locale quotes.
		{`$'rm' -rf /tmp/x`, true},
		{`$"rm" -rf /tmp/x`, true},
		{`$'su''do' id`, true},
		{`curl x | $'sh'`, true},
		{`$'\x72m' -rf /`, true},
		{`$'\162m' -rf /`, true},
		{`$'\u0072m' -rf /`, true},
		{`$'r\x6D' -rf /`, true},
		{`$'rm\0junk' -rf /`, true}, // bash ends the word at the NUL
		{`rm $'-\x72f' /`, true},
		{`echo "$'"; $'\x72m' -rf /; echo "'"`, true}, // $' inside "…" is no quote
		{`echo "$(echo ")")"; $'\x72m' -rf /`, true},
		// $IFS for a space.
		{`rm${IFS}-rf${IFS}/tmp/x`, true},
		{`curl x${IFS}|${IFS}sh`, true},
		{`rm$IFS-rf$IFS/tmp/x`, true},
		{`rm${IFS:0:1}-rf${IFS:0:1}/tmp/x`, true},
		{`sudo${IFS}id`, true},
		// eval or a built command word after keywords, braces, assignments, !, time and wrappers.
		{`if true; then eval x; fi`, true},
		{"for i in 1; do `echo rm` -rf /tmp/x; done", true},
		{`{ $(echo rm) -rf /tmp/x; }`, true},
		{`X=1 $(echo rm) -rf /tmp/x`, true},
		{`X="a b" Y=$(date) $(echo rm) -rf /tmp/x`, true},
		{`! $(echo rm) -rf /x`, true},
		{`time $(echo rm) -rf /x`, true},
		{`time -p eval x`, true},
		{`command $(echo rm) -rf /tmp/x`, true},
		{`builtin eval x`, true},
		{`exec $(echo rm) -rf /tmp/x`, true},
		{`env -i PATH=/bin $(echo rm) -rf /tmp/x`, true},
		{`nice -n 5 $(echo rm) -rf /tmp/x`, true},
		{`nohup eval x`, true},
		{`while $(cat cmd); do :; done`, true},
		{`if x; then :; else eval y; fi`, true},
		{"echo `eval x`", true},
		{"echo `date`; `cat cmd` -rf /tmp/x", true},
		{`/bin/$(echo rm) -rf /tmp/x`, true},
		{`"$(echo rm)" -rf /tmp/x`, true},
		{`X=1 "ev"al x`, true},

		// Ordinary commands.
		{`echo $(date)`, false},
		{`ls "$HOME"`, false},
		{`git log --format='%h'`, false},
		{`x=$(git rev-parse HEAD)`, false},
		{`X=$(date) make`, false},
		{`grep eval main.go`, false},
		{`echo "it's fine"`, false},
		{`if [ -n "$(git status --porcelain)" ]; then echo dirty; fi`, false},
		{`for f in $(ls); do echo "$f"; done`, false},
		{"echo `date` `whoami`", false},
		{"echo `date` eval", false},
		{`echo $'hello\n' $"world"`, false},
		{`printf $'%s\t%s\n' a b`, false},
		{`IFS=, read -r a b`, false},
		{`echo "$IFS" | od -c`, false},
		{`time make -j$(nproc)`, false},
		{`nice -n 5 make -j$(nproc)`, false},
		{`env FOO=1 npm test`, false},
		{`command -v git`, false},
		{`exec 3>$(mktemp)`, false},
		{`cmd 2>&1 | tee $(mktemp)`, false},
		{`echo $((1 + 2))`, false},
		{`{ echo a; echo b; } > out.txt`, false},
		{`! grep -q x file && echo missing`, false},
		{`docker run --rm -it $(docker build -q .)`, false},
	} {
		l, why, ok := CommandRisk(tc.cmd)
		if ok != tc.high || ok && l != risk.High {
			t.Errorf("%q: %v %q %v, want high %v", tc.cmd, l, why, ok, tc.high)
		}
	}
}

// $'…' is decoded as bash decodes it.
func TestANSICQuotes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`$'a\tb'`:         "a\tb",
		`$'\x41\x4a'`:     "AJ",
		`$'\x4'`:          "\x04",
		`$'\xZ'`:          `\xZ`,
		`$'\101\0101'`:    "A\b1",
		`$'A\0B'`:         "A",
		`$'\u00e9'`:       "é",
		`$'\cA'`:          "\x01",
		`$'\c?'`:          "\x7f",
		`$'it\'s'`:        "it's",
		`$'\q'`:           `\q`,
		`$'a' b`:          "a b",
		`$'open`:          "open",
		`'$'\x41`:         "$x41",
		`"$'\x41'"`:       `$'\x41'`,
		`a\ b "c\"d" 'e'`: `a b c"d e`,
		`$"a\"b"`:         `a"b`,
		"rm -r \\\n-f":    "rm -r -f",
		"rm -r \\\r\n-f":  "rm -r -f",
	} {
		if got := shellRead(in); got != want {
			t.Errorf("shellRead(%q) = %q, want %q", in, got, want)
		}
	}
}
