"""The WSGI/Flask application: the AdmissionReview codec, request bodies, the admission, health and metrics
endpoints.
"""
