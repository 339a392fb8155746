"""Webhook TLS: a private CA and a serving certificate (``cryptography``), written to files for
the webhook to load, kept in a Secret and injected as ``caBundle`` when running in-cluster.

``bundle`` makes and judges the certificates (pure: ``now`` is a parameter); ``files`` keeps them
on local disk; ``kube`` is the Kubernetes side -- the Secret, the caBundle and the in-pod bootstrap,
written against its ``CertAPI`` Protocol; ``__main__`` is ``python -m certs``.
"""
