#!/usr/bin/env bash
# Installs what the guest tier (tests/guest: cgroup v2 in a QEMU guest) needs, once per machine:
#
# - Debian packages qemu-system-x86, busybox-static, cpio and socat, and for the kubelet beside the agent
#   containerd, runc and containernetworking-plugins (apt-get, as root), when a command of theirs is missing;
# - a Debian kernel, linux-image-<ver>-amd64: downloaded with `apt-get download` and unpacked with
#   `dpkg-deb -x` into ${KOORDPY_CACHE:-~/.cache/koordpy}/guest-<ver>/ (never into the host's /boot).
#   The standard flavour: -cloud-amd64 has no 9p. <ver> is KOORDPY_GUEST_KERNEL when set, else the
#   newest complete guest-* directory already in the cache, else the version the archive's
#   linux-image-amd64 depends on now.
#
# Output: the guest directory, on stdout (everything else goes to stderr). Any failure is fatal and says
# what went wrong; the tests fail loudly (never skip) when this directory or a command is missing.
set -euo pipefail

die() { echo "install-guest.sh: $*" >&2; exit 1; }
cache="${KOORDPY_CACHE:-$HOME/.cache/koordpy}"

missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
# The kubelet test's runtime (Debian's containerd 1.6: the pinned kubelet still accepts a runtime without the
# RuntimeConfig call), its OCI runtime and the CNI plugins of the pods' network.
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/ptp ] || missing+=(containernetworking-plugins)
# The initramfs needs a static busybox (ldd refuses a static binary); Debian's busybox package is dynamic.
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || missing+=(busybox-static)
command -v cpio >/dev/null 2>&1 || missing+=(cpio)
command -v socat >/dev/null 2>&1 || missing+=(socat)
updated=0
apt_update() {
  if [ "$updated" = 0 ]; then
    apt-get update -qq >&2 || die "apt-get update failed"
    updated=1
  fi
}
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "needs root to install ${missing[*]} (or install them yourself)"
  echo "install-guest.sh: installing ${missing[*]}" >&2
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || die "apt-get install ${missing[*]} failed"
fi

complete() { [ -f "$1/.complete" ]; }
version=${KOORDPY_GUEST_KERNEL:-}
if [ -z "$version" ]; then
  for dir in $(ls -d "$cache"/guest-* 2>/dev/null | sort -V -r); do
    if complete "$dir"; then
      version=${dir##*/guest-}
      break
    fi
  done
fi
if [ -z "$version" ]; then
  apt_update
  version=$(apt-cache depends linux-image-amd64 2>/dev/null \
    | sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*\)-amd64$/\1/p' | head -n 1)
  [ -n "$version" ] || die "cannot tell the current kernel version: apt-cache depends linux-image-amd64 names none"
fi
out="$cache/guest-$version"
if complete "$out"; then
  echo "$out"
  exit 0
fi

package="linux-image-$version-amd64"
echo "install-guest.sh: downloading $package into $out" >&2
tmp=$(mktemp -d)
chmod 755 "$tmp"  # apt-get download fetches as the _apt user when it can enter the directory
trap 'rm -rf "$tmp"' EXIT
apt_update
(cd "$tmp" && apt-get download -qq "$package" >&2) || {
  # linux-image-<ver>-amd64 is the signed package; some archives carry only the -unsigned one.
  (cd "$tmp" && apt-get download -qq "$package-unsigned" >&2) || die "apt-get download $package failed"
}
rm -rf "$out"
mkdir -p "$out"
dpkg-deb -x "$tmp"/*.deb "$out/root" || die "dpkg-deb -x failed"
[ -f "$out/root/boot/vmlinuz-$version-amd64" ] || die "no boot/vmlinuz-$version-amd64 in $package"
[ -d "$out/root/lib/modules/$version-amd64/kernel/fs/9p" ] || die "$package has no 9p module (a cloud flavour?)"
# modules.dep is made by depmod at install time, not shipped: the guest's modprobe (-d <dir>/root) needs it.
busybox depmod -b "$out/root" "$version-amd64" || die "depmod of $package failed"
echo "$version-amd64" > "$out/RELEASE"
touch "$out/.complete"
echo "install-guest.sh: $package unpacked ($(du -sh "$out" | cut -f1))" >&2
echo "$out"
