"""TLS lifecycle: CA and serving certificate issuance, atomic files, hot reload, in-cluster rotation.

Independent of the webhook transport (import-linter forbids `webhook`, `flask` and `gunicorn` here), so the same
code serves the `certs` CLI command, the gunicorn TLS hook and the in-process rotator.
"""
