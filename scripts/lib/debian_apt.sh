# Isolated apt for set-up scripts that fetch files from Debian without touching the system's apt:
# every apt path (sources, lists, cache, state) points into $APT_DIR, /etc/apt is only read. Sourced
# by scripts/xnnpack.sh (source tarballs) and scripts/onnxruntime_headers.sh (a -dev package's headers).
#
# The caller sets APT_DIR (a directory of its own under the etkit cache) and a log function `log`.
#   debian_mirror                      the Debian mirror URL (ETKIT_DEBIAN_MIRROR, else /etc/apt's, else deb.debian.org)
#   apt_isolated TOOL ARGS...          run apt-get/apt-cache with the private configuration
#   apt_use_sources LINE...            write these sources.list lines and `apt-get update` when they
#                                      changed or the lists are over an hour old (sid moves)
# Downloads are checked by apt itself: the suite's Release file is verified against Debian's archive
# keyring (signed-by), the Packages/Sources index against Release, and each file against the index.

DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

debian_mirror() {
  if [[ -n "${ETKIT_DEBIAN_MIRROR:-}" ]]; then echo "$ETKIT_DEBIAN_MIRROR"; return; fi
  local uri
  uri="$( { cat /etc/apt/sources.list 2>/dev/null; cat /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null; } \
        | grep -vE '^[[:space:]]*#' | grep -oE '(https?)://[^ ]*/debian/?( |$)' | grep -v security \
        | head -n1 | tr -d ' ' || true)"
  echo "${uri:-http://deb.debian.org/debian}"
}

apt_isolated() {  # apt-get/apt-cache with every path pointed into $APT_DIR
  local tool="$1"; shift
  "$tool" \
    -o Dir::Etc::SourceList="$APT_DIR/sources.list" \
    -o Dir::Etc::SourceParts="$APT_DIR/sources.list.d" \
    -o Dir::Etc::Preferences="$APT_DIR/preferences" \
    -o Dir::Etc::PreferencesParts="$APT_DIR/preferences.d" \
    -o Dir::State="$APT_DIR/state" \
    -o Dir::State::Lists="$APT_DIR/lists" \
    -o Dir::State::status="$APT_DIR/state/status" \
    -o Dir::Cache="$APT_DIR/cache" \
    -o Debug::NoLocking=1 \
    -o APT::Sandbox::User=root \
    -o Acquire::Languages=none \
    -o APT::Architecture="$(dpkg --print-architecture)" \
    -o APT::Architectures="$(dpkg --print-architecture)" \
    "$@"
}

apt_use_sources() {  # LINE... -> 0 once the private lists for exactly these sources are fresh
  local stamp="$APT_DIR/state/updated" line
  mkdir -p "$APT_DIR"/{lists/partial,cache/archives/partial,state,sources.list.d,preferences.d}
  touch "$APT_DIR/state/status" "$APT_DIR/preferences"
  for line in "$@"; do echo "$line"; done > "$APT_DIR/sources.list.new"
  if cmp -s "$APT_DIR/sources.list.new" "$APT_DIR/sources.list" \
     && [[ -f "$stamp" && -n "$(find "$stamp" -mmin -60 2>/dev/null)" ]]; then
    rm -f "$APT_DIR/sources.list.new"; return 0
  fi
  mv "$APT_DIR/sources.list.new" "$APT_DIR/sources.list"
  log "apt-get update (isolated: $APT_DIR)"
  apt_isolated apt-get -q update >&2 || return 1
  touch "$stamp"
}
