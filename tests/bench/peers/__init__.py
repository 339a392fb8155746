"""Phalanx side by side with its peers on the same local control plane (``make bench-peers``)."""
