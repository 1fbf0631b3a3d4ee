#!/bin/sh
# ringlog's postrm (deb: remove, purge, upgrade, ...) and %postun (rpm:
# $1 = instances left). The data directory and the ringlog user are kept,
# even on purge: the logs are the one thing a reinstall cannot bring back,
# and a user deleted while files it owns remain would leave them to
# whoever is given its uid next.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
case "$1" in
purge)
	echo "ringlog: /var/lib/ringlog and the ringlog user are kept; remove them by hand if the data is not needed" >&2
	;;
esac
exit 0
