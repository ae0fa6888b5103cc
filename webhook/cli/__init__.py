"""The `storage-affinity-webhook` command line, the top layer of webhook/: argument parsing (main.py) and the
offline `review` (review.py); `serve` hands over to webhook/serving/."""
