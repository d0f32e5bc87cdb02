#!/usr/bin/env bash
# tools/mongo-test-server/install.sh: install the MongoDB-wire test server
# (server.mjs) into this folder's node_modules/, offline after the first
# run.  Called by scripts/deps; costs nothing when already installed.
#
# Two steps, both pinned:
#   1. `npm ci` (tools/npm-ci.sh) installs CongoDB's runtime
#      dependencies exactly as package-lock.json says (with
#      --ignore-scripts: nothing downloads a binary);
#   2. `npm pack @push.rocks/smartmongo@2.2.0` fetches the package that
#      ships CongoDB, its sha512 is checked against the registry's
#      integrity recorded below, and only its dist_ts/congodb is unpacked
#      into node_modules/@push.rocks/smartmongo.  The package's own
#      dependencies (mongodb-memory-server, which downloads mongod from
#      the internet, and smartdata) are not installed: CongoDB does not
#      use them, and several of their versions are not on the registry.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
cd "$here"
pkg=@push.rocks/smartmongo
version=2.2.0
integrity='sha512-ovVCNoJ3D0aBuKtoKaQWWQKvBngaGJq9fAPQigzji1EHsS1XyGpXWCpe5nq/ptGvBROOcpqZcOFEGAcrnb+OjA=='
stamp=node_modules/.dlock-mongo-test-server-$version

if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then
    exit 0
fi
"$here/../npm-ci.sh" "$here" mongo-test-server "CongoDB's dependencies"
log=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$log" "$work"' EXIT
if ! (cd "$work" && npm pack "$pkg@$version" >"$log" 2>&1); then
    cat "$log" >&2
    echo "mongo-test-server: npm pack $pkg@$version failed" >&2
    exit 1
fi
tarball=$(ls "$work"/*.tgz)
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
    echo "mongo-test-server: $pkg@$version integrity mismatch:" \
         "expected $integrity, got $got" >&2
    exit 1
fi
dest=node_modules/$pkg
rm -rf "$dest"
mkdir -p "$dest"
tar -xzf "$tarball" -C "$dest" --strip-components=1 \
    package/package.json package/license package/dist_ts/congodb
touch "$stamp"
echo "mongo-test-server: installed CongoDB from $pkg@$version"
