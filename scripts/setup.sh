#!/usr/bin/env bash
# scripts/setup.sh: create or update the local virtualenv .venv (vyre editable, with the
# wgpu, cuda, dev and distributed (Ray) extras) and make sure a Vulkan driver is present for the wgpu backend
# (Mesa's lavapipe through apt-get when none is found and we are root).
#
# Idempotent and fast when nothing changed: pip runs only when pyproject.toml, the extras,
# the Python or the checkout's location differ from the stamp in .venv. It never touches
# anything outside the repository except the system packages named below (apt-get, as root),
# and a missing Vulkan driver is reported, not fatal: the wgpu backend then reports itself
# unavailable and its tests skip with that reason.
#
# Environment: PYTHON (interpreter to build .venv from; default python3),
# VYRE_EXTRAS (default wgpu,cuda,dev,distributed; wgpu,dev,distributed on macOS), VYRE_SKIP_VULKAN=1 (skip the
# driver check), VYRE_REQUIRE_VULKAN=1 (fail if no Vulkan adapter is found).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
VPY="$VENV/bin/python"
STAMP="$VENV/.vyre-setup-stamp"
if [ "$(uname -s)" = Darwin ]; then
    EXTRAS="${VYRE_EXTRAS:-wgpu,dev,distributed}"  # cuda-bindings has no macOS wheels
else
    EXTRAS="${VYRE_EXTRAS:-wgpu,cuda,dev,distributed}"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1

log() { printf '[setup] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }
have() { command -v "$1" >/dev/null 2>&1; }
apt_ok() { is_root && have apt-get; }
apt_install() {
    # apt_install PKG...: update the index, then install; returns non-zero on failure.
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# ---------------------------------------------------------------- the interpreter
find_python() {
    local c
    for c in ${PYTHON:-} python3 python; do
        if have "$c" && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

venv_ok() {
    [ -x "$VPY" ] && "$VPY" -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1
}

make_venv() {
    local py
    py="$(find_python)" || die "Python >= 3.11 not found (set PYTHON=/path/to/python3.11)"
    log "creating $VENV with $py"
    rm -rf "$VENV"
    if "$py" -m venv "$VENV" >/dev/null 2>&1 && venv_ok; then return 0; fi
    rm -rf "$VENV"
    # Debian/Ubuntu split venv/ensurepip into python3-venv.
    if "$py" -m virtualenv --version >/dev/null 2>&1; then
        "$py" -m virtualenv -q "$VENV" && venv_ok && return 0
        rm -rf "$VENV"
    fi
    if apt_ok; then
        local ver
        ver="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
        log "python's venv module is missing; installing python${ver}-venv with apt-get"
        apt_install "python${ver}-venv" || apt_install python3-venv || true
        "$py" -m venv "$VENV" >/dev/null && venv_ok && return 0
        rm -rf "$VENV"
    fi
    die "cannot create a virtualenv with $py: install the venv module (Debian/Ubuntu: apt-get install python3-venv) or virtualenv, then re-run"
}

# One setup at a time per checkout (demo and tests started together must not race on pip).
if have flock; then
    exec 9>"${TMPDIR:-/tmp}/vyre-setup-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1).lock"
    flock 9
fi

venv_ok || make_venv

# ---------------------------------------------------------------- python packages
stamp_now="$("$VPY" - "$ROOT" "$EXTRAS" <<'EOF'
import hashlib, pathlib, sys
root, extras = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
h.update(pathlib.Path(root, "pyproject.toml").read_bytes())
h.update(f"\0{extras}\0{root}\0{sys.version}".encode())
print(h.hexdigest())
EOF
)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$stamp_now" ] && [ -x "$VENV/bin/vyre" ] \
    && "$VPY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("vyre") is None)' >/dev/null 2>&1; then
    log "python packages up to date ($VENV)"
else
    log "installing vyre and extras [$EXTRAS] into $VENV (pip)"
    rm -f "$STAMP"
    "$VPY" -m pip install -q --upgrade pip
    "$VPY" -m pip install -q -e ".[$EXTRAS]" || die "pip install -e .[$EXTRAS] failed (see above)"
    printf '%s\n' "$stamp_now" >"$STAMP"
    log "python packages installed"
fi

# ---------------------------------------------------------------- Vulkan driver
if [ "${VYRE_SKIP_VULKAN:-0}" = 1 ]; then
    exit 0
fi
vulkan_check() { "$VPY" "$ROOT/scripts/check_vulkan.py" 2>/dev/null; }
if msg="$(vulkan_check)"; then
    log "Vulkan: $msg"
    exit 0
fi
log "no Vulkan adapter: $msg"
if apt_ok; then
    log "installing Mesa's Vulkan driver (mesa-vulkan-drivers, lavapipe) with apt-get"
    if apt_install mesa-vulkan-drivers libvulkan1; then
        if msg="$(vulkan_check)"; then
            log "Vulkan: $msg"
            exit 0
        fi
        log "still no Vulkan adapter after installing mesa-vulkan-drivers: $msg"
    else
        log "apt-get could not install mesa-vulkan-drivers (see above)"
    fi
elif is_root; then
    log "apt-get is not available: install a Vulkan driver (Mesa lavapipe) by other means"
else
    log "not root: to get a CPU Vulkan driver run: sudo apt-get install mesa-vulkan-drivers"
fi
if [ "${VYRE_REQUIRE_VULKAN:-0}" = 1 ]; then
    die "VYRE_REQUIRE_VULKAN=1 and no Vulkan adapter was found"
fi
log "continuing without Vulkan: the wgpu backend will report itself unavailable and its tests skip"
