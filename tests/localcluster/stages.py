"""KWOK stages: how fake kubelets move pods and nodes.

kwokctl's stock node stages (initialise, heartbeat with lease) and pod stages (ready, delete) are
copied from the kwok module by build-binaries.sh; the pod-complete stage is ours so that tests can
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
    "pod-delete.yaml",
)

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
            exitCode: 0
            finishedAt: {{{{ $now | Quote }}}}
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: Succeeded
"""


def stage_documents(bin_dir: Path) -> list[str]:
    """The YAML documents of every stage the cluster runs with."""
    stage_dir = bin_dir / "kwok-stages"
    docs = [(stage_dir / name).read_text() for name in STOCK_STAGES]
    docs.append(POD_COMPLETE)
    return docs
