"""`make bench`: the webhook measured against the limit of its own stack (see README, Performance)."""
