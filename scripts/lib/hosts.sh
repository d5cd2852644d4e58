# Simulated hosts on one machine, for the tests and benchmarks that need a
# network (sourced, not run): each host a network namespace with its own
# address on eth0, a veth pair to a bridge br0 in a switch namespace.
#   add_host PREFIX HOST ADDRESS   (the switch namespace is PREFIXsw)
add_host() {
  local p=$1 host=$2 address=$3
  ip netns add "$p$host"
  ip link add "$p${host}h" type veth peer name "$p${host}s"
  ip link set "$p${host}h" netns "$p$host"
  ip link set "$p${host}s" netns "${p}sw"
  ip -n "$p$host" link set "$p${host}h" name eth0
  ip -n "$p$host" addr add "$address/24" dev eth0
  ip -n "$p$host" link set eth0 up
  ip -n "$p$host" link set lo up
  ip -n "${p}sw" link set "$p${host}s" master br0 up
}
