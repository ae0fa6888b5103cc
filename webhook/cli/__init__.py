"""The `storage-affinity-webhook` command line, the top layer of webhook/: the parser (main.py), one module a
command (servecmd.py, certscmd.py, auditcmd.py, reviewcmd.py, suites.py) and the offline `review` (review.py);
`serve` hands over to webhook/serving/."""
