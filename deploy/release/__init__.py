"""``make release``: the install manifests, Helm chart, image archive and plugin wheel in ``dist/``."""
