package template

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// A value starting with '-' is refused where a program would read it as an option,
// unless a literal "--" item comes before it. That "--" must be one the program that
// finally runs reads: one ending a wrapper's options (env -- tar …) ends none of tar's,
// and a program that hands the items after its "--" to another one (kubectl exec pod --
// tar …, npm run build -- …) leaves that one reading options. Under xargs the same holds
// for the words it adds from standard input, which no call-time check sees.

// dashes is where a literal "--" ends the options of the program that finally runs.
type dashes struct {
	// end is the argv index of that "--": the items after it are not options. -1 when
	// there is none, or the program could not be followed to the end.
	end int
	// prog names the program whose options come before end, for messages ("" when the
	// walk found none); after, the program whose "--" it follows, if any.
	prog, after string
	// via is the xargs the program runs under, if any; echo says xargs runs echo (no
	// program is named after it).
	via  *viaXargs
	echo bool
	// handed says prog hands the items after its "--" to another program (runners), and
	// no second "--" follows.
	handed bool
	// refused says the walk through argv[0]'s wrappers stopped at something the code
	// check refuses (and reports) on its own.
	refused bool
}

// runners hand the items after their first "--" to a program of their own as its
// arguments (a package's script, the binary just built): that program still reads
// options there, so that "--" ends none, and a value needs a second "--" after it
// ([npm, run, build, --, --, "{arg}"]). Listed are the subcommands that do so, nil for
// any (yarn and pnpm run a script named as the subcommand). A launcher not known to keep
// its "--" is counted as handing it over: that asks for one "--" more, never one fewer.
var runners = map[string][]string{
	"npm":     {"run", "run-script", "rum", "urn", "test", "tst", "t", "start", "stop", "restart", "exec", "x"},
	"npx":     nil,
	"pnpm":    nil,
	"pnpx":    nil,
	"yarn":    nil,
	"bun":     nil,
	"bunx":    nil,
	"cargo":   {"run", "r", "test", "t", "bench"},
	"go":      {"run"},
	"dotnet":  {"run", "test"},
	"cabal":   {"run", "exec", "test", "bench"},
	"stack":   {"run", "exec", "test", "bench"},
	"swift":   {"run", "test"},
	"deno":    {"task", "run"},
	"task":    nil,
	"uv":      {"run", "tool"},
	"uvx":     nil,
	"pipx":    {"run"},
	"poetry":  {"run"},
	"pipenv":  {"run"},
	"pdm":     {"run"},
	"hatch":   {"run"},
	"rye":     {"run"},
	"kubectl": {"run"},
	"oc":      {"run"},
}

// handsOver says the program at items[0], with the items before its first "--" given,
// hands the items after that "--" to another program (runners).
func handsOver(items []item) bool {
	s, _ := items[0].lit()
	subs, ok := runners[path.Base(s)]
	if !ok {
		return false
	}
	if subs == nil {
		return true
	}
	for _, it := range items[1:] {
		if s, ok := it.lit(); ok && slices.Contains(subs, s) {
			return true
		}
	}
	return false
}

// optionsEnd finds the "--" that ends the options of the program argv finally runs:
// through the wrappers of argv[0] (as the code check follows them), then past each "--"
// after that program that is followed by a literal item, which may be a program it
// starts (kubectl exec pod -- tar …, nsenter -t 1 -m -- tar …): its options need a "--" of
// their own. A "--" followed by a value (a placeholder, or xargs -I's string) is the
// one. stdinVar says standard input has placeholders (xargs's words are then a call's).
func optionsEnd(argv []Text, stdinVar bool) dashes {
	items := make([]item, len(argv))
	for i, t := range argv {
		items[i] = item{t, i}
	}
	d := dashes{end: -1}
	reported := false
	cc := &codeCheck{stdinVar: stdinVar, report: func(int, string, ...any) { reported = true }}
	var via *viaXargs
	for n := 0; n <= maxWrappers; n++ {
		cc.final, cc.echo = nil, false
		_, via = cc.programOf(items, via)
		d.via = via
		if cc.final == nil {
			d.echo = cc.echo
			d.refused = n == 0 && reported
			return d
		}
		var p int
		items, p = cc.final, cc.finalAt
		s, _ := items[p].lit()
		if n > 0 {
			d.after = d.prog
		}
		d.prog = path.Base(s)
		k := nextDashes(items, p+1)
		if k >= 0 && handsOver(items[p:k]) {
			k = nextDashes(items, k+1)
			d.handed = k < 0
		}
		if k < 0 {
			return d
		}
		if k+1 < len(items) {
			if s, ok := items[k+1].lit(); ok && s != "--" && !cc.replaced(via, s) {
				items = items[k+1:]
				continue
			}
		}
		d.end = items[k].idx
		return d
	}
	return d
}

// nextDashes is the index of the first literal "--" in items from k on, -1 when none.
func nextDashes(items []item, k int) int {
	for ; k < len(items); k++ {
		if s, ok := items[k].lit(); ok && s == "--" {
			return k
		}
	}
	return -1
}

// checkXargsOptions reports a command whose program runs under xargs, with standard
// input that has placeholders, where a word or line xargs puts among its arguments could
// be read as an option: the words it adds at the end when no "--" of the program comes
// before them, or a line replacing -I's string where it begins an item before that
// "--". Nothing a call gives is seen before xargs splits it, so this is refused when the
// template is saved.
func (cc *codeCheck) checkXargsOptions(argv []Text) {
	if !cc.stdinVar {
		return
	}
	d := optionsEnd(argv, true)
	via := d.via
	if via == nil || d.refused {
		return
	}
	prog := d.prog
	if prog == "" {
		prog = "the program xargs runs"
	}
	if via.replace == "" {
		if d.end < 0 && !d.echo {
			// The example shows where prog's own items are: right after xargs, or after
			// the program whose -- it follows (perl -w -- /s.pl: the script's).
			example := "[xargs, " + prog + ", …, --]"
			if d.after != "" {
				example = "[xargs, " + d.after + ", …, " + prog + ", …, --]"
			}
			cc.report(-1, "stdin goes to xargs, which adds its words after the items of %s, where a word starting with '-' would be read as an option (tar's --checkpoint-action=exec=… runs a command), so stdin cannot have placeholders there: end argv with a literal -- item that %s reads, before the words xargs adds: %s (with sh -c the -- can be $0: [xargs, sh, -c, 'for p; do grep -e \"$p\" log; done', --])%s",
				prog, prog, example, d.launched())
		}
		return
	}
	for i := via.from; i < len(argv) && (d.end < 0 || i < d.end); i++ {
		if strings.HasPrefix(argv[i].Filled(""), via.replace) {
			r := via.replace
			cc.report(-1, "stdin goes to xargs, which puts each of its lines in place of %s in argv[%d], where it begins the item with no literal -- of %s before it: a line starting with '-' would be read as an option, so stdin cannot have placeholders there. Put a literal -- item before it ([xargs, -I, %s, %s, …, --, %s]), or write the option in the template (%q, %q)%s",
				r, i, prog, r, prog, r, "--name="+r, "-e"+r, d.launched())
			return
		}
	}
}

// launched explains, for a message, why a "--" before the place did not count: it was
// one that hands the items after it to another program, or a literal item after it
// may be a program that the one before starts.
func (d dashes) launched() string {
	switch {
	case d.handed:
		return fmt.Sprintf(". The -- of %s hands the items after it to another program (a script, the binary built) as its arguments, where that one reads options: put a second literal -- after it ([npm, run, build, --, --, \"{arg}\"])", d.prog)
	case d.after != "":
		return fmt.Sprintf(". %s follows a literal -- of %s, and an item right after a -- may be a program %s starts (kubectl exec pod -- tar …), which reads options of its own: put the value right after that -- (no literal item between), or a literal -- of %s's before it", d.prog, d.after, d.after, d.prog)
	}
	return ""
}

// dashRefusal is why a value starting with '-' is refused at item i of a command whose
// options end as d says, "" when it is not: the item's own text starts with a
// placeholder's (or -I's line's) '-' and no "--" the program reads comes before it.
func (d dashes) dashRefusal(i int, t Text, v string) error {
	if i == 0 || d.end >= 0 && i > d.end {
		return nil
	}
	prog := d.prog
	if prog == "" {
		prog = "the program"
	}
	if strings.HasPrefix(v, "-") && !strings.HasPrefix(t.litPrefix(), "-") {
		if why := d.launched(); why != "" {
			return refuse(t.firstParam(), "starts with '-', and here it would be read as an option%s", why)
		}
		return refuse(t.firstParam(), "starts with '-', and here it would be read as an option of %s; the template can put a literal \"--\" item before it, one that %s reads (after its options, not a wrapper's or launcher's), to pass such values%s", prog, prog, d.launched())
	}
	if via := d.via; via != nil && via.replace != "" && i >= via.from && !t.Literal() && strings.HasPrefix(v, via.replace) {
		return refuse(t.firstParam(), "starts with %s, which xargs replaces with a line of its input, and here that line would be read as an option of %s", via.replace, prog)
	}
	return nil
}
