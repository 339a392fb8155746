"""The Phalanx mutating admission webhook.

``mutate`` (pure: AdmissionRequest in, JSONPatch ops and warnings out) decides; ``admission``
turns request bodies into answers; ``server`` serves them over TLS with aiohttp.
"""
