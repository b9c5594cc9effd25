# Sourced by the Go builds of the test tools (hack/control-plane/build.sh: kwok).
#
# go_aligned_build REFERENCE DIR NAME GO-BUILD-ARGS...: `go build GO-BUILD-ARGS` in the wrapper
# module DIR, with every module it shares with the module REFERENCE (the test cluster's Kubernetes
# wrapper module) at an older version raised to REFERENCE's. Go's build cache is keyed by a
# package's source, flags and its dependencies' builds (and, with -trimpath, by the selected
# version of its module), so the packages both use (client-go, apimachinery, api, ...) then come
# from the cache instead of being compiled a second time. Only raised, never lowered: a module the
# tool needs newer than Kubernetes has keeps the tool's version (and what depends on it is
# compiled again). If the raised build fails (an API the tool uses changed), the tool is built
# with its own versions, as published; without REFERENCE, likewise.
# GO_BUILD_WRAP (an array: nice, /usr/bin/time) is put before `go build` when set.
go_aligned_build() {
  local reference=$1 dir=$2 name=$3 raises
  shift 3
  local wrap=("${GO_BUILD_WRAP[@]+"${GO_BUILD_WRAP[@]}"}")
  if [ -f "$reference/go.mod" ]; then
    # Each side's modules as "path version" (the reference's as replaced: its staging modules);
    # joined by path, those older in DIR become -require flags.
    raises="$(LC_ALL=C join \
      <(cd "$reference" && go list -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all | LC_ALL=C sort) \
      <(cd "$dir" && go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all | LC_ALL=C sort) \
      | while read -r path theirs ours; do
          [ "$theirs" != "$ours" ] || continue
          newer="$(printf '%s\n%s\n' "$theirs" "$ours" | sort -V | tail -n 1)"
          if [ "$newer" = "$theirs" ]; then printf -- '-require=%s@%s\n' "$path" "$theirs"; fi
        done)" || raises=""
    if [ -n "$raises" ]; then
      cp "$dir/go.mod" "$dir/go.mod.published"
      cp "$dir/go.sum" "$dir/go.sum.published"
      # shellcheck disable=SC2086 # one -require flag per line
      (cd "$dir" && go mod edit $raises)
      printf '[go-align] %s: %s modules raised to the versions of %s\n' "$name" "$(wc -l <<<"$raises")" "$reference" >&2
      if (cd "$dir" && "${wrap[@]}" go build -mod=mod "$@" 2>"$dir/aligned-build.log"); then
        grep -F 'wall ' "$dir/aligned-build.log" >&2 || true
        return 0
      fi
      tail -n 20 "$dir/aligned-build.log" >&2
      printf '[go-align] %s does not build with those versions (above); building it with its own\n' "$name" >&2
      mv "$dir/go.mod.published" "$dir/go.mod"
      mv "$dir/go.sum.published" "$dir/go.sum"
    fi
  fi
  (cd "$dir" && "${wrap[@]}" go build "$@")
}
