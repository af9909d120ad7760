#!/bin/sh
# Installs the Debian packages whose files are missing, with one apt-get
# update, waiting for the dpkg lock: debian-packages.sh /path=package ...
set -eu
missing=""
for pair in "$@"; do
	file=${pair%%=*} pkg=${pair#*=}
	[ -e "$file" ] || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "needs the Debian packages$missing, and installing them needs root" >&2
	exit 1
fi
apt-get -o DPkg::Lock::Timeout=300 update -q
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends $missing
