# Sourced by the Go builds of the test tools (hack/control-plane/build.sh, hack/helm/build.sh).
#
# The test cluster's Kubernetes and the tools beside it (the snapshot controller, kwok, Helm)
# share most of their dependencies (client-go, apimachinery, x/net, ...) at slightly different
# versions. Go's build cache is keyed by a package's source, flags and its dependencies' builds
# (and, with -trimpath, by the selected version of its module), so a module at another version, or
# one at the same version whose dependency differs (every client-go package depends on go-logr),
# is compiled again for each tool. Aligned, a package is compiled once: Kubernetes is built with
# each shared module at the newest version any of the tools requires (go_raise_for), and each tool
# with its modules raised to Kubernetes' (go_aligned_build). On a new machine this took the
# snapshot controller from ~350 CPU-s to 12 and kwok from 134 to 25. Versions are only ever
# raised, within what a module's go.mod allows: a build that fails raised is built as published.
#
# GO_BUILD_WRAP (an array: nice, /usr/bin/time) is put before `go build` when set.
#
# The compiler and linker collect garbage four times less often than Go's default (GOGC=400):
# building etcd on a new machine took 50 user-s instead of 62 (wall 33 s instead of 39), its
# largest process 390 MB instead of 310; GOGC=off gained 4 user-s more for 620 MB.
export GOGC="${GOGC:-400}"

# go_tool_module DIR NAME PACKAGE@VERSION: DIR (made anew) a wrapper module named for NAME whose
# tool is PACKAGE at VERSION, resolved and downloaded as `go install PACKAGE@VERSION` would (its
# log in DIR/go-get.log, whose end is printed when it fails).
go_tool_module() {
  local dir=$1 name=$2 tool=$3
  rm -rf "$dir"; mkdir -p "$dir"
  (
    cd "$dir"
    go mod init "outfit.local/tools/$name" >/dev/null 2>&1
    go get -tool "$tool" >go-get.log 2>&1 || { tail -n 30 go-get.log >&2; exit 1; }
  )
}

# go_requirements MODULE@VERSION...: the modules each one's go.mod requires, as "path version"
# lines (with Go's module graph pruning, every module its packages are built from).
go_requirements() {
  local module gomod
  for module in "$@"; do
    gomod="$(cd / && GOFLAGS=-mod=mod go mod download -json "$module" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
    [ -f "$gomod" ] || { printf '[go-align] no go.mod for %s\n' "$module" >&2; continue; }
    awk '/^require[[:space:]]*\(/ {inside = 1; next}
         inside && /^\)/ {inside = 0; next}
         inside && NF >= 2 {print $1, $2; next}
         /^require[[:space:]]+[^(]/ {print $2, $3}' "$gomod"
  done
}

# go_raises DIR < "path version" lines: the -require flags that raise the modules of the module
# DIR's build to the versions given where those are newer (one per line; none when none is).
go_raises() {
  local dir=$1
  LC_ALL=C join \
    <(LC_ALL=C sort -k1,1 -u) \
    <(cd "$dir" && go list -mod=mod -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all | LC_ALL=C sort) \
    | while read -r path theirs ours; do
        [ "$theirs" != "$ours" ] || continue
        newer="$(printf '%s\n%s\n' "$theirs" "$ours" | sort -V | tail -n 1)"
        if [ "$newer" = "$theirs" ]; then printf -- '-require=%s@%s\n' "$path" "$theirs"; fi
      done
}

# go_newest < "path version" lines: the newest version of each path, one line each.
go_newest() {
  sort -k1,1 -k2,2V | awk '{newest[$1] = $2} END {for (p in newest) print p, newest[p]}'
}

# go_raise DIR NAME FROM < "path version" lines: raises DIR's modules as go_raises says, keeping
# the published go.mod and go.sum beside (go_unraise puts them back).
go_raise() {
  local dir=$1 name=$2 from=$3 raises
  raises="$(go_raises "$dir")" || raises=""
  [ -n "$raises" ] || return 0
  if [ ! -f "$dir/go.mod.published" ]; then
    cp "$dir/go.mod" "$dir/go.mod.published"
    cp "$dir/go.sum" "$dir/go.sum.published"
  fi
  # shellcheck disable=SC2086 # one -require flag per line
  (cd "$dir" && go mod edit $raises)
  printf '[go-align] %s: %s modules raised to the versions of %s\n' "$name" "$(wc -l <<<"$raises")" "$from" >&2
}

# go_unraise DIR: DIR's go.mod and go.sum as published, if go_raise changed them.
go_unraise() {
  local dir=$1
  [ -f "$dir/go.mod.published" ] || return 0
  mv "$dir/go.mod.published" "$dir/go.mod"
  mv "$dir/go.sum.published" "$dir/go.sum"
}

# go_raise_for DIR NAME MODULE@VERSION...: raises DIR's modules to the newest version the given
# modules (the tools built beside it) require, where newer.
go_raise_for() {
  local dir=$1 name=$2
  shift 2
  go_requirements "$@" | go_newest | go_raise "$dir" "$name" "$*"
}

# go_aligned_build REFERENCE DIR NAME GO-BUILD-ARGS...: `go build GO-BUILD-ARGS` in the wrapper
# module DIR, with every module it shares with the module REFERENCE (the test cluster's Kubernetes
# wrapper module) at an older version raised to REFERENCE's. If the raised build fails (an API
# the tool uses changed), the tool is built with its own versions, as published; without
# REFERENCE, likewise.
go_aligned_build() {
  local reference=$1 dir=$2 name=$3
  shift 3
  local wrap=("${GO_BUILD_WRAP[@]+"${GO_BUILD_WRAP[@]}"}")
  if [ -f "$reference/go.mod" ]; then
    # Raised modules bring requirements of their own, which may come in older than the
    # reference's (a tool on client-go 0.29 raised to 0.37 then needs fxamacker/cbor, at the
    # version client-go asks, older than Kubernetes' wrapper has): raise again until nothing is
    # left to raise (three passes at most).
    local reference_versions before _
    reference_versions="$(cd "$reference" && go list -mod=mod -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all)"
    for _ in 1 2 3; do
      before="$(cat "$dir/go.mod")"
      go_raise "$dir" "$name" "$reference" <<<"$reference_versions"
      [ "$(cat "$dir/go.mod")" != "$before" ] || break
    done
    if [ -f "$dir/go.mod.published" ]; then
      if (cd "$dir" && "${wrap[@]}" go build -mod=mod "$@" 2>"$dir/aligned-build.log"); then
        grep -F 'wall ' "$dir/aligned-build.log" >&2 || true
        return 0
      fi
      tail -n 20 "$dir/aligned-build.log" >&2
      printf '[go-align] %s does not build with those versions (above); building it with its own\n' "$name" >&2
      go_unraise "$dir"
    fi
  fi
  (cd "$dir" && "${wrap[@]}" go build "$@")
}
