package builtin

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
)

// Common destructive forms the rules missed (find -delete, rm *, shred, truncate, git
// reset --hard, an interpreter's one-liner calling rmtree, …) are HIGH, by any path and
// through the wrappers and quoting the other rules see through; look-alikes that delete
// nothing stay unrated. A rule-like text an echo prints (echo find . -delete) is rated as
// the command it spells, as echo "rm -rf x" is: the rules read words, not which word
// runs, and reading too much only raises the level.
func TestCommandRiskDestructiveForms(t *testing.T) {
	t.Parallel()
	checkCommandRisk(t, []riskCase{
		// find and xargs deleting what they find or list.
		{`find . -delete`, "find -delete"},
		{`find ~ -exec rm {} +`, "find -exec rm"},
		{`find . -name '*.log' -execdir /bin/rm -f {} \;`, "find -exec rm"},
		{`find . -type f -ok shred -u {} ';'`, "find -exec rm"},
		{`sudo /usr/bin/find / -mtime +30 -delete`, "find -delete"},
		{`find . -exec sh -c 'rm "$0"' {} \;`, "find -exec rm"},
		{`find . -print0 | xargs -0 rm -f`, "xargs rm"},
		{`ls | nice xargs -I{} /bin/unlink {}`, "xargs rm"},
		{`echo find . -delete`, "find -delete"},
		{`echo "find -delete"`, "find -delete"},
		{`find . -name '*.go'`, ""},
		{`find . -type f -exec grep -l TODO {} +`, ""},
		{`ls | xargs wc -l`, ""},

		// rm given a wildcard.
		{`rm *`, "wildcard"},
		{`rm -- *.log`, "wildcard"},
		{`"rm" ~/notes/*`, "wildcard"},
		{`r''m x?.txt`, "wildcard"},
		{`env rm data[0-9].csv`, "wildcard"},
		{`rm notes.txt`, ""},
		{`rm -f x`, ""},
		{`ls *.txt`, ""},

		// shred and truncate.
		{`shred -u notes.txt`, "shred, truncate"},
		{`/usr/bin/shred notes.txt`, "shred, truncate"},
		{`sudo shred -zu x`, "shred, truncate"},
		{`nice -n 19 shred x`, "shred, truncate"},
		{`$'shred' x`, "shred, truncate"},
		{`{shred,x}`, "shred, truncate"},
		{`truncate -s0 db.sqlite`, "shred, truncate"},
		{`truncate -s 0 db.sqlite`, "shred, truncate"},
		{`truncate --size=0 db.sqlite`, "shred, truncate"},
		{`truncate -r empty db.sqlite`, "shred, truncate"},
		{`tru''ncate -s 0 x`, "shred, truncate"},
		{`cat truncate.txt`, ""},
		{`cat shred.log`, ""},
		{`man shred`, ""},
		{`shred --help`, ""},
		{`grep -rn truncate .`, ""},

		// Disks.
		{`wipefs -a /dev/sdb`, "wipefs"},
		{`wipefs --all /dev/sdb`, "wipefs"},
		{`blkdiscard /dev/nvme0n1`, "blkdiscard"},
		{`dd if=/dev/zero of=disk.img`, "dd of="},
		{`mkfs.ext4 /dev/sdb1`, "mkfs"},
		{`wipefs /dev/sdb`, ""},

		// git discarding work.
		{`git reset --hard HEAD~5`, "git reset --hard"},
		{`git -C repo reset --har`, "git reset --hard"},
		{`git clean -fdx`, "git clean"},
		{`git clean -d --force`, "git clean"},
		{`git -c clean.requireForce=false clean -dx`, "git clean"},
		{`git push --force origin main`, "force-pushes"},
		{`git reset --soft HEAD~1`, ""},
		{`git reset HEAD notes.txt`, ""},
		{`git clean -n`, ""},
		{`git clean --dry-run -d`, ""},
		{`git commit -m clean`, ""},
		{`git log --grep reset --hard-coded`, ""},
		{`git checkout -- .`, "git checkout -- ."},
		{`git checkout -- notes.txt`, "git checkout -- ."},
		{`git checkout .`, "git checkout -- ."},
		{`git checkout -f main`, "git checkout -- ."},
		{`git checkout --force main`, "git checkout -- ."},
		{`git checkout -qf main`, "git checkout -- ."},
		{`git restore notes.txt`, "git restore"},
		{`git restore --worktree --staged .`, "git restore"},
		{`git restore -SW .`, "git restore"},
		{`git switch --discard-changes main`, "git restore"},
		{`git switch -f main`, "git restore"},
		{`git stash drop`, "git stash drop"},
		{`git stash clear`, "git stash drop"},
		{`git checkout main.go`, "git checkout -- ."},
		{`git checkout HEAD main.go`, "git checkout -- ."},
		{`git checkout HEAD~1 src/`, "git checkout -- ."},
		{`git checkout src/`, "git checkout -- ."},
		{`git checkout ./`, "git checkout -- ."},
		{`git checkout '*.go'`, "git checkout -- ."},
		{`git checkout --theirs main.go`, "git checkout -- ."},
		{`git checkout -p`, "git checkout -- ."},
		{`git diff --name-only | xargs git checkout --`, "git checkout -- ."},
		{`git checkout $(git diff --name-only)`, "git checkout -- ."},
		{"git checkout `git diff --name-only`", "git checkout -- ."},
		{`git restore -sSTABLE main.go`, "git restore"},
		{`git restore --source HEAD~2 main.go`, "git restore"},
		{`git stash -q drop`, "git stash drop"},
		{`command git checkout -- .`, "git checkout -- ."},
		{`git checkout main`, ""},
		{`git checkout -`, ""},
		{`git checkout -b feature`, ""},
		{`git checkout -bfix`, ""},
		{`git checkout -Bfeature origin/feature`, ""},
		{`git checkout --detach v1.2.3`, ""},
		{`git checkout -t origin/feature/login`, ""},
		{`git checkout feature/login`, ""},
		{`git restore --staged notes.txt`, ""},
		{`git restore -S .`, ""},
		{`git restore -S -sWIP notes.txt`, ""},
		{`git switch main`, ""},
		{`git switch -c fix`, ""},
		{`git stash`, ""},
		{`git stash pop`, ""},
		{`git stash list`, ""},
		{`git stash push -m drop`, ""},

		// Interpreters given code that deletes.
		{`python3 -c 'import shutil; shutil.rmtree("/tmp/x")'`, "code given on the command line"},
		{`/usr/bin/python3.12 -c "import os; os.remove('x')"`, "code given on the command line"},
		{`python -Bc 'import pathlib; pathlib.Path("x").unlink()'`, "code given on the command line"},
		{`perl -e 'unlink glob "*"'`, "code given on the command line"},
		{`perl -MFile::Path=rmtree -e 'rmtree("x")'`, "code given on the command line"},
		{`ruby -rfileutils -e 'FileUtils.rm_rf("x")'`, "code given on the command line"},
		{`node -e "require('fs').rmSync('x', {recursive: true})"`, "code given on the command line"},
		{`php -r 'unlink("x");'`, "code given on the command line"},
		{"python3 - <<'EOF'\nimport shutil\nshutil.rmtree('x')\nEOF", "code given on the command line"},
		{`echo 'import os; os.unlink("x")' | python3`, "code given on the command line"},
		{`python3 -c 'print(1)'`, ""},
		{`python3 remove_dups.py`, ""},
		{`perl -ne 'print if /x/' notes.txt`, ""},
		{`node -e 'console.log(1)'`, ""},
	})
}

// The rules rate send_input's typed lines too: a destructive form typed at a shell is
// HIGH, as run_command's is.
func TestInputRiskDestructiveForms(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"find . -delete\r", "git reset --hard\n", "shred -u x\r"} {
		if l, why, ok := InputRisk(in); !ok || l != risk.High {
			t.Errorf("%q: %v %q %v, want high", in, l, why, ok)
		}
	}
	if l, why, ok := InputRisk("git reset --soft HEAD~1\r"); ok {
		t.Errorf("git reset --soft: %v %q, want no rule", l, why)
	}
}

// commandArgs gives each word to the rule once, whatever the number of uses of the
// command on the line: before, each use was given every word after it, so a 100,000
// character line of "xargs " took the rules close to a minute to rate.
func TestCommandArgsLinear(t *testing.T) {
	t.Parallel()
	const n = 2000
	for _, tc := range []struct {
		cmd  string
		want int // the words given to f in all
	}{
		// The first 8 uses get the rest of their command, the others up to the next use.
		{strings.Repeat("rm ", n), (n - 1) + (n - 2) + (n - 3) + (n - 4) + (n - 5) + (n - 6) + (n - 7) + (n - 8)},
		{strings.Repeat("rm x ", n), 8*(2*n-1) - 2*(0+1+2+3+4+5+6+7) + (n - 8)},
		{"sudo " + strings.Repeat("/bin/rm -v x ", n) + "; rm -f y", 8*(3*n-1) - 3*(0+1+2+3+4+5+6+7) + 2*(n-8) + 2},
	} {
		got := 0
		commandArgs(tc.cmd, "rm", func(args []string) bool { got += len(args); return false })
		if got != tc.want {
			t.Errorf("%.20q…: %d words given, want %d", tc.cmd, got, tc.want)
		}
	}
	// A flag is still found whichever use it follows.
	if !rmRecursive("rm x rm y -r") || !rmRecursive("rm -r x rm y") {
		t.Error("rm -r after a second rm was missed")
	}
	// A word ending in /git after the git that runs does not hide the force from it.
	for _, c := range []string{"git push origin HEAD:refs/heads/git -f", "git push git@github.com:me/git main --force",
		"git push origin +main:refs/heads/git"} {
		if !gitForcePush(c) {
			t.Errorf("%q: not seen as a force push", c)
		}
	}
}
