#!/bin/sh
# in_netns.sh COMMAND [ARG...]
# Runs COMMAND in network and mount namespaces of its own, where two
# addresses of one host reach the remote engine's listener: 127.0.0.3, lo's
# first address, on which the server listens and its clients dial
# (SHMREG_TEST_HOME), and 127.0.0.2, the first address of a device of its
# own, "second" (one end of a veth pair), from which a peer holds
# unproven connections (SHMREG_TEST_SECOND_SOURCE, SHMREG_TEST_SECOND_DEVICE).
# Laid out so because of UCX 1.13's tcp transport:
#  - it lists devices from /sys/class/net, so sysfs is mounted again
#    inside, to list the namespace's own;
#  - a client's tcp interface listens on the first address of its device,
#    and the server dials the client's lanes at the address its connection
#    came from: a second source on lo would be dialled where nothing listens;
#  - an interface whose address is 127.0.0.1 counts as loopback, and a
#    loopback interface and another never reach each other, so lo's first
#    address is 127.0.0.3 instead.
# Exits 77 (skipped), saying why, where the namespaces cannot be made.
if ! command -v ip >/dev/null 2>&1; then
  echo "skipped: no 'ip' command to lay out the namespace's addresses"
  exit 77
fi
if ! unshare --net --mount true 2>/dev/null; then
  echo "skipped: 'unshare --net --mount' is not permitted here (it needs root)"
  exit 77
fi
export SHMREG_TEST_HOME=127.0.0.3 SHMREG_TEST_SECOND_SOURCE=127.0.0.2 SHMREG_TEST_SECOND_DEVICE=second
exec unshare --net --mount sh -c '
  { mount -t sysfs sysfs /sys && ip link set lo up && ip addr flush dev lo &&
    ip addr add "$SHMREG_TEST_HOME/8" dev lo &&
    ip link add "$SHMREG_TEST_SECOND_DEVICE" type veth peer name second-peer &&
    ip link set "$SHMREG_TEST_SECOND_DEVICE" up && ip link set second-peer up &&
    ip addr add "$SHMREG_TEST_SECOND_SOURCE/32" dev "$SHMREG_TEST_SECOND_DEVICE"; } ||
    { echo "skipped: the namespace could not be laid out (sysfs, lo or a veth pair)"; exit 77; }
  exec "$@"' in_netns "$@"
