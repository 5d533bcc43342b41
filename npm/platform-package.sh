#!/usr/bin/env bash
# Makes the npm package holding the native `trellis` binary of one platform:
#   npm/platform-package.sh PLATFORM BINARY OUT_DIR [VERSION]
# PLATFORM is linux-x64, linux-arm64, darwin-x64 or darwin-arm64 (npm's os-cpu); the package
# `trellis-workflows-PLATFORM` (VERSION, default the launcher's) is written to OUT_DIR/PLATFORM and
# packed there with `npm pack`; the tarball's path is printed last.
set -euo pipefail
platform="$1" binary="$2" out="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "$platform" in
  linux-x64|linux-arm64|darwin-x64|darwin-arm64) ;;
  *) echo "platform-package: unknown platform $platform" >&2; exit 2 ;;
esac
os="${platform%-*}" cpu="${platform#*-}"
version="${4:-$(node -p 'require(process.argv[1]).version' "$here/trellis-workflows/package.json")}"
dir="$out/$platform"
rm -rf "$dir"
mkdir -p "$dir/bin"
cp "$binary" "$dir/bin/trellis"
chmod 755 "$dir/bin/trellis"
cat > "$dir/package.json" <<JSON
{
  "name": "trellis-workflows-$platform",
  "version": "$version",
  "description": "The trellis binary for $platform (installed by trellis-workflows).",
  "license": "MIT",
  "os": ["$os"],
  "cpu": ["$cpu"],
  "files": ["bin/trellis"],
  "preferUnplugged": true
}
JSON
(cd "$dir" && npm pack --silent --pack-destination "$out" >/dev/null)
echo "$out/trellis-workflows-$platform-$version.tgz"
