#!/usr/bin/env bash
# Makes sure the tools that `make run` (mode "run") or `make test` (mode "test")
# need are on this machine, installing Debian packages when running as root.
# Idempotent, and quiet and fast when everything is already there.
#
#   scripts/setup.sh run    Go >= 1.26, the templ tool, PostgreSQL server binaries
#   scripts/setup.sh test   the same, plus chromium (browser tests), Node.js and the npm
#                           packages of package-lock.json (MCP reference servers, and the
#                           TypeScript SDK and Inspector CLI as conformance clients), and
#                           a C compiler (the race detector)
set -euo pipefail

mode="${1:-}"
case "$mode" in
run | test) ;;
*)
	echo "usage: $0 run|test" >&2
	exit 2
	;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

min_go_major=1
min_go_minor=26

say() { echo "setup: $*"; }
die() {
	echo "setup: error: $*" >&2
	exit 1
}

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# ---------------------------------------------------------------------------
# Go

command -v go >/dev/null 2>&1 ||
	die "Go not found on PATH: install Go >= ${min_go_major}.${min_go_minor} and put its bin directory on PATH"

gover="$(go env GOVERSION 2>/dev/null || true)" # e.g. go1.26.8, go1.27rc1
if [[ "$gover" =~ ^go([0-9]+)\.([0-9]+) ]]; then
	major="${BASH_REMATCH[1]}"
	minor="${BASH_REMATCH[2]}"
	if ((major < min_go_major || (major == min_go_major && minor < min_go_minor))); then
		die "Go ${min_go_major}.${min_go_minor} or newer is required, found $gover ($(command -v go))"
	fi
else
	die "could not read the Go version from '$(command -v go)' (go env GOVERSION printed '${gover}')"
fi

# ---------------------------------------------------------------------------
# templ (a go.mod tool dependency, run as `go tool templ`)

if ! go tool templ version >/dev/null 2>&1; then
	say "templ tool not ready: downloading Go modules and building it"
	go mod download
	go tool templ version >/dev/null ||
		die "'go tool templ version' failed; check go.mod's 'tool github.com/a-h/templ/cmd/templ' line"
fi

# ---------------------------------------------------------------------------
# Debian packages

have_postgres() {
	local bindir
	if command -v pg_config >/dev/null 2>&1; then
		bindir="$(pg_config --bindir 2>/dev/null || true)"
		if [[ -n "$bindir" && -x "$bindir/postgres" && -x "$bindir/initdb" ]]; then
			return 0
		fi
	fi
	local p
	for p in /usr/lib/postgresql/*/bin/postgres; do
		[[ -x "$p" ]] && return 0
	done
	return 1
}

have_chromium() {
	[[ -x /usr/bin/chromium ]] || command -v chromium >/dev/null 2>&1
}

# apt_candidate PKG: true when apt knows an installable version of PKG.
apt_candidate() {
	local c
	c="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')"
	[[ -n "$c" && "$c" != "(none)" ]]
}

# Wait for another apt/dpkg process (rather than failing) when the lock is held.
apt_opts=(-o DPkg::Lock::Timeout=900 -o Acquire::Retries=3)

apt_update() {
	say "running apt-get update"
	apt-get "${apt_opts[@]}" update -qq
}

apt_install() {
	command -v apt-get >/dev/null 2>&1 ||
		die "apt-get not found: install these packages with your system's package manager: $*"
	local p need_update=0
	for p in "$@"; do
		apt_candidate "$p" || need_update=1
	done
	((need_update)) && apt_update
	say "installing Debian packages: $*"
	if ! DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -q "${extra_install_opts[@]}" "$@"; then
		# Stale package lists give 404s: refresh once and retry.
		apt_update
		DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -q "${extra_install_opts[@]}" "$@"
	fi
}

# Debian's postgresql package creates and starts a system cluster (15/main on
# port 5432). Toolwarden runs its own cluster under its data dir, so stop the
# system one. Best effort: none of this may exist (containers, no systemd).
stop_system_postgres() {
	if command -v pg_lsclusters >/dev/null 2>&1 && command -v pg_ctlcluster >/dev/null 2>&1; then
		local ver name port status
		while read -r ver name port status _; do
			[[ "$status" == online* ]] || continue
			say "stopping the system PostgreSQL cluster $ver/$name (Toolwarden runs its own)"
			pg_ctlcluster "$ver" "$name" stop >/dev/null 2>&1 || true
		done < <(pg_lsclusters --no-header 2>/dev/null || true)
	fi
	if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
		systemctl disable --now postgresql >/dev/null 2>&1 || true
	elif command -v service >/dev/null 2>&1; then
		service postgresql stop >/dev/null 2>&1 || true
	fi
}

# PostgreSQL server binaries (the embedded database). Not needed when the
# caller points Toolwarden at an external server with DATABASE_URL.
if ! have_postgres; then
	if is_root; then
		extra_install_opts=(--no-install-recommends)
		apt_install postgresql
		have_postgres || die "installed 'postgresql' but still no postgres/initdb binaries under /usr/lib/postgresql/*/bin"
		stop_system_postgres
	elif [[ -n "${DATABASE_URL:-}" ]]; then
		: # an external PostgreSQL: no server binaries needed
	else
		die "PostgreSQL server binaries not found: install the Debian package 'postgresql' (sudo apt-get install postgresql) or set DATABASE_URL"
	fi
fi

# The embedded cluster runs as user postgres when Toolwarden runs as root
# (initdb and postgres refuse to run as root). Debian's package creates it.
if is_root && have_postgres && ! id -u postgres >/dev/null 2>&1; then
	say "creating system user 'postgres'"
	useradd --system --no-create-home --shell /usr/sbin/nologin postgres
fi

# Chromium for the browser tests.
if [[ "$mode" == test ]] && ! have_chromium; then
	if is_root; then
		# Plain install (with recommends: fonts and the like) so pages render
		# as they would for a person.
		extra_install_opts=()
		apt_install chromium
		have_chromium || die "installed 'chromium' but /usr/bin/chromium is still missing"
	else
		die "Chromium not found (needed by the browser tests): install the Debian package 'chromium' (sudo apt-get install chromium)"
	fi
fi

# A C compiler for the race detector (`make test-race` runs go test -race, which needs cgo;
# without a compiler on PATH, Go turns cgo off).
if [[ "$mode" == test ]]; then
	cc="$(go env CC)"
	if ! command -v "${cc%% *}" >/dev/null 2>&1; then
		if is_root; then
			extra_install_opts=(--no-install-recommends)
			apt_install gcc libc6-dev
		else
			die "no C compiler ('$cc') found (the race detector needs cgo): install the Debian package 'gcc'"
		fi
	fi
	[[ "$(go env CGO_ENABLED)" == 1 ]] ||
		die "cgo is off (CGO_ENABLED=$(go env CGO_ENABLED)); the race detector of 'make test-race' needs it: unset CGO_ENABLED"
fi

# Node.js and the MCP reference servers (@modelcontextprotocol/server-everything,
# server-filesystem and server-memory, pinned in package.json) for the MCP integration
# and confinement tests.
min_node_major=18
node_major() { node -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if [[ "$mode" == test ]]; then
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		if is_root; then
			extra_install_opts=(--no-install-recommends)
			apt_install nodejs npm
		else
			die "Node.js and npm not found (needed by the MCP integration tests): install the Debian packages 'nodejs' and 'npm'"
		fi
	fi
	if (($(node_major) < min_node_major)); then
		die "Node.js ${min_node_major} or newer is required by the MCP integration tests, found $(node --version)"
	fi
	# Every @modelcontextprotocol package pinned in package.json (the reference servers
	# everything, filesystem and memory; the conformance tests' clients sdk and
	# inspector-cli) must be installed at its pinned version; the first one missing or
	# different names itself.
	stale="$(node -e '
		const deps = require("./package.json").dependencies;
		for (const [name, pinned] of Object.entries(deps)) {
			if (!name.startsWith("@modelcontextprotocol/")) continue;
			let installed = "";
			try { installed = require("./node_modules/" + name + "/package.json").version; } catch (e) {}
			if (installed !== pinned) { process.stdout.write(name + " " + pinned); break; }
		}' 2>/dev/null || echo "the MCP reference servers")"
	if [[ -n "$stale" ]]; then
		say "installing the npm packages pinned in package-lock.json ($stale)"
		npm ci --no-audit --no-fund --loglevel=error >/dev/null ||
			die "npm ci failed: check the npm registry settings (npm config get registry)"
	fi
fi

exit 0
