package main

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The repository root, from this package's directory.
const deployRepoRoot = "../.."

// dockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerInstruction struct {
	line int    // where it starts
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// dockerStage is a FROM and the instructions after it.
type dockerStage struct {
	image, name string
	ins         []dockerInstruction
}

func parseDockerfile(t *testing.T, p string) []dockerStage {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		stages []dockerStage
		cur    strings.Builder
		start  int
	)
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := dockerInstruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := dockerStage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Errorf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
			}
			return
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return stages
}

// goDirective is go.mod's go (or toolchain) version.
func goDirective(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployRepoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `\s+(?:go)?(\S+)\s*$`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// versionParts splits "1.26.0" into numbers; missing parts are -1.
func versionParts(v string) [3]int {
	out := [3]int{-1, -1, -1}
	for i, p := range strings.SplitN(v, ".", 3) {
		n := 0
		for _, r := range p {
			if r < '0' || r > '9' {
				break
			}
			n = n*10 + int(r-'0')
		}
		out[i] = n
	}
	return out
}

// TestDockerfile keeps the Dockerfile honest without a Docker engine (docs/deploy.md):
// its Go image is the release go.mod asks for, it builds the real main package
// statically with the version stamped, every image runs the binary it copies as a
// user that is not root with its data dir in a volume, the environment it sets is
// read by the binary, and .dockerignore leaves no source, migration or static asset
// out of the build.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(deployRepoRoot, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: want a build stage and a runtime stage, found %d stages", len(stages))
	}

	// The build stage: golang:<major.minor[.patch]>, the release go.mod's go line names.
	build := stages[0]
	m := regexp.MustCompile(`^(?:docker\.io/(?:library/)?)?golang:(\d+\.\d+(?:\.\d+)?)(?:-\S+)?$`).FindStringSubmatch(build.image)
	if m == nil {
		t.Fatalf("Dockerfile: the first stage is %q, want golang:<version>[-variant]", build.image)
	}
	image, want := versionParts(m[1]), versionParts(goDirective(t, "go"))
	if want[0] < 0 {
		t.Fatal("go.mod has no go line")
	}
	if image[0] != want[0] || image[1] != want[1] {
		t.Errorf("Dockerfile: FROM %s is Go %d.%d, but go.mod says go %d.%d: change the image's tag", build.image, image[0], image[1], want[0], want[1])
	}
	if image[2] >= 0 && image[2] < want[2] {
		t.Errorf("Dockerfile: FROM %s is older than go.mod's go %s", build.image, goDirective(t, "go"))
	}
	if tc := goDirective(t, "toolchain"); tc != "" {
		need := versionParts(tc)
		if image[0] != need[0] || image[1] != need[1] || image[2] >= 0 && image[2] < need[2] {
			t.Errorf("Dockerfile: FROM %s does not provide go.mod's toolchain go%s", build.image, tc)
		}
	}

	// A module go.mod replaces with a directory of this repository (third_party/) is
	// copied in before the modules are downloaded: go mod download reads its go.mod.
	gomod, err := os.ReadFile(filepath.Join(deployRepoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^replace \S+ => \./(\S+)`).FindAllSubmatch(gomod, -1) {
		dir, copied := string(m[1]), false
		for _, in := range build.ins {
			if in.cmd == "RUN" && strings.Contains(in.args, "go mod download") {
				break
			}
			if f := strings.Fields(in.args); in.cmd == "COPY" && len(f) > 1 && slices.ContainsFunc(f[:len(f)-1], func(src string) bool {
				return within(dir, strings.TrimSuffix(src, "/"))
			}) {
				copied = true
			}
		}
		if !copied {
			t.Errorf("Dockerfile: go.mod replaces a module with ./%s, which is not copied before go mod download", dir)
		}
	}

	// The go build command.
	var buildCmd string
	for _, in := range build.ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			buildCmd = in.args
		}
	}
	if buildCmd == "" {
		t.Fatal("Dockerfile: the build stage has no RUN ... go build")
	}
	if !strings.Contains(buildCmd, "CGO_ENABLED=0") {
		t.Error("Dockerfile: go build without CGO_ENABLED=0: the binary would not be static")
	}
	if !strings.Contains(buildCmd, "-X main.version=") {
		t.Error("Dockerfile: go build does not stamp main.version (-ldflags -X main.version=...)")
	}
	if src, err := os.ReadFile("main.go"); err != nil || !regexp.MustCompile(`(?m)^var version = `).Match(src) {
		t.Error("cmd/toolwarden/main.go has no `var version`, which the Dockerfile's -X main.version sets")
	}
	fields := strings.Fields(buildCmd)
	pkg := fields[len(fields)-1]
	out := ""
	if i := slices.Index(fields, "-o"); i >= 0 && i+1 < len(fields) {
		out = fields[i+1]
	}
	if out == "" {
		t.Error("Dockerfile: go build has no -o <path>")
	}
	if !strings.HasPrefix(pkg, "./") {
		t.Fatalf("Dockerfile: go build's last argument is %q, want a package path such as ./cmd/toolwarden", pkg)
	}
	if main, err := os.ReadFile(filepath.Join(deployRepoRoot, pkg, "main.go")); err != nil || !strings.Contains(string(main), "package main") || !strings.Contains(string(main), "func main()") {
		t.Errorf("Dockerfile: go build builds %s, which is not this repository's main package (%v)", pkg, err)
	}

	// Every image after the build stage copies that binary, runs it, not as root, with
	// the data dir in a volume.
	readsEnv := envNamesRead(t)
	for _, st := range stages[1:] {
		var copied, user, entry string
		var volumes []string
		env := map[string]string{}
		for _, in := range st.ins {
			switch in.cmd {
			case "COPY":
				f := strings.Fields(in.args)
				if slices.Contains(f, "--from="+build.name) && slices.Contains(f, out) {
					copied = f[len(f)-1]
				}
			case "USER":
				user = in.args
			case "ENTRYPOINT", "CMD":
				if in.cmd == "ENTRYPOINT" || entry == "" {
					entry += " " + in.args
				}
			case "VOLUME":
				volumes = append(volumes, strings.Fields(strings.Trim(in.args, "[]"))...)
			case "ENV":
				for _, kv := range strings.Fields(in.args) {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						t.Errorf("Dockerfile:%d: write ENV as KEY=value", in.line)
						continue
					}
					env[k] = v
				}
			}
		}
		if copied == "" {
			t.Errorf("Dockerfile: stage %s does not COPY --from=%s %s", st.name, build.name, out)
		} else if !strings.Contains(entry, `"`+copied+`"`) {
			t.Errorf("Dockerfile: stage %s copies the binary to %s, but its ENTRYPOINT is%s", st.name, copied, entry)
		}
		if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
			t.Errorf("Dockerfile: stage %s runs as %q; PostgreSQL refuses root and stdio servers should not have it: set USER", st.name, user)
		}
		for k := range env {
			if !readsEnv[k] {
				t.Errorf("Dockerfile: stage %s sets ENV %s, which toolwarden does not read", st.name, k)
			}
		}
		if dir := env["TOOLWARDEN_DATA_DIR"]; dir == "" || !slices.ContainsFunc(volumes, func(v string) bool { return within(dir, strings.Trim(v, `",`)) }) {
			t.Errorf("Dockerfile: stage %s: TOOLWARDEN_DATA_DIR=%q is not inside a VOLUME %v", st.name, dir, volumes)
		}
	}

	// .dockerignore leaves out nothing the build needs.
	ignore := readDockerignore(t)
	needed := 0
	err = filepath.WalkDir(deployRepoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(deployRepoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (rel == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		isSource := strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go")
		if isSource || rel == "go.mod" || rel == "go.sum" || strings.HasPrefix(rel, "migrations/") || strings.HasPrefix(rel, "static/") {
			needed++
			if ignore.excludes(rel) {
				t.Errorf(".dockerignore leaves out %s, which the image's build needs", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if needed < 100 {
		t.Errorf("found only %d files the build needs: is the walk in the right place?", needed)
	}
	// And it does keep out what must not go into an image.
	for _, p := range []string{".git/config", "data/secret.key", "node_modules/x/index.js", "bin/toolwarden"} {
		if !ignore.excludes(p) {
			t.Errorf(".dockerignore sends %s to the build", p)
		}
	}
}

// envNamesRead are the environment variables cmd/toolwarden reads (its non-test
// sources' TOOLWARDEN_* and DATABASE_URL literals).
func envNamesRead(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	re := regexp.MustCompile(`"(TOOLWARDEN_[A-Z0-9_]+|DATABASE_URL)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
	}
	if !names["TOOLWARDEN_DATA_DIR"] {
		t.Fatal("cmd/toolwarden reads no TOOLWARDEN_DATA_DIR: the scan of its sources is wrong")
	}
	return names
}

// dockerignore is .dockerignore's patterns, in order; a "!" pattern lets a path in
// again. Matching follows Docker's: a pattern is anchored at the context's root, path
// segments match with path.Match, "**" matches any number of segments, and a path is
// left out when it or a directory above it matches.
type dockerignore []struct {
	segs   []string
	negate bool
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployRepoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		p := path.Clean(strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/"))
		d = append(d, struct {
			segs   []string
			negate bool
		}{strings.Split(p, "/"), neg})
	}
	return d
}

func (d dockerignore) excludes(p string) bool {
	segs := strings.Split(p, "/")
	out := false
	for _, pat := range d {
		for n := 1; n <= len(segs); n++ {
			if matchSegs(pat.segs, segs[:n]) {
				out = !pat.negate
				break
			}
		}
	}
	return out
}

func matchSegs(pat, segs []string) bool {
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchSegs(pat[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, err := path.Match(pat[0], segs[0])
	return err == nil && ok && matchSegs(pat[1:], segs[1:])
}

// TestDeployFiles keeps deploy/ and docs/deploy.md honest: the environment file names
// only variables toolwarden reads, its data dir is below the unit's state directory
// (the user's home) and not the home itself, the unit turns on none of the settings
// that break the confinement of stdio servers (docs/deploy.md says why for each), and
// the files docs/deploy.md links to exist.
func TestDeployFiles(t *testing.T) {
	reads := envNamesRead(t)
	env, err := os.ReadFile(filepath.Join(deployRepoRoot, "deploy", "toolwarden.env"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(env), "\n") {
		m := regexp.MustCompile(`^#?([A-Z][A-Z0-9_]*)=(.*)$`).FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		vars[m[1]] = m[2]
		if !reads[m[1]] {
			t.Errorf("deploy/toolwarden.env sets %s, which toolwarden does not read", m[1])
		}
	}

	unit, err := os.ReadFile(filepath.Join(deployRepoRoot, "deploy", "toolwarden.service"))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			set[k] = v
		}
	}
	state := set["StateDirectory"]
	if state == "" {
		t.Fatal("deploy/toolwarden.service has no StateDirectory")
	}
	home := "/var/lib/" + state
	if dir := vars["TOOLWARDEN_DATA_DIR"]; !within(dir, home) || filepath.Clean(dir) == home {
		t.Errorf("deploy/toolwarden.env: TOOLWARDEN_DATA_DIR=%q must be below %s (the unit's state directory, the user's home), not the home itself", dir, home)
	}
	if set["ExecStart"] != "/usr/local/bin/toolwarden serve" {
		t.Errorf("deploy/toolwarden.service: ExecStart=%s", set["ExecStart"])
	}
	for _, k := range []string{"ProtectKernelTunables", "ProtectKernelLogs", "MemoryDenyWriteExecute", "SystemCallFilter", "PrivateUsers", "ProcSubset"} {
		if v, ok := set[k]; ok && v != "no" && v != "false" && v != "all" && v != "" {
			t.Errorf("deploy/toolwarden.service sets %s=%s, which breaks the confinement of stdio servers or the servers themselves (docs/deploy.md, systemd)", k, v)
		}
	}
	if v, ok := set["RestrictNamespaces"]; ok {
		got := strings.Fields(v)
		for _, ns := range []string{"user", "mnt", "pid", "ipc"} {
			if !slices.Contains(got, ns) {
				t.Errorf("deploy/toolwarden.service: RestrictNamespaces=%s leaves out %s, which the confinement of stdio servers creates", v, ns)
			}
		}
	}

	doc, err := os.ReadFile(filepath.Join(deployRepoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\((\.\./[^)#]+|[a-z]+\.md)(?:#[^)]*)?\)`).FindAllSubmatch(doc, -1)
	if len(links) < 3 {
		t.Errorf("docs/deploy.md: found %d links to files of the repository, expected the Dockerfile and deploy/", len(links))
	}
	for _, l := range links {
		if _, err := os.Stat(filepath.Join(deployRepoRoot, "docs", string(l[1]))); err != nil {
			t.Errorf("docs/deploy.md links to %s: %v", l[1], err)
		}
	}
}
