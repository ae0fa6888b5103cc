"""The Helm chart: rendering, values, RBAC, webhooks, CEL match conditions and monitoring."""
