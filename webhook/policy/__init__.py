"""The policy's life in a server: reading the file, following the ConfigMap (reload, last good), the file its
workers share, and the generated reference. Parsing and validating a policy is pure, in `rules/policy.py`.
"""
