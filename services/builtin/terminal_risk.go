package builtin

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolwarden/toolwarden/services/risk"
)

// A command or typed input that matches one of these rules makes its call HIGH risk,
// whatever the tool's own level: the rules only ever raise it (the router takes the
// riskier of the two).
var commandRules = []struct {
	why   string
	match func(cmd string) bool
}{
	// run_command's stdin is /dev/null, so -f changes nothing there: -r alone deletes as much.
	{"deletes recursively (rm -r, rm -rf)", rmRecursive},
	{"runs as root (sudo, doas, pkexec, su)", re("(^|[;&|(\\s`{,])(\\S*/)?(sudo|doas|pkexec|su)($|[\\s;&|)`},])")},
	// Whatever feeds the pipe (a download, base64 -d, a file), the shell runs text the
	// command line does not show; || is no pipe.
	{"pipes into a shell what another command prints (curl … | sh, base64 -d | bash)", re(`(^|[^|])\|&?\s*` + shellWord)},
	// An interpreter given no script reads its code from standard input; with a script or
	// -m module, what is piped is data (… | python3 -m json.tool).
	{"pipes into an interpreter what another command prints (curl … | python3, | perl -)", re(`(^|[^|])\|&?\s*` + wrappers +
		`(\S*/)?(python[0-9.]*|perl|ruby|node|php|lua|tclsh|Rscript)(\s+-[A-Za-z]*)*(\s+-)?\s*($|[;&|)\n])`)},
	{"feeds a download to a shell (sh <(curl …), sh -c \"$(curl …)\")", re(`(^|[;&|(\s]|\x60)(\S*/)?((ba|z|da|k|fi)?sh|source|\.)\s[^;&|\n]*(<\(|\$\(|\x60)\s*(curl|wget|fetch)\b`)},
	{"makes a file system (mkfs)", re(`\bmkfs(\.\w+)?\b`)},
	{"writes raw blocks (dd of=)", re(`\bdd\b[^;&|\n]*\bof=`)},
	{"changes permissions or owners recursively (chmod -R, chown -R, chgrp -R)", chmodRecursive},
	{"force-pushes (git push --force)", gitForcePush},
	{"deletes a remote branch or tag (git push --delete, git push origin :branch)", gitPushDelete},
	{"deletes from the destination what the source does not hold (rsync --delete)", rsyncDelete},
	{"writes to a device file, or copies one out", deviceWrite},
	{whyBuilt, builtCommand},
	// /bin/r[m] is rm wherever the file exists; which command a wildcard names, the text
	// does not show.
	{whyGlob, globCommand},
	// A key bound to a macro types a command that no input shows (bind '"\C-e":"rm -rf x\n"',
	// then Ctrl-E); readline reads .inputrc (or $INPUTRC) when a shell starts. In vi mode
	// the keys after Esc are commands the line's rebuilding does not follow.
	{"changes the shell's key bindings (bind, bindkey, .inputrc, INPUTRC, set -o vi), so that a key can type a command no input shows", keyBindings},
	// The forms below delete or overwrite more than the line names, or what no undo
	// brings back. Like the rules above they are a best-effort list of common forms, not
	// a guarantee: a script, an alias or an interpreter reading its code from a file can
	// delete without any of them showing.
	{"deletes what a wildcard matches (rm *)", rmGlob},
	{"deletes what another command finds or lists (find -delete, find -exec rm, xargs rm)", deletesListed},
	{"overwrites or cuts a file's content (shred, truncate)", shredOrTruncate},
	{"erases a disk's signatures or blocks (wipefs -a, blkdiscard)", diskErase},
	{"edits a disk's partition table (fdisk, sfdisk, parted, gdisk, sgdisk, cfdisk)", partitionEdit},
	{"discards git work no undo restores (git reset --hard, git clean, git checkout -- ., git restore, git stash drop)", gitDiscard},
	{"deletes files from code given on the command line (python -c … rmtree, perl -e … unlink)", interpreterDelete},
}

// shellWord is a shell a pipe feeds, after any wrappers that run their arguments as a
// command (sudo, env, command, exec, nice, nohup) and their options.
const shellWord = wrappers + `(\S*/)?(ba|z|da|k|fi|mk|c|tc)?sh\b`

// wrappers are commands that run their arguments as a command (sudo, env, nice, a
// busybox applet…), with their options, before the command they run.
const wrappers = `((\S*/)?(sudo|doas|pkexec|env|command|exec|nice|nohup|busybox|timeout|setsid|stdbuf|ionice|chrt|taskset|unbuffer)\s+([^;&|\n]*\s)?)?`

// unquoted is cmd roughly as the shell reads its words: a backslash-newline joins the
// lines, and quotes and backslashes go (`"rm" -rf` and `\rm -rf` are rm -rf, as is r, two
// quotes, m). It does not follow which quote is open, so a quote inside another cannot
// lead it astray; shellRead does follow them, and the rules are matched against both. A
// quoted rule-like argument (echo "rm -rf x") is rated as the command it spells, which
// only ever raises the level.
func unquoted(cmd string) string {
	cmd = strings.ReplaceAll(cmd, "\\\r\n", "")
	cmd = strings.ReplaceAll(cmd, "\\\n", "")
	return strings.NewReplacer(`"`, "", "'", "", `\`, "").Replace(cmd)
}

// shellRead is cmd as bash reads its words: a backslash-newline joins the lines, a
// backslash outside quotes and the quotes go, '…' is kept as written, "…" and $"…" lose
// the backslash before $ ` " \ and a newline, and $'…' is decoded ($'\x72m' is rm). It
// follows which quote is open, so a $' inside "…" is no quote (and cannot make the
// backslashes after it read as escapes), and $(…) and `…` inside "…" hold quotes of their
// own. Any remaining muddle is covered by unquoted, which is rated too.
func shellRead(cmd string) string {
	type context struct {
		kind  byte // 'n': unquoted text, a $(…) or a `…`; '"': inside "…"
		tick  bool // a `…`, ended by the next backtick
		depth int  // open parentheses of a $(…), which ends when they close
	}
	var b strings.Builder
	stack := []context{{kind: 'n'}}
	next := func(i int) byte {
		if i+1 < len(cmd) {
			return cmd[i+1]
		}
		return 0
	}
	for i := 0; i < len(cmd); i++ {
		c, top := cmd[i], &stack[len(stack)-1]
		if c == '\\' && next(i) == '\r' && i+2 < len(cmd) && cmd[i+2] == '\n' {
			i += 2 // a backslash-CRLF joins lines as a backslash-newline does
			continue
		}
		if top.kind == '"' {
			switch {
			case c == '\\' && strings.IndexByte("$`\"\\\n", next(i)) >= 0:
				if next(i) != '\n' {
					b.WriteByte(next(i))
				}
				i++
			case c == '"':
				stack = stack[:len(stack)-1]
			case c == '$' && next(i) == '(':
				b.WriteString("$(")
				i++
				stack = append(stack, context{kind: 'n', depth: 1})
			case c == '`':
				b.WriteByte(c)
				stack = append(stack, context{kind: 'n', tick: true})
			default:
				b.WriteByte(c)
			}
			continue
		}
		switch {
		case c == '\\':
			if i+1 < len(cmd) && next(i) != '\n' {
				b.WriteByte(next(i))
			}
			i++
		case c == '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				end = len(cmd) - i - 1
			}
			b.WriteString(cmd[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			stack = append(stack, context{kind: '"'})
		case c == '$' && next(i) == '"':
			i++
			stack = append(stack, context{kind: '"'})
		case c == '$' && next(i) == '\'':
			text, n := ansiC(cmd[i+2:])
			b.WriteString(text)
			i += 1 + n
		case c == '$' && next(i) == '(':
			b.WriteString("$(")
			i++
			stack = append(stack, context{kind: 'n', depth: 1})
		case c == '`':
			b.WriteByte(c)
			if top.tick {
				stack = stack[:len(stack)-1]
			} else {
				stack = append(stack, context{kind: 'n', tick: true})
			}
		case c == '(' && top.depth > 0:
			b.WriteByte(c)
			top.depth++
		case c == ')' && top.depth > 0:
			b.WriteByte(c)
			if top.depth--; top.depth == 0 {
				stack = stack[:len(stack)-1]
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ansiC decodes the text of a $'…' (s starts after $') as bash does, returning it and
// the bytes it took, its closing quote included: \n, \t and the other C escapes, \xHH,
// \NNN in octal, \uHHHH, \UHHHHHHHH and \cX; a NUL ends the text, and an escape bash does
// not know keeps its backslash.
func ansiC(s string) (string, int) {
	var b strings.Builder
	nul := false
	write := func(t string) {
		if !nul {
			b.WriteString(t)
		}
	}
	i := 0
	for i < len(s) {
		c := s[i]
		i++
		if c == '\'' {
			return b.String(), i
		}
		if c != '\\' || i == len(s) {
			write(string([]byte{c}))
			continue
		}
		e := s[i]
		i++
		switch e {
		case 'a', 'b', 'e', 'E', 'f', 'n', 'r', 't', 'v':
			write(string([]byte{cEscapes[e]}))
		case '\\', '\'', '"', '?':
			write(string([]byte{e}))
		case 'x', 'u', 'U', '0', '1', '2', '3', '4', '5', '6', '7':
			base, most := 16, 2
			switch e {
			case 'u':
				most = 4
			case 'U':
				most = 8
			case 'x':
			default: // octal: the digit just read is the first of up to three
				base, most = 8, 3
				i--
			}
			v, n := 0, 0
			for ; n < most && i+n < len(s); n++ {
				d := strings.IndexByte("0123456789abcdef"[:base], lower(s[i+n]))
				if d < 0 {
					break
				}
				v = v*base + d
			}
			i += n
			switch {
			case n == 0:
				write(`\` + string([]byte{e}))
			case e == 'u' || e == 'U':
				write(string(rune(v)))
			default:
				nul = nul || byte(v) == 0
				write(string([]byte{byte(v)}))
			}
		case 'c':
			if i < len(s) {
				ctl := s[i] & 0x1f
				if s[i] == '?' {
					ctl = 0x7f
				}
				nul = nul || ctl == 0
				write(string([]byte{ctl}))
				i++
			}
		default:
			write(`\` + string([]byte{e}))
		}
	}
	return b.String(), i
}

var cEscapes = map[byte]byte{'a': 7, 'b': 8, 'e': 27, 'E': 27, 'f': 12, 'n': 10, 'r': 13, 't': 9, 'v': 11}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// ifsWord is $IFS as a word separator: the shell splits rm${IFS}-rf into rm and -rf.
// Any ${IFS…} form (${IFS:0:1}, ${IFS%??}) counts, as most give a separator and
// reading one where there is none only raises the level.
var ifsWord = regexp.MustCompile(`\$(IFS\b|\{IFS[^}]*\})`)

func ifsSpaced(cmd string) string {
	return ifsWord.ReplaceAllString(cmd, " ")
}

// builtWord finds a command word the text does not show: eval, or a word made by $(…),
// `…` or a variable ($a, ${a}, "$@"), where a command word can be: at the start or after
// what ends a command or opens one (; & | newline ( and an opening backtick), past
// reserved words (if, then, do, !, {, …), assignments (X=1) and words that run the rest
// as a command (command, builtin, exec, env, nice, nohup, sudo, time, with their
// options). A ( right after ( or = opens no command: (( $i > 1 )), $(( $n + 1 )) and
// a=( $list ) are arithmetic and an array. In the text it reads, an opening backtick is
// \x01 and a closing one \x02 (see markBackticks); a closing one where a command word
// starts counts too, in case the count is off.
var builtWord = regexp.MustCompile(commandStart + `(?:eval\b|\x02|[^\s;&|()=<>\x01\x02]*(?:\$\(|\$[A-Za-z_{0-9@*#?!$-]|\x01))`)

// commandStart is where a command word can be (builtWord), up to that word. A find's
// -exec and an xargs run their arguments as a command too ({} may follow xargs -I).
const commandStart = `(?:^|[;&|\n\x01]|(?:^|[^(=])\(|\s-(?:exec|execdir|ok|okdir)\s)\s*` +
	`(?:(?:if|then|else|elif|while|until|do|coproc|!|\{)\s+` +
	`|[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=(?:"(?:[^"\\]|\\.)*"|'[^']*'|\$\([^()]*\)|\x01[^\x02]*\x02|[^\s;&|()"'\x01\x02])*\s+` +
	`|(?:[^\s;&|()]*/)?(?:command|builtin|exec|env|nice|nohup|sudo|time|xargs)(?:\s+(?:-[^\s;&|()]*|\d+|\{\}|[A-Za-z_][A-Za-z0-9_]*=[^\s;&|()]*))*\s+)*`

// globWord finds a command word holding a wildcard (*, ?, or […] with its ]), where
// commandStart puts one. [ and [[ hold no ], and a word before ) is a case pattern.
var globWord = regexp.MustCompile(commandStart + `[^\s;&|()=<>\x01\x02]*(?:[*?]|\[[^\s\]]*\])[^\s;&|()<>\x01\x02]*(?:$|[\s;&<>])`)

func globCommand(cmd string) bool {
	return globWord.MatchString(markBackticks(cmd))
}

var (
	// bindWord is bind (bash's, fish's) or bindkey (zsh's) as a command word.
	bindWord = regexp.MustCompile(commandStart + `(?:[^\s;&|()]*/)?bind(?:key)?(?:$|[\s;&|)<>])`)
	// keyFiles are readline's init file by name (~/.inputrc, /etc/inputrc, INPUTRC=…),
	// however it is written, and a shell's -o vi (set -o vi, bash -o vi).
	keyFiles = regexp.MustCompile(`(?i)inputrc|(?:^|\s)-[A-Za-z]*o\s*vi\b`)
)

func keyBindings(cmd string) bool {
	return keyFiles.MatchString(cmd) || bindWord.MatchString(markBackticks(cmd))
}

// markBackticks tells opening backticks (\x01) from closing ones (\x02) by counting, so
// that a command starts after `, not after the ` that ends one (echo `date` `whoami`).
// A \x01 or \x02 already there (Ctrl-A, Ctrl-B typed) is a character of a word.
func markBackticks(cmd string) string {
	b, open := []byte(cmd), true
	for i, c := range b {
		if c == 1 || c == 2 {
			b[i] = '_'
		}
		if c == '`' {
			b[i] = 2
			if open {
				b[i] = 1
			}
			open = !open
		}
	}
	return string(b)
}

func builtCommand(cmd string) bool {
	return builtWord.MatchString(markBackticks(cmd))
}

func re(expr string) func(string) bool {
	r := regexp.MustCompile(expr)
	return r.MatchString
}

var (
	// segments splits a command line at what ends a command: a backtick starts one too
	// (echo `rm -rf x` runs rm).
	segments = regexp.MustCompile("[;&|\\n()`]+")
	// devWrite is a redirection's (>, >>, >|, >&, &>, &>>) or dd's of= target.
	devWrite = regexp.MustCompile(`(?:>\||>>?&?|&>>?|\bof=)\s*([^\s;&|()<>]+)`)
	// upDev is a relative path to /dev through the root (../../dev/sda; ~/../../dev/sda
	// is cleaned to ../dev/sda).
	upDev = regexp.MustCompile(`^(?:\.\./)+dev/`)
)

// longOption reports whether a is opt or a prefix of it the command would take for it:
// GNU getopt and git take a unique prefix (--rec for --recursive). Any prefix of three
// or more characters counts, an ambiguous one included, since it only raises the level.
func longOption(a string, opts ...string) bool {
	a, _, _ = strings.Cut(a, "=")
	for _, o := range opts {
		if len(a) >= 3 && strings.HasPrefix(o, a) {
			return true
		}
	}
	return false
}

// commandArgs calls f with the words after each use of the command named name (or a path
// ending in /name) in cmd, until f returns true. The first fullUses uses of a command
// get the rest of their command; the later ones get the words up to the next use: that
// keeps the cost linear (a line of 30,000 "rm" gave each use every word after it), and
// a word that only ends in /name (a branch refs/heads/git) cannot hide a flag after it
// from the command that runs, which comes first.
func commandArgs(cmd, name string, f func(args []string) bool) bool {
	return commandArgsOf(cmd, argCheck{name, f})
}

// argCheck is one command's check for commandArgsOf.
type argCheck struct {
	name string
	f    func(args []string) bool
}

// commandArgsOf is commandArgs for several commands at once, with cmd split into its
// commands and words once.
func commandArgsOf(cmd string, checks ...argCheck) bool {
	const fullUses = 8
	for _, w := range splitWords(cmd) {
		for _, c := range checks {
			var uses []int
			for i, word := range w {
				if isCommand(word, c.name) {
					uses = append(uses, i)
				}
			}
			for n, i := range uses {
				end := len(w)
				if n >= fullUses && n+1 < len(uses) {
					end = uses[n+1]
				}
				if c.f(w[i+1 : end]) {
					return true
				}
			}
		}
	}
	return false
}

// splits keeps the words of the command lines being rated (splitWords): a rating runs
// about twenty rules over the same few forms of a line (commandWhys), and splitting each
// again was a third of its time. A rating forgets its forms when it ends (forgetSplits),
// so a line typed with echo off (a password) is not kept; ratings at once share it.
var splits struct {
	mu    sync.Mutex
	words map[string][][]string
}

// maxSplits bounds the lines splits keeps: a few ratings' forms.
const maxSplits = 64

// splitWords is cmd split into its commands (segments) and each into its words. The
// result is shared: not to be changed.
func splitWords(cmd string) [][]string {
	splits.mu.Lock()
	w, ok := splits.words[cmd]
	splits.mu.Unlock()
	if ok {
		return w
	}
	segs := segments.Split(cmd, -1)
	w = make([][]string, len(segs))
	for i, seg := range segs {
		w[i] = strings.Fields(seg)
	}
	splits.mu.Lock()
	if splits.words == nil || len(splits.words) >= maxSplits {
		splits.words = map[string][][]string{}
	}
	splits.words[cmd] = w
	splits.mu.Unlock()
	return w
}

// forgetSplits drops forms from splits.
func forgetSplits(forms []string) {
	splits.mu.Lock()
	for _, f := range forms {
		delete(splits.words, f)
	}
	splits.mu.Unlock()
}

// rmRecursive finds an rm given -r (or -R, --recursive, or a cluster holding one: -rv),
// with or without -f.
func rmRecursive(cmd string) bool {
	return commandArgs(cmd, "rm", func(args []string) bool {
		for _, a := range args {
			switch {
			case strings.HasPrefix(a, "--"):
				if longOption(a, "--recursive") {
					return true
				}
			case strings.HasPrefix(a, "-") && strings.ContainsAny(a, "rR"):
				return true
			}
		}
		return false
	})
}

// chmodRecursive finds a chmod given -R (--recursive).
func chmodRecursive(cmd string) bool {
	recursive := func(args []string) bool {
		for _, a := range args {
			if strings.HasPrefix(a, "--") && longOption(a, "--recursive") ||
				!strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && strings.Contains(a, "R") {
				return true
			}
		}
		return false
	}
	return commandArgs(cmd, "chmod", recursive) || commandArgs(cmd, "chown", recursive) || commandArgs(cmd, "chgrp", recursive)
}

// gitPushDelete finds a git push that deletes a ref on the remote: --delete (-d), or a
// refspec with nothing before its colon (:branch).
func gitPushDelete(cmd string) bool {
	return gitPushWith(cmd, 'd', ':', "--delete", "--prune", "--mirror")
}

// rsyncDelete finds an rsync that deletes at the destination (--delete and its
// variants, --remove-source-files).
func rsyncDelete(cmd string) bool {
	return commandArgs(cmd, "rsync", func(args []string) bool {
		return slices.ContainsFunc(args, func(a string) bool {
			return strings.HasPrefix(a, "--del") || strings.HasPrefix(a, "--remove-source")
		})
	})
}

// gitForcePush finds a git push given --force (-f, --force-with-lease,
// --force-if-includes) or a +refspec.
func gitForcePush(cmd string) bool {
	return gitPushWith(cmd, 'f', '+', "--force", "--force-with-lease", "--force-if-includes")
}

// gitPushWith finds a git push given one of the long options (by any prefix git takes),
// a cluster of short ones holding short, or a refspec starting with refspec and naming
// something after it.
func gitPushWith(cmd string, short, refspec byte, long ...string) bool {
	return commandArgs(cmd, "git", func(args []string) bool {
		push := slices.Index(args, "push")
		if push < 0 {
			return false
		}
		for _, a := range args[push+1:] {
			switch {
			case strings.HasPrefix(a, "--"):
				if longOption(a, long...) {
					return true
				}
			case strings.HasPrefix(a, "-") && strings.IndexByte(a, short) >= 0, len(a) > 1 && a[0] == refspec:
				return true
			}
		}
		return false
	})
}

// isCommand reports whether word names one of the commands, by name or by a path
// ending in it (/usr/bin/shred).
func isCommand(word string, names ...string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return word == n || strings.HasSuffix(word, "/"+n) })
}

// deleters are commands that delete or destroy the files they are given; a find -exec
// or an xargs running one deletes files the command line does not name.
var deleters = []string{"rm", "unlink", "shred", "truncate", "wipefs", "blkdiscard"}

// rmGlob finds an rm given a wildcard (*, ?, […]): the files it deletes are whatever
// matches when it runs, which the line does not show (rm *, rm -- *.log, rm ~/x/*).
func rmGlob(cmd string) bool {
	return commandArgs(cmd, "rm", func(args []string) bool {
		return slices.ContainsFunc(args, func(a string) bool {
			open := strings.IndexByte(a, '[')
			return strings.ContainsAny(a, "*?") || open >= 0 && strings.IndexByte(a[open:], ']') > 0
		})
	})
}

// deletesListed finds a find given -delete, or -exec, -execdir, -ok or -okdir with a
// deleter among the words after it (find . -exec rm {} +, -exec sudo /bin/rm {} ;), and
// an xargs with one after it (xargs -0 rm -f): both delete files another command finds.
func deletesListed(cmd string) bool {
	if commandArgs(cmd, "xargs", func(args []string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return isCommand(a, deleters...) })
	}) {
		return true
	}
	return commandArgs(cmd, "find", func(args []string) bool {
		for i, a := range args {
			switch a {
			case "-delete":
				return true
			case "-exec", "-execdir", "-ok", "-okdir":
				if slices.ContainsFunc(args[i+1:], func(a string) bool { return isCommand(a, deleters...) }) {
					return true
				}
			}
		}
		return false
	})
}

// shredOrTruncate finds a shred given any word (it overwrites each file named, and
// with -u deletes it; shred alone or shred --help does nothing), and a truncate given a
// size or a reference (-s0, -s 0, --size=0, -r f), which it needs to change a file.
func shredOrTruncate(cmd string) bool {
	if commandArgs(cmd, "shred", func(args []string) bool { return len(args) > 0 && !longOption(args[0], "--help", "--version") }) {
		return true
	}
	return commandArgs(cmd, "truncate", func(args []string) bool {
		return slices.ContainsFunc(args, func(a string) bool {
			if strings.HasPrefix(a, "--") {
				return longOption(a, "--size", "--reference")
			}
			return strings.HasPrefix(a, "-") && strings.ContainsAny(a, "sr")
		})
	})
}

// diskErase finds a wipefs that erases (-a, --all, -o, --offset, or a cluster holding
// one; without them it only lists signatures) and a blkdiscard given a device.
func diskErase(cmd string) bool {
	if commandArgs(cmd, "blkdiscard", func(args []string) bool { return len(args) > 0 && !longOption(args[0], "--help", "--version") }) {
		return true
	}
	return commandArgs(cmd, "wipefs", func(args []string) bool {
		return slices.ContainsFunc(args, func(a string) bool {
			if strings.HasPrefix(a, "--") {
				return longOption(a, "--all", "--offset")
			}
			return strings.HasPrefix(a, "-") && strings.ContainsAny(a, "ao")
		})
	})
}

// partitionEdit finds a partition editor that may change a disk's partition table:
// fdisk, gdisk or sfdisk given a device, unless only to list it (fdisk -l, gdisk -l,
// sfdisk's -l, -d, -s, -J, -V, -g and their long forms); sgdisk given a device and any
// option but -p, -v, -i and -b (it runs every option given, in order: -Z … -p zaps);
// parted given a device and no command (it asks for them) or one that changes the disk;
// and cfdisk (its default is the first disk) unless asked for its help or version. An
// option's letter is its first: a value joined to it (fdisk -ucylinders) is no option.
func partitionEdit(cmd string) bool {
	hasDevice := func(args []string) bool { return slices.ContainsFunc(args, device) }
	letter := func(a string) byte {
		if len(a) > 1 && a[0] == '-' && a[1] != '-' {
			return a[1]
		}
		return 0
	}
	short := func(args []string, letters string) bool {
		return slices.ContainsFunc(args, func(a string) bool { l := letter(a); return l != 0 && strings.IndexByte(letters, l) >= 0 })
	}
	long := func(args []string, opts ...string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--") && longOption(a, opts...) })
	}
	return commandArgsOf(cmd,
		argCheck{"fdisk", func(args []string) bool { return hasDevice(args) && !short(args, "l") && !long(args, "--list") }},
		argCheck{"gdisk", func(args []string) bool { return hasDevice(args) && !short(args, "l") }},
		argCheck{"sfdisk", func(args []string) bool {
			return hasDevice(args) && !short(args, "ldsJVg") &&
				!long(args, "--list", "--dump", "--show-size", "--json", "--verify", "--show-geometry", "--list-free")
		}},
		argCheck{"sgdisk", func(args []string) bool {
			return hasDevice(args) && slices.ContainsFunc(args, func(a string) bool {
				if strings.HasPrefix(a, "--") {
					return len(a) > 2 && !longOption(a, "--print", "--verify", "--info", "--backup", "--help", "--version")
				}
				l := letter(a)
				return l != 0 && strings.IndexByte("pvib?V", l) < 0
			})
		}},
		argCheck{"parted", func(args []string) bool {
			if !hasDevice(args) || short(args, "l") || long(args, "--list") {
				return false
			}
			i := slices.IndexFunc(args, device)
			var words []string // parted's commands, after the device, options left out
			for _, a := range args[i+1:] {
				if !strings.HasPrefix(a, "-") {
					words = append(words, a)
				}
			}
			return len(words) == 0 || slices.ContainsFunc(words, func(w string) bool { return partedChanges[w] })
		}},
		argCheck{"cfdisk", func(args []string) bool { return !long(args, "--help", "--version") && !short(args, "hV") }})
}

// partedChanges are parted's commands that change a disk (print, unit, align-check and
// help only look).
var partedChanges = map[string]bool{"mklabel": true, "mktable": true, "mkpart": true, "mkpartfs": true, "rm": true,
	"resize": true, "resizepart": true, "rescue": true, "name": true, "set": true, "toggle": true, "disk_set": true,
	"disk_toggle": true, "move": true, "cp": true, "mkfs": true, "type": true}

// gitDiscard finds a git reset given --hard (any prefix git takes: --har) and a git
// clean that is not a dry run (-n, --dry-run): clean deletes untracked files, which git
// keeps no copy of, and refuses to without -f only while clean.requireForce is left on.
func gitDiscard(cmd string) bool {
	return commandArgs(cmd, "git", func(args []string) bool {
		sub := gitSubcommand(args)
		if sub < 0 {
			return false
		}
		after := args[sub+1:]
		switch args[sub] {
		case "reset":
			return slices.ContainsFunc(after, func(a string) bool { return strings.HasPrefix(a, "--") && longOption(a, "--hard") })
		case "clean":
			return !slices.ContainsFunc(after, func(a string) bool {
				if strings.HasPrefix(a, "--") {
					return longOption(a, "--dry-run")
				}
				return strings.HasPrefix(a, "-") && strings.Contains(a, "n")
			})
		case "checkout":
			return checkoutDiscards(parseGitArgs(after, "bB", "--orphan", "--pathspec-from-file"))
		case "restore":
			// The working tree's changes are lost unless only the index is restored
			// (--staged alone).
			g := parseGitArgs(after, "s", "--source", "--pathspec-from-file")
			return g.has('W', "--worktree") || !g.has('S', "--staged")
		case "switch":
			g := parseGitArgs(after, "cC", "--create", "--force-create", "--orphan")
			return g.has('f', "--force", "--discard-changes")
		case "stash":
			g := parseGitArgs(after, "m", "--message", "--pathspec-from-file")
			return len(g.words) > 0 && (g.words[0] == "drop" || g.words[0] == "clear")
		}
		return false
	})
}

// checkoutDiscards reports whether a git checkout overwrites files with what a commit or
// the index holds (losing their uncommitted changes) rather than only switching branch:
// forced, patch by patch, from one side of a conflict, of paths after -- (or fed by
// xargs after it), of a second word (checkout <tree-ish> <paths>), of one word that
// reads as a path rather than a branch, or of what a substitution prints ($(…) and `…`,
// which the line's reading splits off, leaving a $ or nothing).
func checkoutDiscards(g gitArgs) bool {
	switch {
	case slices.Contains(g.words, "$") || g.short == "" && len(g.long) == 0 && len(g.words) == 0 && !g.dashdash:
		return true
	case g.has('f', "--force") || g.has('p', "--patch") || g.has(0, "--ours", "--theirs", "--pathspec-from-file"):
		return true
	case g.has('b') || g.has('B') || g.has(0, "--orphan"):
		return false // a new branch from a start point
	case g.dashdash || len(g.words) > 1:
		return true
	}
	return len(g.words) == 1 && pathLike(g.words[0])
}

// pathLike reports whether a word git would take as a branch or a path reads as a path:
// . or .., one starting with ./, ../, :/ or /, ending with /, holding a wildcard, or
// ending with a file extension (main.go, notes.txt; not a version's digits, v1.2).
func pathLike(w string) bool {
	switch {
	case w == "." || w == ".." || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") || strings.HasPrefix(w, ":/") ||
		strings.HasPrefix(w, "/") || strings.HasSuffix(w, "/") || strings.ContainsAny(w, "*?["):
		return true
	}
	base := w[strings.LastIndexByte(w, '/')+1:]
	i := strings.LastIndexByte(base, '.')
	if i <= 0 || len(base)-i-1 < 1 || len(base)-i-1 > 6 {
		return false
	}
	for _, r := range base[i+1:] {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// gitArgs are the words after a git subcommand, sorted.
type gitArgs struct {
	short    string   // every short option letter given (-qf: q, f)
	long     []string // the long options, as given
	words    []string // the operands before --
	dashdash bool     // -- was given (the words after it are paths)
}

// parseGitArgs sorts args: valuedShort are the short options that take a value (the
// rest of their word, or the next word), valuedLong the long ones (after = or as the
// next word), whose values are not operands.
func parseGitArgs(args []string, valuedShort string, valuedLong ...string) gitArgs {
	var g gitArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case g.dashdash:
		case a == "--":
			g.dashdash = true
		case strings.HasPrefix(a, "--"):
			g.long = append(g.long, a)
			if !strings.Contains(a, "=") && longOption(a, valuedLong...) {
				i++
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				g.short += a[j : j+1]
				if strings.IndexByte(valuedShort, a[j]) >= 0 {
					if j == len(a)-1 {
						i++ // its value is the next word
					}
					break
				}
			}
		default:
			g.words = append(g.words, a)
		}
	}
	return g
}

// has reports whether short option letter (0: none) or one of the long options was given.
func (g gitArgs) has(letter byte, long ...string) bool {
	if letter != 0 && strings.IndexByte(g.short, letter) >= 0 {
		return true
	}
	return len(long) > 0 && slices.ContainsFunc(g.long, func(a string) bool { return longOption(a, long...) })
}

// gitSubcommand is the index of git's subcommand in its words: the first past git's own
// options (-C dir, -c name=value, --git-dir=…), so that git commit -m clean is no clean;
// -1 when there is none.
func gitSubcommand(args []string) int {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" || a == "--config-env":
			i++
		case !strings.HasPrefix(a, "-"):
			return i
		}
	}
	return -1
}

var (
	// interpreter is a language's interpreter as a word (by any path, any version:
	// python3.12, /usr/bin/perl), followed by the rest of the text.
	interpreter = regexp.MustCompile(`(?:^|[\s;&|(\x60])(?:\S*/)?(?:(?:python|pypy|perl|ruby|php)[0-9.]*|node|nodejs|deno|bun)(?:\s|$)`)
	// inlineCode is what gives an interpreter its code on the command line or on its
	// input rather than in a file: an option cluster holding -c, -e, -E, -p or -r (code,
	// perl -ne, node -p, php -r; ruby's -r and perl's -p count too, which only raises the
	// level), --eval and --print, or a here-document.
	inlineCode = regexp.MustCompile(`\s(-[A-Za-z]*[ceEpr]|--eval\b|--print\b)|<<`)
	// deleteCall is a library call that deletes a file or a tree, in the languages above:
	// Python's shutil.rmtree, os.remove, os.unlink, os.rmdir, Path.unlink; Perl's unlink,
	// rmtree, remove_tree; Ruby's FileUtils.rm_rf, File.delete; Node's fs.rm, rmSync,
	// unlinkSync; PHP's unlink; and truncating calls.
	deleteCall = regexp.MustCompile(`\b(rmtree|remove_tree|removedirs|remove|unlink(Sync)?|rmdir(Sync)?|rm_rf?|rm_f|rmSync|rimraf|truncate)\b|\brm\s*\(|\b(File|Dir|FileUtils)\.(delete|rm)\b`)
)

// interpreterDelete finds an interpreter given its code inline (python3 -c, perl -e,
// node -e, ruby -e, php -r, or a here-document) where the code after it makes a call
// that deletes files, or fed its code by a pipe (echo … | python3) where the text before
// it does. The code is read as text, so a call in quotes counts as well as a bare one.
func interpreterDelete(cmd string) bool {
	del := deleteCall.FindStringIndex(cmd)
	if del == nil {
		return false
	}
	locs := interpreter.FindAllStringIndex(cmd, -1)
	// The text after the first interpreter holds what follows every later one, so it
	// alone is searched: a line of many interpreters costs no more than one.
	if len(locs) > 0 && inlineCode.MatchString(cmd[locs[0][0]:]) && deleteCall.MatchString(cmd[locs[0][0]:]) {
		return true
	}
	for _, loc := range locs {
		if loc[0] >= del[1] && strings.HasSuffix(strings.TrimRight(cmd[:loc[0]+1], " \t"), "|") {
			return true
		}
	}
	return false
}

// harmlessDevices may be written to.
var harmlessDevices = map[string]bool{"null": true, "zero": true, "stdout": true, "stderr": true, "tty": true, "full": true,
	"random": true, "urandom": true, "stdin": true}

// copiers are the commands that write to a path named among their operands (or by -t):
// a device among them is written to, or read whole (a disk copied out), either of which
// is to be looked at.
var copiers = []string{"tee", "cp", "mv", "install", "ln", "rsync", "ddrescue"}

// deviceWrite finds a write to a device file that is not harmless, to a path under /dev
// however it is spelled (//dev/sda, /./dev/sda, /dev/fd/../sda): by a redirection, dd's
// of=, a copier's operand, find's -fprint, -fprint0, -fprintf or -fls, the file curl
// (-o, --output) or wget (-O, --output-document) saves to, sort's -o, openssl's -out,
// tar's archive (-f, --file, or the word after an old-style cf), or an address of socat.
func deviceWrite(cmd string) bool {
	for _, m := range devWrite.FindAllStringSubmatch(cmd, -1) {
		if device(m[1]) {
			return true
		}
	}
	operands := func(args []string) bool { return slices.ContainsFunc(args, deviceOperand) }
	checks := make([]argCheck, 0, len(copiers)+7)
	for _, name := range copiers {
		checks = append(checks, argCheck{name, operands})
	}
	return commandArgsOf(cmd, append(checks,
		argCheck{"sort", func(args []string) bool {
			return optionValueIsDevice(args, func(a string) bool { return longOption(a, "--output") }, 'o')
		}},
		argCheck{"openssl", func(args []string) bool {
			return optionValueIsDevice(args, func(a string) bool { return a == "-out" }, 0)
		}},
		argCheck{"tar", tarDevice},
		argCheck{"socat", func(args []string) bool { return slices.ContainsFunc(args, socatDevice) }},
		argCheck{"find", func(args []string) bool {
			return optionValueIsDevice(args, func(a string) bool { return a == "-fprint" || a == "-fprint0" || a == "-fprintf" || a == "-fls" }, 0)
		}},
		argCheck{"curl", func(args []string) bool {
			return optionValueIsDevice(args, func(a string) bool { return longOption(a, "--output") }, 'o')
		}},
		argCheck{"wget", func(args []string) bool {
			return optionValueIsDevice(args, func(a string) bool { return longOption(a, "--output-document") }, 'O')
		}})...)
}

// tarDevice reports whether tar's archive is a device: the value of -f (among other
// letters too) or --file, or in the old style (tar cf ARCHIVE …, no dash) the word
// after the letters.
func tarDevice(args []string) bool {
	if optionValueIsDevice(args, func(a string) bool { return longOption(a, "--file") }, 'f') {
		return true
	}
	return len(args) > 1 && !strings.HasPrefix(args[0], "-") && strings.IndexByte(args[0], 'f') >= 0 && device(args[1])
}

// socatDevice reports whether a socat address names a device: a path alone (socat opens
// it as GOPEN does) or after FILE:, OPEN:, GOPEN:, CREATE: or CREAT:, before any
// ",option".
func socatDevice(a string) bool {
	if strings.HasPrefix(a, "-") && a != "-" {
		return false
	}
	a, _, _ = strings.Cut(a, ",")
	if kind, rest, ok := strings.Cut(a, ":"); ok {
		switch strings.ToUpper(kind) {
		case "FILE", "OPEN", "GOPEN", "CREATE", "CREAT":
			return device(rest)
		}
		return false
	}
	return device(a)
}

// deviceOperand is a device named by a word alone or as an option's value joined to it
// (-t/dev/sda, --target-directory=/dev/sda), or /dev itself (cp sda /dev/ writes
// /dev/sda).
func deviceOperand(a string) bool {
	if device(a) || path.Clean(a) == "/dev" {
		return true
	}
	if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
		return deviceOperand(v)
	}
	return len(a) > 2 && a[0] == '-' && a[1] != '-' && deviceOperand(a[2:])
}

// optionValueIsDevice reports whether an option that takes a value is given a device:
// a long one (is tells which) as the next word or after = (--output=/dev/sda), a short
// one (the letter short; 0 for none) also among other letters before it, its value
// the rest of the word or the next word (-sSLo /dev/sda, -qO/dev/sda).
func optionValueIsDevice(args []string, is func(string) bool, short byte) bool {
	for i, a := range args {
		next := func() bool { return i+1 < len(args) && device(args[i+1]) }
		if strings.HasPrefix(a, "--") || (short == 0 && strings.HasPrefix(a, "-")) {
			if name, v, ok := strings.Cut(a, "="); ok && is(name) && device(v) {
				return true
			}
			if is(a) && next() {
				return true
			}
			continue
		}
		if short != 0 && len(a) > 1 && a[0] == '-' {
			if j := strings.IndexByte(a[1:], short); j >= 0 {
				rest := a[1+j+1:]
				if rest == "" && next() || rest != "" && device(rest) {
					return true
				}
			}
		}
	}
	return false
}

// device reports whether p names a device file other than the harmless ones.
func device(p string) bool {
	p = path.Clean(p)
	name, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		loc := upDev.FindStringIndex(p)
		if loc == nil {
			return false
		}
		name = p[loc[1]:]
	}
	// /dev/shm is a memory file system for files of any program, not a device.
	return !harmlessDevices[name] && !strings.HasPrefix(name, "fd/") && !strings.HasPrefix(name, "pts/") &&
		!strings.HasPrefix(name, "shm/")
}

// braceWord is a word with a brace expansion: a prefix, {a,b,…} or a sequence {x..y}
// or {x..y..step} of numbers or of letters, and a suffix, none holding a space or what
// ends a word for the shell. The prefix takes what it can, so that the group expanded
// is a word's last (innermost, when they nest): the groups before it are in each word it
// makes, which the next round expands (r{m,x}{,} is rm rm rx rx, each group in turn).
var braceWord = regexp.MustCompile("([^\\s;&|()<>`]*)\\{(?:([^{}\\s]*,[^{}\\s]*)|" +
	"(?:(-?[0-9]{1,12})\\.\\.(-?[0-9]{1,12})|([A-Za-z])\\.\\.([A-Za-z]))(?:\\.\\.(-?[0-9]{1,12}))?)\\}([^\\s;&|()<>`]*)")

// maxSequence bounds the words a sequence {x..y} is rated as: its first and last ones,
// which a longer one differs from only in the digits of a number.
const maxSequence = 64

// sequence is what {x..y..step} expands to as bash expands it (step "" is 1, its sign
// is ignored, and numbers are padded with zeros to the longer of x and y when either
// has a leading zero), at most maxSequence words of it; x and y are numbers of up to 12
// digits or letters (braceWord).
func sequence(x, y, step string) []string {
	inc := 1
	if step != "" {
		n, _ := strconv.Atoi(step)
		inc = max(n, -n, 1)
	}
	from, errX := strconv.Atoi(x)
	to, errY := strconv.Atoi(y)
	letters := errX != nil || errY != nil
	if letters {
		from, to = int(x[0]), int(y[0])
	}
	width := 0
	if zero := func(n string) bool { return len(n) > 1 && strings.TrimPrefix(n, "-")[0] == '0' }; !letters && (zero(x) || zero(y)) {
		width = max(len(x), len(y))
	}
	dir, n := 1, (to-from)/inc+1
	if to < from {
		dir, n = -1, (from-to)/inc+1
	}
	var words []string
	for i := 0; i < n; i++ {
		if n > maxSequence && i == maxSequence/2 {
			i = n - maxSequence/2
		}
		v := from + dir*inc*i
		if letters {
			words = append(words, string(rune(v)))
		} else {
			words = append(words, fmt.Sprintf("%0*d", width, v))
		}
	}
	return words
}

// bracedGrowth bounds what brace expansions may add to a command rated: x…{,,…}
// expands n characters into n² (a 100,000-character command into gigabytes).
const bracedGrowth = 64 << 10

// braced is cmd with its brace expansions expanded as bash does ({rm,-rf,x} is rm -rf x,
// -{r,f} is -r -f, r{m..m} is rm), in other order at times and with words repeated
// (a{b,{c,d}}), which the rules do not mind. ok is false when expanding would add more
// than bracedGrowth, or a word holds more groups than maxBraceRounds: the command is
// then left as far as it was expanded.
func braced(cmd string) (_ string, ok bool) {
	limit := len(cmd) + bracedGrowth
	for range maxBraceRounds {
		grown, over := 0, false
		next := braceWord.ReplaceAllStringFunc(cmd, func(w string) string {
			m := braceWord.FindStringSubmatch(w)
			prefix, suffix := m[1], m[8]
			var alts []string
			switch {
			case m[2] != "":
				alts = strings.Split(m[2], ",")
			case m[3] != "":
				alts = sequence(m[3], m[4], m[7])
			default:
				alts = sequence(m[5], m[6], m[7])
			}
			// n copies of prefix and suffix, the alternatives and n-1 spaces.
			size := len(alts)*(len(prefix)+len(suffix)+1) - 1
			for _, a := range alts {
				size += len(a)
			}
			if over = over || len(cmd)+grown+size-len(w) > limit; over {
				return w
			}
			grown += size - len(w)
			for i, a := range alts {
				alts[i] = prefix + a + suffix
			}
			return strings.Join(alts, " ")
		})
		if over {
			return next, false
		}
		if next == cmd {
			return cmd, true
		}
		cmd = next
	}
	// A word of more groups than rounds: what it expands to is not all known.
	return cmd, !braceWord.MatchString(cmd)
}

// maxBraceRounds bounds the rounds of braced, each of which expands one group of each
// word: a word of more is not rated as expanded.
const maxBraceRounds = 16

// CommandRisk is the risk a command line's text carries: HIGH and why when a rule
// matches, ok false otherwise. The rules see the text as given, and as unquoted and
// shellRead read it, with $IFS as a space, each also with its brace expansions expanded.
func CommandRisk(cmd string) (risk.Level, string, bool) {
	whys := commandWhys(cmd)
	if len(whys) == 0 {
		return "", "", false
	}
	return risk.High, "the command " + strings.Join(whys, "; "), true
}

// commandWhys are the reasons of the rules cmd matches (CommandRisk), in the rules' order.
func commandWhys(cmd string) []string {
	var whys []string
	forms, ok := []string{cmd}, true
	for _, plain := range []string{ifsSpaced(unquoted(cmd)), ifsSpaced(shellRead(cmd))} {
		expanded, fits := braced(plain)
		forms, ok = append(forms, plain, expanded), ok && fits
	}
	defer forgetSplits(forms)
	for _, r := range commandRules {
		if slices.ContainsFunc(forms, r.match) {
			whys = append(whys, r.why)
		}
	}
	if !ok {
		whys = append(whys, whyBraces)
	}
	return whys
}

// The reasons of the rules a word's characters alone can match: a password typed with
// echo off (S3cret$Pass, pa$$word, abc*def, x{1..2}) matches them as often as a command.
const (
	whyBuilt  = "builds the command it runs (eval, or a command word made by $(…), `…` or a variable)"
	whyGlob   = "names the command it runs by a wildcard (/bin/r[m], /bin/r?)"
	whyBraces = "has more brace expansions than can be rated"
)

// HiddenLineRisk is CommandRisk for a line typed with echo off, which may be a
// password: only the rules that name what a command does (rm -rf, sudo, a pipe into a
// shell) count, not those its characters alone can match ($, backticks, wildcards,
// braces). The audit log keeps such a line's text only when it is rated (what turning
// echo off must not hide); a password taken for a command would be kept in clear.
func HiddenLineRisk(line string) (string, bool) {
	var whys []string
	for _, w := range commandWhys(line) {
		if w != whyBuilt && w != whyGlob && w != whyBraces {
			whys = append(whys, w)
		}
	}
	if len(whys) == 0 {
		return "", false
	}
	return "the command " + strings.Join(whys, "; "), true
}

// historyLine finds what makes an interactive shell run a line from its history rather
// than the text typed: ! expansion (!!, !-1, !rm, !$; a ! before a space, =, ( or the
// end is not one), ^old^new at the start, and fc (zsh's r too).
var historyLine = regexp.MustCompile("![^\\s=(]|^\\s*\\^|(^|[;&|(`])\\s*(fc|r)(\\s|$)")

// inputWhys are why typed keys make a call HIGH: of the line (its history, editing or
// length) and of the command it spells (a rule's reason), each once.
type inputWhys struct{ line, command []string }

func (w *inputWhys) add(line bool, why string) {
	list := &w.command
	if line {
		list = &w.line
	}
	if !slices.Contains(*list, why) {
		*list = append(*list, why)
	}
}

// rateLine adds the reasons of one line the shell gets (finished or not).
func (w *inputWhys) rateLine(l edited) {
	if l.shell {
		w.add(true, "the line is changed by the shell's history, completion or editing keys, so what it runs is not in the text")
	}
	if l.cut {
		w.add(true, fmt.Sprintf("the line is longer than %d characters, so what it runs is not all in the text", maxAuditLine))
	}
	for _, text := range append([]string{l.text}, l.others...) {
		if historyLine.MatchString(text) {
			w.add(true, "the line runs a command from the shell's history (!, ^old^new, fc)")
		}
		for _, why := range commandWhys(text) {
			w.add(false, why)
		}
	}
}

// rateInput adds the reasons of input typed at e (which it feeds): each line e rebuilds
// from it, and what is left unfinished, as readline and as the kernel's canonical mode
// build it (whichever reads the keys), and the keys as given, as a net where the program
// reading them is no shell.
func (w *inputWhys) rateInput(e *lineEditor, input string) {
	lines := e.feed([]byte(input))
	if l := e.current(); l.text != "" || l.shell || l.cut || len(l.others) > 0 {
		lines = append(lines, l)
	}
	for _, l := range lines {
		w.rateLine(l)
	}
	for _, why := range commandWhys(input) {
		w.add(false, why)
	}
}

func (w *inputWhys) String() string {
	whys := w.line
	if len(w.command) > 0 {
		whys = append(slices.Clip(whys), "the command "+strings.Join(w.command, "; "))
	}
	return strings.Join(whys, "; ")
}

// InputRisk is the risk of keys typed into a terminal (send_input), rated alone, as if
// at an empty line (rateInput): HIGH when a line they make, or the keys as given, match a
// rule (CommandRisk), and when a line the shell changes from its history or with keys
// the editor does not follow, or one longer than the editor keeps, since what it runs is
// not (all) in the text. Terminal.Input rates them with the line they join (joinedRisk).
func InputRisk(input string) (risk.Level, string, bool) {
	var w inputWhys
	w.rateInput(&lineEditor{}, input)
	if len(w.line)+len(w.command) == 0 {
		return "", "", false
	}
	return risk.High, "in the typed input, " + w.String(), true
}

// joinedRisk is what input, typed at the unfinished line held (the editor as the keys
// before left it; not changed), makes HIGH that neither the input alone (InputRisk,
// which the router rated the call by) nor the held line carried: "rm -r" then "f ~/x\n"
// is rm -rf ~/x, though each piece rates nothing. "" when nothing: the held line's own
// reasons came with keys rated (and approved) before. When the held line holds keys a
// person typed on the page (heldUnrated), which no one rated, its reasons count too.
func joinedRisk(held *lineEditor, input string, heldUnrated bool) string {
	if held.empty() {
		return "" // a fresh line: the input alone is what was rated
	}
	var joined, alone, before inputWhys
	e := held.clone()
	joined.rateInput(&e, input)
	alone.rateInput(&lineEditor{}, input)
	// Cleared first (Ctrl-U, or Ctrl-C): what the person typed is gone wherever lines are
	// edited (a line editor, the terminal's own kill character); only a program reading
	// raw bytes would still get it, which the held line's forms alone then carry.
	if !heldUnrated || input != "" && (input[0] == 0x15 || input[0] == 0x03) {
		before.rateLine(held.current())
	}
	var added inputWhys
	// An Esc alone left pending, then keys that do not continue a key's sequence ([ or
	// O: the arrows, Home, End): in a full-screen program that is Esc, then keys (vim's
	// Esc, then :wq), which the line's rebuilding reads as a shell's Alt key. Only the
	// command's reasons count then; an arrow key split between two calls still does, and
	// so do the Alt keys with which readline takes a line or words from the history
	// (M-< M-> beginning and end of history, M-. M-_ M-C-y its arguments, M-p M-n its
	// search, M-r the line as it was), which no input shows.
	twoKeys := len(held.line) == 0 && !held.shellEdited && !held.cut && string(held.pending) == "\x1b" &&
		input != "" && !strings.ContainsRune("[O<>._\x19pnr", rune(input[0]))
	for _, why := range joined.line {
		if !twoKeys && !slices.Contains(alone.line, why) && !slices.Contains(before.line, why) {
			added.add(true, why)
		}
	}
	for _, why := range joined.command {
		if !slices.Contains(alone.command, why) && !slices.Contains(before.command, why) {
			added.add(false, why)
		}
	}
	return added.String()
}
