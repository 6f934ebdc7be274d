#!/usr/bin/env bash
# Copies the front-end libraries pinned in package.json from node_modules/
# into static/vendor/, which is committed so that a plain Go build needs no Node.
# Run through `make vendor`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [[ ! -d node_modules ]]; then
	command -v npm >/dev/null 2>&1 || {
		echo "vendor: npm not found: install Node.js and npm (Debian: apt-get install npm)" >&2
		exit 1
	}
	echo "vendor: node_modules missing, running npm ci"
	npm ci --no-audit --no-fund
fi

out=static/vendor
mkdir -p "$out"

# copy SRC DST: fail loudly if the package layout changed.
copy() {
	if [[ ! -f "$1" ]]; then
		echo "vendor: $1 not found (package layout changed? run npm ci)" >&2
		exit 1
	fi
	install -m 0644 "$1" "$2"
	echo "vendor: $1 -> $2"
}

# first_of FILE...: prints the first file that exists.
first_of() {
	local f
	for f in "$@"; do
		if [[ -f "$f" ]]; then
			echo "$f"
			return 0
		fi
	done
	echo "$1"
}

nm=node_modules

copy "$nm/htmx.org/dist/htmx.min.js" "$out/htmx.min.js"
copy "$nm/htmx.org/LICENSE" "$out/htmx.org.LICENSE"

copy "$(first_of "$nm/htmx-ext-ws/dist/ws.min.js" "$nm/htmx-ext-ws/dist/ws.js" "$nm/htmx-ext-ws/ws.js")" \
	"$out/htmx-ext-ws.min.js"
copy "$nm/htmx-ext-ws/LICENSE" "$out/htmx-ext-ws.LICENSE"

copy "$nm/@xterm/xterm/lib/xterm.js" "$out/xterm.js"
copy "$nm/@xterm/xterm/css/xterm.css" "$out/xterm.css"
copy "$nm/@xterm/xterm/LICENSE" "$out/xterm.LICENSE"
copy "$nm/@xterm/addon-fit/lib/addon-fit.js" "$out/xterm-addon-fit.js"
copy "$nm/@xterm/addon-fit/LICENSE" "$out/xterm-addon-fit.LICENSE"

# Record the versions that were copied, so a reviewer sees them in the diff.
node -e '
const fs = require("fs");
const pkgs = Object.keys(require("./package.json").dependencies).sort();
const lines = pkgs.map(p => p + " " + require("./node_modules/" + p + "/package.json").version);
fs.writeFileSync("static/vendor/VERSIONS", lines.join("\n") + "\n");
'
echo "vendor: wrote $out/VERSIONS"
