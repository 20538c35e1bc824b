#!/bin/bash
# Corral's agent ramdisk: a minimal Debian root file system holding
# ironic-python-agent (from PyPI, in a virtualenv) and the tools it runs,
# packed as an initramfs next to the Debian kernel it was made for.
#
# Run by `corral baremetal build-ramdisk` (corral/baremetal/ramdisk), which
# decides whether a build is needed, passes every input in the environment
# and makes the bootable ISO afterwards:
#
#   WORK         work directory: root file system, package caches, logs
#   OUT          where ipa.kernel and ipa.initramfs are written
#   FILES        the directory of this script (init, agent configuration, lists)
#   SUITE        Debian release (bookworm)
#   MIRROR       Debian mirror
#   IPA_VERSION  ironic-python-agent version on PyPI
#   PACKAGES     extra Debian packages, space separated (may be empty)
#   SSH_KEYS     file of authorized_keys for root (may be empty: no SSH server)
#
# Needs root (debootstrap, chroot, mounts), debootstrap, cpio and zstd.
# Writes nothing outside WORK and OUT; the kernel file systems it mounts in
# the chroot are unmounted whatever happens.
set -euo pipefail

: "${WORK:?}" "${OUT:?}" "${FILES:?}" "${SUITE:?}" "${MIRROR:?}" "${IPA_VERSION:?}"
PACKAGES=${PACKAGES:-}
SSH_KEYS=${SSH_KEYS:-}
ROOT=$WORK/rootfs
CACHE=$WORK/cache
LOGS=$WORK/logs
START=$(date +%s)

step() { echo "[build-ramdisk +$(( $(date +%s) - START ))s] $*"; }
fail() { echo "build-ramdisk: $*" >&2; exit 1; }
# Commands in the chroot run with a clean environment: the host's PIP_*,
# http_proxy ... settings are the host's business.
in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$ROOT" "$@"; }

MOUNTS=(proc sys dev dev/pts var/cache/apt/archives root/.cache/pip)
unmount_all() {
  local i
  for (( i=${#MOUNTS[@]}-1; i>=0; i-- )); do
    if mountpoint -q "$ROOT/${MOUNTS[$i]}" 2>/dev/null; then umount -l "$ROOT/${MOUNTS[$i]}" || true; fi
  done
}
trap unmount_all EXIT

mkdir -p "$CACHE/apt" "$CACHE/pip" "$LOGS" "$OUT"
unmount_all
rm -rf "$ROOT"

# --------------------------------------------------------------- 1. base
step "debootstrap $SUITE (minbase)"
debootstrap --variant=minbase --cache-dir="$CACHE/apt" "$SUITE" "$ROOT" "$MIRROR" > "$LOGS/debootstrap.log" 2>&1 \
  || fail "debootstrap failed, see $LOGS/debootstrap.log"

mount -t proc proc "$ROOT/proc"
mount -t sysfs sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
mount --bind "$CACHE/apt" "$ROOT/var/cache/apt/archives"
mkdir -p "$ROOT/root/.cache/pip"
mount --bind "$CACHE/pip" "$ROOT/root/.cache/pip"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# No service may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
# A mirror of .../debian has its security updates at .../debian-security.
case "$MIRROR" in
  */debian) security=${MIRROR%/debian}/debian-security ;;
  *) security=http://deb.debian.org/debian-security ;;
esac
cat > "$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $security $SUITE-security main
EOF

# ----------------------------------------------------------- 2. packages
mapfile -t BASE < <(grep -v '^\s*\(#\|$\)' "$FILES/packages.txt")
EXTRA=()
[ -z "$PACKAGES" ] || read -r -a EXTRA <<< "$PACKAGES"
[ -z "$SSH_KEYS" ] || EXTRA+=(openssh-server)
step "apt-get install (${#BASE[@]} packages${EXTRA:+, extra: ${EXTRA[*]}})"
in_root sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  ${BASE[*]} ${EXTRA[*]:-}" > "$LOGS/apt.log" 2>&1 || fail "apt-get failed, see $LOGS/apt.log"

# ------------------------------------------------------------ 3. the agent
step "ironic-python-agent $IPA_VERSION from PyPI"
# A host that reaches PyPI through a TLS-inspecting proxy trusts the proxy's
# CA from /usr/local/share/ca-certificates; the chroot's pip trusts only its
# own bundle.  The host's local CAs are trusted for the download and
# removed again before the root file system is packed.
LOCAL_CAS=()
for ca in /usr/local/share/ca-certificates/*.crt; do [ -e "$ca" ] && LOCAL_CAS+=("$ca"); done
if [ ${#LOCAL_CAS[@]} -gt 0 ]; then
  cp "${LOCAL_CAS[@]}" "$ROOT/usr/local/share/ca-certificates/"
  in_root update-ca-certificates > /dev/null 2>&1
fi
in_root env PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_CACHE_DIR=/root/.cache/pip sh -c \
  "python3 -m venv /opt/ipa && /opt/ipa/bin/pip install 'ironic-python-agent==$IPA_VERSION'" \
  > "$LOGS/pip.log" 2>&1 || fail "pip install failed, see $LOGS/pip.log"
in_root /opt/ipa/bin/pip freeze > "$OUT/ipa.packages.txt" 2>/dev/null
if [ ${#LOCAL_CAS[@]} -gt 0 ]; then
  for ca in "${LOCAL_CAS[@]}"; do rm -f "$ROOT/usr/local/share/ca-certificates/${ca##*/}"; done
  in_root update-ca-certificates --fresh > /dev/null 2>&1
fi
ln -sf /opt/ipa/bin/ironic-python-agent "$ROOT/usr/local/bin/ironic-python-agent"

# There is no init system to ask for a power-off or a reboot (the agent's
# standby.power_off runs `poweroff`): these answer at once and act a second
# later through sysrq, after a sync, so that the agent can reply first.
for pair in poweroff:o reboot:b halt:o shutdown:o; do
  name=${pair%%:*} key=${pair##*:}
  cat > "$ROOT/usr/local/sbin/$name" <<EOF
#!/bin/sh
# Corral's ramdisk has no init system: sync, then sysrq '$key' one second later.
sync
( sleep 1; echo 1 > /proc/sys/kernel/sysrq; echo $key > /proc/sysrq-trigger ) > /dev/null 2>&1 &
exit 0
EOF
  chmod 0755 "$ROOT/usr/local/sbin/$name"
done

# -------------------------------------------------------------- 4. kernel
step "kernel and modules"
KPKG=$(in_root apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$KPKG" ] || fail "cannot resolve linux-image-amd64 in $SUITE"
KVER=${KPKG#linux-image-}
in_root sh -c "cd /var/cache/apt/archives && { ls ${KPKG}_*.deb > /dev/null 2>&1 || apt-get download -q $KPKG; }" \
  > "$LOGS/kernel.log" 2>&1 || fail "cannot download $KPKG, see $LOGS/kernel.log"
# Unpacked inside the root file system so that its own kmod reads it.
KDIR=$ROOT/tmp/kernel
rm -rf "$KDIR"
dpkg-deb -x "$(ls "$CACHE/apt/${KPKG}"_*.deb | head -n1)" "$KDIR"
cp "$KDIR/boot/vmlinuz-$KVER" "$OUT/ipa.kernel"
# Only the modules of modules.txt and what they depend on.
in_root depmod -b /tmp/kernel "$KVER"
: > "$WORK/modules.wanted"
while read -r module; do
  case "$module" in ''|'#'*) continue;; esac
  in_root modprobe -d /tmp/kernel -S "$KVER" --show-depends "$module" 2>/dev/null \
    | awk '$1 == "insmod" {print $2}' >> "$WORK/modules.wanted" || true
done < "$FILES/modules.txt"
sort -u -o "$WORK/modules.wanted" "$WORK/modules.wanted"
[ -s "$WORK/modules.wanted" ] || fail "no kernel module of modules.txt was found in $KPKG"
MODDIR=lib/modules/$KVER
mkdir -p "$ROOT/$MODDIR"
cp "$KDIR/$MODDIR"/modules.order "$KDIR/$MODDIR"/modules.builtin* "$ROOT/$MODDIR/"
while read -r path; do
  relative=${path#/tmp/kernel/}
  mkdir -p "$ROOT/$(dirname "$relative")"
  cp "$KDIR/$relative" "$ROOT/$relative"
done < "$WORK/modules.wanted"
rm -rf "$KDIR"
in_root depmod "$KVER"
echo "$KVER" > "$OUT/ipa.kernel.version"

# ------------------------------------------------------------ 5. the rest
step "init, agent configuration$([ -n "$SSH_KEYS" ] && echo ', SSH keys')"
install -m 0755 "$FILES/init" "$ROOT/init"
install -m 0755 "$FILES/dhcp-script" "$ROOT/usr/local/sbin/corral-dhcp-script"
mkdir -p "$ROOT/etc/ironic-python-agent" "$ROOT/var/log" "$ROOT/etc/ironic-python-agent.d"
install -m 0644 "$FILES/ironic-python-agent.conf" "$ROOT/etc/ironic-python-agent/ironic-python-agent.conf"
echo corral-ramdisk > "$ROOT/etc/hostname"
printf '127.0.0.1\tlocalhost corral-ramdisk\n' > "$ROOT/etc/hosts"
: > "$ROOT/etc/resolv.conf"
if [ -n "$SSH_KEYS" ]; then
  install -d -m 0700 "$ROOT/root/.ssh"
  install -m 0600 "$SSH_KEYS" "$ROOT/root/.ssh/authorized_keys"
  # Host keys made once for this ramdisk: every machine booting it shows the same ones.
  in_root ssh-keygen -A > /dev/null
fi

# ------------------------------------------------------------- 6. trim
step "trim"
unmount_all
rm -rf "$ROOT"/usr/share/{doc,man,info,locale,i18n,lintian,bash-completion,zsh} \
       "$ROOT"/var/cache/apt/* "$ROOT"/var/lib/apt/lists/* "$ROOT"/root/.cache \
       "$ROOT"/var/cache/debconf/*-old "$ROOT"/var/log/*.log "$ROOT/usr/sbin/policy-rc.d"
find "$ROOT/opt/ipa" -depth -type d -name tests -exec rm -rf {} + 2>/dev/null || true
# Byte-compile now: under emulation, compiling at every boot costs minutes.
in_root /opt/ipa/bin/python -m compileall -q -j 0 /opt/ipa/lib > /dev/null 2>&1 || true
du -sm "$ROOT" | awk '{print $1 " MiB"}' > "$OUT/ipa.rootfs-size.txt"

# -------------------------------------------------------------- 7. pack
step "pack ($(cat "$OUT/ipa.rootfs-size.txt"))"
(cd "$ROOT" && find . -xdev | LC_ALL=C sort | cpio -o -H newc --quiet) | zstd -q -T0 -6 > "$OUT/ipa.initramfs"
rm -rf "$ROOT"
step "done"
