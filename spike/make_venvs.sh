#!/bin/bash
# Spike for issue 20: separate venvs under /opt/gwspike, never the machine's Python.
# kg/eg use /usr/bin/python3.11: the gateway runs as another Unix user, which cannot enter /root
# (the pyenv interpreter lives there). product/hub see the machine's packages read-only
# (--system-site-packages) so a dry run tells what installing alongside the product would change.
set -x
cd /opt/gwspike
mkdir -p logs
[ -d kg ] || /usr/bin/python3.11 -m venv kg
[ -d eg ] || /usr/bin/python3.11 -m venv eg
[ -d product ] || python3 -m venv --system-site-packages product
[ -d hub ] || python3 -m venv --system-site-packages hub
t0=$(date +%s)
nice -n 19 kg/bin/pip install jupyter_kernel_gateway > logs/kg.log 2>&1; echo "kg rc=$? $(( $(date +%s)-t0 ))s"
t0=$(date +%s)
nice -n 19 eg/bin/pip install jupyter_enterprise_gateway > logs/eg.log 2>&1; echo "eg rc=$? $(( $(date +%s)-t0 ))s"
t0=$(date +%s)
nice -n 19 product/bin/pip install --dry-run jupyter_kernel_gateway > logs/dry_kg.log 2>&1; echo "dry kg rc=$?"
nice -n 19 product/bin/pip install --dry-run jupyter_enterprise_gateway > logs/dry_eg.log 2>&1; echo "dry eg rc=$?"
nice -n 19 product/bin/pip install --dry-run jupyterhub > logs/dry_hub.log 2>&1; echo "dry hub rc=$?"
t0=$(date +%s)
nice -n 19 hub/bin/pip install jupyterhub > logs/hub.log 2>&1; echo "hub rc=$? $(( $(date +%s)-t0 ))s"
