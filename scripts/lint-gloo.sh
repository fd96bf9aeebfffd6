#!/usr/bin/env bash
# lint-gloo.sh (make lint): every Gloo collective of the engine goes through
# GlooGroup (engine/native/src/gloo_group.h), which holds the process-wide
# issue lock while it issues one (issue 39: torch 2.x's flight recorder races
# when several Gloo groups of one process issue at once). Fails when any other
# file of engine/native (src/ and tests/, .cpp .h .cu .cuh .hpp), outside
# comments:
#   - includes a c10d header other than the stores' (Store, HashStore,
#     PrefixStore, TCPStore), e.g. ProcessGroupGloo.hpp, ProcessGroup.hpp, Backend.hpp;
#   - names anything in c10d:: but those stores (c10d::ProcessGroupGloo,
#     c10d::ProcessGroup, c10d::Backend, c10d::Work, c10d::AllreduceOptions ...);
#   - names a ProcessGroup* type unqualified, or opens or aliases c10d
#     (using namespace c10d; namespace c10d { ...; namespace x = c10d;);
#   - includes gloo's own headers or calls its algorithms (gloo::allreduce ...).
# Before the tree it checks itself on a planted direct call, so a rule that
# stopped matching fails here too.
set -euo pipefail
cd "$(dirname "$0")/.."

WRAPPER=engine/native/src/gloo_group.cpp
STORES='(Store|HashStore|PrefixStore|TCPStore|TCPStoreOptions)'
RULES=(
  "#include\\s*[<\"]torch/csrc/distributed/c10d/(?!${STORES}\\.hpp[>\"])"
  "\\bc10d::(?!${STORES}\\b)"
  "\\bProcessGroup\\w*"
  "\\bnamespace\\s+c10d\\b|=\\s*(::)?c10d\\s*;"
  "#include\\s*[<\"]gloo/"
  "(?<![\\w\"/])gloo::"
)

# scan FILE...: prints FILE:LINE: CODE for every line that breaks a rule,
# comments (// to the end of the line) left out.
scan() {
  local f
  for f in "$@"; do
    [ "$f" = "$WRAPPER" ] && continue
    sed -E 's://.*$::' "$f" | grep -nP "$(IFS='|'; echo "${RULES[*]}")" | sed "s|^|$f:|" || true
  done
}

# The self-check: a planted direct collective is caught, line for line; the
# stores and comments naming ProcessGroupGloo are not.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/bad.cpp" <<'EOF'
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <gloo/allreduce.h>
void f(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, std::vector<at::Tensor>& v) {
  pg->allreduce(v)->wait();
  c10d::BroadcastOptions bo;
  gloo::AllreduceOptions o(ctx);
}
using namespace c10d;
void g(ProcessGroupGloo& pg);
EOF
cat > "$tmp/good.cpp" <<'EOF'
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
// ProcessGroupGloo's allgather moves bytes (a comment): c10d::ProcessGroupGloo
c10::intrusive_ptr<c10d::Store> s = c10::make_intrusive<c10d::HashStore>();  // c10d::Work
throw CommError("gloo: setting up rank");
EOF
want="$tmp/bad.cpp:1 $tmp/bad.cpp:2 $tmp/bad.cpp:3 $tmp/bad.cpp:5 $tmp/bad.cpp:6 $tmp/bad.cpp:8 $tmp/bad.cpp:9"
got=$(scan "$tmp/bad.cpp" "$tmp/good.cpp" | cut -d: -f1,2 | tr '\n' ' ' | sed 's/ $//')
if [ "$got" != "$want" ]; then
  echo "lint-gloo: the self-check failed: the rules flagged"
  echo "  ${got:-nothing}"
  echo "where they should flag"
  echo "  $want"
  exit 1
fi

mapfile -t files < <(git ls-files -co --exclude-standard 'engine/native/src/*' 'engine/native/tests/*' |
  grep -E '\.(cpp|h|cu|cuh|hpp)$')
# No file found is no check: fail rather than pass on nothing.
((${#files[@]})) || { echo "lint-gloo: no engine sources found (git ls-files): nothing checked"; exit 1; }
out=$(scan "${files[@]}")
if [ -n "$out" ]; then
  echo "lint-gloo: a c10d process group or a Gloo collective outside $WRAPPER;"
  echo "issue collectives through GlooGroup (engine/native/src/gloo_group.h), which takes the issue lock:"
  echo "$out"
  exit 1
fi
echo "lint-gloo: every Gloo collective goes through GlooGroup (${#files[@]} files of engine/native checked)"
