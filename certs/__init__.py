"""TLS lifecycle: CA and serving certificate issuance, atomic files, hot reload, in-cluster rotation.

Independent of the webhook transport (import-linter forbids `webhook`, `flask` and `gunicorn` here), so the same
code serves the `certs` CLI command, the gunicorn TLS hook and the rotator process. Everything a certificate
is (issuing, files, reloading, the Secret and caBundle reconcile) is here; how `serve` runs the rotator beside
gunicorn, a separate process with its own arguments, is webhook/serving/selfcerts.py.
"""
