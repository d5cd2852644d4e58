# Simulated hosts on one machine, for the tests and benchmarks that need a
# network (sourced, not run): each host a network namespace with its own
# address on eth0, a veth pair to a bridge br0 in a switch namespace.
#   add_switch PREFIX              the switch namespace PREFIXsw and its bridge;
#                                  prints why and fails where they cannot be made
#   add_host PREFIX HOST ADDRESS   (the switch namespace is PREFIXsw)
#   remove_hosts PREFIX            deletes every namespace whose name starts with PREFIX
#   host_cluster_keys CONNECT REQUEST   [cluster] keys of a cluster on these hosts:
#                                  plain TCP allowed (the namespaces are the caller's own),
#                                  connect-timeout CONNECT, request-timeout REQUEST
#   host_middleman CLOSE           a [middleman] section: a heartbeat each second, a
#                                  silent connection closed after CLOSE
#   stop_tasks PID...              kills each task started in the background and
#                                  what it started: `timeout CMD` runs CMD in a
#                                  process group of its own (led by timeout), and
#                                  a SIGKILL to timeout alone leaves CMD running
host_cluster_keys() {
  printf 'allow-plain = true ; namespaces this script made: nobody else reaches them\n'
  printf 'connect-timeout = %s\nrequest-timeout = %s\n' "$1" "$2"
}
host_middleman() { printf '[middleman]\nheartbeat-interval = 1s\nconnection-timeout = %s\n' "$1"; }
add_switch() {
  ip netns add "$1sw" 2>/dev/null || { echo "cannot create network namespaces"; return 1; }
  ip -n "$1sw" link add br0 type bridge 2>/dev/null || { echo "cannot create a bridge"; return 1; }
  ip -n "$1sw" link set br0 up
}
remove_hosts() {
  local ns
  for ns in $(ip netns list | awk -v p="$1" '$1 ~ "^"p { print $1 }'); do ip netns del "$ns"; done
}
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
stop_tasks() {
  local pid
  for pid in "$@"; do kill -9 -- "-$pid" "$pid" 2>/dev/null; done
}
