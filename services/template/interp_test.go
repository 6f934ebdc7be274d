package template_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/template"
)

// commandTool is a template of one tool t with properties p and q and the command given.
func commandTool(command string) string {
	return "tools:\n  - name: t\n    input_schema: {type: object, properties: {p: {type: string}, q: {type: string}}}\n    command: " + command + "\n"
}

// A placeholder in the code a shell or interpreter runs is refused when the template is
// saved, through wrappers and wherever the interpreter is named; the problem names the
// argv item (or stdin) and shows the safe form.
func TestInterpreterCodeRefused(t *testing.T) {
	t.Parallel()
	for command, want := range map[string]string{
		`{argv: [sh, -c, "grep {p} /var/log/app.log"]}`:           "argv[2] is shell code that sh runs with -c",
		`{argv: [/bin/bash, -euo, pipefail, -c, "echo {p}"]}`:     "argv[4] is shell code that bash runs with -c",
		`{argv: [bash, -c, "echo {p}", bash, "{q}"]}`:             "argv[2] is shell code",
		`{argv: [zsh, -lc, "echo {p}"]}`:                          "argv[2] is shell code",
		`{argv: [sh, -c, "{p}"]}`:                                 "argv[2] is shell code",
		`{argv: [python3, -c, "print('{p}')"]}`:                   "argv[2] is Python code that python3 runs",
		`{argv: [python3.12, -Ic, "print('{p}')"]}`:               "argv[2] is Python code",
		`{argv: [perl, -ne, "print if /{p}/", /var/log/app.log]}`: "argv[2] is Perl code",
		`{argv: [perl, "-e print '{p}'"]}`:                        "argv[1] is Perl code",
		`{argv: [ruby, -e, "puts '{p}'"]}`:                        "argv[2] is Ruby code",
		`{argv: [node, -e, "console.log('{p}')"]}`:                "argv[2] is JavaScript code",
		`{argv: [node, "--eval={p}"]}`:                            "argv[1] is JavaScript code",
		`{argv: [php, -r, "echo '{p}';"]}`:                        "argv[2] is PHP code",
		`{argv: [awk, "/{p}/ {print}", /var/log/app.log]}`:        "argv[1] is awk code",
		`{argv: [sed, -n, "/{p}/p", /var/log/app.log]}`:           "argv[2] is sed code",
		`{argv: [sed, -e, "s/a/{p}/"]}`:                           "argv[2] is sed code",
		`{argv: [pwsh, -NoProfile, -Command, Get-Item, "{p}"]}`:   "argv[4] is part of the PowerShell code",
		`{argv: [ssh, -p, "22", host.example, ls, "{p}"]}`:        "argv[5] is remote shell code",
		// ssh options that run local code: ProxyCommand, a config file, a PKCS#11 library.
		`{argv: [ssh, -o, "{p}", host.example, uptime]}`:                                    "argv[2] is the value of an option of ssh that can make it run a local command",
		`{argv: [ssh, "-o{p}", host.example, uptime]}`:                                      "argv[1] is the value of an option of ssh that can make it run a local command",
		`{argv: [ssh, -F, "{p}", host.example, uptime]}`:                                    "argv[2] is the value of an option of ssh",
		`{argv: [ssh, -I, "{p}", host.example, uptime]}`:                                    "argv[2] is the value of an option of ssh",
		`{argv: [ssh, -p, "{port}", -o, "ProxyCommand={p}", host.example, uptime]}`:         "argv[4] is the value of an option of ssh",
		`{argv: [find, /etc/hostname, -exec, ssh, -o, "ProxyCommand={p}", h, "true", ";"]}`: "argv[5] is the value of an option of ssh",
		`{argv: [docker, exec, app, ssh, -o, "ProxyCommand={p}", h, uptime]}`:               "argv[5] is the value of an option of ssh",
		`{argv: [su, app, -c, "ls {p}"]}`:                                                   "argv[3] is shell code",
		`{argv: [env, sh, -c, "echo {p}"]}`:                                                 "argv[3] is shell code",
		`{argv: [env, -i, "A={q}", sh, -c, "echo {p}"]}`:                                    "argv[5] is shell code",
		`{argv: [env, -S, "sh -c", "echo {p}"]}`:                                            "argv[3] is shell code",
		`{argv: [timeout, 5, sh, -c, "echo {p}"]}`:                                          "argv[4] is shell code",
		`{argv: [timeout, -s, KILL, "{q}", bash, -c, "echo {p}"]}`:                          "argv[6] is shell code",
		`{argv: [nice, -n, "10", nohup, stdbuf, -oL, sh, -c, "echo {p}"]}`:                  "argv[8] is shell code",
		`{argv: [xargs, -0, sh, -c, "echo {p}"]}`:                                           "argv[4] is shell code",
		`{argv: [busybox, sh, -c, "echo {p}"]}`:                                             "argv[3] is shell code",
		`{argv: [flock, /tmp/l, -c, "echo {p}"]}`:                                           "argv[3] is the shell line flock runs with -c",
		`{argv: [docker, exec, app, sh, -c, "ls {p}"]}`:                                     "argv[5] is shell code",
		`{argv: [find, /srv, -name, x, -exec, sh, -c, "echo {p}", ";"]}`:                    "argv[7] is shell code",
		`{argv: [sh], stdin: "{p}"}`:                                                        "stdin is the program sh reads and runs",
		`{argv: [bash, -s, --, x], stdin: "echo {p}"}`:                                      "stdin is the program bash reads and runs",
		`{argv: [python3, "-"], stdin: "{p}"}`:                                              "stdin is the program python3 reads",
		`{argv: [sh, /dev/stdin], stdin: "{p}"}`:                                            "stdin is the program sh reads",
		`{argv: [ssh, host.example], stdin: "{p}"}`:                                         "stdin is read as commands by the remote shell",
		`{argv: [xargs, -I, "{{}", sh, -c, "echo {{}"], stdin: "{p}"}`:                      "stdin goes to xargs, which puts each of its lines in place of {}",
		`{argv: [xargs, sh, -c], stdin: "{p}"}`:                                             "stdin goes to xargs, whose first word of it becomes the shell code",
		// env -S's line under xargs still gets xargs's input.
		`{argv: [xargs, -I, "{{}", env, -S, "sh -c", "echo {{}"], stdin: "{p}"}`: "stdin goes to xargs, which puts each of its lines in place of {}",
		`{argv: [xargs, env, -S, "sh -c"], stdin: "{p}"}`:                        "stdin goes to xargs, whose first word of it becomes the shell code",
		// Under xargs, its input's words are added to ssh's remote line; a wrapper left with
		// no program runs the first word; -I's string may not name the program.
		`{argv: [xargs, ssh, host.example, ls], stdin: "{p}"}`:                  "stdin goes to xargs, which adds its words to the command line of ssh",
		`{argv: [xargs, ssh], stdin: "{p}"}`:                                    "stdin goes to xargs, which adds its words to the command line of ssh",
		`{argv: [xargs, -I, "{{}", ssh, host.example, "ls {{}"], stdin: "{p}"}`: "stdin goes to xargs, which puts each of its lines in place of {} in argv[5] of ssh",
		`{argv: [xargs, env], stdin: "{p}"}`:                                    "stdin goes to xargs, whose first word of it becomes the program",
		`{argv: [xargs, timeout, "5"], stdin: "{p}"}`:                           "stdin goes to xargs, whose first word of it becomes the program",
		`{argv: [xargs, -I, "{{}", "{{}"], stdin: "{p}"}`:                       "in place of {} in argv[3], the program that runs",
		`{argv: [xargs, -I, "{{}", env, -S, "{{}"], stdin: "{p}"}`:              "in place of {} in argv[5], the command line env -S splits",
		`{argv: [xargs, -I, "{q}", sh, -c, "echo x"], stdin: "{p}"}`:            "argv[2] is the string xargs -I replaces",
		`{argv: [xargs, "-I{q}", sh, -c, "echo x"], stdin: "{p}"}`:              "argv[1] is among the options of xargs",
		// A placeholder in env -S's value, or where it could be -S, is a command line.
		`{argv: [env, "-S{p}"]}`:                                                 "argv[1] is among the options of env",
		`{argv: [env, "--split-string={p}"]}`:                                    "argv[1] is among the options of env",
		`{argv: [env, -i, "-{p}", ls]}`:                                          "argv[2] is among the options of env",
		`{argv: [R, --vanilla], stdin: "{p}"}`:                                   "stdin is the program R reads and runs",
		`{argv: [/usr/bin/R, --no-save, -q], stdin: "{p}"}`:                      "stdin is the program R reads and runs",
		`{argv: [R, -d, "{p}"]}`:                                                 "argv[2] names the code R runs",
		`{argv: [ssh, -p, "22", -o, BatchMode=yes, host.example], stdin: "{p}"}`: "stdin is read as commands by the remote shell",
		`{argv: [sh, "{p}"]}`:                                                    "argv[1] names the script sh runs",
		`{argv: [python3, -m, "{p}"]}`:                                           "argv[2] names the code python3 runs",
		`{argv: [sh, "-{p}", x]}`:                                                "argv[1] is among the options of sh",
		`{argv: [env, "{p}", x]}`:                                                "argv[1] is the program env runs and cannot have placeholders",
		`{argv: [timeout, 5, "{p}"]}`:                                            "argv[2] is the program timeout runs",
		`{argv: [xargs, "{p}"]}`:                                                 "argv[1] is the program xargs runs",
		// Elsewhere in argv, an interpreter followed by its code options is checked.
		`{argv: [docker, exec, app, bash, -l, -c, "ls {p}"]}`:           "argv[6] is shell code that bash runs",
		`{argv: [kubectl, exec, pod, --, perl, -ne, "print if /{p}/"]}`: "argv[6] is Perl code that perl runs",
		`{argv: [docker, exec, app, su, app, -c, "ls {p}"]}`:            "argv[6] is shell code that su runs",
		`{argv: [find, /srv, -exec, awk, -e, "/{p}/", "{{}", ";"]}`:     "argv[5] is awk code",
		// A shell's rc file is code it runs; the script after it is still the program.
		`{argv: [bash, --rcfile, "{p}", -i]}`:                       "argv[2] names the code bash runs",
		`{argv: [bash, "--init-file={p}"]}`:                         "argv[1] names the code bash runs",
		`{argv: [bash, --rcfile, /etc/rc, "{p}"]}`:                  "argv[3] names the script bash runs",
		`{argv: [bash, --init-file, /etc/rc], stdin: "{p}"}`:        "stdin is the program bash reads and runs",
		`{argv: [xargs, sh], stdin: "{p}"}`:                         "stdin goes to xargs, whose first word of it becomes the script sh runs",
		`{argv: [xargs, env, -S, sh], stdin: "{p}"}`:                "stdin goes to xargs, whose first word of it becomes the script sh runs",
		`{argv: [xargs, -0, python3, -u], stdin: "{p}"}`:            "stdin goes to xargs, whose first word of it becomes the script python3 runs",
		`{argv: [xargs, -I, "{{}", sh, "{{}"], stdin: "{p}"}`:       "in place of {} in argv[4], which names the code sh runs",
		`{argv: [xargs, -I, "{{}", ruby, -r, "{{}"], stdin: "{p}"}`: "in place of {} in argv[5], which names the code ruby runs",
		// Under xargs, a word starting with '-' is an option where one is still read.
		`{argv: [xargs, perl, -e, 'print "@ARGV"'], stdin: "{p}"}`: "stdin goes to xargs, which adds its words after the items of perl",
		`{argv: [xargs, bash, -s], stdin: "{p}"}`:                  "stdin goes to xargs, which adds its words after the items of bash",
		`{argv: [xargs, sed, -n, 's/a/b/p'], stdin: "{p}"}`:        "stdin goes to xargs, which adds its words after the items of sed",
		`{argv: [xargs, su, app, -c, 'echo "$@"'], stdin: "{p}"}`:  "stdin goes to xargs, which adds its words after the items of su",
		// PowerShell reads its code from stdin with -Command -, -File -, or neither.
		`{argv: [pwsh, -Command, "-"], stdin: "{p}"}`:                  "stdin is the program pwsh reads and runs (-Command -)",
		`{argv: [pwsh, -NoProfile, -File, "-"], stdin: "{p}"}`:         "stdin is the program pwsh reads and runs (-File -)",
		`{argv: [pwsh], stdin: "{p}"}`:                                 "stdin is read as commands by pwsh",
		`{argv: [pwsh, -NoProfile, -NonInteractive], stdin: "{p}"}`:    "stdin is read as commands by pwsh",
		`{argv: [pwsh, -File, "{p}"]}`:                                 "argv[2] names the script pwsh runs",
		`{argv: [pwsh, "{p}"]}`:                                        "argv[1] is among the options of pwsh",
		`{argv: [xargs, pwsh, -Command, Get-Item], stdin: "{p}"}`:      "stdin goes to xargs, which adds its words to the PowerShell code pwsh runs",
		`{argv: [xargs, pwsh], stdin: "{p}"}`:                          "given no -File or -Command",
		`{argv: [xargs, -I, "{{}", pwsh, -File, "{{}"], stdin: "{p}"}`: "in place of {} in argv[5], which names the script pwsh runs",
	} {
		_, err := template.Parse(commandTool(command))
		var te *template.Error
		if !errors.As(err, &te) {
			t.Errorf("%s: got %v, want a problem %q", command, err, want)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a problem %q", command, err, want)
		}
		// Shell code points to the positional-parameter form.
		if strings.Contains(want, "shell code") && !strings.Contains(want, "remote") && !strings.Contains(err.Error(), `'grep -e "$1" /var/log/app.log', sh, "{pattern}"]`) {
			t.Errorf("%s: %v does not show the safe form", command, err)
		}
	}
}

// Values as separate items after the code, code options elsewhere, and placeholders
// that are data to the program (awk -v, a timeout's duration, a script's arguments)
// are accepted.
func TestInterpreterDataAccepted(t *testing.T) {
	t.Parallel()
	for _, command := range []string{
		`{argv: [sh, -c, 'grep -e "$1" /var/log/app.log', sh, "{p}"]}`,
		`{argv: [bash, -euc, 'printf "%s\n" "$@"', bash, "{p}", "{q}"]}`,
		`{argv: [sh, -c, 'cat | wc -w'], stdin: "{p}"}`,
		`{argv: [sh, /opt/tools/report.sh, "{p}"]}`,
		`{argv: [python3, -c, 'import sys; print(sys.argv[1])', "{p}"]}`,
		`{argv: [python3, /opt/tools/report.py, --name, "{p}"], stdin: "{q}"}`,
		`{argv: [perl, -e, 'print $ARGV[0]', "{p}"]}`,
		`{argv: [node, -e, 'console.log(process.argv[1])', "{p}"]}`,
		`{argv: [awk, -v, "pat={p}", '$0 ~ pat', /var/log/app.log]}`,
		`{argv: [awk, -F, "{q}", '{print $1}', /var/log/app.log]}`,
		`{argv: [sed, --sandbox, -n, "/{p}/p", /var/log/app.log]}`,
		`{argv: [sed, -n, 's/a/b/p'], stdin: "{p}"}`,
		`{argv: [timeout, "{q}", sh, -c, 'echo "$1"', sh, "{p}"]}`,
		`{argv: [env, "LANG={q}", sh, -c, 'echo "$1"', sh, "{p}"]}`,
		`{argv: [xargs, -0, sh, -c, 'echo "$@"', --], stdin: "{p}"}`,
		`{argv: [grep, -e, "{p}", /var/log/app.log]}`,
		`{argv: [wc, -w], stdin: "{p}"}`,
		`{argv: [which, python3, "{p}"]}`,
		`{argv: [ssh, host.example, 'read -r p; grep -e "$p" /var/log/app.log'], stdin: "{p}"}`,
		`{argv: [pwsh, -File, /opt/s.ps1, "{p}"]}`,
		`{argv: [sh], stdin: "echo fixed"}`,
		`{argv: [xargs], stdin: "{p}"}`,
		`{argv: [xargs, -0, -n, "1"], stdin: "{p}"}`,
		`{argv: [xargs, -I, "{{}", grep, "-e{{}", /var/log/app.log], stdin: "{p}"}`,
		`{argv: [env, "-u{q}", "-C/tmp", "A={p}", ls]}`,
		`{argv: [timeout, "-s{q}", "5", ls]}`,
		`{argv: [xargs, -I, "{{}", env, -S, "sh -c", 'echo "$1"', --, "{{}"], stdin: "{p}"}`,
		`{argv: [R, -f, /opt/tools/report.R], stdin: "{p}"}`,
		`{argv: [R, --vanilla, --file=/opt/tools/report.R], stdin: "{p}"}`,
		`{argv: [R, -e, 'cat(readLines(file("stdin")))'], stdin: "{p}"}`,
		`{argv: [Rscript, /opt/tools/report.R, "{q}"], stdin: "{p}"}`,
		`{argv: [Rscript, -e, 'cat(commandArgs(TRUE)[1])', "{q}"], stdin: "{p}"}`,
		// An interpreter's name elsewhere in argv is data unless its code options follow.
		`{argv: [journalctl, -u, ssh, -n, "{q}", --grep, "{p}"]}`,
		`{argv: [grep, -rn, awk, "{p}"]}`,
		`{argv: [ls, -l, /usr/bin/sed, "{p}"]}`,
		`{argv: [grep, -rn, sh, "{p}", /srv]}`,
		`{argv: [systemctl, status, python3, "{p}"]}`,
		`{argv: [pgrep, -f, perl, "{p}"]}`,
		`{argv: [bash, --rcfile, /etc/rc, /opt/tools/report.sh, "{p}"]}`,
		// Under xargs: the code or script written out, its options ended.
		`{argv: [xargs, perl, -e, 'print "@ARGV"', --], stdin: "{p}"}`,
		`{argv: [xargs, bash, -s, --], stdin: "{p}"}`,
		`{argv: [xargs, sed, -n, 's/a/b/p', --], stdin: "{p}"}`,
		`{argv: [xargs, python3, /opt/tools/report.py, --], stdin: "{p}"}`,
		`{argv: [xargs, sh, /opt/tools/report.sh, --], stdin: "{p}"}`,
		`{argv: [xargs, -I, "{{}", sh, /opt/tools/report.sh, --, "{{}"], stdin: "{p}"}`,
		`{argv: [xargs, pwsh, -File, /opt/s.ps1, --], stdin: "{p}"}`,
		`{argv: [pwsh, -File, /opt/s.ps1], stdin: "{p}"}`,
		`{argv: [pwsh, -NoProfile, -Command, '$input | Measure-Object'], stdin: "{p}"}`,
	} {
		if _, err := template.Parse(commandTool(command)); err != nil {
			t.Errorf("%s: %v", command, err)
		}
	}
}

// The safe form keeps a hostile value data: the shell gets it as $1, never as code.
func TestShellPositionalStaysData(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	tpl := mustParse(t, commandTool(`{argv: [sh, -c, 'printf "%s\n" "$1"', sh, "{p}"]}`))
	for _, v := range hostile {
		if strings.HasPrefix(v, "-") {
			continue
		}
		if res := call(t, tpl, "t", map[string]any{"p": v}); res.IsError || res.Text != v+"\n" {
			t.Errorf("%q: got %+v", v, res)
		}
	}
}

// With "--" as $0, a value starting with '-' goes through as $1.
func TestShellDashDashAsZero(t *testing.T) {
	t.Parallel()
	tpl := mustParse(t, commandTool(`{argv: [sh, -c, 'printf "%s\n" "$1"', --, "{p}"]}`))
	if res := call(t, tpl, "t", map[string]any{"p": "-rf; id"}); res.IsError || res.Text != "-rf; id\n" {
		t.Errorf("got %+v", res)
	}
}

// ParseWith SkipCodeChecks reads a template that breaks the code rules (as one stored by
// an older release may), for what it says; Parse still refuses it.
func TestParseSkipCodeChecks(t *testing.T) {
	t.Parallel()
	text := commandTool(`{argv: [sh, -c, "curl -H 'Authorization: Bearer {p}' https://h.example/x"]}`)
	if _, err := template.Parse(text); err == nil || !strings.Contains(err.Error(), "argv[2] is shell code") {
		t.Fatalf("Parse: %v", err)
	}
	tpl, err := template.ParseWith(text, template.ParseOptions{SkipCodeChecks: true})
	if err != nil || len(tpl.Tools) != 1 || tpl.Tools[0].Command == nil {
		t.Fatalf("ParseWith: %v", err)
	}
	// Other rules still hold.
	if _, err := template.ParseWith(commandTool(`{argv: ["{p}"]}`), template.ParseOptions{SkipCodeChecks: true}); err == nil {
		t.Fatal("a placeholder as the program was accepted")
	}
}
