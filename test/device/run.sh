#!/usr/bin/env bash
# The whole test suite (and a quick GPU bench) in ONE runtime on the GPU machine (issue 5).
# test/device/prepare.sh fills .device/carry here; copy the repository to the GPU machine together
# with .device/carry/RUNTIME, .device/carry/vitest, .device/carry/embree4 and .device/carry/bench
# (they are git-ignored), then run there, from the repository root, within about 9 minutes:
#
#   bash test/device/run.sh RUNTIME        (RUNTIME: bun, deno or node)
#
# 1. unpacks the carried runtime under /tmp/memlife-device and links it where test/all.ts and
#    bench/main.ts look (node_modules/.bin/bun, node_modules/@deno/linux-x64-glibc/deno,
#    node_modules/.bin/node; koffi and vitest with its dependencies are unpacked into
#    node_modules). A runtime or vitest already in node_modules is used as it is.
# 2. Embree 4 (Debian 13's libembree4-4 + TBB 2022): EMBREE_LIBRARY and LD_LIBRARY_PATH point at
#    the carried copy (where glibc < 2.38 it cannot load: then the system's Embree is used, said so).
# 3. an ICD vendors folder with NVIDIA's libnvidia-opencl.so.1 (when found) and the system's .icd
#    files (PoCL), through OCL_ICD_VENDORS.
# 4. passes, each under `timeout`, each skipped with its reason when its platform is absent:
#      nvidia  MEMLIFE_OPENCL_PLATFORM=NVIDIA    the whole suite (test/all.ts --runtime=RUNTIME)
#      pocl    MEMLIFE_OPENCL_PLATFORM=Portable  the whole suite
#      bench   bench/main.ts --quick --filter=buffer on NVIDIA (create+release, destructor
#              callbacks; C baseline = .device/carry/bench/baseline where there is no cc)
#      bench-pocl  the same on PoCL (not in the default set; for trying the bench pass elsewhere)
#    test/all.ts is run by the carried runtime itself (no Node needed on the machine), and runs
#    vitest (node_modules/vitest/vitest.mjs) with that runtime, one process per spec file.
# Logs go to $OUT (6 files: env.txt, tests-nvidia.txt, tests-pocl.txt, bench-nvidia.txt,
# bench-nvidia.json, summary.txt); the summary (counts, failing tests, skips) is printed last.
# Time: MEMLIFE_DEVICE_BUDGET_S (default 480 s) for everything; MEMLIFE_DEVICE_PASSES picks passes
# (default "nvidia pocl bench"); MEMLIFE_DEVICE_BENCH_SET="" benches with the default sample set;
# MEMLIFE_DEVICE_TEST_FILTER runs only the spec files whose name contains it, or one of its
# comma-separated parts (test/all.ts --filter);
# MEMLIFE_DEVICE_BENCH_FILTER picks the bench cases (default "buffer"; "pipeline" for issue 13's).
set -uo pipefail
cd "$(dirname "$0")/../.."

rt=${1:-}
case $rt in bun | deno | node) ;; *) echo "usage: bash test/device/run.sh bun|deno|node" >&2; exit 2 ;; esac
out=${OUT:-/tmp/memlife-device-out}
mkdir -p "$out"
carry=.device/carry
base=/tmp/memlife-device
budget=${MEMLIFE_DEVICE_BUDGET_S:-480}
passes=${MEMLIFE_DEVICE_PASSES:-nvidia pocl bench}
# The bench's sample set: --quick by default; MEMLIFE_DEVICE_BENCH_SET= (empty) for the default set.
bench_set=${MEMLIFE_DEVICE_BENCH_SET---quick}
bench_filter=${MEMLIFE_DEVICE_BENCH_FILTER:-buffer}
summary=$out/summary.txt
: > "$summary"
note() { echo "run.sh: $*" | tee -a "$summary"; }
left() { echo $((budget - SECONDS)); }
export DENO_NO_UPDATE_CHECK=1 NO_COLOR=1 DENO_DIR=$base/deno-dir

# Decompresses an .xz file without needing xz(1): Ubuntu images may lack xz-utils, python3 has lzma.
unxz_to() {
  if command -v xz >/dev/null; then xz -dc "$1" > "$2"
  else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 20)' "$1" "$2"
  fi
}
# unxz_to_dir ARCHIVE.tar.xz DIR
untar_xz() { unxz_to "$1" "$base/tmp.tar" && tar -C "$2" -xf "$base/tmp.tar" && rm -f "$base/tmp.tar"; }

mkdir -p "$base"

# ---- 1. the runtime ---------------------------------------------------------------------------
case $rt in
bun) link=node_modules/.bin/bun ;;
deno) link=node_modules/@deno/linux-x64-glibc/deno ;;
node) link=node_modules/.bin/node ;;
esac
real=$(readlink -f "$link" 2>/dev/null || true)
if [ -x "$link" ] && [ "${real#"$base"/}" = "$real" ]; then
  note "$rt: using $link from node_modules as it is"
else
  [ -f "$carry/$rt/$rt.xz" ] || { note "$carry/$rt/$rt.xz missing: carry .device/carry/$rt (test/device/prepare.sh $rt)"; exit 2; }
  mkdir -p "$base/$rt" "$(dirname "$link")"
  t0=$SECONDS
  unxz_to "$carry/$rt/$rt.xz" "$base/$rt/$rt" && chmod +x "$base/$rt/$rt" || { note "could not unpack $rt"; exit 2; }
  ln -sfn "$base/$rt/$rt" "$link"
  note "$rt: unpacked to $base/$rt/$rt ($((SECONDS - t0)) s), linked as $link"
fi
if [ "$rt" = node ] && [ ! -d node_modules/koffi ]; then
  [ -f "$carry/node/koffi.tar.xz" ] || { note "$carry/node/koffi.tar.xz missing"; exit 2; }
  untar_xz "$carry/node/koffi.tar.xz" node_modules && note "koffi: unpacked into node_modules"
fi
# one.sh (MEMLIFE_DEVICE_SETUP_ONLY=1) runs a fixture, without vitest; the bench passes need none
# either, which leaves Bun's 37 MiB room in one call's 64 MiB.
case " $passes " in *" nvidia "* | *" pocl "*) needs_vitest=1 ;; *) needs_vitest= ;; esac
if [ "${MEMLIFE_DEVICE_SETUP_ONLY:-}" != 1 ] && [ -n "$needs_vitest" ] && [ ! -f node_modules/vitest/vitest.mjs ]; then
  [ -f "$carry/vitest/vitest.tar.xz" ] || { note "$carry/vitest/vitest.tar.xz missing: carry .device/carry/vitest (test/device/prepare.sh vitest)"; exit 2; }
  untar_xz "$carry/vitest/vitest.tar.xz" node_modules && note "vitest: unpacked into node_modules ($(grep -m1 '"version"' node_modules/vitest/package.json | tr -d ' ,'))"
fi
case $rt in
bun) run_rt=("$link") ;;
deno) run_rt=("$link" run -A --no-lock) ;;
node) run_rt=("$link") ;;
esac
rt_version=$("$link" --version 2>&1 | head -1)
note "$rt: $rt_version"

# ---- 2. Embree 4 ------------------------------------------------------------------------------
e4=$base/embree4
e4lib=$e4/usr/lib/x86_64-linux-gnu
if [ -f "$carry/embree4/embree4.tar.xz" ]; then
  rm -rf "$e4" && mkdir -p "$e4" && untar_xz "$carry/embree4/embree4.tar.xz" "$e4"
  if [ -f "$e4lib/libembree4.so.4" ] && [ -e "$e4lib/libtbb.so.12" ] && [ -e "$e4lib/libtbbmalloc.so.2" ]; then
    glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
    if [ "$(printf '%s\n2.38\n' "$glibc" | sort -V | head -1)" = 2.38 ]; then
      export EMBREE_LIBRARY=$e4lib/libembree4.so.4
      export LD_LIBRARY_PATH=$e4lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      note "Embree 4: EMBREE_LIBRARY=$EMBREE_LIBRARY ($(tr '\n' ' ' < "$e4/VERSIONS"))"
    else
      note "Embree 4: layout OK ($(cd "$e4lib" && ls | tr '\n' ' ')) but glibc $glibc < 2.38 cannot load it: EMBREE_LIBRARY left unset (system Embree)"
    fi
  else
    note "Embree 4: unexpected layout in $e4: $(find "$e4" | tr '\n' ' ')"
  fi
else
  note "Embree 4: $carry/embree4/embree4.tar.xz not carried: system Embree"
fi

# ---- 3. OpenCL ICDs: NVIDIA + the system's (PoCL) ---------------------------------------------
vendors=$base/vendors
rm -rf "$vendors" && mkdir -p "$vendors"
cp /etc/OpenCL/vendors/*.icd "$vendors"/ 2>/dev/null
ldc() { PATH="$PATH:/sbin:/usr/sbin" ldconfig -p; }
if ldc | grep -q 'libnvidia-opencl\.so\.1 '; then
  echo libnvidia-opencl.so.1 > "$vendors/nvidia.icd"
else
  f=$(find /usr/local/nvidia /usr/lib /lib /opt -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
  [ -n "$f" ] && echo "$f" > "$vendors/nvidia.icd"
fi
export OCL_ICD_VENDORS=$vendors
# The machine sets OCL_ICD_FILENAMES=libpocl.so.2:libnvidia-opencl.so.1, and the ICD loader cuts
# that variable at its first ':' in place (in the process's own environment) while it enumerates
# platforms: children of Deno and Node, which pass the live environment on, then saw PoCL only
# (measured 2026-11-23). OCL_ICD_VENDORS names both drivers, so the variable is not needed.
# The loader dlopen finds first there is CUDA's libOpenCL.so.1, which reads OCL_ICD_FILENAMES only;
# the distribution's ocl-icd reads the OCL_ICD_VENDORS folder: memlife is pointed at it.
if [ -z "${OPENCL_LIBRARY:-}" ]; then
  for f in /lib/x86_64-linux-gnu/libOpenCL.so.1 /usr/lib/x86_64-linux-gnu/libOpenCL.so.1; do
    [ -e "$f" ] && { export OPENCL_LIBRARY=$f; note "OPENCL_LIBRARY=$f (the distribution's ICD loader)"; break; }
  done
fi
[ -n "${OCL_ICD_FILENAMES:-}" ] && note "unset OCL_ICD_FILENAMES=$OCL_ICD_FILENAMES (OCL_ICD_VENDORS names the drivers)"
unset OCL_ICD_FILENAMES
note "ICDs: $(for f in "$vendors"/*.icd; do [ -e "$f" ] && printf '%s=%s ' "$(basename "$f")" "$(cat "$f")"; done)"
[ -e "$vendors/nvidia.icd" ] || note "no NVIDIA OpenCL driver (libnvidia-opencl.so.1) on this machine"

# ---- environment ------------------------------------------------------------------------------
{
  echo "== $(date -u +%FT%TZ) $(uname -srm)"
  grep PRETTY_NAME /etc/os-release
  ldd --version 2>&1 | head -1
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  echo "runtime: $rt_version ($link -> $(readlink -f "$link"))"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "OCL_ICD_VENDORS=$OCL_ICD_VENDORS EMBREE_LIBRARY=${EMBREE_LIBRARY:-}"
  echo "== ldconfig (OpenCL, Embree, TBB, hwloc, libstdc++)"
  ldc | grep -E 'libOpenCL|nvidia-opencl|pocl|embree|libtbb|hwloc|libstdc\+\+' | sed 's/^\s*/  /'
  stdcxx=$(ldc | awk '/libstdc\+\+\.so\.6 /{print $NF; exit}')
  echo "libstdc++ $stdcxx: $(grep -aoE 'GLIBCXX_3\.4\.[0-9]+' "$stdcxx" 2>/dev/null | sort -Vu | tail -1) (Embree 4 needs GLIBCXX_3.4.32)"
  command -v cc gcc xz python3 2>/dev/null | sed 's/^/  have /'
  echo "== $rt test/device/info.ts"
  timeout -k 5 60 "${run_rt[@]}" test/device/info.ts 2>&1
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

# Sourced by test/device/one.sh with MEMLIFE_DEVICE_SETUP_ONLY=1: the set-up above, no passes.
if [ "${MEMLIFE_DEVICE_SETUP_ONLY:-}" = 1 ]; then return 0 2>/dev/null || exit 0; fi

# ---- 4. passes ----------------------------------------------------------------------------------
# Prints the last `N passed, N failed` line, the per-file lines and every failing or skipped test.
digest() {
  local log=$1
  grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1 | sed 's/^/  total: /'
  grep -E '^(ok  |FAIL) (bun |deno|node) ' "$log" | sed 's/^/  /'
  # Failing tests, with the first two lines of their error; skips with their reason.
  awk '/^    FAIL /{print "    " substr($0, 5); n=2; next} n>0 && /^        /{print "      " substr($0, 9); n--; next} {n=0} /^    (skip |!! )/{print "    " substr($0, 5)}' "$log" | cut -c1-300
}

tests_pass() { # NAME PLATFORM
  local name=$1 platform=$2 log=$out/tests-$1.txt limit
  limit=$(($(left) - 20))
  [ "$name" = nvidia ] && case " $passes " in *" pocl "*) limit=$((limit - 150)) ;; esac
  case " $passes " in *" bench "*) limit=$((limit - 70)) ;; esac
  if [ "$limit" -lt 60 ]; then note "pass $name: SKIPPED, only $(left) s of the budget left"; return; fi
  MEMLIFE_OPENCL_PLATFORM=$platform timeout -k 5 60 "${run_rt[@]}" test/device/info.ts --require-platform="$platform" > "$log.info" 2>&1
  local rc=$?
  if [ $rc -eq 3 ]; then
    note "pass $name (MEMLIFE_OPENCL_PLATFORM=$platform): SKIPPED, no OpenCL platform matches \"$platform\" here"
    cat "$log.info" > "$log"; rm -f "$log.info"
    return
  fi
  { echo "== pass $name: MEMLIFE_OPENCL_PLATFORM=$platform $rt test/all.ts --runtime=$rt (limit ${limit} s)"; cat "$log.info"; } > "$log"
  rm -f "$log.info"
  local t0=$SECONDS
  MEMLIFE_OPENCL_PLATFORM=$platform timeout -k 10 "$limit" "${run_rt[@]}" test/all.ts --runtime="$rt" --timeout=150 \
    ${MEMLIFE_DEVICE_TEST_FILTER:+--filter="$MEMLIFE_DEVICE_TEST_FILTER"} >> "$log" 2>&1
  rc=$?
  note "pass $name (MEMLIFE_OPENCL_PLATFORM=$platform, Embree ${EMBREE_LIBRARY:+4 }${EMBREE_LIBRARY:-system}): exit $rc$([ $rc -eq 124 ] && echo ", KILLED at its ${limit} s limit") in $((SECONDS - t0)) s"
  digest "$log" | tee -a "$summary"
}

bench_pass() { # NAME PLATFORM
  local name=$1 platform=$2 log=$out/bench-$1.txt limit=$(($(left) - 15))
  if [ ! -f bench/main.ts ]; then note "bench: no bench/main.ts"; return; fi
  if ! grep -q -- '--quick' bench/main.ts || ! grep -q -- '--runtime' bench/main.ts; then note "bench: bench/main.ts lacks --quick/--runtime"; return; fi
  if [ "$limit" -lt 40 ]; then note "bench $name: SKIPPED, only $(left) s of the budget left"; return; fi
  if ! MEMLIFE_OPENCL_PLATFORM=$platform timeout -k 5 60 "${run_rt[@]}" test/device/info.ts --require-platform="$platform" > /dev/null 2>&1; then
    note "bench $name: SKIPPED, no OpenCL platform matches \"$platform\" here"; return
  fi
  if ! command -v cc >/dev/null && ! command -v gcc >/dev/null && [ ! -x bench/baseline ] && [ -x "$carry/bench/baseline" ]; then
    cp "$carry/bench/baseline" bench/baseline && note "bench: no C compiler here, using the carried bench/baseline"
  fi
  local before t0=$SECONDS rc
  before=$(ls bench/results/history 2>/dev/null)
  { echo "== bench $name: MEMLIFE_OPENCL_PLATFORM=$platform $rt bench/main.ts --runtime=$rt $bench_set --filter=$bench_filter --no-install (limit ${limit} s)"
    MEMLIFE_OPENCL_PLATFORM=$platform timeout -k 5 "$limit" "${run_rt[@]}" bench/main.ts --runtime="$rt" $bench_set --filter="$bench_filter" --no-install --timeout=$((limit - 10)) 2>&1
  } > "$log"
  rc=$?
  note "bench $name (MEMLIFE_OPENCL_PLATFORM=$platform, ${bench_set:-default set} --filter=$bench_filter): exit $rc in $((SECONDS - t0)) s"
  for f in $(ls bench/results/history 2>/dev/null); do
    case $'\n'"$before"$'\n' in
    *$'\n'"$f"$'\n'*) ;;
    *.gz) gzip -dc "bench/results/history/$f" > "$out/bench-$name.json" ;;
    *) cp "bench/results/history/$f" "$out/bench-$name.json" ;;
    esac
  done
  # The table (no PyOpenCL rows, no blank lines) and the target checks.
  grep -E '^(case |buffer |svm |embree | +(C|[a-z]+ raw|[a-z]+ memlife) |[0-9]+ of [0-9]+ target|- missed)' "$log" | cut -c1-150 | head -40 | sed 's/^/  /' | tee -a "$summary"
}

for p in $passes; do
  case $p in
  nvidia) tests_pass nvidia NVIDIA ;;
  pocl) tests_pass pocl Portable ;;
  bench) bench_pass nvidia NVIDIA ;;
  bench-pocl) bench_pass pocl Portable ;;
  *) note "unknown pass $p" ;;
  esac
done

echo
echo "==================== summary ($rt, $((SECONDS)) s) ===================="
cat "$summary"
