package template_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/template"
)

// needTar skips a test that runs GNU tar and xargs when they are missing.
func needTar(t *testing.T) {
	t.Helper()
	for _, p := range []string{"tar", "xargs", "env"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skip("no " + p)
		}
	}
	if out, err := exec.Command("tar", "--version").Output(); err != nil || !strings.Contains(string(out), "GNU tar") {
		t.Skip("no GNU tar")
	}
}

// noMarker fails when a command a value tried to run left its marker.
func noMarker(t *testing.T, marker string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a value ran a command: %s exists", marker)
	}
}

// Under xargs, standard input's words are added to the program's arguments: a word
// starting with '-' would be an option of tar (--checkpoint-action=exec=…), so such a
// template is refused when saved unless a literal "--" ends argv; with -I, a line that
// begins an item before "--" would be a whole option.
func TestXargsWordsAreNotOptions(t *testing.T) {
	t.Parallel()
	for command, want := range map[string]string{
		`{argv: [xargs, tar, -cf, /backups/out.tar], stdin: "{p}"}`:                   "stdin goes to xargs, which adds its words after the items of tar",
		`{argv: [xargs, -0, rm, -f], stdin: "{p}"}`:                                   "after the items of rm",
		`{argv: [xargs, -n, "1", curl, -s], stdin: "{p}"}`:                            "after the items of curl",
		`{argv: [env, --, xargs, git, log], stdin: "{p}"}`:                            "after the items of git",
		`{argv: [xargs, -0, sh, -c, 'tar -cf /tmp/o "$@"', sh], stdin: "{p}"}`:        "after the items of sh",
		`{argv: [xargs, python3, /opt/tools/report.py], stdin: "{p}"}`:                "after the items of python3",
		`{argv: [xargs, kubectl, exec, pod, --, tar, czf, "-"], stdin: "{p}"}`:        "after the items of tar, where a word starting with '-' would be read as an option (tar's --checkpoint-action=exec=… runs a command), so stdin cannot have placeholders there: end argv with a literal -- item that tar reads, before the words xargs adds: [xargs, kubectl, …, tar, …, --]",
		`{argv: [xargs, -I, "{{}", tar, -cf, /tmp/o, "{{}"], stdin: "{p}"}`:           "in place of {} in argv[6], where it begins the item",
		`{argv: [xargs, -I, "{{}", grep, -e, "{{}", /var/log/app.log], stdin: "{p}"}`: "in place of {} in argv[5], where it begins the item",
		`{argv: [xargs, "-I%", timeout, "%", tar, -cf, /tmp/o, --, x], stdin: "{p}"}`: "in place of % in argv[3]",
		`{argv: [xargs, -I, "{{}", tar, -cf, /tmp/o, "{q}{{}"], stdin: "{p}"}`:        "in place of {} in argv[6]",
	} {
		_, err := template.Parse(commandTool(command))
		var te *template.Error
		if !errors.As(err, &te) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a problem %q", command, err, want)
			continue
		}
		if !strings.Contains(err.Error(), "--") {
			t.Errorf("%s: %v does not say to add --", command, err)
		}
	}
	for _, command := range []string{
		`{argv: [xargs, rm, --], stdin: "{p}"}`,
		`{argv: [xargs, -0, tar, -cf, /tmp/o, --], stdin: "{p}"}`,
		`{argv: [xargs, -0, sh, -c, 'tar -cf /tmp/o -- "$@"', --], stdin: "{p}"}`,
		`{argv: [xargs, -I, "{{}", tar, -cf, /tmp/o, --, "{{}"], stdin: "{p}"}`,
		`{argv: [xargs, -I, "{{}", grep, "-e{{}", /var/log/app.log], stdin: "{p}"}`,
		`{argv: [xargs, -I, "{{}", cp, "--target-directory=/tmp/{{}", --, a], stdin: "{p}"}`,
		`{argv: [xargs, kubectl, exec, pod, --, tar, czf, "-", --], stdin: "{p}"}`,
		`{argv: [xargs, tar, -cf, /tmp/o], stdin: "fixed"}`,
		`{argv: [xargs], stdin: "{p}"}`,
	} {
		if _, err := template.Parse(commandTool(command)); err != nil {
			t.Errorf("%s: %v", command, err)
		}
	}
}

// The reviewer's run: the template as it was saved before, called with words that make
// tar run a command. It is refused now; with "--" the same words are file names.
func TestXargsTarCheckpointRefused(t *testing.T) {
	t.Parallel()
	needTar(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	out := filepath.Join(dir, "out.tar")
	words := `--checkpoint=1 "--checkpoint-action=exec=touch ` + marker + `" /etc/hostname`
	// Refused when saved; were it saved, the call below would have run touch.
	if tpl, err := template.Parse(commandTool(`{argv: [xargs, tar, -cf, ` + out + `], stdin: "{p}"}`)); err == nil {
		t.Error("the template was saved")
		call(t, tpl, "t", map[string]any{"p": words})
		noMarker(t, marker)
	}
	// As one stored by an older release, it is still read for what it says (where its
	// tools send their arguments), never to run: Parse refuses it at connect.
	if _, err := template.ParseWith(commandTool(`{argv: [xargs, tar, -cf, `+out+`], stdin: "{p}"}`), template.ParseOptions{SkipCodeChecks: true}); err != nil {
		t.Errorf("ParseWith SkipCodeChecks: %v", err)
	}
	// Ended by "--", the same words are file names.
	tpl := mustParse(t, commandTool(`{argv: [xargs, tar, -cf, `+out+`, --], stdin: "{p}"}`))
	res := call(t, tpl, "t", map[string]any{"p": words})
	noMarker(t, marker)
	if !res.IsError || !strings.Contains(res.Text, "--checkpoint=1") {
		t.Errorf("got %+v, want tar failing on a file named --checkpoint=1", res)
	}
	// Legitimate input still goes through.
	res = call(t, tpl, "t", map[string]any{"p": "/etc/hostname"})
	if res.IsError {
		t.Fatalf("got %+v", res)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("no archive: %v", err)
	}
	// With -I, a line that starts with '-' lands after "--".
	tplI := mustParse(t, commandTool(`{argv: [xargs, -I, "{{}", tar, -cf, `+out+`, --, "{{}"], stdin: "{p}"}`))
	res = call(t, tplI, "t", map[string]any{"p": "--checkpoint-action=exec=touch " + marker})
	noMarker(t, marker)
	if !res.IsError {
		t.Errorf("got %+v, want tar failing on a missing file", res)
	}
	// A value may not bring -I's string into an item before "--", where the line would
	// begin it.
	tplQ := mustParse(t, commandTool(`{argv: [xargs, -I, "{{}", tar, "{q}", `+out+`, --, "{{}"], stdin: "{p}"}`))
	res = call(t, tplQ, "t", map[string]any{"q": "{}", "p": "--checkpoint-action=exec=touch " + marker})
	noMarker(t, marker)
	if !res.IsError || !strings.Contains(res.Text, `argument "q"`) {
		t.Errorf("got %+v, want q refused", res)
	}
}

// A literal "--" counts only for the program that finally runs: one that ends env's
// options, or that a launcher hands over to its child program, leaves the child reading
// options.
func TestDashesOfAnotherProgram(t *testing.T) {
	t.Parallel()
	needTar(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	value := "--use-compress-program=touch " + marker + ";cat"
	out := filepath.Join(dir, "out2.tar")
	tpl := mustParse(t, `tools:
  - name: env
    input_schema: {type: object, properties: {path: {type: string}}}
    command: {argv: [env, --, tar, -cf, `+out+`, "{path}", /etc/hostname]}
  - name: env_ended
    input_schema: {type: object, properties: {path: {type: string}}}
    command: {argv: [env, --, tar, -cf, `+out+`, --, "{path}"]}
  - name: nice
    input_schema: {type: object, properties: {path: {type: string}}}
    command: {argv: [nice, --, tar, -cf, `+out+`, "{path}"]}
  - name: launched
    input_schema: {type: object, properties: {path: {type: string}}}
    command: {argv: [env, -i, --, env, --, tar, -cf, `+out+`, "{path}"]}
  - name: sh_zero
    input_schema: {type: object, properties: {path: {type: string}}}
    command: {argv: [sh, -c, 'printf "%s\n" "$1"', --, "{path}"]}
  - name: plain
    input_schema: {type: object, properties: {path: {type: string}}}
    command: {argv: [tar, -cf, `+out+`, --, "{path}"]}
`)
	for _, tool := range []string{"env", "nice", "launched"} {
		res := call(t, tpl, tool, map[string]any{"path": value})
		noMarker(t, marker)
		if !res.IsError || !strings.Contains(res.Text, `argument "path" starts with '-'`) || !strings.Contains(res.Text, "tar") {
			t.Errorf("%s: got %+v, want a refusal naming tar", tool, res)
		}
	}
	for _, tool := range []string{"env_ended", "plain"} {
		res := call(t, tpl, tool, map[string]any{"path": value})
		noMarker(t, marker)
		if !res.IsError || strings.Contains(res.Text, "refused") {
			t.Errorf("%s: got %+v, want tar failing on a missing file", tool, res)
		}
		if res := call(t, tpl, tool, map[string]any{"path": "/etc/hostname"}); res.IsError {
			t.Errorf("%s: got %+v", tool, res)
		}
	}
	if res := call(t, tpl, "sh_zero", map[string]any{"path": "-x"}); res.IsError || res.Text != "-x\n" {
		t.Errorf("sh -c … -- value: got %+v", res)
	}
}

// The shapes of launchers: a "--" that hands the items after it to another program
// does not end that program's options. The programs are named by paths that do not
// exist (they are known by their base name): a refusal comes before anything would run,
// and a value let through fails to start.
func TestDashesOfLaunchers(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, `tools:
  - name: kubectl
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [no-such-kubectl-tw, exec, pod, --, tar, czf, "-", "{p}"]}
  - name: kubectl_ended
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [no-such-kubectl-tw, exec, pod, --, tar, czf, "-", --, "{p}"]}
  - name: sudo
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [/nonexistent-tw/sudo, --, tar, czf, "-", "{p}"]}
  - name: npm
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [/nonexistent-tw/npm, run, build, --, "{p}"]}
  - name: npm_ended
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [/nonexistent-tw/npm, run, build, --, --, "{p}"]}
  - name: cargo
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [/nonexistent-tw/cargo, run, --release, --, "{p}"]}
  - name: yarn
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [/nonexistent-tw/yarn, build, --, "{p}"]}
  - name: git
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [/nonexistent-tw/git, log, --, "{p}"]}
  - name: git_after
    input_schema: {type: object, properties: {p: {type: string}}}
    command: {argv: [/nonexistent-tw/git, diff, --, a.txt, "{p}"]}
`)
	for _, tool := range []string{"kubectl", "sudo", "npm", "cargo", "yarn"} {
		if res := call(t, tpl, tool, map[string]any{"p": "--use-compress-program=x"}); !res.IsError || !strings.Contains(res.Text, "starts with '-'") {
			t.Errorf("%s: got %+v, want a refusal", tool, res)
		}
	}
	for tool, want := range map[string]string{
		"npm":       "put a second literal -- after it",
		"kubectl":   "tar follows a literal -- of no-such-kubectl-tw",
		"git_after": "put the value right after that --",
	} {
		if res := call(t, tpl, tool, map[string]any{"p": "-x"}); !strings.Contains(res.Text, want) {
			t.Errorf("%s: got %+v, want it to say %q", tool, res, want)
		}
	}
	// Past the child's own "--", the value goes to the program (which is missing here,
	// or fails): it is not refused.
	for _, tool := range []string{"kubectl_ended", "npm_ended", "git"} {
		if res := call(t, tpl, tool, map[string]any{"p": "--x"}); strings.Contains(res.Text, "refused") {
			t.Errorf("%s: got %+v, want it let through", tool, res)
		}
	}
}
