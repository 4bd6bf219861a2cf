#!/usr/bin/env bash
# `make image-oci`: a real OCI image from the Dockerfile on a machine without a container daemon, then
# each entrypoint run inside it. Needs root and Debian's buildah and debootstrap (installed with apt when
# missing). Slow (minutes); `make test` does not depend on it.
#
# The Dockerfile's base image cannot be pulled here, so a stand-in is built under its name from Debian
# packages (debootstrap minbase + python3, python3-venv, python3-pip: Debian's Python of the same minor
# version, not the exact patch release; this machine's CA bundle), committed to a private buildah store (vfs driver, under
# .tools/image-oci), and the Dockerfile is built with `buildah bud --pull=never --isolation chroot`.
# The result is written as an OCI archive, .tools/image-oci/koordpy.oci.tar.
#
# usage: scripts/image-oci.sh IMAGE   (IMAGE: the reference `make image` tags)
set -euo pipefail
image=${1:?usage: image-oci.sh IMAGE}
work=${IMAGE_OCI_WORK:-.tools/image-oci}
suite=bookworm
base=$(sed -n 's/^FROM \([^ ]*\) AS base$/\1/p' Dockerfile)
[ -n "$base" ] || { echo "image-oci.sh: no 'FROM <image> AS base' line in Dockerfile" >&2; exit 1; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
store=(--storage-driver vfs --root "$work/storage" --runroot "$work/run")

if ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get install -y -qq buildah debootstrap
fi

start=$(date +%s)
if ! buildah "${store[@]}" inspect --type image "$base" >/dev/null 2>&1; then
  echo "== stand-in for $base: debootstrap $suite"
  rm -rf "$work/rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    "$suite" "$work/rootfs" >"$work/debootstrap.log"
  ctr=$(buildah "${store[@]}" from scratch)
  mnt=$(buildah "${store[@]}" mount "$ctr")
  cp -a "$work/rootfs/." "$mnt/"
  # This machine's trust store (it may hold a TLS-inspecting proxy's CA that pip in the build must trust).
  cp /etc/ssl/certs/ca-certificates.crt "$mnt/etc/ssl/certs/ca-certificates.crt"
  buildah "${store[@]}" umount "$ctr" >/dev/null
  buildah "${store[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd python3 "$ctr"
  buildah "${store[@]}" commit --quiet --rm "$ctr" "$base" >/dev/null
  rm -rf "$work/rootfs"
fi
echo "== base ready after $(($(date +%s) - start)) s"

echo "== buildah bud -t $image"
buildah "${store[@]}" bud --quiet --pull=never --isolation chroot --tag "$image" .
echo "== built after $(($(date +%s) - start)) s"

buildah "${store[@]}" rm --all >/dev/null  # working containers left by an interrupted run
ctr=$(buildah "${store[@]}" from --pull=never "$image")
trap 'buildah "${store[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
entrypoint=$(buildah "${store[@]}" inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "$image")
user=$(buildah "${store[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$image")
echo "== entrypoint $entrypoint, user $user"
[ "$entrypoint" = '[koordpy]' ] || { echo "unexpected entrypoint $entrypoint" >&2; exit 1; }
for args in "--version" "extender --help" "manager --help" "agent run --help"; do
  echo "== koordpy $args (inside the image, as $user)"
  # shellcheck disable=SC2086  # args is a word list on purpose
  buildah "${store[@]}" run --isolation chroot --user "$user" "$ctr" -- koordpy $args | head -n 1
done
rm -f "$work/koordpy.oci.tar"
buildah "${store[@]}" push --quiet "$image" "oci-archive:$work/koordpy.oci.tar:$image"
echo "== wrote $work/koordpy.oci.tar ($(du -h "$work/koordpy.oci.tar" | cut -f1)) after $(($(date +%s) - start)) s"
