#!/bin/bash
# Run only in a fresh virtme guest; keep host networking and logs untouched.
# One run prints both metric groups of the A/B table:
#   IPI/RPS   : hardirq time, received_rps, function-call IPIs, flush WARNs
#   defer_list: skb_attempt_defer_free vs the purge trigger that fires
# MODE=rps sends RPS to CPU1; MODE=local keeps it on CPU0; MODE=norps has RPS off.

set -euo pipefail
export LC_ALL=C
SECS=${SECS:-20}; MODE=${MODE:-rps}; CPU=1; MASK=2
[[ $MODE == rps ]] || { CPU=0; MASK=1; }
grep -q 'virtme' /proc/cmdline
[[ $(cat /sys/kernel/realtime) == 1 ]]
HZ=$(getconf CLK_TCK)
command -v iperf3 >/dev/null || { echo 'SKIP: iperf3 missing'; exit 0; }
# The guest root is read-only; iperf3 needs a writable temp dir to start.
TMPDIR=$(for d in /var/tmp /dev/shm /run /root /tmp; do [ -w "$d" ] && { echo "$d"; break; }; done)
[ -n "$TMPDIR" ] && export TMPDIR || { echo 'SKIP: no writable TMPDIR'; exit 0; }
TR=/sys/kernel/tracing
[[ -d $TR ]] || { mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug; TR=/sys/kernel/debug/tracing; }
[[ -d $TR ]] || { echo 'SKIP: no tracing dir'; exit 0; }

NS=bn$$; TX=bn$$t; RX=bn$$r
PROBES='def_free kick trig'
cleanup() {
    ip link del "$TX" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    for p in $PROBES; do { echo "-:$p" > "$TR/kprobe_events"; } 2>/dev/null || true; done
}
trap cleanup EXIT
ip netns add "$NS"
ip link add "$TX" type veth peer name "$RX"
ip link set "$RX" netns "$NS"
ip addr add 192.0.2.1/24 dev "$TX"
ip link set "$TX" up
ip netns exec "$NS" ip addr add 192.0.2.2/24 dev "$RX"
ip netns exec "$NS" ip link set "$RX" up
if [[ $MODE != norps ]]; then
    ip netns exec "$NS" sh -c "printf '%s\n' '$MASK' > /sys/class/net/$RX/queues/rx-0/rps_cpus"
    printf 'RPS_MASK='
    ip netns exec "$NS" sh -c "cat /sys/class/net/$RX/queues/rx-0/rps_cpus"
fi
printf 'KERNEL=%s MODE=%s CPU=%s SECS=%s USER_HZ=%s\n' "$(uname -r)" "$MODE" "$CPU" "$SECS" "$HZ"
uname -v
ps -eo pid,cls,rtprio,psr,comm | grep -E 'backlog_napi|ksoftirqd' || true
for p in $(ps -eo pid,comm | awk '$2 ~ /^backlog_napi\// {print $1}'); do taskset -pc "$p"; done

# ---- IPI/RPS path: CPU0 floods the veth, RPS steers RX to $CPU ----
# Connectivity check also warms up ARP and avoids charging WARN output to load.
taskset -c 0 ping -n -q -c 3 -W 2 192.0.2.2
irq() { awk -v c="cpu$CPU" '$1==c {print $7}' /proc/stat; }
field() { awk -v c="$CPU" -v f="$1" 'NR==c+1 {print $f}' /proc/net/softnet_stat; }
# CPU n is field n+2 on the "CAL: ... Function call interrupts" line.
cal() { awk -v c="$((CPU+2))" '/Function call interrupts/ {print $c}' /proc/interrupts; }
i0=$(irq); sleep "$SECS"; i1=$(irq)
r0=$(field 10); c0=$(cal); j0=$(irq)
rc=0
PING=$(timeout -s INT "$SECS" taskset -c 0 ping -n -f -q 192.0.2.2 2>&1) || rc=$?
[[ $rc == 124 || $rc == 0 ]] || { printf '%s\n' "$PING"; exit "$rc"; }
j1=$(irq); r1=$(field 10); c1=$(cal)
printf '%s\n' "$PING"
printf '%s\n' "$PING" | awk '/packets transmitted/ {ok=($1>0 && $4>0)} END {exit !ok}'
printf 'IDLE_IRQ_MS=%s LOAD_IRQ_MS=%s RPS_CALLBACKS=%s CALL_IPI=%s\n' \
    "$(((i1-i0)*1000/HZ))" "$(((j1-j0)*1000/HZ))" \
    "$((16#$r1-16#$r0))" "$((c1-c0))"
# A WARN header is one warning; repeated symbol names in its stack are not.
LOG=$(dmesg)
printf 'TARGET_WARNINGS=%s\n' "$(printf '%s\n' "$LOG" | grep -cE 'WARNING:.*do_softirq_post_smp_call_flush' || true)"

# ---- defer_list path: skb alloc on CPU0, freed by a CPU1 reader ----
# kick_defer_list_purge exists only in the patched tree. kprobe_events events
# are created disabled, so each probe must be enabled explicitly.
for spec in 'def_free skb_attempt_defer_free' 'kick kick_defer_list_purge' \
            'trig trigger_rx_softirq'; do
    set -- $spec
    { echo "p:$1 $2" >> "$TR/kprobe_events"; } 2>/dev/null || echo "PROBE_ABSENT=$2"
    { echo 1 > "$TR/events/kprobes/$1/enable"; } 2>/dev/null || true
done
# A probe that never registered has no counter; report that explicitly rather
# than as a misleading zero.
hits() {
    [ -r "$TR/events/kprobes/$1/enable" ] || { echo ABSENT; return; }
    awk -v n="$1" '$1==n {print $2}' "$TR/kprobe_profile" 2>/dev/null | grep . || echo 0
}
printf '4\n' > /proc/sys/net/core/skb_defer_max
ip netns exec "$NS" taskset -c 1 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
SRV=$!
sleep 1
taskset -c 0 iperf3 -c 192.0.2.2 -p 5201 -t "$SECS" -P 4 >/dev/null 2>&1 || true
wait "$SRV" 2>/dev/null || true
sleep 2   # let any pending purge drain before sampling
D=$(hits def_free); K=$(hits kick); T=$(hits trig)
printf 'HITS def_free=%s kick=%s trig=%s\n' "$D" "$K" "$T"
[[ $D -gt 0 ]] && echo 'DEFER_PATH=REACHED' || echo 'DEFER_PATH=NOT_REACHED'

printf '%s\n' '--- softnet_stat ---'; cat /proc/net/softnet_stat
# Only the warning block is evidence; the rest of dmesg is boot noise.
printf '%s\n' '--- WARNING ---'
printf '%s\n' "$LOG" | grep -A20 -E 'WARNING:.*do_softirq_post_smp_call_flush' || true
