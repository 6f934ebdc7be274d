package template_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/template"
)

// Under xargs, standard input's words (or with -I its lines) become perl's arguments
// after its script, whose code the save-time check cannot see and which may open them
// with two-argument open, where "cmd|" runs cmd; the call-time check sees only argv's
// items. So a placeholder in stdin is refused there when the template is saved, wherever
// perl is found through wrappers; -e code the check reads, which does not read its
// arguments as files, stays accepted.
func TestPerlScriptUnderXargsRefused(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("no perl")
	}
	if _, err := exec.LookPath("xargs"); err != nil {
		t.Skip("no xargs")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "count.pl")
	if err := os.WriteFile(script, []byte("while (<>) { print }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "pwned")
	const words = "which adds its words after the script perl runs, whose code the check cannot see"
	for command, want := range map[string]string{
		fmt.Sprintf(`{argv: [xargs, perl, %q, --], stdin: "{p}"}`, script):                           words,
		fmt.Sprintf(`{argv: [xargs, perl, %q], stdin: "{p}"}`, script):                               words,
		fmt.Sprintf(`{argv: [xargs, -d, "\n", perl, -w, --, %q], stdin: "{p}"}`, script):             words,
		fmt.Sprintf(`{argv: [xargs, -0, env, LC_ALL=C, perl, %q, --], stdin: "{p}"}`, script):        words,
		fmt.Sprintf(`{argv: [sudo, -u, app, xargs, nice, perl, %q, --], stdin: "{p}"}`, script):      words,
		fmt.Sprintf(`{argv: [xargs, env, -S, "perl %s"], stdin: "{p}"}`, script):                     words,
		fmt.Sprintf(`{argv: [xargs, perl, -Mstrict, %q, --], stdin: "{p}"}`, script):                 words,
		fmt.Sprintf(`{argv: [xargs, perl, -i, %q, --], stdin: "{p}"}`, script):                       words,
		fmt.Sprintf(`{argv: [xargs, -I, "{{}", perl, %q, --, "{{}"], stdin: "{p}"}`, script):         "in place of {} in argv[6], an argument of the script perl runs",
		fmt.Sprintf(`{argv: [xargs, --replace=@, perl, %q, /etc/hosts, "@"], stdin: "{p}"}`, script): "in place of @ in argv[5], an argument of the script perl runs",
		// -e code that calls open itself: two-argument open cannot be told from its text.
		`{argv: [xargs, perl, -e, 'open F, $ARGV[0] or die; print <F>', --], stdin: "{p}"}`:        "adds its words after the Perl code of argv[3], which calls open",
		`{argv: [xargs, perl, -w, "-eopen F, $ARGV[0]; print <F>", --], stdin: "{p}"}`:             "adds its words after the Perl code of argv[3], which calls open",
		`{argv: [xargs, perl, -e, 'my $f = IO::File->new; $f->open($ARGV[0])', --], stdin: "{p}"}`: "adds its words after the Perl code of argv[3], which calls open",
		`{argv: [xargs, -I, "{{}", perl, -e, 'CORE::open(F, $ARGV[0])', --, "{{}"], stdin: "{p}"}`: "in place of {} in argv[7], an argument of the Perl code of argv[5], which calls open",
	} {
		_, err := template.Parse(commandTool(command))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", command, err, want)
			continue
		}
		// The message points to argv items after the script, where the call checks them.
		if !strings.Contains(err.Error(), `pass each value as its own argv item after the`) {
			t.Errorf("%s: %v does not show the argv form", command, err)
		}
	}

	// -n given with a script keeps the message that says perl opens them as files.
	if _, err := template.Parse(commandTool(fmt.Sprintf(`{argv: [xargs, perl, -n, %q, --], stdin: "{p}"}`, script))); err == nil ||
		!strings.Contains(err.Error(), "which opens them as files with two-argument open") {
		t.Errorf("-n with a script: got %v", err)
	}

	// What the refusal prevents, shown on the refused template read without the code
	// checks: xargs gives the word to the script's <>, which runs it as a command.
	risky, err := template.ParseWith(commandTool(fmt.Sprintf(`{argv: [xargs, -d, "\n", perl, %q, --], stdin: "{p}"}`, script)),
		template.ParseOptions{SkipCodeChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	riskyCode, err := template.ParseWith(commandTool(`{argv: [xargs, -d, "\n", perl, -e, 'open F, $ARGV[0] or die; print <F>', --], stdin: "{p}"}`),
		template.ParseOptions{SkipCodeChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tpl := range []*template.Template{risky, riskyCode} {
		call(t, tpl, "t", map[string]any{"p": "touch " + marker + "|"})
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the unchecked template did not run the command (%v): the test no longer shows the hazard", err)
		}
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
	}

	// Accepted: -e code that the check reads and that does not open its arguments (the
	// documented form), the same with -I, a script given values as argv items (checked at
	// the call), and a script reading stdin without xargs.
	for _, command := range []string{
		`{argv: [xargs, perl, -e, 'print "@ARGV"', --], stdin: "{p}"}`,
		`{argv: [xargs, -I, "{{}", perl, -e, 'print "@ARGV"', --, "{{}"], stdin: "{p}"}`,
		fmt.Sprintf(`{argv: [perl, %q, "{p}"]}`, script),
		fmt.Sprintf(`{argv: [perl, %q], stdin: "{p}"}`, script),
		`{argv: [xargs, perl, -Mopen=:std, -e, 'print "@ARGV"; opendir D, "."; sysopen F, "/dev/null", 0', --], stdin: "{p}"}`,
		`{argv: [perl, -e, 'open F, $ARGV[0] or die; print <F>', "{p}"]}`,
	} {
		if _, err := template.Parse(commandTool(command)); err != nil {
			t.Errorf("%s: %v", command, err)
		}
	}
	// The documented form keeps the value data: perl prints it and runs nothing.
	tpl := mustParse(t, commandTool(`{argv: [xargs, -d, "\n", perl, -e, 'print "@ARGV"', --], stdin: "{p}"}`))
	v := "touch " + marker + "|"
	if res := call(t, tpl, "t", map[string]any{"p": v}); res.IsError || res.Text != v {
		t.Errorf("-e under xargs: got %+v, want %q", res, v)
	}
	noMarker(t, marker)
}
