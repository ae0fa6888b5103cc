"""Transport: AdmissionReview codec, Flask app factory, gunicorn server, cluster state, CLI and metrics."""
