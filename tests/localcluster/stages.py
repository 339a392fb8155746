"""KWOK stages: how fake kubelets move pods and nodes.

kwokctl's stock node stages (initialise, heartbeat with lease) and pod-ready stage are copied from
the kwok module by build-binaries.sh; pod-complete, pod-terminate and pod-delete are ours. Tests can
watch a gang *run*: a Job-owned pod completes only after the Go duration in the annotation
``RUN_FOR_ANNOTATION`` (e.g. "30s"), and without it after ``DEFAULT_RUN_FOR_MS`` (one hour, i.e.
for any test: it keeps running until deleted). Pods without a Job owner run until deleted.
"""

from __future__ import annotations

from pathlib import Path

RUN_FOR_ANNOTATION = "kwok.phalanx.io/run-for"
DEFAULT_RUN_FOR_MS = 3_600_000
STOCK_STAGES = (
    "node-initialize.yaml",
    "node-heartbeat-with-lease.yaml",
    "pod-ready.yaml",
)


def _terminated(exit_code: int, reason: str, phase: str) -> str:
    """A statusTemplate (indented for ``next:``) that ends every container and sets ``phase``."""
    return f"""\
    statusTemplate: |
      {{{{ $now := Now }}}}
      containerStatuses:
      {{{{ range $index, $item := .spec.containers }}}}
      - image: {{{{ $item.image | Quote }}}}
        name: {{{{ $item.name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {exit_code}
            finishedAt: {{{{ $now | Quote }}}}
            reason: {reason}
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: {phase}
"""


# Like a kubelet: a bound pod that is being deleted first turns Failed (its containers killed),
# and only then goes away. The Job controller relies on that terminal phase when a Job has a
# podFailurePolicy (which Phalanx's webhook adds so preemption evictions are not failures);
# kwok's stock pod-delete stage would delete such a pod while it is still Running.
POD_TERMINATE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-terminate
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.spec.nodeName'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running', 'Pending']
  next:
""" + _terminated(137, "Error", "Failed")

POD_DELETE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'In'
      values: ['Succeeded', 'Failed', 'Unknown']
  next:
    delete: true
"""

POD_COMPLETE = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values: ['Job']
  delay:
    durationMilliseconds: {DEFAULT_RUN_FOR_MS}
    durationFrom:
      expressionFrom: '.metadata.annotations["{RUN_FOR_ANNOTATION}"]'
  next:
""" + _terminated(0, "Completed", "Succeeded")


def stage_documents(bin_dir: Path) -> list[str]:
    """The YAML documents of every stage the cluster runs with."""
    stage_dir = bin_dir / "kwok-stages"
    docs = [(stage_dir / name).read_text() for name in STOCK_STAGES]
    docs += [POD_COMPLETE, POD_TERMINATE, POD_DELETE]
    return docs
