#!/bin/sh
# Runs the cgroup v2 real-kernel test (crates/linux/tests/memcg_v2_kernel.rs)
# inside a small QEMU guest whose cgroup2 hierarchy has the memory controller,
# for hosts whose memory controller is bound to cgroup v1 (where the test
# skips). Nothing of the host's cgroups is touched: the guest has its own
# kernel.
#
# Needs: qemu-system-x86_64, a Linux kernel image, a static busybox.
# ACCEL=kvm uses KVM; the default is TCG (emulation), because on the
# development VM (itself a KVM guest) nested KVM guests hang after the
# kernel's setup stage, while TCG boots in ~5 s.  On Debian:
#   apt-get install --no-install-recommends qemu-system-x86 busybox-static linux-image-cloud-amd64
# Usage: scripts/v2-vm-test.sh [KERNEL]   (default: newest /boot/vmlinuz-*)
set -eu
cd "$(dirname "$0")/.."
KERNEL=${1:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)}
[ -r "$KERNEL" ] || { echo "v2-vm-test: no kernel image (pass one as argument)" >&2; exit 2; }
ACCEL=${ACCEL:-tcg}
command -v qemu-system-x86_64 >/dev/null || { echo "v2-vm-test: qemu-system-x86_64 missing" >&2; exit 2; }
BUSYBOX=$(command -v busybox)
file -L "$BUSYBOX" | grep -q 'statically linked' || BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || { echo "v2-vm-test: busybox missing" >&2; exit 2; }

# The test binary and the daemon binary it starts.
TEST=$(cargo test -p appflow-linux --test memcg_v2_kernel --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*memcg_v2_kernel[^"]*\)".*/\1/p' | tail -1)
cargo build -p appflow-linux --bin appflowd 2>/dev/null
APPFLOWD=$(pwd)/target/debug/appflowd
[ -x "$TEST" ] && [ -x "$APPFLOWD" ] || { echo "v2-vm-test: build failed" >&2; exit 1; }

WORK=$(mktemp -d /tmp/appflow-v2-vm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT INT TERM
R=$WORK/root
mkdir -p "$R/bin" "$R/proc" "$R/sys" "$R/dev" "$R/tmp" "$R/run" "$R/test"
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh mount mkdir cat echo poweroff sleep head tail; do ln -s busybox "$R/bin/$a"; done
# Same absolute paths as on the host, so the daemon's and test's
# CARGO_BIN_EXE/current_exe paths hold.
mkdir -p "$R$(dirname "$TEST")" "$R$(dirname "$APPFLOWD")"
cp "$TEST" "$R$TEST"; cp "$APPFLOWD" "$R$APPFLOWD"
for lib in $( (ldd "$TEST"; ldd "$APPFLOWD") | grep -o '/[^ ]*' | sort -u); do
  mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"
done
cat > "$R/init" <<INIT
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo "guest kernel: \$(cat /proc/sys/kernel/osrelease)"
echo "guest cgroup2 controllers: \$(cat /sys/fs/cgroup/cgroup.controllers)"
cd /tmp
$TEST --nocapture --test-threads=1
echo "V2-TEST-EXIT=\$?"
poweroff -f
INIT
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initrd.gz"
qemu-system-x86_64 -accel "$ACCEL" -cpu max -smp 1 -m 768M -nographic -no-reboot \
  -kernel "$KERNEL" -initrd "$WORK/initrd.gz" \
  -append "console=ttyS0 quiet psi=1 panic=-1 rdinit=/init" | tee "$WORK/console.log"
grep -q '^V2-TEST-EXIT=0' "$WORK/console.log"
