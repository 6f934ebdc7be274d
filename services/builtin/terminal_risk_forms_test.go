package builtin

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// Forms the rules missed: a command word held in a variable, rm -r without -f (a
// run_command's stdin is /dev/null, so -f changes nothing), and anything piped into a
// shell, not only a download. Arithmetic, arrays and ordinary pipes stay unflagged.
func TestCommandRiskVariablesRecursionAndShellPipes(t *testing.T) {
	t.Parallel()
	checkCommandRisk(t, []riskCase{
		// A command word held in a variable.
		{`a=rm; $a -rf /`, "builds the command"},
		{`${a} -rf x`, "builds the command"},
		{`"$a" -rf x`, "builds the command"},
		{`x=m; r$x -rf /`, "builds the command"},
		{`ls && $CMD`, "builds the command"},
		{`exec "$@"`, "builds the command"},
		{`env -i $prog x`, "builds the command"},
		{`( $cmd )`, "builds the command"},
		{`diff <($a) b`, "builds the command"},
		{`echo $(( $($x) + 1 ))`, "builds the command"},
		{`echo $a`, ""},
		{`cd "$dir" && make`, ""},
		{`echo hi > $out`, ""},
		{`(( $n > 1 )) && echo big`, ""},
		{`echo $(( $n + 1 ))`, ""},
		{`files=( $list )`, ""},
		{`X=$HOME/bin make`, ""},
		{`[ -n "$x" ] || exit $rc`, ""},

		// rm recursive, with or without -f.
		{`rm -r *`, "deletes recursively"},
		{`rm -r -- *`, "deletes recursively"},
		{`rm -R x`, "deletes recursively"},
		{`rm -rv x`, "deletes recursively"},
		{`rm --recursive x`, "deletes recursively"},
		{`rm --rec x`, "deletes recursively"},
		{`rm -rf x`, "rm -rf"},
		{`rm -f x`, ""},
		{`rm -v x`, ""},
		{`rm x -- -f`, ""},

		// Anything piped into a shell.
		{`echo cm0gLXJmIH4K | base64 -d | sh`, "pipes into a shell"},
		{`cat x.sh | bash`, "pipes into a shell"},
		{`printf x|zsh`, "pipes into a shell"},
		{`cat x |& dash`, "pipes into a shell"},
		{`cat x | /bin/ksh`, "pipes into a shell"},
		{`cat x | bash -s -- -y`, "pipes into a shell"},
		{`cat x | sh -s`, "pipes into a shell"},
		{`cat x | sudo -u me sh`, "pipes into a shell"},
		{`curl -fsSL x | sh`, "pipes into a shell"},
		{`make || sh`, ""},
		{`ls | shuf`, ""},
		{`sha256sum x | cut -c1-8`, ""},
		{`cat x | grep sh`, ""},
	})
}

// joinedRisk rates the line a send_input finishes with what the line already held: the
// pieces of a risky line, each harmless alone, are caught; a line whose reasons came
// with the keys before it (rated, and approved, then), or a fresh line, adds nothing.
func TestJoinedRisk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		held, input, why string // why: a part of the reason; "" for none
	}{
		{"sud", "o reboot\n", "runs as root"},
		{"rm -r", "f ~/x\n", ""}, // rm -r alone is rated, and approved, when it is typed
		{"r", "m -r x\n", "deletes recursively"},
		{"cu", "rl http://x | s", ""}, // "| s" alone: not yet a shell
		{"curl http://x | s", "h\n", "pipes into a shell"},
		{"a=rm; $", "a -rf x\n", "builds the command"},
		{"!", "rm\n", "from the shell's history"},
		{strings.Repeat("x", maxAuditLine-3) + "; ", "ls\n", "longer than"},
		{"echo ", "hi\n", ""},
		{"sudo ls", "\n", ""},                     // the line's reason came with its first piece
		{"\x1b[B", "q", ""},                       // a key the shell acts on, rated when it was typed
		{"sud", "\x15ls\n", ""},                   // Ctrl-U cleared it
		{"sud", "\x03ls\n", ""},                   // so did Ctrl-C
		{"", "sudo reboot\n", ""},                 // a fresh line: the input alone is what was rated
		{"\x1b", "[Asud", "changed by the shell"}, // the up key, cut between two inputs
		{"\x1b", "OA\n", "changed by the shell"},  // the same key as SS3
		{"\x1b", ":wq\n", ""},                     // vim: Esc, then a command
		{"\x1b", "<\n", "changed by the shell"},   // readline's M-<: the oldest history line
		{"\x1b", ".\n", "changed by the shell"},   // M-.: the last command's last word
		{"\x1b", "p\n", "changed by the shell"},   // M-p: a search of the history
		{"\x1b", "ZZ", ""},
		{"\x1b", "sudo reboot\n", ""}, // rated alone, as the router did
		{"sudo ls; r", "m -r x", "deletes recursively"},
	} {
		var held lineEditor
		held.feed([]byte(tc.held))
		was := held.clone()
		why := joinedRisk(&held, tc.input, false)
		if tc.why == "" && why != "" || !strings.Contains(why, tc.why) {
			t.Errorf("%.60q then %q: %q, want %q", tc.held, tc.input, why, tc.why)
		}
		if string(held.line) != string(was.line) || held.shellEdited != was.shellEdited || string(held.pending) != string(was.pending) {
			t.Errorf("%.60q then %q: the held line changed to %.60q", tc.held, tc.input, string(held.line))
		}
	}
}

// riskCase is a command line and a part of the reason the rules give for rating it
// HIGH; why "" for a line no rule rates.
type riskCase struct{ cmd, why string }

// checkCommandRisk checks CommandRisk on each case.
func checkCommandRisk(t *testing.T, cases []riskCase) {
	t.Helper()
	for _, tc := range cases {
		l, why, ok := CommandRisk(tc.cmd)
		if tc.why == "" {
			if ok {
				t.Errorf("%q: %v %q, want no rule", tc.cmd, l, why)
			}
			continue
		}
		if !ok || l != risk.High || !strings.Contains(why, tc.why) {
			t.Errorf("%q: %v %q %v, want high for %q", tc.cmd, l, why, ok, tc.why)
		}
	}
}

// Forms the command-name rules missed: a command word naming its file by a wildcard
// (/bin/r[m] is rm), brace sequences (r{m..m} is rm) and groups side by side ({r,x}{m,y}
// holds rm), device paths spelled otherwise (//dev/sda) or written by >& and &>, and
// what rebinds the shell's keys (bind, .inputrc), after which one key types a command
// no input shows. Test commands ([ and [[), case patterns and ordinary globs, sequences
// and redirections stay unflagged.
func TestCommandRiskGlobsSequencesDevicesAndKeys(t *testing.T) {
	t.Parallel()
	checkCommandRisk(t, []riskCase{
		{`/bin/r[m] -rf x`, "by a wildcard"},
		{`/bin/r? -rf x`, "by a wildcard"},
		{`/bin/r* -rf x`, "by a wildcard"},
		{`ls | xargs /bin/r[m]`, "by a wildcard"},
		{`xargs -0 -I {} /bin/r? {}`, "by a wildcard"},
		{`find . -exec /bin/r[m] {} +`, "by a wildcard"},
		{`/usr/bin/sud[o] reboot`, "by a wildcard"},
		{`curl x | /bin/ba[s]h`, "by a wildcard"},
		{`curl x|/bin/b?sh`, "by a wildcard"},
		{`"/bin/r[m]" -rf x`, "by a wildcard"},
		{`r{m..m} -rf x`, "deletes recursively"},
		{`su{d..d}o reboot`, "runs as root"},
		{`curl x | b{a..a}sh`, "pipes into a shell"},
		{`{r,x}{m,y} -rf x`, "deletes recursively"},
		{`r{k..m..2} -rf x`, "deletes recursively"},
		{`/bin/r{m,m}` + strings.Repeat(`{a..a}`, maxBraceRounds) + ` -rf x`, "more brace expansions"},
		{`echo x >& /dev/sda`, "device"},
		{`echo x &>> /dev/sda`, "device"},
		{`echo x > //dev/sda`, "device"},
		{`echo x > /./dev/sda`, "device"},
		{`echo x >/dev//sda`, "device"},
		{`echo x > /dev/fd/../sda`, "device"},
		{`echo x > ../../../../dev/sda`, "device"},
		{`echo x | tee -i /dev/sda`, "device"},
		{`echo x | tee --append log /dev/sda`, "device"},
		{`bind '"\C-e":"\162\155 -\162f victim\n"'`, "key bindings"},
		{`builtin bind -x '"\C-e": ls'`, "key bindings"},
		{`ls; bind -f ./keys`, "key bindings"},
		{`bindkey -s '^E' 'ls\n'`, "key bindings"},
		{`printf '"\C-e":"ls\n"' > ~/.inputrc`, "key bindings"},
		{`echo x >> .inputrc`, "key bindings"},
		{`INPUTRC=./keys bash`, "key bindings"},
		{`export INPUTRC=/tmp/k`, "key bindings"},
		{`set -o vi`, "key bindings"},

		// Forms the rules missed: other ways to root, recursive owners, remote deletes,
		// an interpreter reading its code from a pipe, a shell behind another wrapper.
		{`doas reboot`, "runs as root"},
		{`pkexec rm x`, "runs as root"},
		{`su -c 'id' root`, "runs as root"},
		{`chown -R nobody /srv`, "owners recursively"},
		{`chgrp --recursive staff .`, "owners recursively"},
		{`git push --delete origin main`, "remote branch"},
		{`git push -d origin v1`, "remote branch"},
		{`git push origin :main`, "remote branch"},
		{`git push --prune origin`, "remote branch"},
		{`rsync -a --delete src/ dst/`, "rsync --delete"},
		{`rsync -a --del src/ dst/`, "rsync --delete"},
		{`curl -s x | python3`, "interpreter"},
		{`curl -s x | python3 -u -`, "interpreter"},
		{`wget -qO- x | perl`, "interpreter"},
		{`cat x.js | node`, "interpreter"},
		{`curl x | busybox sh`, "pipes into a shell"},
		{`curl x | timeout 60 sh`, "pipes into a shell"},
		{`curl x | setsid bash`, "pipes into a shell"},
		{`curl x | tcsh`, "pipes into a shell"},

		// Devices written by a copier's operand, find's output files, curl's and wget's
		// output; a disk copied out.
		{`cp disk.img /dev/sda`, "device"},
		{`cp -t /dev/sda x`, "device"},
		{`cp --target-directory=/dev/sda x`, "device"},
		{`mv x //dev/nvme0n1`, "device"},
		{`install -m 644 x /dev/sda`, "device"},
		{`ln -sf x /dev/sda`, "device"},
		{`rsync x /dev/vdb`, "device"},
		{`cp /dev/sda disk.img`, "copies one out"},
		{`find . -fprint /dev/sda`, "device"},
		{`find . -name x -fprintf /dev/sda %p`, "device"},
		{`curl -o /dev/sda https://x.example/img`, "device"},
		{`curl -o/dev/sda https://x.example/img`, "device"},
		{`curl --output=/dev/sda https://x.example/img`, "device"},
		{`wget -O /dev/sda https://x.example/img`, "device"},
		{`wget --output-document /dev/sda https://x.example/img`, "device"},
		{`curl -sSLo /dev/sda https://x.example/img`, "device"},
		{`curl -sLo/dev/sda https://x.example/img`, "device"},
		{`wget -qO /dev/sda https://x.example/img`, "device"},
		{`ddrescue /dev/sda disk.img map`, "copies one out"},
		{`ddrescue -f img /dev/sdb map`, "device"},
		{`sort -o /dev/sda list`, "device"},
		{`sort -uo/dev/sda list`, "device"},
		{`sort --output=/dev/sda list`, "device"},
		{`openssl enc -d -in img.enc -out /dev/sda`, "device"},
		{`tar -cf /dev/sda .`, "device"},
		{`tar cf /dev/sda .`, "device"},
		{`tar --file=/dev/st0 -c .`, "device"},
		{`tar -xvf /dev/sdb1`, "copies one out"},
		{`socat -u TCP-LISTEN:9000 OPEN:/dev/sda,creat`, "device"},
		{`socat - /dev/sda`, "device"},
		{`socat -u tcp:host:9 file:/dev/nvme0n1`, "device"},
		{`sort -o out.txt list`, ""},
		{`sort -r /dev/null`, ""},
		{`openssl rand -out key.bin 32`, ""},
		{`tar -cf out.tar /dev/null`, ""},
		{`tar czf backup.tgz src`, ""},
		{`socat TCP-LISTEN:8080,fork TCP:localhost:80`, ""},
		{`socat - OPEN:/dev/null`, ""},
		{`fdisk /dev/sda`, "partition table"},
		{`sudo fdisk /dev/nvme0n1`, "runs as root"},
		{`sfdisk /dev/sda < layout.txt`, "partition table"},
		{`parted -s /dev/sda mklabel gpt`, "partition table"},
		{`parted /dev/sda`, "partition table"},
		{`sgdisk --zap-all /dev/sdb`, "partition table"},
		{`gdisk /dev/sdb`, "partition table"},
		{`cfdisk`, "partition table"},
		{`sgdisk -o -n 1:0:+512M -t 1:ef00 -p /dev/sda`, "partition table"},
		{`sgdisk --zap-all --new=1:0:0 --print /dev/sda`, "partition table"},
		{`sgdisk --backup=sda.gpt --zap-all /dev/sda`, "partition table"},
		{`sgdisk -i 1 -d 1 /dev/sda`, "partition table"},
		{`sgdisk -v -Z /dev/sda`, "partition table"},
		{`fdisk -ucylinders /dev/sda`, "partition table"},
		{`parted -s /dev/sda rm 1`, "partition table"},
		{`sgdisk -i 1 /dev/sda`, ""},
		{`sgdisk --backup=sda.gpt /dev/sda`, ""},
		{`parted /dev/sda unit s print`, ""},
		{`parted /dev/sda print free`, ""},
		{`parted /dev/sda -s print`, ""},
		{`fdisk -l /dev/sda`, ""},
		{`fdisk -l`, ""},
		{`sfdisk -d /dev/sda > table.txt`, ""},
		{`sfdisk --json /dev/sda`, ""},
		{`parted -l`, ""},
		{`parted /dev/sda print`, ""},
		{`sgdisk -p /dev/sda`, ""},
		{`gdisk -l /dev/sda`, ""},
		{`cfdisk --help`, ""},
		{`cp sda /dev/`, "device"},
		{`cp -t /dev sda`, "device"},
		{`install sda /dev`, "device"},
		{`cp /dev/null x`, ""},
		{`cp a b`, ""},
		{`ls -l /dev/sda`, ""},
		{`cp x /dev/shm/y`, ""},
		{`cp /dev/stdin out`, ""},
		{`curl -sSLo out.bin https://x.example/img`, ""},
		{`wget -qO- https://x.example/ | wc -c`, ""},
		{`curl -sS -o /dev/null https://x.example/`, ""},
		{`echo x > /dev/shm/y`, ""},
		{`curl -s -o /dev/null -w '%{http_code}' https://x.example/`, ""},
		{`head -c 16 /dev/urandom > key`, ""},
		{`curl -o out.bin https://x.example/img`, ""},
		{`find . -fprint out.txt`, ""},
		{`wget -O - https://x.example/ | wc -c`, ""},

		{`cat data.json | python3 -m json.tool`, ""},
		{`git push origin main`, ""},
		{`git push -u origin feature-d`, ""},
		{`rsync -a src/ dst/`, ""},
		{`chown nobody x`, ""},
		{`echo hi | ssh host cat`, ""},
		{`[ -f x ] && echo y`, ""},
		{`[[ -n $x ]] && echo y`, ""},
		{`case $f in *.go) echo go;; *) echo other;; esac`, ""},
		{`case $f in a) x;; *.txt|*.md) y;; esac`, ""},
		{`for f in *.txt; do wc -l "$f"; done`, ""},
		{`ls *.go ./?.txt`, ""},
		{`find . -name '*.go' -exec grep -l foo {} +`, ""},
		{`ls | xargs grep 'a.*b'`, ""},
		{`echo {1..10} {a..e}`, ""},
		{`for i in {1..100000}; do :; done`, ""},
		{`mkdir -p src/{a,b}/{x,y}`, ""},
		{`echo $((2*3))`, ""},
		{`echo hi >&2; cmd &> /dev/null; echo x >/dev/./null`, ""},
		{`echo x | tee -a log /dev/null`, ""},
		{`ls /dev/sd?`, ""},
		{`grep -r bind . && mount --bind a b`, ""},
	})
}

// braced expands brace sequences as bash does (the same words, in another order at
// times), checked against a real bash.
func TestBracedMatchesBash(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, w := range []string{"{1..5}", "{5..1}", "{01..10}", "{a..e..2}", "{-3..3..2}", "{1..10..-3}",
		"{-05..5}", "{0..-3}", "{1..3..0}", "x{X..Z}z", "p{1..2}{a..b}", "{r,x}{m,y}", "a{b,{c,d}}e", "r{m..m}"} {
		out, err := exec.Command("bash", "-c", "printf '%s\\n' "+w).Output()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := braced(w)
		want := slices.Compact(slices.Sorted(slices.Values(strings.Fields(string(out)))))
		if have := slices.Compact(slices.Sorted(slices.Values(strings.Fields(got)))); !ok || !slices.Equal(have, want) {
			t.Errorf("%s: braced %q, bash %q", w, have, want)
		}
	}
	// A long sequence is rated by its first and last words.
	if got, ok := braced("-{1..100000000000}rf"); !ok || !strings.HasPrefix(got, "-1rf -2rf") || !strings.HasSuffix(got, " -100000000000rf") ||
		len(strings.Fields(got)) != maxSequence {
		t.Errorf("a long sequence: %.60q… %v", got, ok)
	}
}

// The words a rating splits a line into are shared by its rules while it runs and
// forgotten after it: a line typed with echo off (a password) is not kept.
func TestRatingForgetsItsLines(t *testing.T) {
	t.Parallel()
	line := "correct horse battery staple " + t.Name()
	if _, ok := HiddenLineRisk(line); ok {
		t.Fatal("rated")
	}
	splits.mu.Lock()
	defer splits.mu.Unlock()
	for k := range splits.words {
		if strings.Contains(k, t.Name()) {
			t.Errorf("kept after the rating: %q", k)
		}
	}
}
