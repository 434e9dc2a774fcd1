# Runs under dbus-run-session: starts Debian's gnome-keyring (the Secret
# Service) on the private session bus with a fresh login keyring unlocked
# by the password on the first line of stdin, prints the bus address once
# the service owns its name, and stops the keyring when stdin closes.
IFS= read -r password
printf '%s' "$password" | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
keyring=$!
i=0
until dbus-send --session --dest=org.freedesktop.DBus --print-reply /org/freedesktop/DBus \
	org.freedesktop.DBus.GetNameOwner string:org.freedesktop.secrets >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 200 ] || ! kill -0 $keyring 2>/dev/null; then
		echo "gnome-keyring-daemon did not take org.freedesktop.secrets" >&2
		kill $keyring 2>/dev/null
		exit 1
	fi
	sleep 0.05
done
echo "$DBUS_SESSION_BUS_ADDRESS"
cat >/dev/null
kill $keyring
wait $keyring
