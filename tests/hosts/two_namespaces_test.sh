#!/usr/bin/env bash
# `shardwise train` across two hosts: two network namespaces joined by a veth pair stand for two
# machines, mpirun starts one rank in each over OpenMPI's TCP transport (no shared memory), with
# `ip netns exec` as its remote agent where a cluster would use ssh. The losses must equal the
# in-process run's, and `shardwise bench comm` must run over the same transport.
#
#   two_namespaces_test.sh SHARDWISE_BINARY MODEL_JSON
#
# Exits 77 (skipped, with the reason) where it cannot run: not root, no `ip netns`, no mpirun,
# or a launcher that fails to start the job three times (a launcher failure is not shardwise's).
set -uo pipefail
binary=$1
model=$2
skip() { echo "skipped: $*"; exit 77; }

[[ $(id -u) == 0 ]] || skip "creating network namespaces needs root"
command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
command -v mpirun >/dev/null || skip "no mpirun"

id=$$
ns_a=sw${id}a
ns_b=sw${id}b
work=$(mktemp -d)
cleanup() {
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns_a" 2>"$work/netns.err" || skip "ip netns add failed: $(cat "$work/netns.err")"
ip netns add "$ns_b" || skip "ip netns add failed"
ip link add "swv${id}a" type veth peer name "swv${id}b" || skip "cannot create a veth pair"
ip link set "swv${id}a" netns "$ns_a"
ip link set "swv${id}b" netns "$ns_b"
ip -n "$ns_a" addr add 10.231.0.1/24 dev "swv${id}a"
ip -n "$ns_b" addr add 10.231.0.2/24 dev "swv${id}b"
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns_a" link set "swv${id}a" up
ip -n "$ns_b" link set "swv${id}b" up
# Reachable: a connection to a closed port is refused at once (not lost).
reach=$(ip netns exec "$ns_a" timeout 5 bash -c 'exec 3<>/dev/tcp/10.231.0.2/9' 2>&1)
[[ $reach == *refused* || -z $reach ]] ||
  skip "the namespaces cannot reach each other over the veth pair: $reach"

# The namespaces share /tmp and the host name: each gets its own TMPDIR, or OpenMPI's session
# folders of the two "hosts" collide.
mkdir -p "$work/tmp_a" "$work/tmp_b"
cat >"$work/agent" <<AGENT
#!/usr/bin/env bash
# mpirun's remote agent: "agent HOST COMMAND..." runs COMMAND in the namespace standing for HOST.
host=\$1
shift
case \$host in
  10.231.0.2) exec ip netns exec $ns_b env TMPDIR=$work/tmp_b /bin/sh -c "\$*" ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
AGENT
chmod +x "$work/agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch=(mpirun --host 10.231.0.1:1,10.231.0.2:1 -np 2
        --mca plm_rsh_agent "$work/agent"
        --mca btl tcp,self --mca btl_tcp_if_include 10.231.0.0/24
        --mca oob_tcp_if_include 10.231.0.0/24 --mca pml ob1
        # Two busy-polling ranks and the kernel's network stack share 2 cores here: waiting
        # ranks yield, or a 64 KiB all-reduce takes 8 ms instead of 0.1 ms.
        --mca mpi_yield_when_idle 1)

# Runs the launch with ARGS in namespace a; a launcher that fails to start the job is retried,
# then skipped. Output in $work/out, errors in $work/err.
run_across() {
  for attempt in 1 2 3; do
    ip netns exec "$ns_a" env TMPDIR="$work/tmp_a" "${launch[@]}" "$@" >"$work/out" 2>"$work/err"
    local status=$?
    # A launcher failure: shardwise never spoke (no output, no line of its own) and OpenMPI's
    # runtime (ORTE, its daemons) says why. Anything else is the project's.
    if [[ $status == 0 || -s $work/out ]] || grep -q '^shardwise ' "$work/err" ||
      ! grep -qE '\b(ORTE|orted|HNP)\b|daemon' "$work/err"; then
      return $status
    fi
    echo "launcher failure (attempt $attempt): $(head -c 400 "$work/err")"
  done
  skip "mpirun could not start the job across the namespaces: $(head -c 400 "$work/err")"
}

train=(train --model "$model" --mesh data=2 --zero 2 --steps 6 --batch 4 --seed 3 --json)
"$binary" "${train[@]}" >"$work/local.out" 2>"$work/local.err" ||
  { echo "in-process run failed: $(cat "$work/local.err")"; exit 1; }
run_across "$binary" "${train[@]}" || { echo "the run across hosts failed:"; cat "$work/err"; exit 1; }
local_losses=$(grep -o '"loss":[^,}]*' "$work/local.out")
host_losses=$(grep -o '"loss":[^,}]*' "$work/out")
if [[ -z $local_losses || $local_losses != "$host_losses" ]]; then
  echo "losses differ: in-process"
  echo "$local_losses"
  echo "across two hosts over TCP"
  echo "$host_losses"
  exit 1
fi
echo "6 steps across two namespaces over TCP, the same losses as in-process:"
echo "$host_losses" | tr '\n' ' '
echo

run_across "$binary" bench comm --sizes 64K 1M --ops all_reduce all_gather --json ||
  { echo "bench comm across hosts failed:"; cat "$work/err"; exit 1; }
rows=$(grep -c '"op"' "$work/out")
if [[ $rows != 4 ]] || ! grep -q '"backend":"mpi"' "$work/out"; then
  echo "bench comm printed $rows rows, expected 4 on the mpi backend:"
  cat "$work/out"
  exit 1
fi
echo "bench comm over TCP: $rows rows"
