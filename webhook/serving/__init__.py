"""The gunicorn integration: the application, its master and gevent worker, connection handling, assembling a
process's runtime, and the self-issued certificate's rotation process.
"""
