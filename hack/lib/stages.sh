# Sourced by .ci/run and hack/bench-smoke.sh: named stages with their wall times, so a slow step
# can be found in a CI log.
#
#   . hack/lib/stages.sh; stages_begin LABEL
#   stage "what runs next"       # closes the stage before it, printing its time
#   stages_end                    # closes the last stage; prints every stage's time and the total
#
# Each stage's heading and closing line carry LABEL and the UTC time.
stages_begin() {
  STAGES_LABEL=$1
  STAGES_START=$(date +%s)
  STAGES_CURRENT=
  STAGES_CURRENT_START=
  STAGES_SUMMARY=()
}

stages_close() {
  [ -n "$STAGES_CURRENT" ] || return 0
  local took=$(($(date +%s) - STAGES_CURRENT_START))
  printf '%s %s: %d s (%s)\n' "-- $STAGES_LABEL ($(date -u +%T))" "$STAGES_CURRENT" "$took" "$(stages_minutes "$took")"
  STAGES_SUMMARY+=("$(printf '%6d s  %s' "$took" "$STAGES_CURRENT")")
  STAGES_CURRENT=
}

stage() {
  stages_close
  STAGES_CURRENT=$*
  STAGES_CURRENT_START=$(date +%s)
  printf '\n== %s (%s): %s\n' "$STAGES_LABEL" "$(date -u +%T)" "$*"
}

stages_end() {
  stages_close
  local total=$(($(date +%s) - STAGES_START))
  printf '\n== %s: stage times\n' "$STAGES_LABEL"
  printf '%s\n' "${STAGES_SUMMARY[@]}"
  printf '%6d s  total (%s)\n' "$total" "$(stages_minutes "$total")"
}

stages_minutes() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }
