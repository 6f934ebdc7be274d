package builtin

import (
	"regexp"
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
	{"runs as root (sudo)", re(`(^|[;&|(\s])sudo\b`)},
	{"pipes a download into a shell (curl … | sh)", re(`\b(curl|wget|fetch)\b[^;&\n]*\|\s*(sudo\s+)?(\S*/)?(ba|z|da|k|fi)?sh\b`)},
	{"makes a file system (mkfs)", re(`\bmkfs(\.\w+)?\b`)},
	{"writes raw blocks (dd of=)", re(`\bdd\b[^;&|\n]*\bof=`)},
	{"changes permissions recursively (chmod -R)", re(`\bchmod\s+(\S+\s+)*(-[a-zA-Z]*R[a-zA-Z]*|--recursive)\b`)},
	{"force-pushes (git push --force)", re(`\bgit\b[^;&|\n]*\bpush\b[^;&|\n]*(\s--force(-with-lease)?\b|\s-[a-zA-Z]*f[a-zA-Z]*\b|\s\+\S+)`)},
	{"writes to a device file", deviceWrite},
	{"builds the command it runs (eval, or a command word made by $(…) or `…`)", re("(^|[;&|(\\n])\\s*(eval\\b|\\$\\(|`)")},
}

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
	segments = regexp.MustCompile(`[;&|\n()]+`)
	devWrite = regexp.MustCompile(`(>>?|\bof=|\btee\s+(-a\s+)?)\s*/dev/([A-Za-z0-9_/.-]+)`)
)

// rmRecursiveForce finds an rm given both -r (or -R, --recursive) and -f (--force).
func rmRecursiveForce(cmd string) bool {
	for _, seg := range segments.Split(cmd, -1) {
		f := strings.Fields(seg)
		for i, w := range f {
			if w != "rm" && !strings.HasSuffix(w, "/rm") {
				continue
			}
			var rec, force bool
			for _, a := range f[i+1:] {
				switch {
				case a == "--recursive":
					rec = true
				case a == "--force":
					force = true
				case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--"):
					rec = rec || strings.ContainsAny(a, "rR")
					force = force || strings.Contains(a, "f")
				}
			}
			if rec && force {
				return true
			}
		}
	}
	return false
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

// CommandRisk is the risk a command line's text carries: HIGH and why when a rule
// matches, ok false otherwise.
func CommandRisk(cmd string) (risk.Level, string, bool) {
	var whys []string
	plain := unquoted(cmd)
	for _, r := range commandRules {
		if r.match(cmd) || r.match(plain) {
			whys = append(whys, r.why)
		}
	}
	if len(whys) == 0 {
		return "", "", false
	}
	return risk.High, "the command " + strings.Join(whys, "; "), true
}
