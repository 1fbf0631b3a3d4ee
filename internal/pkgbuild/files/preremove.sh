#!/bin/sh
# ringlog's prerm (deb: remove, upgrade, deconfigure, failed-upgrade) and
# %preun (rpm: $1 = instances left, 0 on erase). The broker stops only
# when the package goes away, not on an upgrade.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl --no-reload disable --now ringlog.service || true
	fi
	;;
esac
exit 0
