#!/bin/sh
# Installs and starts dice-lsp-team.service (server/README.md, "Running it as a service"): the dice-lsp user,
# a token if there is none yet, the unit. Run as root, after installing dice-lsp into /opt/dice-lsp.
set -eu
here=$(dirname "$0")
install -D -m 0644 "$here/dice-lsp.sysusers" /etc/sysusers.d/dice-lsp.conf
systemd-sysusers /etc/sysusers.d/dice-lsp.conf
install -d -m 0755 /etc/dice-lsp
if [ ! -s /etc/dice-lsp/token ]; then  # 32 random bytes in hex, readable by the server's user only
    install -m 0600 -o dice-lsp -g dice-lsp /dev/null /etc/dice-lsp/token
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > /etc/dice-lsp/token
fi
install -m 0644 "$here/dice-lsp-team.service" /etc/systemd/system/dice-lsp-team.service
systemctl daemon-reload
systemctl enable --now dice-lsp-team.service
