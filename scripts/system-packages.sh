#!/usr/bin/env bash
# The Debian packages dossier needs, installed when missing.
#   scripts/system-packages.sh runtime   what the workers' tools drive (npm start runs this)
#   scripts/system-packages.sh test      that, plus what the tests build fixtures with (npm test runs this)
#   scripts/system-packages.sh image     the runtime ones, without recommends (the Dockerfile runs this)
# As root with apt-get it installs what is missing (apt-get update first); otherwise it names
# what is missing and fails for `test` and `image`, warns for `runtime`. Nothing is done when all
# are present.
set -euo pipefail
kind="${1:-runtime}"

# unblob's external tools (lz4, zstd, e2fsprogs' debugfs, erofs-utils' fsck.erofs, lziprecover, lzop,
# partclone, unar, android-sdk-libsparse-utils' simg2img, p7zip-full's 7z, which python3-binwalk only
# recommends; dossier's own archive reader runs 7zip's 7zz): all in Debian but sasquatch (unblob's
# squashfs extractor), which no registry here has (dossier reads squashfs itself, sqfs2tar), and upx
# (unblob unpacks UPX-packed ELF files with it), which bookworm does not have.
# binwalk's listing searches its literal signatures in one pass with python3-numpy.
runtime=(bubblewrap util-linux procps file openssl binutils strace ltrace binwalk python3-numpy squashfs-tools-ng 7zip libarchive-tools bzip2 xz-utils python3 python3-venv adb qemu-user-static lz4 zstd e2fsprogs erofs-utils lziprecover lzop partclone unar android-sdk-libsparse-utils p7zip-full)
# The breadth fixtures are made with lzip, dosfstools (mkfs.fat) and mtools (mcopy); rule scans are
# measured against Debian's yara; function boundaries are scored on 32-bit ARM clang and gcc builds;
# the MCP Apps Views are tested in Debian's headless chromium.
tests=(zip unzip squashfs-tools cpio rpm xorriso android-sdk-libsparse-utils u-boot-tools e2fsprogs mtd-utils gcc openssh-server openssh-client postgresql lzip dosfstools mtools yara clang binutils-arm-linux-gnueabihf libc6-dev-armhf-cross gcc-arm-linux-gnueabihf chromium)
case "$kind" in
  runtime | image) wanted=("${runtime[@]}") ;;
  test) wanted=("${runtime[@]}" "${tests[@]}") ;;
  *) echo "dossier: scripts/system-packages.sh runtime|test|image, not \"$kind\"" >&2 && exit 2 ;;
esac
# Only a missing runtime package is a warning: the tools that need it say so when called.
strict=1
[ "$kind" = runtime ] && strict=0

missing=()
# Installed means dpkg's "ii" (a removed package whose config files remain is not installed).
installed() { [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" = "ii " ]; }
for p in "${wanted[@]}"; do installed "$p" || missing+=("$p"); done

# The emulated-device test runs an armhf busybox under qemu-user: Debian's armhf package, cached.
fixture="${HOME:-/root}/.cache/dossier/fixtures/busybox-static-armhf.deb"
need_fixture=0
[ "$kind" = test ] && [ ! -s "$fixture" ] && need_fixture=1

[ ${#missing[@]} -eq 0 ] && [ $need_fixture -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  msg="dossier: missing Debian packages: ${missing[*]:-none}; install them with: sudo apt-get install ${missing[*]:-}"
  [ $need_fixture -eq 1 ] && msg="$msg (and run scripts/system-packages.sh test as root once for the armhf busybox fixture)"
  echo "$msg" >&2
  exit $strict
fi

export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "dossier: installing Debian packages ${missing[*]}" >&2
  recommends=()
  [ "$kind" = image ] && recommends=(--no-install-recommends)
  if ! { apt-get update -qq && apt-get install -y -qq "${recommends[@]}" "${missing[@]}" >/dev/null; }; then
    later="; the tools that need them will say so when called"
    [ $strict = 1 ] && later=""
    echo "dossier: could not install ${missing[*]}$later" >&2
    exit $strict
  fi
fi
if [ $need_fixture -eq 1 ]; then
  echo "dossier: fetching busybox-static:armhf for the emulated-device test" >&2
  dpkg --add-architecture armhf
  apt-get update -qq || true # an armhf index of another suite may be mid-sync; the package comes from main
  mkdir -p "$(dirname "$fixture")"
  (cd "$(dirname "$fixture")" && apt-get download -qq busybox-static:armhf && mv busybox-static_*_armhf.deb "$fixture")
fi
