"""The domain: pure placement and validation rules, the policy model and selector algebra.

Nothing here performs I/O or imports transport code (checked by import-linter); rules are functions of
(the object under review, a read-only cluster view, the policy).
"""
