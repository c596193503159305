#!/usr/bin/env bash
# The consumer test: memlife as its users get it. Packs the package (prepack emits dist/), checks
# the tarball's files against the allow-list, installs it into a fresh project in a temporary
# folder, runs every program of examples/ there on Node 24 (the pinned one), Node 22 (22.18 or
# newer, installed from npm into the temporary folder), Bun and Deno (through node_modules), with
# the real OpenCL and Embree, require()s it from CommonJS on both Nodes, and type-checks a file
# that uses the whole public API under strict compiler settings. It also checks that nothing runs
# at install (no install script or node-gyp build in the package), and runs the examples from an
# `npm install --ignore-scripts` (Node) and a `bun add` (Bun) of the tarball. Prints one line per check and a
# summary per runtime; exits 1 if any check failed.
# Last, `deno publish --dry-run` checks the JSR package (JSR itself cannot be reached from CI).
#   bash test/consumer/run.sh [--keep]     (--keep leaves the temporary folder for inspection)
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
node24=$repo/node_modules/.bin/node
bun=$repo/node_modules/.bin/bun
deno=$repo/node_modules/@deno/linux-x64-glibc/deno
tsc=$repo/node_modules/typescript/bin/tsc

tmp=$(mktemp -d "${TMPDIR:-/tmp}/memlife-consumer.XXXXXX")
[ "${1:-}" = "--keep" ] && echo "consumer: working in $tmp" || trap 'rm -rf "$tmp"' EXIT

declare -A passed failed
fails=0
check() { # check <group> <name> <command...>: runs it with a time limit, records and prints the result
  local group=$1 name=$2 log="$tmp/log.txt"
  shift 2
  if (cd "$tmp/app" && timeout 120 "$@") >"$log" 2>&1; then
    passed[$group]=$(( ${passed[$group]:-0} + 1 ))
    printf 'ok    %-8s %s: %s\n' "$group" "$name" "$(tail -n 1 "$log")"
  else
    failed[$group]=$(( ${failed[$group]:-0} + 1 ))
    fails=$((fails + 1))
    printf 'FAIL  %-8s %s\n' "$group" "$name"
    sed 's/^/        /' "$log" | tail -n 30
  fi
}

# --- the tarball ------------------------------------------------------------------------------
PATH="$repo/node_modules/.bin:$PATH" npm pack --json --pack-destination "$tmp" >"$tmp/pack.json" 2>"$tmp/pack.err" \
  || { cat "$tmp/pack.err" >&2; echo "consumer: npm pack failed"; exit 1; }
"$node24" -e '
  const [info] = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  // Runtime code, the C Bun compiles, the prebuilt ledger of Deno and Node with its sources, and
  // the documents: nothing else.
  const allowed = [/^package\.json$/, /^README\.md$/, /^LICENSE$/, /^CHANGELOG\.md$/, /^dist\/package\.json$/,
    /^dist\/(src|ffi)\/[\w/-]+\.(js|d\.ts)$/, /^dist\/ffi\/(bun-relay|ledger|event-relay|lane|deferred)\.c$/,
    /^dist\/ffi\/prebuilt\/(memlife-ledger\.c|build\.sh|linux-(x64|arm64)\/libmemlife-ledger\.so)$/];
  const required = ["package.json", "README.md", "LICENSE", "CHANGELOG.md", "dist/package.json", "dist/src/mod.js",
    "dist/src/mod.d.ts", "dist/ffi/bun.js", "dist/ffi/deno.js", "dist/ffi/node.js", "dist/ffi/bun-relay.c",
    "dist/ffi/ledger.c", "dist/ffi/event-relay.c", "dist/ffi/lane.c", "dist/ffi/deferred.c",
    "dist/ffi/prebuilt/linux-x64/libmemlife-ledger.so"];
  const paths = info.files.map((f) => f.path).sort();
  const stray = paths.filter((p) => !allowed.some((re) => re.test(p)) || /(^|\/)(test|bench|\.ci)\//.test(p));
  const missing = required.filter((p) => !paths.includes(p));
  console.log(`consumer: ${info.filename}: ${paths.length} files, ${info.size} bytes packed, ${info.unpackedSize} unpacked`);
  if (process.env.CONSUMER_LIST_FILES) for (const p of paths) console.log(`  ${p}`);
  if (stray.length || missing.length) {
    console.log(`FAIL  tarball  files outside the allow-list: ${stray.join(" ") || "none"}; missing: ${missing.join(" ") || "none"}`);
    process.exit(1);
  }
  console.log("ok    tarball  every file is on the allow-list and every required file is there");
' "$tmp/pack.json" && passed[tarball]=1 || { failed[tarball]=1; fails=$((fails + 1)); }
tarball=$(ls "$tmp"/memlife-*.tgz)
# "Nothing is compiled to install memlife": the packed package.json runs nothing at install (no
# install lifecycle script, no node-gyp build), and there is no binding.gyp to build.
tar -xOzf "$tarball" package/package.json >"$tmp/packed-package.json"
if "$node24" -e '
  const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const atInstall = ["preinstall", "install", "postinstall"].filter((s) => p.scripts && s in p.scripts);
  if (atInstall.length || p.gypfile) {
    console.log(`FAIL  tarball  runs at install: ${[...atInstall, ...(p.gypfile ? ["gypfile"] : [])].join(" ")}`);
    process.exit(1);
  }
' "$tmp/packed-package.json" && ! tar -tzf "$tarball" | grep -q 'binding\.gyp$'; then
  passed[tarball]=$(( ${passed[tarball]:-0} + 1 ))
  echo "ok    tarball  no install script, no gypfile, no binding.gyp"
else
  failed[tarball]=$(( ${failed[tarball]:-0} + 1 ))
  fails=$((fails + 1))
fi

# --- a fresh project that depends on it ----------------------------------------------------------
mkdir -p "$tmp/app" "$tmp/node22"
cp examples/*.ts test/consumer/api.ts "$tmp/app/"
cat >"$tmp/app/package.json" <<EOF
{ "name": "memlife-consumer", "private": true, "type": "module", "dependencies": { "memlife": "file:$tarball" } }
EOF
# Deno: the npm package through node_modules (what `deno add npm:memlife` sets up).
echo '{ "nodeModulesDir": "manual" }' >"$tmp/app/deno.json"
(cd "$tmp/app" && npm install --no-audit --no-fund --loglevel=error) || { echo "consumer: npm install of the tarball failed"; exit 1; }
# Node 22: the newest 22.x that npm has, as the `node` package (its binary comes from npm too).
(cd "$tmp/node22" && npm install --no-audit --no-fund --loglevel=error node@22 >/dev/null) \
  || { echo "consumer: npm install node@22 failed"; exit 1; }
node22=$tmp/node22/node_modules/.bin/node

cat >"$tmp/app/require.cjs" <<'EOF'
// CommonJS: require() of the ESM package (Node 22.12+, Bun and Deno load ESM without top-level await).
const { cl, rtc, runtime } = require("memlife");
const devices = cl.getPlatforms().flatMap((p) => p.getDevices());
const device = rtc.newDevice();
console.log(`require("memlife") on ${runtime}: ${devices.length} OpenCL device(s), Embree ${device.version.string}`);
device.release();
EOF
cat >"$tmp/app/npm-specifier.ts" <<'EOF'
import { cl, runtime } from "npm:memlife";
console.log(`npm:memlife on ${runtime}: ${cl.getPlatforms().map((p) => p.name).join(", ")}`);
EOF

examples=(destructor-callback.ts svm-free.ts embree-budget.ts)
for runner in node24 node22 bun deno; do
  case $runner in
    node24) cmd=("$node24") ;;
    node22) cmd=("$node22") ;;
    bun) cmd=("$bun") ;;
    deno) cmd=("$deno" run --allow-ffi --allow-env) ;;
  esac
  version=$("${cmd[0]}" --version | head -n 1)
  echo "consumer: $runner ($version)"
  for example in "${examples[@]}"; do check "$runner" "$example" "${cmd[@]}" "$example"; done
  check "$runner" "require()" "${cmd[@]}" require.cjs
  [ $runner = deno ] && check "$runner" "npm:memlife" "${cmd[@]}" npm-specifier.ts
done

# --- installs that run no install script ---------------------------------------------------------
# npm with --ignore-scripts: nothing runs at install, koffi's own script (which would compile only
# where no prebuilt binary fits) included, so nothing can have been compiled. Bun: `bun add`, which
# runs no dependency's script it does not trust (koffi's is blocked).
mkdir -p "$tmp/no-scripts" "$tmp/bun-add"
for dir in no-scripts bun-add; do
  cp examples/*.ts "$tmp/$dir/"
  echo "{ \"name\": \"memlife-$dir\", \"private\": true, \"type\": \"module\" }" >"$tmp/$dir/package.json"
done
(cd "$tmp/no-scripts" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "$tarball" >/dev/null) \
  || { echo "consumer: npm install --ignore-scripts of the tarball failed"; exit 1; }
(cd "$tmp/bun-add" && "$bun" add "$tarball" >/dev/null 2>&1) || { echo "consumer: bun add of the tarball failed"; exit 1; }
echo "consumer: install (npm --ignore-scripts, bun add)"
for example in "${examples[@]}"; do
  check install "npm --ignore-scripts: $example" sh -c 'cd "$1" && exec "$2" "$3"' sh "$tmp/no-scripts" "$node24" "$example"
  check install "bun add: $example" sh -c 'cd "$1" && exec "$2" "$3"' sh "$tmp/bun-add" "$bun" "$example"
done

# --- TypeScript users ----------------------------------------------------------------------------
for resolution in bundler nodenext; do
  module=esnext
  [ $resolution = nodenext ] && module=nodenext
  cat >"$tmp/app/tsconfig.$resolution.json" <<EOF
{
  "compilerOptions": {
    "strict": true, "noUncheckedIndexedAccess": true, "exactOptionalPropertyTypes": true,
    "noImplicitOverride": true, "noImplicitReturns": true, "noPropertyAccessFromIndexSignature": true,
    "noFallthroughCasesInSwitch": true, "useUnknownInCatchVariables": true, "isolatedModules": true,
    "verbatimModuleSyntax": true, "skipLibCheck": false, "noEmit": true, "types": [],
    "target": "ES2022", "lib": ["ES2023", "ESNext.Disposable"],
    "module": "$module", "moduleResolution": "$resolution"
  },
  "files": ["api.ts"]
}
EOF
  check typescript "api.ts, moduleResolution $resolution" \
    sh -c '"$0" "$1" -p "$2" --pretty false && echo "0 errors in $("$0" "$1" -p "$2" --listFilesOnly | grep -c memlife/dist) memlife declaration files"' \
    "$node24" "$tsc" "tsconfig.$resolution.json"
done

# --- JSR: what `deno publish` would upload (JSR itself is not reached) -----------------------------
if (timeout 120 "$deno" publish --dry-run --allow-dirty) >"$tmp/jsr.txt" 2>&1 \
  && ! grep -qi "warning" "$tmp/jsr.txt"; then
  passed[jsr]=1
  echo "ok    jsr      deno publish --dry-run: $(grep -c 'file:///' "$tmp/jsr.txt") files, no warning"
else
  failed[jsr]=1
  fails=$((fails + 1))
  echo "FAIL  jsr      deno publish --dry-run"
  sed 's/^/        /' "$tmp/jsr.txt" | tail -n 30
fi

echo "consumer: results"
for group in tarball node24 node22 bun deno install typescript jsr; do
  [ -n "${passed[$group]:-}${failed[$group]:-}" ] || continue
  printf '  %-10s %s passed, %s failed\n' "$group" "${passed[$group]:-0}" "${failed[$group]:-0}"
done
[ $fails -eq 0 ] && echo "consumer: all passed" || { echo "consumer: $fails failed"; exit 1; }
