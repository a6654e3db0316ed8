# modules.sh - sourced by the shell wrappers of the node tests
# (tests/integration/web.sh, pprof.sh): $web is tests/web.
#
# web_modules PKG... - installs tests/web/node_modules with "npm ci" (from
# package-lock.json) unless every PKG is there already; when npm fails,
# prints its output as comments and one "not ok" line, and returns 1.
web_modules() {
	missing=""
	for m in "$@"; do
		[ -d "$web/node_modules/$m" ] || missing="$missing $m"
	done
	[ -z "$missing" ] && return 0
	log=$(mktemp) || return 1
	if ! npm ci --prefix "$web" --no-audit --no-fund --prefer-offline \
		>"$log" 2>&1; then
		sed 's/^/# /' "$log"
		rm -f "$log"
		echo "not ok - npm ci in tests/web installs$missing"
		return 1
	fi
	rm -f "$log"
}
