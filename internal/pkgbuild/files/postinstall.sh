#!/bin/sh
# ringlog's postinst (deb: configure) and %post (rpm: $1 = 1 on install,
# 2 on upgrade). Every step is idempotent, so the arguments do not matter.
set -e

# The broker runs as the ringlog system user (the unit's User=).
if ! getent group ringlog >/dev/null; then
	groupadd --system ringlog
fi
if ! getent passwd ringlog >/dev/null; then
	useradd --system --gid ringlog --home-dir /var/lib/ringlog --no-create-home \
		--shell /usr/sbin/nologin --comment "ringlog broker" ringlog
fi

# The data directory (log.dirs) is made here rather than shipped in the
# package, so that neither dpkg nor rpm ever removes it or its logs. An
# existing one (a mount point, an earlier install) is left as it is.
if [ ! -d /var/lib/ringlog ]; then
	install -d -o ringlog -g ringlog -m 0750 /var/lib/ringlog
fi

# The service is neither enabled nor started: a broker needs its node.id,
# listeners and quorum set first (systemctl enable --now ringlog), and an
# upgrade restarts no broker behind the operator's back (a rolling
# upgrade restarts one broker at a time).
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
exit 0
