package builtin

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/services/risk"
)

// A command or typed input that matches one of these rules makes its call HIGH risk,
// whatever the tool's own level: the rules only ever raise it (the router takes the
// riskier of the two).
var commandRules = []struct {
	why   string
	match func(cmd string) bool
}{
	{"deletes recursively and by force (rm -rf)", rmRecursiveForce},
	{"runs as root (sudo)", re("(^|[;&|(\\s`{,])(\\S*/)?sudo($|[\\s;&|)`},])")},
	{"pipes a download into a shell (curl … | sh)", re(`\b(curl|wget|fetch)\b[^;&\n]*\|&?\s*` + shellWord)},
	{"feeds a download to a shell (sh <(curl …), sh -c \"$(curl …)\")", re(`(^|[;&|(\s]|\x60)(\S*/)?((ba|z|da|k|fi)?sh|source|\.)\s[^;&|\n]*(<\(|\$\(|\x60)\s*(curl|wget|fetch)\b`)},
	{"makes a file system (mkfs)", re(`\bmkfs(\.\w+)?\b`)},
	{"writes raw blocks (dd of=)", re(`\bdd\b[^;&|\n]*\bof=`)},
	{"changes permissions recursively (chmod -R)", chmodRecursive},
	{"force-pushes (git push --force)", gitForcePush},
	{"writes to a device file", deviceWrite},
	{"builds the command it runs (eval, or a command word made by $(…) or `…`)", re("(^|[;&|(\\n])\\s*(eval\\b|\\$\\(|`)")},
}

// shellWord is a shell a pipe feeds, after any wrappers that run their arguments as a
// command (sudo, env, command, exec, nice, nohup) and their options.
const shellWord = `((\S*/)?(sudo|env|command|exec|nice|nohup)\s+([^;&|\n]*\s)?)?(\S*/)?(ba|z|da|k|fi)?sh\b`

// unquoted is cmd as the shell reads its words: a backslash-newline joins the lines, and
// quotes and backslashes go (`"rm" -rf` and `\rm -rf` are rm -rf, as is r, two quotes, m). The rules
// are matched against both forms; a quoted rule-like argument (echo "rm -rf x") is rated
// as the command it spells, which only ever raises the level.
func unquoted(cmd string) string {
	cmd = strings.ReplaceAll(cmd, "\\\r\n", "")
	cmd = strings.ReplaceAll(cmd, "\\\n", "")
	return strings.NewReplacer(`"`, "", "'", "", `\`, "").Replace(cmd)
}

func re(expr string) func(string) bool {
	r := regexp.MustCompile(expr)
	return r.MatchString
}

var (
	// segments splits a command line at what ends a command: a backtick starts one too
	// (echo `rm -rf x` runs rm).
	segments = regexp.MustCompile("[;&|\\n()`]+")
	devWrite = regexp.MustCompile(`(>\||>>?|\bof=|\btee\s+(-a\s+)?)\s*/dev/([A-Za-z0-9_/.-]+)`)
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
// ending in /name) in cmd, until f returns true.
func commandArgs(cmd, name string, f func(args []string) bool) bool {
	for _, seg := range segments.Split(cmd, -1) {
		w := strings.Fields(seg)
		for i, c := range w {
			if (c == name || strings.HasSuffix(c, "/"+name)) && f(w[i+1:]) {
				return true
			}
		}
	}
	return false
}

// rmRecursiveForce finds an rm given both -r (or -R, --recursive) and -f (--force).
func rmRecursiveForce(cmd string) bool {
	return commandArgs(cmd, "rm", func(args []string) bool {
		var rec, force bool
		for _, a := range args {
			switch {
			case strings.HasPrefix(a, "--"):
				rec = rec || longOption(a, "--recursive")
				force = force || longOption(a, "--force")
			case strings.HasPrefix(a, "-"):
				rec = rec || strings.ContainsAny(a, "rR")
				force = force || strings.Contains(a, "f")
			}
		}
		return rec && force
	})
}

// chmodRecursive finds a chmod given -R (--recursive).
func chmodRecursive(cmd string) bool {
	return commandArgs(cmd, "chmod", func(args []string) bool {
		for _, a := range args {
			if strings.HasPrefix(a, "--") && longOption(a, "--recursive") ||
				!strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && strings.Contains(a, "R") {
				return true
			}
		}
		return false
	})
}

// gitForcePush finds a git push given --force (-f, --force-with-lease,
// --force-if-includes) or a +refspec.
func gitForcePush(cmd string) bool {
	return commandArgs(cmd, "git", func(args []string) bool {
		push := slices.Index(args, "push")
		if push < 0 {
			return false
		}
		for _, a := range args[push+1:] {
			switch {
			case strings.HasPrefix(a, "--"):
				if longOption(a, "--force", "--force-with-lease", "--force-if-includes") {
					return true
				}
			case strings.HasPrefix(a, "-") && strings.Contains(a, "f"), strings.HasPrefix(a, "+") && len(a) > 1:
				return true
			}
		}
		return false
	})
}

// harmlessDevices may be written to.
var harmlessDevices = map[string]bool{"null": true, "zero": true, "stdout": true, "stderr": true, "tty": true, "full": true}

func deviceWrite(cmd string) bool {
	for _, m := range devWrite.FindAllStringSubmatch(cmd, -1) {
		name := m[3]
		if harmlessDevices[name] || strings.HasPrefix(name, "fd/") || strings.HasPrefix(name, "pts/") {
			continue
		}
		return true
	}
	return false
}

// braceWord is a word with a brace expansion: a prefix, {a,b,…} and a suffix, none
// holding a space or what ends a word for the shell.
var braceWord = regexp.MustCompile("([^\\s{};&|()<>`]*)\\{([^{}\\s]*,[^{}\\s]*)\\}([^\\s{};&|()<>`]*)")

// bracedGrowth bounds what brace expansions may add to a command rated: x…{,,…}
// expands n characters into n² (a 100,000-character command into gigabytes).
const bracedGrowth = 64 << 10

// braced is cmd with its brace expansions expanded as bash does ({rm,-rf,x} is rm -rf x,
// -{r,f} is -r -f), innermost first, a few levels deep. ok is false when expanding would
// add more than bracedGrowth: the command is then left as far as it was expanded.
func braced(cmd string) (_ string, ok bool) {
	limit := len(cmd) + bracedGrowth
	for range 4 {
		grown, over := 0, false
		next := braceWord.ReplaceAllStringFunc(cmd, func(w string) string {
			m := braceWord.FindStringSubmatch(w)
			n := strings.Count(m[2], ",") + 1
			// n copies of prefix and suffix, the alternatives and n-1 spaces.
			size := n*(len(m[1])+len(m[3])) + len(m[2])
			if over = over || len(cmd)+grown+size-len(w) > limit; over {
				return w
			}
			grown += size - len(w)
			alts := strings.Split(m[2], ",")
			for i, a := range alts {
				alts[i] = m[1] + a + m[3]
			}
			return strings.Join(alts, " ")
		})
		if over {
			return next, false
		}
		if next == cmd {
			break
		}
		cmd = next
	}
	return cmd, true
}

// CommandRisk is the risk a command line's text carries: HIGH and why when a rule
// matches, ok false otherwise. The rules see the text as given, unquoted, and with its
// brace expansions expanded.
func CommandRisk(cmd string) (risk.Level, string, bool) {
	var whys []string
	plain := unquoted(cmd)
	expanded, ok := braced(plain)
	forms := []string{cmd, plain, expanded}
	for _, r := range commandRules {
		if slices.ContainsFunc(forms, r.match) {
			whys = append(whys, r.why)
		}
	}
	if !ok {
		whys = append(whys, "has more brace expansions than can be rated")
	}
	if len(whys) == 0 {
		return "", "", false
	}
	return risk.High, "the command " + strings.Join(whys, "; "), true
}

// historyLine finds what makes an interactive shell run a line from its history rather
// than the text typed: ! expansion (!!, !-1, !rm, !$; a ! before a space, =, ( or the
// end is not one), ^old^new at the start, and fc (zsh's r too).
var historyLine = regexp.MustCompile("![^\\s=(]|^\\s*\\^|(^|[;&|(`])\\s*(fc|r)(\\s|$)")

// InputRisk is the risk of keys typed into a terminal (send_input): each line a fresh
// lineEditor rebuilds from them, and what is left unfinished, is rated as the shell
// will run it (CommandRisk), and so are the keys as given, as a net where the program
// reading them is no shell. A line the shell changes from its history or with keys the
// editor does not follow, or one longer than the editor keeps, is HIGH, since what it
// runs is not (all) in the text.
func InputRisk(input string) (risk.Level, string, bool) {
	var e lineEditor
	lines := e.feed([]byte(input))
	if len(e.line) > 0 || e.shellEdited || e.cut {
		lines = append(lines, edited{text: string(e.line), shell: e.shellEdited, cut: e.cut})
	}
	var whys []string
	add := func(why string) {
		if !slices.Contains(whys, why) {
			whys = append(whys, why)
		}
	}
	for _, l := range lines {
		if l.shell {
			add("line is changed by the shell's history, completion or editing keys, so what it runs is not in the text")
		}
		if l.cut {
			add(fmt.Sprintf("line is longer than %d characters, so what it runs is not all in the text", maxAuditLine))
		}
		if historyLine.MatchString(l.text) {
			add("line runs a command from the shell's history (!, ^old^new, fc)")
		}
		if _, why, ok := CommandRisk(l.text); ok {
			add(why)
		}
	}
	if _, why, ok := CommandRisk(input); ok {
		add(why)
	}
	if len(whys) == 0 {
		return "", "", false
	}
	return risk.High, "the typed " + strings.Join(whys, "; "), true
}
