package template

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// A command's argv goes to exec as it is, but a template may name a program that
// runs text as code: a shell with -c, python -c, perl -e, awk's program, ssh's remote
// command. A placeholder in that text would let a call write code (`sh -c "grep
// {pattern} f"` with pattern "x; rm -rf ~"), so checkInterpreters refuses it when the
// template is saved. Values go in as their own argv items after the code, where it
// reads them as data ($1, sys.argv[1], ARGV[0]).

// interp is how a program that runs code given as text reads its arguments.
type interp struct {
	kind     string // for messages: "shell", "Python" …
	example  string // the safe form, for messages
	shortArg string // short options whose value is attached or the next item
	shortOpt string // short options whose value may only be attached (perl -0, -i)
	inline   string // of those: the value is code (-c, -e)
	files    string // of those: the value names the program to run (a script file, a module)
	libs     string // of those: the value names code loaded before the program (ruby -r)
	longArg  []string
	longCode []string // long options whose value is code (--eval)
	longFile []string // long options whose value names the program (--file)
	longLib  []string // long options whose value names code loaded before it (--require)
	// cFlag: -c is a flag and the first operand is the code (POSIX shells).
	cFlag bool
	// plus: options may also start with '+' (sh +e); dashEnds: "-" alone ends options
	// instead of naming standard input.
	plus, dashEnds bool
	// firstCode: the first operand is the program unless an option gave one (awk, sed).
	firstCode bool
	// stdinCode: with no code and no script file it reads its program from standard input.
	stdinCode bool
	// endAtCode: the code option ends the options (python -c: the rest are sys.argv).
	endAtCode bool
	// permute: options may follow operands (su user -c cmd).
	permute bool
	// gnuOpts: GNU getopt reads options after operands too, up to "--" (sed, and awk
	// but for gawk). Only the words xargs adds are unchecked there: a placeholder in
	// argv that starts with '-' is refused when the call is made.
	gnuOpts bool
	// remote: the operands after the first are joined into a line for a remote shell (ssh).
	remote bool
	// sandbox is a long option that stops the code running programs or writing files,
	// so a value in it can only change how text is processed (sed --sandbox).
	sandbox string
	// shortSome are short options whose attached value is short (perl -l and -0 take
	// octal digits, ruby -K one letter), so more options may follow in the same item
	// (-lne); someLen is how many of the letters after one it takes, -1 for all.
	shortSome string
	someLen   func(c byte, rest string) int
	// magicOpen are flags that make it read its file operands through two-argument
	// open (perl -n and -p wrap the code in while (<>), and -a and -F imply -n), where a
	// name such as "cmd|" runs a command; rawOpen is one that makes it open them as
	// named instead (perl -i). magicCode matches code that reads them so itself.
	magicOpen, rawOpen string
	magicCode          *regexp.Regexp
}

const (
	shellExample  = `[sh, -c, 'grep -e "$1" /var/log/app.log', sh, "{pattern}"]`
	pythonExample = `[python3, -c, 'import sys; print(sys.argv[1])', "{text}"]`
	rExample      = `[Rscript, -e, 'cat(commandArgs(TRUE)[1])', "{text}"]`
)

var (
	// A shell's --rcfile and --init-file name code it runs before its program (a lib, not
	// the program: its script or standard input is still to be checked).
	shellInterp = &interp{kind: "shell", example: shellExample, shortArg: "oO", longLib: []string{"rcfile", "init-file"},
		longCode: []string{"command"}, cFlag: true, plus: true, dashEnds: true, stdinCode: true}
	pythonInterp = &interp{kind: "Python", example: pythonExample, shortArg: "cmWXQ", inline: "c", files: "m",
		longArg: []string{"check-hash-based-pycs"}, stdinCode: true, endAtCode: true}
	perlInterp = &interp{kind: "Perl", example: `[perl, -e, 'print $ARGV[0]', "{text}"]`, shortArg: "eEI", shortOpt: "FiCdDxVMm",
		shortSome: "l0", someLen: perlSomeLen, inline: "eEMm", stdinCode: true,
		magicOpen: "npaF", rawOpen: "i", magicCode: perlMagicCode}
	// Ruby's ARGF (-n, -p, gets) opens its files as named, never through a pipe.
	rubyInterp = &interp{kind: "Ruby", example: `[ruby, -e, 'puts ARGV[0]', "{text}"]`, shortArg: "erICE", shortOpt: "Fxi",
		shortSome: "0KW", someLen: rubySomeLen, inline: "e", libs: "r", longArg: []string{"enable", "disable", "encoding", "external-encoding", "internal-encoding"}, stdinCode: true}
	nodeInterp = &interp{kind: "JavaScript", example: `[node, -e, 'console.log(process.argv[1])', "{text}"]`, shortArg: "eprC", inline: "ep", libs: "r",
		longArg: []string{"conditions", "input-type", "title", "env-file", "inspect-port", "stack-size"}, longCode: []string{"eval", "print"},
		longLib: []string{"require", "import", "loader", "experimental-loader"}, stdinCode: true}
	phpInterp = &interp{kind: "PHP", example: `[php, -r, 'echo $argv[1];', --, "{text}"]`, shortArg: "rBREfdczSt", inline: "rBRE", files: "f", stdinCode: true}
	luaInterp = &interp{kind: "Lua", example: `[lua, -e, 'io.write(io.read("a"))'], stdin: "{text}"`, shortArg: "eljO", inline: "e", libs: "l", stdinCode: true}
	// Rscript with no file and no -e prints its usage; R reads its program from standard
	// input (R --vanilla < script.R). R's -d names a debugger that runs R.
	rscriptInterp = &interp{kind: "R", example: rExample, shortArg: "ef", inline: "e", files: "f", longFile: []string{"file"}}
	rInterp       = &interp{kind: "R", example: rExample, shortArg: "efgd", inline: "e", files: "f", libs: "d", longArg: []string{"gui"},
		longFile: []string{"file"}, longLib: []string{"debugger"}, stdinCode: true}
	awkInterp = &interp{kind: "awk", example: `[awk, -v, "pat={pattern}", '$0 ~ pat', /var/log/app.log]`, shortArg: "FvfeEilW", inline: "e", files: "fE", libs: "il",
		longArg: []string{"field-separator", "assign"}, longCode: []string{"source"}, longFile: []string{"file", "exec"}, longLib: []string{"include", "load"}, firstCode: true, gnuOpts: true}
	sedInterp = &interp{kind: "sed", example: `[sed, --sandbox, -n, "/{pattern}/p", /var/log/app.log] (--sandbox stops it running commands or writing files), or grep`,
		shortArg: "efl", shortOpt: "i", inline: "e", files: "f", longArg: []string{"line-length"}, longCode: []string{"expression"}, longFile: []string{"file"},
		firstCode: true, sandbox: "sandbox", gnuOpts: true}
	suInterp = &interp{kind: "shell", example: `a shell as the program: ` + shellExample, shortArg: "csgGw", inline: "c", files: "s",
		longCode: []string{"command", "session-command"}, longFile: []string{"shell"}, longArg: []string{"group", "supp-group", "whitelist-environment"}, permute: true}
	scriptInterp = &interp{kind: "shell", example: shellExample, shortArg: "cIOBTm", inline: "c", longCode: []string{"command"},
		longArg: []string{"log-in", "log-out", "log-io", "log-timing", "logging-format"}, permute: true}
	expectInterp = &interp{kind: "Tcl", example: `a script file that reads $argv: [expect, check.exp, "{host}"]`, shortArg: "cfb", inline: "c", files: "fb", stdinCode: true}
	tclInterp    = &interp{kind: "Tcl", example: `a script file that reads $argv: [tclsh, check.tcl, "{host}"]`, stdinCode: true}
	sshInterp    = &interp{kind: "remote shell", example: `pass values on standard input: [ssh, host, 'read -r p; grep -e "$p" /var/log/app.log'], stdin: "{pattern}"`,
		// libs: -o (ProxyCommand=, LocalCommand=), -F (a config file saying so) and -I (a
		// PKCS#11 library it loads) can make it run local code.
		shortArg: "BbcDEeFIiJLlmOoPpQRSWw", libs: "oFI", remote: true}
	// pwshInterp stands for PowerShell, whose -Command takes all the items after it as code.
	pwshInterp = &interp{kind: "PowerShell", example: `[pwsh, -File, script.ps1, "{text}"]`}
)

// perlSomeLen is how many letters after perl's -l or -0 are its value: up to three
// octal digits (-l012, -0777; -l0 may take a fourth), or all of them after -0x.
func perlSomeLen(c byte, rest string) int {
	if c == '0' && strings.HasPrefix(rest, "x") {
		return -1
	}
	max := 3
	if c == 'l' && strings.HasPrefix(rest, "0") {
		max = 4
	}
	return octalDigits(rest, max)
}

// rubySomeLen is how many letters after ruby's -0 (octal digits), -K (one letter, the
// encoding) or -W (a level digit, or :category to the end) are its value.
func rubySomeLen(c byte, rest string) int {
	switch c {
	case 'K':
		return min(len(rest), 1)
	case 'W':
		// -W0 to -W2, or -W:category, which takes the rest.
		if strings.HasPrefix(rest, ":") {
			return -1
		}
		return octalDigits(rest, 1)
	}
	return octalDigits(rest, 3)
}

func octalDigits(s string, max int) int {
	n := 0
	for n < len(s) && n < max && '0' <= s[n] && s[n] <= '7' {
		n++
	}
	return n
}

// perlMagicCode matches Perl code that reads the files named in @ARGV through the ARGV
// handle, which opens each with two-argument open: <> (but not <<>>, which opens them as
// named; it is taken out first), <ARGV>, readline(ARGV) or *ARGV, readline or eof()
// with no handle. $ARGV[0], @ARGV and $#ARGV are the array, not the handle.
var perlMagicCode = regexp.MustCompile(`(?m)<>|(?:^|[^\w$@#%{])ARGV\b|\breadline\s*(?:\(\s*\)|$|[;)}])|\beof\s*\(\s*\)`)

// interpreters are the programs whose arguments hold code, by name.
var interpreters = map[string]*interp{
	"sh": shellInterp, "bash": shellInterp, "rbash": shellInterp, "dash": shellInterp, "ash": shellInterp, "zsh": shellInterp,
	"ksh": shellInterp, "ksh93": shellInterp, "mksh": shellInterp, "pdksh": shellInterp, "yash": shellInterp, "posh": shellInterp,
	"fish": shellInterp, "csh": shellInterp, "tcsh": shellInterp,
	"python": pythonInterp, "pypy": pythonInterp, "perl": perlInterp, "ruby": rubyInterp,
	"node": nodeInterp, "nodejs": nodeInterp, "bun": nodeInterp, "php": phpInterp, "lua": luaInterp, "luajit": luaInterp,
	"Rscript": rscriptInterp, "R": rInterp,
	"awk": awkInterp, "gawk": awkInterp, "mawk": awkInterp, "nawk": awkInterp, "busybox-awk": awkInterp,
	"sed": sedInterp, "gsed": sedInterp,
	"su": suInterp, "runuser": suInterp, "script": scriptInterp,
	"expect": expectInterp, "tclsh": tclInterp, "wish": tclInterp,
	"ssh": sshInterp, "pwsh": pwshInterp, "powershell": pwshInterp,
}

// versioned matches names such as python3.12, perl5.36, lua5.4, php8.2 or pypy3.
var versioned = regexp.MustCompile(`^(python|pypy|perl|ruby|node|php|lua|luajit|tclsh|wish)-?[0-9][0-9.]*$`)

// interpreterOf is the interp of a program name or path, nil when it is not one.
func interpreterOf(prog string) (*interp, string) {
	name := path.Base(prog)
	if ip := interpreters[name]; ip != nil {
		return ip, name
	}
	if m := versioned.FindStringSubmatch(name); m != nil {
		return interpreters[m[1]], name
	}
	return nil, name
}

// wrapper is a program that runs another one given after its options (env, timeout,
// xargs): the program it runs is found past them.
type wrapper struct {
	shortArg    string
	shortOpt    string
	longArg     []string
	operands    int  // operands before the program (timeout's duration, chroot's root)
	assignments bool // NAME=VALUE items may come before the program (env, sudo)
	numeric     bool // -N is a flag (nice -5)
	xargs       bool
	flock       bool // -c/--command after its file runs a shell line
	split       byte // the option whose value is a whole command line (env -S)
}

var wrappers = map[string]*wrapper{
	"env":      {shortArg: "uCSP", longArg: []string{"unset", "chdir", "split-string"}, assignments: true, split: 'S'},
	"nice":     {shortArg: "n", longArg: []string{"adjustment"}, numeric: true},
	"timeout":  {shortArg: "sk", longArg: []string{"signal", "kill-after"}, operands: 1},
	"nohup":    {},
	"stdbuf":   {shortArg: "ioe", longArg: []string{"input", "output", "error"}},
	"xargs":    {shortArg: "adEILnPs", shortOpt: "eil", longArg: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}, xargs: true},
	"setsid":   {},
	"ionice":   {shortArg: "cnpPu", longArg: []string{"class", "classdata", "pid", "pgid", "uid"}},
	"time":     {shortArg: "fo", longArg: []string{"format", "output"}},
	"busybox":  {},
	"sudo":     {shortArg: "ugCDhprtTU", longArg: []string{"user", "group", "chdir", "close-from", "host", "prompt", "role", "type", "command-timeout", "other-user"}, assignments: true},
	"doas":     {shortArg: "uC"},
	"chroot":   {longArg: []string{"userspec", "groups"}, operands: 1},
	"unbuffer": {},
	"taskset":  {operands: 1},
	"chrt":     {shortArg: "TPD", longArg: []string{"sched-runtime", "sched-period", "sched-deadline"}, operands: 1},
	"flock":    {shortArg: "wE", longArg: []string{"timeout", "conflict-exit-code"}, operands: 1, flock: true},
	"prlimit":  {},
}

// item is an argv item with the index it is reported as (items split from env -S's
// line are reported as the -S item).
type item struct {
	t   Text
	idx int
}

// lit is the text of a literal item, ok false when it has placeholders.
func (it item) lit() (string, bool) {
	if !it.t.Literal() {
		return "", false
	}
	return it.t.Filled(""), true
}

// checkInterpreters reports each place of argv (or stdin) where a placeholder would be
// read as code, or would choose the program or script that runs. It checks the program
// argv[0] runs through wrappers fully, and a known interpreter named anywhere else in
// argv (docker exec c sh -c …, find -exec sh -c …) for its code options only: there the
// name may be plain data (journalctl -u ssh, grep -rn awk), so awk's or sed's first
// operand and ssh's remote line are code only where they are the program. The file
// operands perl opens with two-argument open are checked wherever it is named.
func (r *reader) checkInterpreters(argv []Text, stdin *Text) {
	line := func(idx int) int {
		if idx < 0 {
			return stdin.Line
		}
		return argv[idx].Line
	}
	reported := map[int]bool{}
	cc := &codeCheck{stdinVar: stdin != nil && !stdin.Literal()}
	cc.report = func(idx int, format string, a ...any) {
		if !reported[idx] {
			reported[idx] = true
			r.fail(line(idx), format, a...)
		}
	}
	cc.walk(argv)
	cc.checkXargsOptions(argv)
}

// walk checks the program argv runs, through its wrappers, and each interpreter named
// elsewhere in argv.
func (cc *codeCheck) walk(argv []Text) {
	items := make([]item, len(argv))
	for i, t := range argv {
		items[i] = item{t, i}
	}
	prog, via := cc.programOf(items, nil)
	if prog >= 0 {
		cc.checkInterp(items, prog, true, via)
	}
	// items[0] is the program, a wrapper, or refused by the caller.
	for i, it := range items {
		if i == prog {
			continue
		}
		if s, ok := it.lit(); ok {
			if ip, _ := interpreterOf(s); ip != nil {
				cc.checkInterp(items, i, false, nil)
			}
		}
	}
}

// viaXargs says the program runs under xargs: standard input's words are added to its
// arguments, and with -I each line replaces a string in them.
type viaXargs struct {
	replace string
	from    int // the argv index of the first item of the command xargs runs
}

// codeCheck is the check of one command's argv: stdinVar says its standard input has
// placeholders, and report reports a place once, by its argv index (-1 for stdin).
type codeCheck struct {
	stdinVar bool
	report   func(idx int, format string, a ...any)
	// final and finalAt are where the last programOf found the program that runs (in
	// env -S's split line, the items it made); echo says it found xargs left with no
	// program, which runs echo.
	final   []item
	finalAt int
	echo    bool
	// opened are the argv items with placeholders that perl may open with two-argument
	// open: its operands after the code or script (noteOpened), for magicRefusal.
	opened []int
}

// replaced says s, literal text of an item that via (an xargs, or nil) runs, holds the
// string xargs -I replaces with each line of standard input, which has placeholders.
func (cc *codeCheck) replaced(via *viaXargs, s string) bool {
	return cc.stdinVar && via != nil && via.replace != "" && strings.Contains(s, via.replace)
}

// xargsWords says via is an xargs without -I, which adds the words of standard input,
// which has placeholders, after the items it runs.
func (cc *codeCheck) xargsWords(via *viaXargs) bool {
	return cc.stdinVar && via != nil && via.replace == ""
}

// programOf walks items[0] and the wrappers it names to the program that finally runs:
// its position in items, or -1 when there is none to check further. via is the xargs
// that runs items[0], if any (env -S's line under xargs still gets xargs's input).
func (cc *codeCheck) programOf(items []item, via *viaXargs) (int, *viaXargs) {
	i, prev := 0, ""
	for n := 0; ; n++ {
		if i >= len(items) {
			// xargs alone runs echo; another wrapper under xargs runs the first word of
			// its input.
			if cc.xargsWords(via) && (prev == "" || !wrappers[prev].xargs) {
				cc.report(-1, "stdin goes to xargs, whose first word of it becomes the program that runs, so it cannot have placeholders: a call must never choose which program runs; name the program in argv and let xargs add the values after it")
			}
			cc.echo = prev != "" && wrappers[prev].xargs
			return -1, via
		}
		s, ok := items[i].lit()
		if !ok {
			// argv[0] itself is refused by the caller.
			if i > 0 {
				cc.report(items[i].idx, "argv[%d] is the program %s runs and cannot have placeholders: a call must never choose which program runs", items[i].idx, prev)
			}
			return -1, via
		}
		if cc.replaced(via, s) {
			cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], the program that runs, so it cannot have placeholders: a call must never choose which program runs", via.replace, items[i].idx)
			return -1, via
		}
		name := path.Base(s)
		w := wrappers[name]
		if w == nil {
			cc.final, cc.finalAt = items, i
			return i, via
		}
		// Wrappers are followed up to maxWrappers deep; past that the program is not
		// found, so the template is refused rather than saved with it unchecked.
		if n == maxWrappers {
			cc.report(items[i].idx, "argv[%d] is a wrapper (%s) after %d others, more than the check follows to find the program that runs: run the program with fewer wrappers", items[i].idx, name, maxWrappers)
			return -1, via
		}
		if w.xargs {
			via = &viaXargs{}
		}
		j := i + 1
	options:
		for j < len(items) {
			it := items[j]
			s, ok := it.lit()
			if !ok {
				p := it.t.litPrefix()
				switch {
				case strings.HasPrefix(p, "-"):
					if w.optionHides(p) {
						cc.report(it.idx, "argv[%d] is among the options of %s, where a placeholder could name an option, or be the command line or replace string it runs with, so it cannot have placeholders there: write its options out and pass values as their own items", it.idx, name)
						return -1, via
					}
					j++
					continue
				case w.assignments && strings.Contains(p, "="):
					j++
					continue
				}
				break options
			}
			switch {
			case s == "--":
				j++
				break options
			case strings.HasPrefix(s, "--"):
				opt, val, has := strings.Cut(s[2:], "=")
				if w.xargs && opt == "replace" {
					via.replace = "{}"
					if has {
						via.replace = val
					}
				}
				if !has && slices.Contains(w.longArg, opt) {
					j++
				}
				if opt == "split-string" && w.split != 0 {
					cc.splitLine(items, j, has, val, name, via)
					return -1, via
				}
				j++
			case len(s) > 1 && s[0] == '-':
				if w.numeric && strings.Trim(s[1:], "0123456789") == "" {
					j++
					continue
				}
				letters := s[1:]
				for k := 0; k < len(letters); k++ {
					c := letters[k]
					rest := letters[k+1:]
					if strings.IndexByte(w.shortArg, c) >= 0 {
						val := rest
						if rest == "" {
							j++
							if j < len(items) {
								val, _ = items[j].lit()
							}
						}
						if w.xargs && c == 'I' {
							if rest == "" && j < len(items) && !items[j].t.Literal() {
								cc.report(items[j].idx, "argv[%d] is the string xargs -I replaces with each line of its input and cannot have placeholders: a value could make any text of the command a place for input", items[j].idx)
								return -1, via
							}
							via.replace = val
						}
						if c == w.split && w.split != 0 {
							cc.splitLine(items, j, rest != "", rest, name, via)
							return -1, via
						}
						break
					}
					if strings.IndexByte(w.shortOpt, c) >= 0 {
						if w.xargs && c == 'i' {
							via.replace = rest
							if rest == "" {
								via.replace = "{}"
							}
						}
						break
					}
				}
				j++
			case w.assignments && strings.Contains(s, "="):
				j++
			default:
				break options
			}
		}
		if w.xargs {
			via.from = len(items)
			if j < len(items) {
				via.from = items[j].idx
			}
		}
		j += w.operands
		if w.flock && j < len(items) {
			if s, ok := items[j].lit(); ok && (s == "-c" || s == "--command") {
				if j+1 < len(items) && !items[j+1].t.Literal() {
					cc.report(items[j+1].idx, "argv[%d] is the shell line %s runs with -c and cannot have placeholders: a value would be read as shell code, not data. Run a shell as its program and pass each value as its own argv item after the script, where it is a positional parameter: [flock, file, sh, -c, 'grep -e \"$1\" /var/log/app.log', sh, \"{pattern}\"]", items[j+1].idx, name)
				}
				return -1, via
			}
		}
		prev = name
		i = j
	}
}

// maxWrappers is how many wrappers programOf follows to the program.
const maxWrappers = 16

// optionHides says whether a placeholder after p, the literal start of an option item of
// w, could be an option's name or letters, or is the value of an option that sets the
// command line w runs (env -S) or where xargs puts its input (-I).
func (w *wrapper) optionHides(p string) bool {
	if long, ok := strings.CutPrefix(p, "--"); ok {
		opt, _, has := strings.Cut(long, "=")
		return !has || w.split != 0 && opt == "split-string" || w.xargs && opt == "replace"
	}
	if w.numeric && len(p) > 1 && strings.Trim(p[1:], "0123456789") == "" {
		return false
	}
	for k := 1; k < len(p); k++ {
		c := p[k]
		if w.split != 0 && c == w.split || w.xargs && (c == 'I' || c == 'i') {
			return true
		}
		if strings.IndexByte(w.shortArg, c) >= 0 || strings.IndexByte(w.shortOpt, c) >= 0 {
			return false
		}
	}
	return true
}

// splitLine follows env -S at items[j], whose value is split into the command line env
// runs: the value's words stand in for it (reported as its item), then the items after
// it, and the program found there is checked.
func (cc *codeCheck) splitLine(items []item, j int, attached bool, val string, name string, via *viaXargs) {
	if j >= len(items) {
		return
	}
	valItem := items[j]
	if !attached {
		s, ok := valItem.lit()
		if !ok {
			cc.report(valItem.idx, "argv[%d] is the command line %s -S splits and runs and cannot have placeholders: a value could add arguments or name the program; pass values as argv items after it", valItem.idx, name)
			return
		}
		val = s
	}
	if cc.replaced(via, val) {
		cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], the command line %s -S splits and runs, so it cannot have placeholders: a value could add arguments or name the program", via.replace, valItem.idx, name)
		return
	}
	// The words are literal (the value has no placeholders), whatever braces they have.
	var rest []item
	for _, w := range strings.Fields(val) {
		rest = append(rest, item{Text{Parts: []Part{{Lit: w}}, Line: valItem.t.Line}, valItem.idx})
	}
	rest = append(rest, items[j+1:]...)
	if prog, via := cc.programOf(rest, via); prog >= 0 {
		cc.checkInterp(rest, prog, true, via)
	}
}

// checkInterp reads the items after the interpreter at items[at] and reports where a
// placeholder is code. full is for the program that runs: then a placeholder that
// names the script, or hides among its options, and standard input read as the
// program are reported too; an interpreter named elsewhere in argv (an argument to
// docker or find) is checked for its code options only.
func (cc *codeCheck) checkInterp(items []item, at int, full bool, via *viaXargs) {
	progName, _ := items[at].lit()
	ip, name := interpreterOf(progName)
	if ip == nil {
		return
	}
	args := items[at+1:]
	if ip == pwshInterp {
		cc.checkPwsh(args, name, full, via)
		return
	}
	var code, files, libs, opts, operands []int // positions in args
	codeGiven, cflag, stdinFlag, sandbox, missing := false, false, false, false, false
	magic, raw := false, false    // a magicOpen or a rawOpen flag was given
	options, ended := true, false // ended: a literal "--" (or a shell's "-") ended the options
	addValue := func(k int, attached bool, isCode, isFile, isLib bool) int {
		pos := k
		if !attached {
			pos = k + 1
			if pos >= len(args) {
				missing = missing || isCode
				return k + 1
			}
		}
		switch {
		case isCode:
			code = append(code, pos)
			codeGiven = true
		case isFile:
			files = append(files, pos)
		case isLib:
			libs = append(libs, pos)
		}
		return pos + 1
	}
	for k := 0; k < len(args); {
		it := args[k]
		if !options {
			// GNU getopt stops at "--" after operands too (gnuOpts).
			if s, ok := it.lit(); ok && s == "--" {
				ended = true
			}
			operands = append(operands, k)
			k++
			continue
		}
		// An item with placeholders is read by its literal start: an option whose value
		// takes the rest of it (-e{code}, --eval={code}) holds a placeholder in that value;
		// otherwise the placeholder could be option letters.
		s, complete := it.lit()
		if !complete {
			s = it.t.litPrefix()
		}
		switch {
		case complete && s == "--":
			options, ended = false, true
			k++
		case complete && s == "-":
			if !ip.dashEnds {
				operands = append(operands, k)
			}
			ended = ended || ip.dashEnds
			options = ip.permute && !ip.dashEnds
			k++
		case strings.HasPrefix(s, "--"):
			opt, _, has := strings.Cut(s[2:], "=")
			if !complete && !has {
				opts = append(opts, k)
				k++
				continue
			}
			isCode, isFile, isLib := slices.Contains(ip.longCode, opt), slices.Contains(ip.longFile, opt), slices.Contains(ip.longLib, opt)
			if opt == ip.sandbox && ip.sandbox != "" {
				sandbox = true
			}
			if isCode || isFile || isLib || slices.Contains(ip.longArg, opt) {
				k = addValue(k, has, isCode, isFile, isLib)
			} else {
				k++
			}
			if ip.endAtCode && (isCode || isFile) {
				options = false
			}
		case len(s) > 0 && (s[0] == '-' || ip.plus && s[0] == '+') && (len(s) > 1 || !complete):
			letters, next, valued := s[1:], k+1, false
			for l := 0; l < len(letters) && !valued; l++ {
				c := letters[l]
				if ip.cFlag && c == 'c' {
					cflag = true
					continue
				}
				if ip == shellInterp && c == 's' {
					stdinFlag = true
					continue
				}
				magic = magic || strings.IndexByte(ip.magicOpen, c) >= 0
				raw = raw || strings.IndexByte(ip.rawOpen, c) >= 0
				isCode, isFile, isLib := strings.IndexByte(ip.inline, c) >= 0, strings.IndexByte(ip.files, c) >= 0, strings.IndexByte(ip.libs, c) >= 0
				attached := l+1 < len(letters) || !complete
				switch {
				case strings.IndexByte(ip.shortSome, c) >= 0:
					if n := ip.someLen(c, letters[l+1:]); n >= 0 {
						l += n
					} else {
						valued = true
					}
				case strings.IndexByte(ip.shortArg, c) >= 0:
					next = addValue(k, attached, isCode, isFile, isLib)
					if ip.endAtCode && (isCode || isFile) {
						options = false
					}
					valued = true
				case strings.IndexByte(ip.shortOpt, c) >= 0:
					// Its value is attached, if any: the item itself. Code given so
					// (perl -M) comes before the program, which is still to be found.
					if isCode {
						code = append(code, k)
					}
					valued = true
				}
			}
			if !complete && !valued {
				opts = append(opts, k)
			}
			k = next
		default:
			operands = append(operands, k)
			options = ip.permute
			k++
		}
	}
	fileGiven := len(files) > 0
	pos := func(k int) int { return args[k].idx }
	hasVar := func(k int) bool { return !args[k].t.Literal() }
	codeMsg := func(k int, how string) {
		cc.report(pos(k), "argv[%d] is %s code that %s runs%s, so it cannot have placeholders: a value would be read as code, not data. Pass each value as its own argv item after the code, where it reads it as data: %s",
			pos(k), ip.kind, name, how, ip.example)
	}
	// replaced says the literal item at k holds xargs -I's string, which each line of
	// standard input replaces.
	replaced := func(k int) bool {
		s, ok := args[k].lit()
		return ok && cc.replaced(via, s)
	}
	if ip.remote {
		// ssh destination command...: the command's items are joined and read by a shell.
		// Under xargs, its input's words are added to that line (or with -I put in it).
		// Its options that run local code are checked wherever it is named (find -exec
		// ssh -o …, docker exec … ssh): named elsewhere in argv, only its operands may be
		// data (journalctl -u ssh -n 5).
		for _, k := range libs {
			if hasVar(k) {
				cc.report(pos(k), "argv[%d] is the value of an option of %s that can make it run a local command or load code (-o ProxyCommand=…, -F a config file, -I a library), so it cannot have placeholders: write these options out, and %s", pos(k), name, ip.example)
			}
		}
		if !full {
			return
		}
		if cc.xargsWords(via) {
			cc.report(-1, "stdin goes to xargs, which adds its words to the command line of %s, whose remote shell runs them as code, so it cannot have placeholders: run %s without xargs and give it a command that reads the value as data: %s", name, name, ip.example)
		}
		for k := range args {
			if replaced(k) {
				cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d] of %s, where its remote shell or its options read it, so it cannot have placeholders: run %s without xargs and give it a command that reads the value as data: %s", via.replace, pos(k), name, name, ip.example)
			}
		}
		if len(operands) > 0 {
			for _, k := range operands[1:] {
				if hasVar(k) {
					codeMsg(k, " (ssh joins the items after the host into one line for the remote shell)")
				}
			}
			if len(operands) > 1 {
				return
			}
		}
		if cc.stdinVar && via == nil {
			cc.report(-1, "stdin is read as commands by the remote shell of %s (no command follows the host), so it cannot have placeholders: give %s a command that reads the value as data: %s", name, name, ip.example)
		}
		return
	}
	if cflag || full && ip.firstCode && !codeGiven && !fileGiven {
		if len(operands) > 0 {
			code = append(code, operands[0])
			operands = operands[1:]
		} else {
			missing = true
		}
		codeGiven = true
	}
	for _, k := range code {
		if sandbox {
			break
		}
		if hasVar(k) {
			how := ""
			if cflag {
				how = " with -c"
			}
			codeMsg(k, how)
		} else if replaced(k) {
			cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in the %s code of argv[%d], so it cannot have placeholders: without -I, xargs adds the lines as separate arguments after the code, where it reads them as data: %s",
				via.replace, ip.kind, pos(k), ip.example)
		}
	}
	if missing && via != nil && cc.stdinVar {
		cc.report(-1, "stdin goes to xargs, whose first word of it becomes the %s code %s runs, so it cannot have placeholders: write the code in argv and let xargs add the values after it: %s", ip.kind, name, ip.example)
	}
	if ip.magicOpen != "" {
		cc.noteOpened(args, operands, codeGiven || fileGiven)
	}
	if !raw {
		how := ""
		switch {
		case magic:
			how = "with -n, -p, -a or -F it wraps the code in while (<>)"
		case ip.magicCode != nil:
			for _, k := range code {
				if s, ok := args[k].lit(); ok && ip.magicCode.MatchString(strings.ReplaceAll(s, "<<>>", "")) {
					how = "its code reads them with <> or the ARGV handle"
				}
			}
		}
		if how != "" {
			cc.checkMagicOpen(args, operands, codeGiven || fileGiven, name, how, via)
		}
	}
	if ip.magicOpen != "" {
		if !codeGiven && !fileGiven {
			cc.checkScriptOpen(args, operands, name, via)
		} else {
			cc.checkCodeOpen(args, code, operands, name, via)
		}
	}
	if !full {
		return
	}
	for _, k := range opts {
		cc.report(pos(k), "argv[%d] is among the options of %s, where a placeholder could make it run a value as code: write its options out, and pass values after the code: %s", pos(k), name, ip.example)
	}
	replacedMsg := func(k int) {
		cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], which names the code %s runs, so it cannot have placeholders: a call must never choose which program runs", via.replace, pos(k), name)
	}
	for _, k := range append(files, libs...) {
		if hasVar(k) {
			cc.report(pos(k), "argv[%d] names the code %s runs and cannot have placeholders: a call must never choose which program runs", pos(k), name)
		} else if replaced(k) {
			replacedMsg(k)
		}
	}
	fromStdin := stdinFlag
	if !codeGiven && !fileGiven {
		if len(operands) == 0 {
			fromStdin = fromStdin || ip.stdinCode
		} else {
			k := operands[0]
			s, ok := args[k].lit()
			switch {
			case !ok:
				cc.report(pos(k), "argv[%d] names the script %s runs and cannot have placeholders: a call must never choose which program runs (pass values after the script, or after code given in argv: %s)", pos(k), name, ip.example)
			case replaced(k):
				replacedMsg(k)
			case s == "-" || s == "/dev/stdin" || s == "/dev/fd/0" || s == "/proc/self/fd/0":
				fromStdin = true
			}
		}
	}
	if fromStdin && cc.stdinVar && via == nil {
		cc.report(-1, "stdin is the program %s reads and runs (it is given no code or script file), so it cannot have placeholders: a value would be read as %s code, not data. Write the code in argv and pass values after it: %s", name, ip.kind, ip.example)
	}
	// Under xargs without -I, standard input's words are added after the items (its own
	// standard input is /dev/null): the first word is the script when none is given, as
	// in [sh, "{p}"], and a word starting with '-' is an option (perl -e, bash -c) where
	// the program still reads options.
	if cc.xargsWords(via) && !missing {
		switch {
		case !codeGiven && !fileGiven && len(operands) == 0 && !stdinFlag:
			cc.report(-1, "stdin goes to xargs, whose first word of it becomes the script %s runs (it is given no code or script file), so it cannot have placeholders: a call must never choose which program runs. Write the code in argv, or name a script file, and let xargs add the values after it (for a shell: %s)",
				name, xargsShellExample)
		case !ended && (options || ip.gnuOpts):
			cc.report(-1, "stdin goes to xargs, which adds its words after the items of %s, where it still reads options: a word starting with '-' could be one that runs code (-e, -c), so stdin cannot have placeholders there. End the options with a literal -- item after the code or script, before the words xargs adds: [xargs, %s, …, --]",
				name, name)
		}
	}
}

// magicOpenExample is the safe form of Perl code that reads a file a call names.
const magicOpenExample = `pass the data on stdin ([perl, -ne, 'print if /x/'], stdin: "{text}"), or open the file in the code with three-argument open: [perl, -e, 'open my $f, "<", $ARGV[0] or die "$ARGV[0]: $!"; while (<$f>) { print if /x/ }', "{file}"]`

// checkMagicOpen reports placeholders among the file operands of an interpreter that
// opens them with two-argument open, where a name such as "cmd|" or "|cmd" runs a
// command and ">file" or "+<file" opens one to write (how says why it opens them so);
// the first operand is the script unless code was given. Under xargs, the words it adds
// or the lines it puts in place of -I's string would be such names too.
func (cc *codeCheck) checkMagicOpen(args []item, operands []int, codeGiven bool, name, how string, via *viaXargs) {
	if !codeGiven && len(operands) > 0 {
		operands = operands[1:]
	}
	for _, k := range operands {
		it := args[k]
		if !it.t.Literal() {
			cc.report(it.idx, "argv[%d] is a file that %s opens with two-argument open (%s), where a name such as 'cmd|' runs a command and '>file' writes one, so it cannot have placeholders: %s",
				it.idx, name, how, magicOpenExample)
		} else if s, _ := it.lit(); cc.replaced(via, s) {
			cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], a file that %s opens with two-argument open (%s), where a name such as 'cmd|' runs a command, so it cannot have placeholders: run %s without xargs and %s",
				via.replace, it.idx, name, how, name, magicOpenExample)
		}
	}
	if cc.xargsWords(via) {
		cc.report(-1, "stdin goes to xargs, which adds its words after the items of %s, which opens them as files with two-argument open (%s), where a name such as 'cmd|' runs a command, so it cannot have placeholders: run %s without xargs and %s",
			name, how, name, magicOpenExample)
	}
}

// noteOpened notes in cc.opened the items with placeholders among perl's operands
// after its script (the first operand unless code was given), for the call-time check.
// checkMagicOpen refuses them when the template is saved only where it sees them read
// with <>, but a script's code cannot be seen ([perl, /opt/count.pl, "{file}"] with
// while (<>) in it), and -e code may call two-argument open itself (open F, $ARGV[0]).
func (cc *codeCheck) noteOpened(args []item, operands []int, codeGiven bool) {
	if !codeGiven && len(operands) > 0 {
		operands = operands[1:]
	}
	for _, k := range operands {
		if !args[k].t.Literal() {
			cc.opened = append(cc.opened, args[k].idx)
		}
	}
}

// magicRefusal refuses v, the value of argv item t, an operand of perl after its code
// or script, which perl may open with two-argument open (noteOpened): open strips white
// space around the name, and a leading '<', '>', '+' or '|', a trailing '|', or "-"
// choose a mode or run a command. A plain file name, or text that is not one, passes.
func magicRefusal(t Text, v string) error {
	switch {
	case t.Literal():
		return nil
	case strings.TrimSpace(v) != v:
		return refuse(t.firstParam(), "starts or ends with white space, which Perl's two-argument open strips from the file name it opens")
	case v != "" && strings.IndexByte("<>+|-", v[0]) >= 0 || strings.HasSuffix(v, "|"):
		return refuse(t.firstParam(), "goes to perl, whose two-argument open (<> in its code or script) would read it as a mode or a command: it may not start with '<', '>', '+', '|' or '-', nor end with '|'")
	}
	return nil
}

// magicOpened are the argv items with placeholders that perl may open with
// two-argument open, wherever it is named in argv (noteOpened).
func magicOpened(argv []Text, stdinVar bool) []int {
	cc := &codeCheck{stdinVar: stdinVar, report: func(int, string, ...any) {}}
	cc.walk(argv)
	return cc.opened
}

// checkScriptOpen reports standard input with placeholders under xargs, where its words
// (or, with -I, its lines) become perl's arguments after its script: the script's code
// cannot be seen, so it may open them with two-argument open (while (<>), open F,
// $ARGV[0]), where a name such as "cmd|" runs a command, and the call-time check
// (noteOpened) sees only argv's items, never what xargs adds. Code given in argv is
// judged by checkMagicOpen instead. With no operand, xargs's first word is the script,
// which checkInterp reports.
func (cc *codeCheck) checkScriptOpen(args []item, operands []int, name string, via *viaXargs) {
	if len(operands) == 0 || via == nil || !cc.stdinVar {
		return
	}
	script, ok := args[operands[0]].lit()
	if !ok {
		script = "script.pl"
	} else if cc.replaced(via, script) {
		return // the script itself is refused (replacedMsg)
	}
	example := fmt.Sprintf(`[%s, %s, "{file}"]`, name, script)
	if cc.xargsWords(via) {
		cc.report(-1, "stdin goes to xargs, which adds its words after the script %s runs, whose code the check cannot see: it may open them with two-argument open (<>, or open F, $ARGV[0]), where a name such as 'cmd|' runs a command, and no check at the call sees the words xargs adds, so stdin cannot have placeholders: run %s without xargs and pass each value as its own argv item after the script, where the call refuses such a name: %s",
			name, name, example)
		return
	}
	for _, k := range operands[1:] {
		if s, ok := args[k].lit(); ok && cc.replaced(via, s) {
			cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], an argument of the script %s runs, whose code the check cannot see: it may open it with two-argument open (<>, or open F, $ARGV[0]), where a name such as 'cmd|' runs a command, and no check at the call sees the lines xargs puts there, so stdin cannot have placeholders: run %s without xargs and pass each value as its own argv item after the script, where the call refuses such a name: %s",
				via.replace, args[k].idx, name, name, example)
			return
		}
	}
}

// perlOpenCall matches Perl code that calls open (CORE::open, IO::File->open too), or
// -e code attached to its option that starts with it: two-argument open cannot be told
// from three-argument open by its text.
var perlOpenCall = regexp.MustCompile(`(?:^|[^\w$@%&])open\b|^-\w*[eE]open\b`)

// checkCodeOpen reports standard input with placeholders under xargs, where its words
// (or, with -I, its lines) become the arguments of perl code given in argv that calls
// open: with two arguments (open F, $ARGV[0]) a name such as "cmd|" runs a command, and
// the call-time check sees only argv's items. Code reading them with <> is reported by
// checkMagicOpen; code that calls no open (print "@ARGV") reads them as data.
func (cc *codeCheck) checkCodeOpen(args []item, code, operands []int, name string, via *viaXargs) {
	if via == nil || !cc.stdinVar {
		return
	}
	at := -1
	for _, k := range code {
		if s, ok := args[k].lit(); ok && perlOpenCall.MatchString(s) {
			at = args[k].idx
			break
		}
	}
	if at < 0 {
		return
	}
	example := fmt.Sprintf(`[%s, -e, 'open my $f, "<", $ARGV[0] or die "$ARGV[0]: $!"; …', "{file}"]`, name)
	if cc.xargsWords(via) {
		cc.report(-1, "stdin goes to xargs, which adds its words after the Perl code of argv[%d], which calls open: with two arguments (open F, $ARGV[0]) a name such as 'cmd|' runs a command, and no check at the call sees the words xargs adds, so stdin cannot have placeholders: run %s without xargs and pass each value as its own argv item after the code, where the call refuses such a name: %s",
			at, name, example)
		return
	}
	for _, k := range operands {
		if s, ok := args[k].lit(); ok && cc.replaced(via, s) {
			cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], an argument of the Perl code of argv[%d], which calls open: with two arguments (open F, $ARGV[0]) a name such as 'cmd|' runs a command, and no check at the call sees the lines xargs puts there, so stdin cannot have placeholders: run %s without xargs and pass each value as its own argv item after the code, where the call refuses such a name: %s",
				via.replace, args[k].idx, at, name, example)
			return
		}
	}
}

// xargsShellExample is the safe form of a shell under xargs: the code is written out and
// the words xargs adds are its positional parameters.
const xargsShellExample = `[xargs, sh, -c, 'for p; do grep -e "$p" /var/log/app.log; done', --]`

// checkPwsh reports placeholders after PowerShell's -Command (or -EncodedCommand),
// which joins every item after it into the code it runs. For the program that runs
// (full), also a placeholder before -File or -Command (it could be -Command), the
// script -File names, and stdin when it is the code: -Command -, -File -, or neither
// given (PowerShell then reads its commands from standard input). Under xargs, only
// -File with a script written out keeps the words it adds from being code.
func (cc *codeCheck) checkPwsh(args []item, name string, full bool, via *viaXargs) {
	xargsWords := full && cc.xargsWords(via)
	replaced := func(it item) bool {
		s, ok := it.lit()
		return ok && full && cc.replaced(via, s)
	}
	for k, it := range args {
		s, ok := it.lit()
		if !ok {
			if full {
				cc.report(it.idx, "argv[%d] is among the options of %s, where a placeholder could be -Command and make it run a value as code: write its options out and run a script file with the values after it: %s",
					it.idx, name, pwshInterp.example)
				return
			}
			continue
		}
		l := strings.ToLower(s)
		if l == "-f" || l == "-file" {
			if !full || k+1 >= len(args) {
				return
			}
			script := args[k+1]
			sv, ok := script.lit()
			switch {
			case !ok:
				cc.report(script.idx, "argv[%d] names the script %s runs and cannot have placeholders: a call must never choose which program runs (pass values after the script: %s)", script.idx, name, pwshInterp.example)
			case replaced(script):
				cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], which names the script %s runs, so it cannot have placeholders: a call must never choose which program runs", via.replace, script.idx, name)
			case sv == "-" && cc.stdinVar && via == nil:
				cc.report(-1, "stdin is the program %s reads and runs (-File -), so it cannot have placeholders: a value would be read as PowerShell code, not data. Run a script file and pass values after it: %s", name, pwshInterp.example)
			}
			return
		}
		isCmd := l == "-c" || l == "-e" || l == "-ec" || l == "-cwa" || l == "-encodedcommand" || l == "-commandwithargs" ||
			len(l) >= 3 && strings.HasPrefix("-command", l)
		if !isCmd {
			continue
		}
		rest := args[k+1:]
		for _, r := range rest {
			switch {
			case !r.t.Literal():
				cc.report(r.idx, "argv[%d] is part of the PowerShell code %s runs (%s joins the items after it into code), so it cannot have placeholders: a value would be read as code, not data. Run a script file and pass values after it: %s",
					r.idx, name, s, pwshInterp.example)
			case replaced(r):
				cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], part of the PowerShell code %s runs, so it cannot have placeholders: run a script file and pass values after it: %s", via.replace, r.idx, name, pwshInterp.example)
			}
		}
		switch {
		case xargsWords:
			cc.report(-1, "stdin goes to xargs, which adds its words to the PowerShell code %s runs (%s joins the items after it into code), so it cannot have placeholders: run a script file with -File and let xargs add the values after it: [xargs, %s, -File, script.ps1]", name, s, name)
		case full && cc.stdinVar && via == nil && len(rest) > 0 && rest[0].t.Literal() && rest[0].t.Filled("") == "-":
			cc.report(-1, "stdin is the program %s reads and runs (%s -), so it cannot have placeholders: a value would be read as PowerShell code, not data. Run a script file and pass values after it: %s", name, s, pwshInterp.example)
		}
		return
	}
	switch {
	case xargsWords:
		cc.report(-1, "stdin goes to xargs, whose words become the arguments of %s, given no -File or -Command, where they could be -Command and code, so it cannot have placeholders: run a script file with -File and let xargs add the values after it: [xargs, %s, -File, script.ps1]", name, name)
	case full && cc.stdinVar && via == nil:
		cc.report(-1, "stdin is read as commands by %s (it is given no -File or -Command), so it cannot have placeholders: a value would be read as PowerShell code, not data. Run a script file and pass values after it: %s", name, pwshInterp.example)
	}
}
