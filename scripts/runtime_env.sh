# scripts/runtime_env.sh: sourced by demo.sh and test.sh. Mesa's Vulkan drivers (lavapipe)
# print "XDG_RUNTIME_DIR is invalid or not set" on every adapter probe when the variable is
# missing (containers, CI); give them a private directory so the output stays readable.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
    XDG_RUNTIME_DIR="$(mktemp -d "${TMPDIR:-/tmp}/vyre-xdg.XXXXXX")"
    chmod 700 "$XDG_RUNTIME_DIR"
    export XDG_RUNTIME_DIR
fi
