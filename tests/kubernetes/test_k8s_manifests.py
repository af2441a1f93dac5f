"""The manifests of examples/kubernetes: each mounts its ConfigMap's job.json where the container's
`dtrain launch` reads it and the token Secret where the job spec names it, and each pod's
`dtrain plan` of that job.json, in exactly the env Kubernetes gives that pod, is one job: the
same run id everywhere, the node count of the manifest, the pod's node rank, node 0's rendezvous.
The indexed Job's pods get their host name and the kubelet's /etc/hosts line (unshare --uts
--mount; that part is skipped where it cannot be made). Exit 77 (reason printed) without PyYAML.

    test_k8s_manifests.py DTRAIN_BIN EXAMPLES_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("SKIP: PyYAML is not installed for this Python (python3-yaml)")
    sys.exit(77)

DTRAIN, EXAMPLES = sys.argv[1], sys.argv[2]
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
failures = []
skipped = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def load(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return {d["kind"]: d for d in yaml.safe_load_all(f)}


def check_pod(where, pod_spec, configmap, job):
    """The container runs dtrain launch on the mounted job.json; the Secret sits at token_file."""
    c = pod_spec["containers"][0]
    if "PLACEHOLDER" not in open(os.path.join(EXAMPLES, where.split(":")[0])).read():
        fail(f"{where}: the image placeholder is not marked")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    job_dir = [mounts[n] for n, v in volumes.items() if v.get("configMap", {}).get("name") == configmap]
    if c["command"][:2] != ["dtrain", "launch"] or not job_dir or c["command"][2] != job_dir[0] + "/job.json":
        fail(f"{where}: the command {c['command']} does not launch the ConfigMap's job.json")
    token_dir = [mounts[n] for n, v in volumes.items() if "secret" in v]
    if not token_dir or job["rendezvous"]["token_file"] != token_dir[0] + "/token":
        fail(f"{where}: rendezvous.token_file is not the mounted Secret's token")


def plan(job_file, token, env, wrap=()):
    """dtrain plan --json in exactly `env` (and PATH), through `wrap` (a command prefix)."""
    cmd = list(wrap) + [DTRAIN, "plan", "--json", job_file, "--token-file", token]
    r = subprocess.run(cmd, env={"PATH": PATH, **env}, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"dtrain plan in env {env}: exit {r.returncode}: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


def expect(where, p, nodes, rank, endpoint, run_ids):
    if p is None:
        return
    got = (p["instances"], p["node_rank"], p["rendezvous"]["endpoint"])
    if got != (nodes, rank, endpoint):
        fail(f"{where}: (nodes, rank, endpoint) = {got}, expected {(nodes, rank, endpoint)}")
    run_ids.add(p["run_id"])


def pytorchjob(tmp, token):
    before = len(failures)
    docs = load("pytorchjob.yaml")
    name = docs["PyTorchJob"]["metadata"]["name"]
    job_text = docs["ConfigMap"]["data"]["job.json"]
    job_file = os.path.join(tmp, "pytorchjob.json")
    open(job_file, "w").write(job_text)
    specs = docs["PyTorchJob"]["spec"]["pytorchReplicaSpecs"]
    pods = [("master", 0)] + [("worker", i) for i in range(specs["Worker"]["replicas"])]
    port = [p["containerPort"] for p in specs["Master"]["template"]["spec"]["containers"][0]["ports"]
            if p["name"] == "pytorchjob-port"][0]
    for kind in ("Master", "Worker"):
        check_pod(f"pytorchjob.yaml:{kind}", specs[kind]["template"]["spec"], docs["ConfigMap"]["metadata"]["name"],
                  json.loads(job_text))
    for since_18 in (False, True):  # training-operator before 1.8, and since (PET_*, nprocPerNode unset)
        run_ids = set()
        for rank, (rtype, index) in enumerate(pods):
            env = {"MASTER_ADDR": f"{name}-master-0", "MASTER_PORT": str(port), "WORLD_SIZE": str(len(pods)),
                   "RANK": str(rank), "PYTHONUNBUFFERED": "0", "HOSTNAME": f"{name}-{rtype}-{index}"}
            if since_18:
                env.update({"PET_MASTER_ADDR": env["MASTER_ADDR"], "PET_MASTER_PORT": env["MASTER_PORT"],
                            "PET_NODE_RANK": str(rank), "PET_NNODES": str(len(pods))})
            p = plan(job_file, token, env)
            expect(f"pytorchjob pod {rtype}-{index}", p, len(pods), rank, f"{name}-master-0:29400", run_ids)
            if p is not None and p["master_port"] != port:
                fail(f"pytorchjob pod {rtype}-{index}: the workers' MASTER_PORT {p['master_port']}, expected {port}")
        if len(run_ids) != 1:
            fail(f"pytorchjob: the pods plan different run ids {run_ids}")
    if len(failures) == before:
        print(f"ok: pytorchjob.yaml: {len(pods)} pods plan one job")


def indexed_job(tmp, token):
    before = len(failures)
    docs = load("indexed-job.yaml")
    job, svc = docs["Job"], docs["Service"]
    name, spec = job["metadata"]["name"], job["spec"]
    job_text = docs["ConfigMap"]["data"]["job.json"]
    job_file = os.path.join(tmp, "indexed.json")
    open(job_file, "w").write(job_text)
    check_pod("indexed-job.yaml", spec["template"]["spec"], docs["ConfigMap"]["metadata"]["name"], json.loads(job_text))
    if spec.get("completionMode") != "Indexed" or spec["template"]["spec"].get("subdomain") != svc["metadata"]["name"]:
        fail("indexed-job.yaml: not an Indexed Job whose pods' subdomain is the Service")
    if svc["spec"].get("clusterIP") != "None" or svc["spec"]["selector"].get("job-name") != name:
        fail("indexed-job.yaml: the Service is not headless or does not select the Job's pods")
    if json.loads(job_text)["cluster"]["instances"] != spec["completions"]:
        fail("indexed-job.yaml: cluster.instances differs from the Job's completions")
    probe = subprocess.run(["unshare", "--uts", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        skipped.append(f"indexed Job pods (unshare --uts --mount: {probe.stderr.strip()})")
        return
    domain = f"{svc['metadata']['name']}.default.svc.cluster.local"
    run_ids = set()
    for i in range(spec["completions"]):
        host = f"{name}-{i}"
        hosts = os.path.join(tmp, f"hosts-{i}")
        open(hosts, "w").write(f"127.0.0.1 localhost\n10.244.0.{10 + i}\t{host}.{domain}\t{host}\n")
        wrap = ["unshare", "--uts", "--mount", "sh", "-c",
                'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"', hosts, host]
        p = plan(job_file, token, {"JOB_COMPLETION_INDEX": str(i), "HOSTNAME": host}, wrap)
        expect(f"indexed Job pod {i}", p, spec["completions"], i, f"{name}-0.{domain}:29400", run_ids)
    if len(run_ids) != 1:
        fail(f"indexed Job: the pods plan different run ids {run_ids}")
    if len(failures) == before:
        print(f"ok: indexed-job.yaml: {spec['completions']} pods plan one job")


with tempfile.TemporaryDirectory() as tmp:
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    os.chmod(token, 0o600)
    pytorchjob(tmp, token)
    indexed_job(tmp, token)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
if skipped:
    print("SKIP: " + "; ".join(skipped))
    sys.exit(77)
print("both manifests plan one job per kind of pod")
