#!/bin/bash
# Run a command with bubblewrap (`bwrap`) on PATH on a machine that has none and can fetch nothing (the GPU device
# machine): the team server's sandbox (dice_lsp/sandbox.py) finds bwrap through PATH, and its tests
# (tests/test_sandbox.py, among them the GPU one) need a real one.
#
#   bash bench/device/with_bwrap.sh COMMAND [ARGS...]          # from anywhere; DEBS=folder of .deb files
#
# The .deb files come from DEBS (default: .device-debs/ at the repository root, git-ignored, carried to the device
# with `carry`), filled on a machine with Debian's archive:
#   mkdir -p .device-debs && cd .device-debs && apt-get download bubblewrap libcap2 libselinux1 libpcre2-8-0
# They are unpacked with `dpkg-deb -x` (or `ar` and `tar` without dpkg) into a fresh folder; bwrap goes on PATH.
# Debian 12's bubblewrap 0.8.0 is the oldest the sandbox can use (it passes --disable-userns, new in 0.8.0); its
# binary needs glibc 2.34 (`objdump -T bwrap`: GLIBC_2.34 at most; libselinux 2.34, libcap 2.33), so the host
# needs glibc >= 2.34 (Ubuntu 22.04 and later, Debian 12 and later; not RHEL 8). Its libraries (libselinux1,
# libcap2, libpcre2-8-0) are used only where the host lacks them: then bwrap on PATH is a wrapper that sets
# LD_LIBRARY_PATH for bwrap alone (the sandbox starts it with an empty environment; nothing else sees those
# libraries). A bwrap already on PATH is used as it is (WITH_BWRAP_CARRIED=1: the carried one all the same, put
# first on PATH; how this script was tried on a machine that has bubblewrap).
#
# Running as root (the device machine), the sandbox also needs util-linux's prlimit, setpriv and nsenter: they
# are checked and named when missing. A one-line check that bwrap can make its namespaces here runs first; the
# command runs either way (the sandbox then refuses to start with its own one-line reason).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
debs=${DEBS:-$here/.device-debs}
say() { echo "with_bwrap: $*" >&2; }
[ $# -gt 0 ] || { say "usage: bash bench/device/with_bwrap.sh COMMAND [ARGS...]"; exit 2; }

if [ -z "${WITH_BWRAP_CARRIED:-}" ] && command -v bwrap >/dev/null 2>&1; then
    say "bwrap is already on PATH: $(command -v bwrap) ($(bwrap --version 2>&1 | head -1))"
else
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    if [ -n "$glibc" ] && [ "$(printf '%s\n2.34\n' "$glibc" | sort -V | head -1)" != "2.34" ]; then
        say "this host's glibc is $glibc; the carried bubblewrap (Debian 12) needs 2.34 or later"
    fi
    shopt -s nullglob
    packages=("$debs"/*.deb)
    [ ${#packages[@]} -gt 0 ] || { say "no .deb files in $debs (see the top of this script)"; exit 2; }
    prefix=$(mktemp -d "${TMPDIR:-/tmp}/with-bwrap.XXXXXX") || exit 2
    for deb in "${packages[@]}"; do
        if command -v dpkg-deb >/dev/null 2>&1; then
            dpkg-deb -x "$deb" "$prefix" || { say "cannot unpack $deb"; exit 2; }
        else  # a .deb is an ar archive holding data.tar.{xz,zst,gz}
            member=$(ar t "$deb" | grep '^data\.tar') || { say "cannot read $deb (no dpkg-deb, no ar)"; exit 2; }
            ar p "$deb" "$member" | tar -x --auto-compress -f - -C "$prefix" 2>/dev/null \
                || ar p "$deb" "$member" | tar -xJ -C "$prefix" || { say "cannot unpack $deb"; exit 2; }
        fi
    done
    real=$prefix/usr/bin/bwrap
    [ -x "$real" ] || { say "no usr/bin/bwrap in the packages of $debs"; exit 2; }
    mkdir -p "$prefix/bin"
    libs=$prefix/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu
    if ldd "$real" 2>/dev/null | grep -q "not found"; then
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$real" > "$prefix/bin/bwrap"
        chmod 755 "$prefix/bin/bwrap"
        say "the host lacks $(ldd "$real" | awk '/not found/ {print $1}' | tr '\n' ' ')- bwrap runs with the carried ones"
    else
        ln -s "$real" "$prefix/bin/bwrap"
    fi
    chmod 755 "$prefix"  # mktemp's folder is 0700
    export PATH=$prefix/bin:$PATH
    say "bwrap from $debs: $(bwrap --version 2>&1 | head -1), in $prefix"
fi

if [ "$(id -u)" = 0 ]; then
    missing=$(for tool in prlimit setpriv nsenter tee; do command -v $tool >/dev/null 2>&1 || printf '%s ' $tool; done)
    [ -z "$missing" ] || say "missing for a root server's sandbox (util-linux): $missing"
fi
if check=$(bwrap --unshare-all --unshare-user --die-with-parent --ro-bind / / true 2>&1); then
    say "bwrap makes its namespaces here"
else
    say "bwrap cannot make its namespaces here: $(echo "$check" | tail -1)"
fi
exec "$@"
