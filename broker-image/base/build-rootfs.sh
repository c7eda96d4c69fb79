#!/usr/bin/env bash
# Build the base image's root filesystem with debootstrap and write it as a tarball.
#   build-rootfs.sh OUT.tar SUITE MIRROR PACKAGES_FILE
# Needs root and debootstrap. The tree is trimmed (apt lists, docs, man pages) so the
# image stays small; nothing outside the work dir is touched.
set -euo pipefail
out=$1 suite=$2 mirror=$3 packages_file=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/undertow-rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
include=$(grep -v '^\s*#' "$packages_file" | grep -v '^\s*$' | paste -sd, -)
debootstrap --variant=minbase --include="$include" "$suite" "$work/root" "$mirror" \
  > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
root=$work/root
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/var/log/* "$root"/etc/ssh/ssh_host_*
# Host keys are made per container (ssh-keygen -A in the sshd variant), never baked in.
tar --numeric-owner -C "$root" -cf "$out" .
