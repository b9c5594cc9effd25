"""Usage: generate.py DIR [PER_FILE]

10,000 PodDefaults and 10,000 Gatekeeper Assigns for the RSS measurement (issue 14 item 3).
PodDefaults: 100 per namespace ns-0..ns-99, each selecting label pd-<i>: "true" and adding an env
var, a volume and a mount. Assigns: one per namespace-glob ns-<i % 100>, on Pods, each setting
env[name: GK_<i>] in every container. Written as 10 files of 1,000 documents per kind."""
import os, sys
out = sys.argv[1]
per_file = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
os.makedirs(out, exist_ok=True)
for f in range(10):
    with open(f"{out}/poddefaults-{f}.yaml", "w") as fh:
        for j in range(per_file):
            i = f * per_file + j
            ns = f"ns-{i % 100}"
            fh.write(f"""apiVersion: kubeflow.org/v1alpha1
kind: PodDefault
metadata: {{name: pd-{i}, namespace: {ns}}}
spec:
  desc: default {i}
  selector: {{matchLabels: {{pd-{i}: "true"}}}}
  env: [{{name: PD_{i}, value: "v{i}"}}]
  volumes: [{{name: vol-{i}, emptyDir: {{}}}}]
  volumeMounts: [{{name: vol-{i}, mountPath: /mnt/pd-{i}}}]
---
""")
    with open(f"{out}/assigns-{f}.yaml", "w") as fh:
        for j in range(per_file):
            i = f * per_file + j
            fh.write(f"""apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {{name: gk-{i}}}
spec:
  applyTo: [{{groups: [""], versions: [v1], kinds: [Pod]}}]
  match: {{scope: Namespaced, kinds: [{{apiGroups: ["*"], kinds: [Pod]}}], namespaces: [ns-{i % 100}]}}
  location: "spec.containers[name: *].env[name: GK_{i}].value"
  parameters: {{assign: {{value: "g{i}"}}}}
---
""")
