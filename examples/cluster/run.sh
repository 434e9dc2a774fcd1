#!/bin/sh
# A three-member mcpvisor cluster on this machine (make cluster-demo):
# one mock serving 12 remote servers on /mcp/<name>, and three
# `supervise --cluster` gateways on 127.0.0.1:7911-7913, every one serving
# all 12 servers. Ctrl-C stops everything. See docs/cluster.md.
set -eu
BIN=${BIN:-bin/mcpvisor}
DIR=$(mktemp -d)
MOCK=127.0.0.1:7910
PEERS=127.0.0.1:7931,127.0.0.1:7932,127.0.0.1:7933
pids=""
stop() {
	trap - INT TERM EXIT
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DIR"
}
trap stop INT TERM EXIT

{
	printf '{"mcpServers":{'
	for i in 01 02 03 04 05 06 07 08 09 10 11 12; do
		[ "$i" = 01 ] || printf ','
		printf '"s%s":{"type":"http","url":"http://%s/mcp/s%s"}' "$i" "$MOCK" "$i"
	done
	printf '}}\n'
} >"$DIR/cluster.json"

# The mock serves until its stdin ends: keep a pipe open.
mkfifo "$DIR/mock.in"
"$BIN" mock -transport http -listen "$MOCK" <"$DIR/mock.in" 2>"$DIR/mock.log" &
pids="$pids $!"
exec 3>"$DIR/mock.in"

for n in 1 2 3; do
	"$BIN" supervise --config "$DIR/cluster.json" --listen "127.0.0.1:791$n" --cluster \
		--cluster-addr "127.0.0.1:792$n" --cluster-membership-port "793$n" --cluster-peers "$PEERS" \
		2>"$DIR/member$n.log" &
	pids="$pids $!"
done

echo "three members, one MCP endpoint each (any of them serves every server):"
for n in 1 2 3; do
	echo "  member $n: http://127.0.0.1:791$n/mcp   status: http://127.0.0.1:791$n/status   log: $DIR/member$n.log"
done
echo "try: curl -s 127.0.0.1:7911/status | head -c 600; kill -9 one member's pid and watch its servers move"
echo "pids (mock, members):$pids"
echo "Ctrl-C stops the cluster."
wait
