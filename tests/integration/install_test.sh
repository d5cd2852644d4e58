#!/usr/bin/env bash
# Troupe as a library dependency, as a new user meets it: `cmake --install`
# into a fresh prefix, then the README's library example, extracted from the
# README exactly as shown, built out of tree twice: with find_package(Troupe)
# and Troupe::troupe, and with pkg-config. Both programs train (1000 steps of
# Fashion-MNIST) and print "ok":true.
set -u
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit
build=$1; root=$2
tmp=$(mktemp -d)
cd "$tmp" || exit 1
trap '[ -n "${TROUPE_KEEP_LOGS:-}" ] && echo "logs in $tmp" || rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >install.log 2>&1; rc=$?
expect "cmake --install into a fresh prefix" test "$rc" = 0
expect "  installs the CMake package and troupe.pc" \
  bash -c "test -f prefix/lib/cmake/Troupe/TroupeConfig.cmake && test -f prefix/lib/pkgconfig/troupe.pc"
# The example: the first C++ block after the README's "## Library API".
awk '/^## Library API/ { section = 1 } section && /^```cpp/ { inside = 1; next }
     inside && /^```/ { exit } inside { print }' "$root/README.md" >main.cpp
expect "the README's example is there" grep -q "spawn_local_cluster" main.cpp
mkdir app
cp main.cpp app/
cat >app/CMakeLists.txt <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(troupe_user CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(Troupe REQUIRED)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE Troupe::troupe)
CMAKE
cmake -S app -B app-build -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  >configure.log 2>&1; rc=$?
expect "find_package(Troupe) configures" test "$rc" = 0
cmake --build app-build -j2 >build.log 2>&1; rc=$?
expect "the example builds against Troupe::troupe" test "$rc" = 0
[ "$rc" = 0 ] || tail -20 build.log
(cd app-build && timeout 120 ./app >run.out 2>run.log); rc=$?
expect "and runs: exit 0, \"ok\":true" \
  bash -c "test $rc = 0 && grep -q '\"ok\":true' app-build/run.out"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs troupe 2>pc.err); rc=$?
expect "pkg-config knows troupe" test "$rc" = 0
g++ -O1 main.cpp $flags -o app-pc >pc-build.log 2>&1; rc=$?
expect "the example builds with pkg-config's flags" test "$rc" = 0
[ "$rc" = 0 ] || tail -20 pc-build.log
timeout 120 ./app-pc >pc-run.out 2>pc-run.log; rc=$?
expect "and runs: exit 0, \"ok\":true" bash -c "test $rc = 0 && grep -q '\"ok\":true' pc-run.out"
echo "install_test: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
