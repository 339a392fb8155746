"""``kubectl phalanx``: explain a waiting gang, watch the queue, audit a namespace before opting in.

Read-only. It lists the cluster through the user's kubeconfig, builds the very snapshot the
controller builds (``controller.store``/``records``/``gangs``), and runs the real planning core on
it (``controller.core``); nothing is ever written.
"""
