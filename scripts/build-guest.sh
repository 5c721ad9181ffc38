#!/bin/sh
# Builds the microVM guest image (kernel + initramfs) from Debian packages and the built
# harnessnode, cached under target/guest/<key>/ where <key> hashes every input (this script, the
# kernel and busybox package versions, the harnessnode binary). Nothing is downloaded from
# anywhere but the configured Debian archive (apt-get download).
#
# Usage: scripts/build-guest.sh [HARNESSNODE]
#   HARNESSNODE  the harnessnode binary (default: target/debug/harnessnode, else target/release)
# Environment: GUEST_DIR (default <repo>/target/guest).
# Prints two lines, `kernel=<path>` and `initrd=<path>`, and points target/guest/current at the
# build.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${GUEST_DIR:-$ROOT/target/guest}
NODE=${1:-}
if [ -z "$NODE" ]; then
    for candidate in "$ROOT/target/debug/harnessnode" "$ROOT/target/release/harnessnode"; do
        if [ -x "$candidate" ]; then NODE=$candidate; break; fi
    done
fi
if [ -z "$NODE" ] || [ ! -x "$NODE" ]; then
    echo "build-guest: no harnessnode binary (build it: cargo build -p agentsessions-harnessnode)" >&2
    exit 2
fi
# The build works in its own directory: name the binary by an absolute path.
NODE=$(cd "$(dirname "$NODE")" && pwd)/$(basename "$NODE")

# The guest's modules, in load order: the cloud kernel builds virtio and its network driver as
# modules.
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_mmio \
failover net_failover virtio_net"

# Resolve exact package versions first: they are part of the cache key.
KERNEL_PKG=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null \
    | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n 1)
if [ -z "$KERNEL_PKG" ]; then
    echo "build-guest: cannot resolve linux-image-cloud-amd64 (run apt-get update)" >&2
    exit 2
fi
KERNEL_VER=$(apt-cache policy "$KERNEL_PKG" | sed -n 's/^ *Candidate: //p')
BUSYBOX_VER=$(apt-cache policy busybox-static | sed -n 's/^ *Candidate: //p')
NODE_SUM=$(sha256sum "$NODE" | cut -d' ' -f1)
SCRIPT_SUM=$(sha256sum "$0" | cut -d' ' -f1)
KEY=$(printf '%s\n' "$SCRIPT_SUM" "$KERNEL_PKG=$KERNEL_VER" "busybox-static=$BUSYBOX_VER" \
    "$NODE_SUM" | sha256sum | cut -c1-16)
DEST=$OUT/$KEY

if [ ! -f "$DEST/initrd.img" ] || [ ! -f "$DEST/vmlinuz" ]; then
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/build-guest.XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
    cd "$WORK"
    apt-get download -q "$KERNEL_PKG=$KERNEL_VER" "busybox-static=$BUSYBOX_VER" >/dev/null 2>&1 || {
        echo "build-guest: apt-get download failed" >&2
        exit 1
    }
    dpkg-deb -x "$KERNEL_PKG"_*.deb kernel
    dpkg-deb -x busybox-static_*.deb busybox
    KVER=$(ls kernel/lib/modules)
    BUSYBOX=busybox/bin/busybox

    mkdir -p root/bin root/sbin root/lib/modules root/proc root/sys root/dev root/tmp root/etc
    cp "$BUSYBOX" root/bin/busybox
    for applet in $(root/bin/busybox --list); do
        [ -e "root/bin/$applet" ] || ln -s busybox "root/bin/$applet"
    done
    for module in $MODULES; do
        path=$(find "kernel/lib/modules/$KVER" -name "$module.ko" | head -n 1)
        [ -n "$path" ] || { echo "build-guest: module $module not in $KERNEL_PKG" >&2; exit 1; }
        cp "$path" root/lib/modules/
    done
    # harnessnode without its debug info, and the shared libraries it links.
    objcopy --strip-debug "$NODE" root/bin/harnessnode
    ldd "$NODE" | awk '/=> \// { print $3 } /^[[:space:]]*\/lib/ { print $1 }' | sort -u \
        | while read -r lib; do
            mkdir -p "root$(dirname "$lib")"
            cp -L "$lib" "root$lib"
        done

    cat > root/init <<'INIT'
#!/bin/sh
# Guest init: modules, network (user-mode networking's fixed addresses), then harnessnode on the
# port the host forwards, its readiness line on the console. Afterwards the console sets the
# clock: the host writes the epoch seconds after a restore, since a restored guest's clock
# stands where the snapshot left it.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p" | head -n 1; }
for module in MODULES_HERE; do
    if [ "$module" = virtio_mmio ]; then
        insmod /lib/modules/virtio_mmio.ko $(tr ' ' '\n' < /proc/cmdline | sed -n 's/^virtio_mmio\.//p')
    else
        insmod "/lib/modules/$module.ko"
    fi
done
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
ip route add default via 10.0.2.2
harness=$(arg agentsessions.harness)
port=$(arg agentsessions.port)
[ -n "$(arg agentsessions.epoch)" ] && date -s "@$(arg agentsessions.epoch)" >/dev/null
echo "agentsessions-guest: network up"
delay=$(arg agentsessions.answer_delay_ms)
/bin/harnessnode --harness "${harness:-counter}" --listen ":${port:-7000}" \
    --answer-delay-ms "${delay:-0}" </dev/null &
stty -echo 2>/dev/null
while true; do
    if read -r line; then
        case "$line" in
            clock=*) date -s "@${line#clock=}" >/dev/null && echo "agentsessions-guest: clock set" ;;
        esac
    else
        sleep 1
    fi
done
INIT
    sed -i "s/MODULES_HERE/$(echo $MODULES)/" root/init
    chmod 755 root/init

    find root -exec touch -h -d @0 {} +
    mkdir -p "$DEST.tmp"
    (cd root && find . | LC_ALL=C sort | ../"$BUSYBOX" cpio -o -H newc 2>/dev/null) \
        | gzip -1 -n > "$DEST.tmp/initrd.img"
    cp "kernel/boot/vmlinuz-$KVER" "$DEST.tmp/vmlinuz"
    printf '%s\n' "kernel=$KERNEL_PKG=$KERNEL_VER" "busybox-static=$BUSYBOX_VER" \
        "harnessnode=$NODE_SUM" > "$DEST.tmp/inputs.txt"
    rm -rf "$DEST"
    mv "$DEST.tmp" "$DEST"
fi
ln -sfn "$KEY" "$OUT/current"
echo "kernel=$DEST/vmlinuz"
echo "initrd=$DEST/initrd.img"
