#!/usr/bin/env bash
# Compile cost of one attend call (issue 18): the time `CXX -std=c++20 -O2 -c` takes for a
# translation unit holding one dynamic attn::attend call (float, scaled_dot, into caller
# buffers; bench/compile_cost/attend_one.cpp) and its object's text size, beside the same
# attention written with Eigen (bench/compile_cost/attend_eigen.cpp).
#
#   bench/compile_cost.sh [INCLUDE_DIR] [CXX]
#
#   bench/compile_cost.sh                               # this repository's include/, g++
#   bench/compile_cost.sh /path/to/old/include clang++  # another attn, another compiler
#
# INCLUDE_DIR is the directory holding attn/ (default: include/ of this repository), CXX the
# compiler (default g++). Each probe is compiled RUNS times (environment, default 5) into a
# temporary directory; the table gives the median wall time, the median CPU time (user +
# system; a wall time well above it means the compiler waited for a CPU) and the sum of the
# object's .text* sections (`size -A`: .text, .text.unlikely and each inline function's own).
# Eigen is looked for in EIGEN_DIR (default /usr/include/eigen3; Debian: apt-get install
# libeigen3-dev). Measure on an idle machine: the script warns when the 1-minute load is above
# 1.5.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
include_dir=${1:-$here/../include}
cxx=${2:-g++}
runs=${RUNS:-5}
eigen_dir=${EIGEN_DIR:-/usr/include/eigen3}
flags=(-std=c++20 -O2 -c)

die() { echo "$*" >&2; exit 2; }
[[ -f $include_dir/attn/attention.hpp ]] || die "no attn/attention.hpp in $include_dir"
[[ -f $eigen_dir/Eigen/Core ]] || die "no Eigen/Core in $eigen_dir (apt-get install libeigen3-dev)"
include_dir=$(cd "$include_dir" && pwd)

load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN { exit !(l > 1.5) }'; then
  echo "warning: load average $load > 1.5; the times will read high" >&2
fi

exec 3>&2  # the compiler's errors, while `time` writes to stderr
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median_time PROBE INCLUDE: compile RUNS times; print the median wall time and the median
# CPU time (user + system) of the compiler, in seconds
median_time() {
  local src=$1 inc=$2 i TIMEFORMAT='%R %U %S'
  : >"$tmp/times"
  for ((i = 0; i < runs; i++)); do
    { time "$cxx" "${flags[@]}" -I"$inc" "$src" -o "$tmp/probe.o" 2>"$tmp/stderr" ||
        { cat "$tmp/stderr" >&3; return 1; }; } 2>>"$tmp/times"
  done
  printf '%s | %s' "$(awk '{ print $1 }' "$tmp/times" | median)" \
    "$(awk '{ print $2 + $3 }' "$tmp/times" | median)"
}

# median: the median of the numbers on stdin, one a line, to two decimals
median() {
  sort -g | awk '{ v[NR] = $1 }
    END { printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# text_size: bytes in the .text* sections of the last object compiled
text_size() {
  size -A "$tmp/probe.o" | awk '$1 ~ /^\.text/ { s += $2 } END { print s + 0 }'
}

echo "$("$cxx" --version | head -n 1); \`${flags[*]}\`; median of $runs;" \
  "load $load; $(date -u +%Y-%m-%d)"
echo "attn: $include_dir"
echo
echo "| translation unit | wall time (s) | CPU time (s) | .text (bytes) |"
echo "|---|---:|---:|---:|"
t=$(median_time "$here/compile_cost/attend_one.cpp" "$include_dir")
echo "| one dynamic attn::attend (float, scaled_dot) | $t | $(text_size) |"
eigen_version=$(sed -n 's/^#define EIGEN_\(WORLD\|MAJOR\|MINOR\)_VERSION \([0-9]*\).*/\2/p' \
  "$eigen_dir/Eigen/src/Core/util/Macros.h" | paste -sd.)
t=$(median_time "$here/compile_cost/attend_eigen.cpp" "$eigen_dir")
echo "| the same with Eigen $eigen_version | $t | $(text_size) |"
