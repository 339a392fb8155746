"""Webhook TLS: a private CA and a serving certificate (``cryptography``), written to files for
the webhook to load, kept in a Secret and injected as ``caBundle`` when running in-cluster.

Pure parts (``issue``, ``check``, ``cabundle``, ``names``, ``bundle``, ``pem``) take ``now`` as a
parameter; I/O lives in ``files`` (local disk), ``kube`` (the only module that talks to the API
server) and ``bootstrap`` (the in-cluster loop, written against the ``api.CertAPI`` Protocol).
"""
