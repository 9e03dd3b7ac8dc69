"""Checks the manifests in examples/kubernetes the way Kubernetes would wire them, and prints,
for every ddprun container, the environment it would get (one tab-separated line each) so
that the C++ test can hand it to ddprun's own command-line parser.

  check_manifests.py FILE...    exit 1 with one line per problem on stderr
"""
import re
import sys

import yaml

POD_IP = "10.0.0.7"
JOB_UID = "0b7c6f3e-uid"
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def resolve_env(env_list):
    """The container's environment as Kubernetes builds it: fieldRefs, then $(VAR)."""
    env = {}
    for e in env_list:
        if "value" in e:
            value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        else:
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            value = {"status.podIP": POD_IP,
                     "metadata.labels['batch.kubernetes.io/controller-uid']": JOB_UID}.get(path)
            check(value is not None, f"{e['name']}: unexpected fieldRef {path}")
        env[e["name"]] = value
    return env


def main():
    docs = []
    for path in sys.argv[1:]:
        with open(path) as f:
            docs += [(path, d) for d in yaml.safe_load_all(f) if d]
    services = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Service"}
    jobs = [(p, d) for p, d in docs if d["kind"] == "Job"]
    check(jobs, "no Job")
    for path, job in jobs:
        name = job["metadata"]["name"]
        spec = job["spec"]
        pod = spec["template"]["spec"]
        where = f"{path}: Job {name}"
        check(spec.get("completionMode") == "Indexed", f"{where}: not an Indexed Job")
        check(spec.get("completions") == spec.get("parallelism"),
              f"{where}: completions and parallelism differ")
        check(pod.get("restartPolicy") == "Never", f"{where}: restartPolicy is not Never")
        for c in pod["containers"]:
            if c["command"][0] != "ddprun":
                continue
            env = resolve_env(c.get("env", []))
            check(env.get("PET_LOCAL_ADDR") == POD_IP, f"{where}: PET_LOCAL_ADDR is not the pod IP")
            check(env.get("PET_RDZV_ID") == JOB_UID, f"{where}: PET_RDZV_ID is not the Job's uid")
            nnodes = env.get("PET_NNODES", "1")
            check(int(nnodes.split(":")[-1]) == spec["parallelism"],
                  f"{where}: the --nnodes maximum {nnodes} is not the Job's parallelism")
            host, port = env["PET_RDZV_ENDPOINT"].rsplit(":", 1)
            if pod.get("subdomain"):
                # Node 0 hosts the master: <job>-0.<headless service>.
                svc = services.get(pod["subdomain"])
                check(svc is not None, f"{where}: no Service {pod['subdomain']} for its subdomain")
                check(host == f"{name}-0.{pod['subdomain']}", f"{where}: endpoint {host} is not pod 0")
                if svc:
                    check(svc["spec"].get("clusterIP") == "None", f"{where}: Service not headless")
                    check(svc["spec"].get("publishNotReadyAddresses") is True,
                          f"{where}: Service does not publish pods before they are ready")
                    labels = job["spec"]["template"].get("metadata", {}).get("labels", {})
                    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
                          f"{where}: the Service's selector misses the pods")
                    check(any(p["port"] == int(port) for p in svc["spec"]["ports"]),
                          f"{where}: the Service has no port {port}")
            else:
                svc = services.get(host)
                check(svc is not None, f"{where}: no Service {host} for the endpoint")
                check("is_host=0" in env.get("PET_RDZV_CONF", ""),
                      f"{where}: agents do not leave the master to ddprun-master (is_host=0)")
            token = re.search(r"token_file=([^,]+)", env.get("PET_RDZV_CONF", ""))
            if token:
                mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
                check(any(token.group(1).startswith(m + "/") for m in mounts),
                      f"{where}: token_file {token.group(1)} is not on a mounted volume")
            check(pod.get("terminationGracePeriodSeconds", 30) > 30,
                  f"{where}: the grace period does not leave ddprun its --shutdown-timeout (30 s)")
            if ":" in nnodes:  # elastic: lost pods are replaced, finished ones end the Job
                check(spec.get("backoffLimit", 6) > 0, f"{where}: elastic, but a lost pod fails it")
                rules = spec.get("successPolicy", {}).get("rules", [])
                check(any(r.get("succeededCount") == int(nnodes.split(":")[0]) for r in rules),
                      f"{where}: elastic, but the Job does not end when the --nnodes minimum succeeded")
            else:  # fixed size: ddprun restarts workers itself; a replaced pod is a new node
                check(spec.get("backoffLimit") == 0, f"{where}: backoffLimit is not 0")
            # One line per ddprun container: where, then NAME=VALUE, tab-separated.
            print("\t".join([where] + [f"{k}={v}" for k, v in env.items()]))
    # ddprun-master: its port, the Service's, and the liveness probe on it.
    for path, d in docs:
        if d["kind"] != "Deployment":
            continue
        c = d["spec"]["template"]["spec"]["containers"][0]
        where = f"{path}: Deployment {d['metadata']['name']}"
        if c["command"][0] != "ddprun-master":
            continue
        port = int(c["command"][c["command"].index("--port") + 1])
        check(c.get("livenessProbe", {}).get("tcpSocket", {}).get("port") == port,
              f"{where}: no liveness probe on the master's port {port}")
        svc = services.get(d["metadata"]["name"])
        check(svc is not None and any(p["port"] == port for p in svc["spec"]["ports"]),
              f"{where}: no Service of the same name on port {port}")
        labels = d["spec"]["template"]["metadata"]["labels"]
        check(svc is not None and all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
              f"{where}: the Service's selector misses the master's pod")
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
