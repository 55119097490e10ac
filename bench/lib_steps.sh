# shellcheck shell=bash
# Sourced by bench/part_round.sh and bench/part_floor_mps.sh (and copied beside them into the
# GPU bundles): one bounded step of a round.
#
# bounded_step NAME FILE LIMIT END COMMAND...
#   runs COMMAND for at most LIMIT s and not past END (epoch seconds; 5 s are kept for the
#   kill), its stdout and stderr into FILE, then prints FILE and one line "## NAME: rc=RC, S s"
#   ("(timeout L s)" after RC when it was killed). With less than 5 s left it runs nothing and
#   says so. Sets STEP_RC (the command's exit status; 0 when not run); returns 0.
bounded_step() {
  local name=$1 file=$2 limit=$3 end=$4
  shift 4
  local t0
  t0=$(date +%s)
  local left=$(( end - t0 - 5 ))
  (( left < limit )) && limit=$left
  STEP_RC=0
  echo "## $name"
  if (( limit < 5 )); then
    echo "## $name: not run ($(( end - t0 )) s left of the round's budget)"
    : > "$file"
    return 0
  fi
  timeout -k 5 "$limit" "$@" > "$file" 2>&1
  STEP_RC=$?
  cat "$file"
  echo "## $name: rc=$STEP_RC$( (( STEP_RC == 124 || STEP_RC == 137 )) && echo " (timeout ${limit} s)"), $(( $(date +%s) - t0 )) s"
  return 0
}
