#!/usr/bin/python3
"""Checks the manifests of dist/k8s without a cluster: each file parses as
YAML (python3-yaml), and the references between objects hold, which a typo
would silently break at run time:

- every object has apiVersion, kind, metadata.name, namespace sandboxd;
- the kustomization lists every manifest and nothing else;
- each StatefulSet's serviceName is a headless Service publishing not-ready
  pods, whose selector (and the client Service's, and the PDB's) matches the
  pod template's labels;
- every $(VAR) in a container's args is an env var of that container, every
  secretKeyRef / secret volume item names a key of the Secret, and every
  volumeMount names a volume or a volumeClaimTemplate;
- the advertise URL is built from the pod name, the headless Service and the
  namespace, on the container's port;
- session.key decodes to 32 bytes (tenant/session.c reads exactly that).

    /usr/bin/python3 dist/k8s/check.py      # exit 0: "ok", else the problems
"""
import base64
import glob
import os
import re
import sys

try:
    import yaml
except ImportError:
    print("check.py: skipped: python3-yaml is not installed (apt-get install python3-yaml)")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
problems = []


def need(cond, what):
    if not cond:
        problems.append(what)


def load():
    objs = []
    for f in sorted(glob.glob(os.path.join(HERE, "*.yaml"))):
        for d in yaml.safe_load_all(open(f)):
            if d is not None:
                objs.append((os.path.basename(f), d))
    return objs


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_statefulset(sts, services, secret_keys, pdbs):
    name = sts["metadata"]["name"]
    spec = sts["spec"]
    labels = spec["template"]["metadata"]["labels"]
    need(matches(spec["selector"]["matchLabels"], labels), f"{name}: selector does not match the pod labels")
    head = services.get(spec["serviceName"])
    need(head is not None and head["spec"].get("clusterIP") == "None",
         f"{name}: serviceName {spec['serviceName']} is not a headless Service")
    if head:
        need(head["spec"].get("publishNotReadyAddresses") is True, f"{name}: headless Service hides not-ready pods")
    for svc in services.values():
        need(matches(svc["spec"]["selector"], labels), f"{name}: Service {svc['metadata']['name']} selects no pod")
    need(any(matches(p["spec"]["selector"]["matchLabels"], labels) for p in pdbs), f"{name}: no PodDisruptionBudget")
    pod = spec["template"]["spec"]
    volumes = {v["name"] for v in pod.get("volumes", [])} | {c["metadata"]["name"] for c in
                                                              spec.get("volumeClaimTemplates", [])}
    for v in pod.get("volumes", []):
        for item in v.get("secret", {}).get("items", []):
            need(item["key"] in secret_keys, f"{name}: volume {v['name']} names no Secret key {item['key']}")
    for c in pod.get("initContainers", []) + pod["containers"]:
        env = {e["name"]: e for e in c.get("env", [])}
        for e in env.values():
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                need(ref["key"] in secret_keys, f"{name}/{c['name']}: env {e['name']}: no Secret key {ref['key']}")
        for arg in c.get("args", []):
            for var in re.findall(r"\$\(([A-Z_]+)\)", arg):
                need(var in env, f"{name}/{c['name']}: $({var}) in args is not an env var")
        for m in c.get("volumeMounts", []):
            need(m["name"] in volumes, f"{name}/{c['name']}: volumeMount {m['name']} has no volume")
    main = pod["containers"][0]
    port = main["ports"][0]["containerPort"]
    want = f"--set=cluster.advertise_url=http://$(POD_NAME).{spec['serviceName']}.{sts['metadata']['namespace']}.svc:{port}"
    need(want in main.get("args", []), f"{name}: advertise URL is not {want}")
    need(main["securityContext"].get("privileged") is True, f"{name}: not privileged (docs/deploy.md)")


def main():
    objs = load()
    files = {f for f, _ in objs}
    by_kind = {}
    for f, d in objs:
        need("apiVersion" in d and "kind" in d, f"{f}: no apiVersion/kind")
        by_kind.setdefault(d["kind"], []).append(d)
        if d["kind"] != "Kustomization":
            md = d.get("metadata", {})
            need(md.get("name"), f"{f}: no metadata.name")
            if d["kind"] != "Namespace":
                need(md.get("namespace") == "sandboxd", f"{f}: {d['kind']} not in namespace sandboxd")
    kust = by_kind.get("Kustomization", [{}])[0]
    need(set(kust.get("resources", [])) == files - {"kustomization.yaml"},
         "kustomization.yaml does not list exactly the manifests")
    secret = by_kind["Secret"][0]
    secret_keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    sk = secret.get("data", {}).get("session.key", "")
    need(len(base64.b64decode(sk)) == 32 if sk else False, "Secret session.key is not 32 bytes of base64")
    services = {s["metadata"]["name"]: s for s in by_kind.get("Service", [])}
    for sts in by_kind.get("StatefulSet", []):
        check_statefulset(sts, services, secret_keys, by_kind.get("PodDisruptionBudget", []))
    need(by_kind.get("StatefulSet"), "no StatefulSet")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"ok: {len(objs)} objects in {len(files)} files")


if __name__ == "__main__":
    main()
