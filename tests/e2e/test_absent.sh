#!/usr/bin/env bash
# Why a missing rank's pod is absent (rendezvous.explainMissing, pkg/report/absent.c), end to
# end against the HTTPS stand-in for the API server (kapi_standin.py; a CA made here with
# openssl): `preflight run` as rank 0 of a world whose other rank never comes reads the job's
# pods by its own labels' selector and each absent pod's Events, and says why in the
# missing-ranks finding, the culprit, the evidence `absent`, the human form and the
# termination message. One namespace a reason; the PodList and EventList bodies have the
# shapes the API server writes (kubernetes v1.37.2: k8s.io/api core/v1 types.go json tags;
# the writers of each field named in pkg/report/absent.c and below). A joined rank's verdict
# carries the same words (the SUMMARY). A 403 or no answer is reason "unknown", never a
# verdict of its own; the option off asks nothing.
. "$(dirname "$0")/lib.sh"

for tool in openssl python3; do
    command -v $tool >/dev/null || { skip "absent" "$tool missing"; exit 0; }
done
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

SA=$T/root/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$SA" "$T/ca" "$T/root/etc/podinfo" "$T/bodies" "$T/empty"
TOKEN="eyJhbGciOiJSUzI1NiJ9.absent-token-$$"
printf '%s' "$TOKEN" >"$SA/token"
(
    cd "$T/ca"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
        -subj "/CN=preflight-test-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
        -subj "/CN=kubernetes" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
        -days 2 -extfile ext.cnf 2>/dev/null
) || { notok "absent: make test certificates" "openssl failed"; exit 0; }
cp "$T/ca/ca.crt" "$SA/ca.crt"

# rank 0's own labels, as the downward API writes them (key="Go-quoted value"): an Indexed
# Job's pod (kubernetes v1.37.2 pkg/controller/job: the Job's selector labels and the
# completion index)
JOBUID=5c3b7f0e-9d1a-4e2b-8f6a-0a1b2c3d4e5f
cat >"$T/root/etc/podinfo/labels" <<EOF
batch.kubernetes.io/controller-uid="$JOBUID"
batch.kubernetes.io/job-completion-index="0"
batch.kubernetes.io/job-name="trainer"
controller-uid="$JOBUID"
job-name="trainer"
EOF

# ---- the API server's answers, one namespace a reason
python3 - "$T/bodies" "$JOBUID" >"$T/routes.json" <<'PY'
import json, sys, urllib.parse
out, jobuid = sys.argv[1:3]
sel = urllib.parse.quote("batch.kubernetes.io/controller-uid=" + jobuid, safe="")
routes = {}

def pod(name, host, uid, phase, node=None, ip=None, conditions=(), init=(), main=(), **meta):
    # core/v1 Pod: metadata, spec.{hostname,nodeName,initContainers,containers}, status.{phase,
    # conditions[{type,status,reason,message,lastTransitionTime}], podIP, podIPs,
    # initContainerStatuses, containerStatuses[{name,state:{waiting|running|terminated}}]}
    p = {"metadata": {"name": name, "generateName": "trainer-" + host[-1] + "-",
                      "namespace": "ns", "uid": uid, "resourceVersion": "4711",
                      "creationTimestamp": "2026-11-28T13:00:00Z",
                      "labels": {"batch.kubernetes.io/controller-uid": jobuid,
                                 "batch.kubernetes.io/job-completion-index": host[-1],
                                 "batch.kubernetes.io/job-name": "trainer"},
                      "annotations": {"batch.kubernetes.io/job-completion-index": host[-1]},
                      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                           "name": "trainer", "uid": jobuid,
                                           "controller": True, "blockOwnerDeletion": True}]},
         "spec": {"hostname": host, "subdomain": "trainer", "restartPolicy": "Never",
                  "initContainers": [{"name": "data-fetch", "image": "busybox"},
                                     {"name": "preflight",
                                      "image": "registry.example.com/preflight:0.1.0"}],
                  "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3"}],
                  "schedulerName": "default-scheduler"},
         "status": {"phase": phase, "qosClass": "BestEffort"}}
    p["metadata"].update(meta)
    if node:
        p["spec"]["nodeName"] = node
    if ip:
        p["status"]["podIP"] = ip
        p["status"]["podIPs"] = [{"ip": ip}]
        p["status"]["hostIP"] = "192.0.2.20"
        p["status"]["startTime"] = "2026-11-28T13:00:02Z"
    if conditions:
        p["status"]["conditions"] = list(conditions)
    if init:
        p["status"]["initContainerStatuses"] = list(init)
    if main:
        p["status"]["containerStatuses"] = list(main)
    return p

def cs(name, **state):
    return {"name": name, "image": "x", "imageID": "", "ready": False, "restartCount": 0,
            "started": "running" in state, "state": state}

def cond(t, s, reason=None, message=None):
    c = {"type": t, "status": s, "lastProbeTime": None,
         "lastTransitionTime": "2026-11-28T13:00:01Z"}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c

waitinit = {"waiting": {"reason": "PodInitializing"}}
def me():  # rank 0 itself: its preflight initContainer runs
    return pod("trainer-0-a1b2c", "trainer-0", "uid-rank0", "Pending", node="node-a",
               ip="10.244.0.5", conditions=[cond("PodScheduled", "True")],
               init=[cs("data-fetch", terminated={"exitCode": 0, "reason": "Completed"}),
                     cs("preflight", running={"startedAt": "2026-11-28T13:00:05Z"})],
               main=[cs("trainer", **waitinit)])

def event(reason, message, uid, name, **kw):
    # core/v1 Event: involvedObject, reason, message, type, count, first/lastTimestamp (the
    # kubelet's and the controllers' record.EventRecorder), or eventTime, series,
    # reportingComponent, action and null lastTimestamp (the scheduler's events.k8s.io
    # recorder, read through core/v1)
    e = {"metadata": {"name": name + ".18a1b2c3d4e5f607", "namespace": "ns"},
         "involvedObject": {"kind": "Pod", "namespace": "ns", "name": name, "uid": uid,
                            "apiVersion": "v1", "resourceVersion": "4711"},
         "reason": reason, "message": message, "type": "Warning"}
    e.update(kw)
    return e

# the scheduler's words: kubernetes v1.37.2 pkg/scheduler/framework/types.go FitError.Error()
# with DefaultPreemption's PostFilter message
FIT = ("0/64 nodes are available: 64 Insufficient nvidia.com/gpu. preemption: 0/64 nodes are "
       "available: 64 No preemption victims found for incoming pod.")
scen = {
    "unsched": ([pod("trainer-1-q7w8e", "trainer-1", "uid-u", "Pending",
                     conditions=[cond("PodScheduled", "False", "Unschedulable", FIT)])],
                [event("FailedScheduling", FIT, "uid-u", "trainer-1-q7w8e",
                       eventTime="2026-11-28T13:00:03.123456Z", lastTimestamp=None,
                       firstTimestamp=None, count=None,
                       series={"count": 4, "lastObservedTime": "2026-11-28T13:04:03.000001Z"},
                       reportingComponent="default-scheduler", reportingInstance="default-scheduler-x",
                       action="Scheduling", source={})]),
    # the kubelet: pkg/kubelet/images/types.go ErrImagePullBackOff, message from
    # image_manager.go ("Back-off pulling image ...")
    "image": ([pod("trainer-1-q7w8e", "trainer-1", "uid-i", "Pending", node="node-b",
                   ip="10.244.1.7", conditions=[cond("PodScheduled", "True"),
                                                cond("Initialized", "False", "ContainersNotInitialized",
                                                     "containers with incomplete status: [data-fetch preflight]")],
                   init=[cs("data-fetch", waiting={"reason": "ImagePullBackOff",
                         "message": "Back-off pulling image \"registry.example.com/data-fetch:9.9\": ErrImagePull: failed to pull and unpack image"}),
                         cs("preflight", **waitinit)])],
              [event("Failed", "Failed to pull image \"registry.example.com/data-fetch:9.9\": not found",
                     "uid-i", "trainer-1-q7w8e", count=3, firstTimestamp="2026-11-28T13:00:04Z",
                     lastTimestamp="2026-11-28T13:02:04Z", source={"component": "kubelet", "host": "node-b"})]),
    # the node lifecycle controller: pkg/controller/util/node/controller_utils.go
    # MarkPodsNotReady (Ready=False, then a Warning Event NodeNotReady "Node is not ready")
    "notready": ([pod("trainer-1-q7w8e", "trainer-1", "uid-n", "Running", node="node-c",
                      ip="10.244.2.9", conditions=[cond("PodScheduled", "True"), cond("Ready", "False")],
                      init=[cs("data-fetch", terminated={"exitCode": 0, "reason": "Completed"}),
                            cs("preflight", running={"startedAt": "2026-11-28T13:00:05Z"})])],
                 [event("NodeNotReady", "Node is not ready", "uid-n", "trainer-1-q7w8e", count=1,
                        firstTimestamp="2026-11-28T13:01:00Z", lastTimestamp="2026-11-28T13:01:00Z",
                        source={"component": "node-controller"})]),
    "initrun": ([pod("trainer-1-q7w8e", "trainer-1", "uid-r", "Pending", node="node-d",
                     ip="10.244.3.4", conditions=[cond("PodScheduled", "True")],
                     init=[cs("data-fetch", running={"startedAt": "2026-11-28T13:00:04Z"}),
                           cs("preflight", **waitinit)])], []),
    "unreach": ([pod("trainer-1-q7w8e", "trainer-1", "uid-x", "Pending", node="node-e",
                     ip="10.244.4.2", conditions=[cond("PodScheduled", "True")],
                     init=[cs("data-fetch", terminated={"exitCode": 0, "reason": "Completed"}),
                           cs("preflight", running={"startedAt": "2026-11-28T13:00:05Z"})])], []),
    "nopod": ([], []),
    # a failed try and its Pending replacement: the replacement is the one told
    "retry": ([pod("trainer-1-old11", "trainer-1", "uid-o", "Failed", node="node-f",
                   init=[cs("data-fetch", terminated={"exitCode": 0, "reason": "Completed"}),
                         cs("preflight", terminated={"exitCode": 4, "reason": "Error",
                                                     "message": "fail (node): rdma.verbs: no device"})],
                   creationTimestamp="2026-11-28T12:50:00Z"),
               pod("trainer-1-new22", "trainer-1", "uid-w", "Pending",
                   conditions=[cond("PodScheduled", "False", "SchedulingGated",
                                    "Scheduling is blocked due to non-empty scheduling gates")],
                   creationTimestamp="2026-11-28T13:00:00Z")], []),
}
for ns, (pods, events) in scen.items():
    items = [me()] + pods
    for p in items:
        p["metadata"]["namespace"] = ns
    f = "%s/%s-pods.json" % (out, ns)
    json.dump({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5000"},
               "items": items}, open(f, "w"))
    routes["/api/v1/namespaces/%s/pods?labelSelector=%s" % (ns, sel)] = [200, f]
    for p in items:
        uid = p["metadata"]["uid"]
        f = "%s/%s-events-%s.json" % (out, ns, uid)
        json.dump({"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "5000"},
                   "items": [e for e in events if e["involvedObject"]["uid"] == uid]}, open(f, "w"))
        routes["/api/v1/namespaces/%s/events?fieldSelector=%s" % (
            ns, urllib.parse.quote("involvedObject.uid=" + uid, safe=""))] = [200, f]
open(out + "/forbidden.txt", "w").write(
    'pods is forbidden: User "system:serviceaccount:denied:preflight" cannot list resource '
    '"pods" in API group "" in the namespace "denied"')
routes["/api/v1/namespaces/denied/pods?labelSelector=%s" % sel] = [403, out + "/forbidden.txt"]
print(json.dumps(routes))
PY

LOG=$T/requests.jsonl
: >"$LOG"
python3 "$PREFLIGHT_SRC/tests/e2e/kapi_standin.py" "$T/ca" "$T/port" "$LOG" "$TOKEN" "$T/routes.json" &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 1 100); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port" 2>/dev/null)
[ -n "$PORT" ] || { notok "absent: the stand-in API server starts"; exit 0; }

cat >"$T/on.yaml" <<EOF
rendezvous:
  timeoutSeconds: 2
  explainMissing: true
EOF
cat >"$T/off.yaml" <<EOF
rendezvous:
  timeoutSeconds: 2
EOF

RDV_PORT=$((29800 + $$ % 150))
# rank0 NAME NS CONFIG [WORLD]: `preflight run` as rank 0 (world 2 unless told) whose rank 1
# never comes; V, H (the human form), TERM (the termination message), RC
rank0() {
    local name=$1 ns=$2 cfg=$3 world=${4:-2}
    V=$T/v-$name.yaml H=$T/h-$name.txt TERM=$T/term-$name
    : >"$TERM"
    env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT NO_COLOR=1 \
        KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" \
        POD_NAME=trainer-0-a1b2c POD_NAMESPACE="$ns" NODE_NAME=node-a JOB_COMPLETION_INDEX=0 \
        PREFLIGHT_TOKEN=absent-secret \
        "$PREFLIGHT" run --root "$T/root" --config "$cfg" --verdict "$V" --format human \
        --rank 0 --world-size "$world" --coordinator 127.0.0.1 --port "$RDV_PORT" --timeout 40 \
        --termination-log "$TERM" >"$H" 2>"$T/err-$name.txt"
    RC=$?
}
absent() { yq "$V" "check('rendezvous')['evidence'].get('absent', [{}])[0].get('$1')"; }
finding() { yq "$V" "[f['message'] for f in check('rendezvous')['findings'] if f['code'] == 'missing-ranks'][0]"; }
culprit() { yq "$V" "[c['reason'] for c in d.get('culprits', []) if c['rank'] == 1][0]"; }

# human_has FILE TEXT: the human form holds TEXT, its wrapping undone (words joined by one space)
human_has() {
    python3 -c 'import sys; t = " ".join(open(sys.argv[1]).read().split()); sys.exit(0 if " ".join(sys.argv[2].split()) in t else 1)' "$1" "$2"
}

# everywhere: the finding, the culprit, the human form and the termination message say it
told_everywhere() {
    local name=$1 want=$2
    check "absent $name: the missing-ranks finding says \"$want\"" grep -qF -- "$want" <<<"$(finding)"
    check "absent $name: the culprit rank 1 says it" grep -qF -- "$want" <<<"$(culprit)"
    check "absent $name: the human form says it" human_has "$H" "$want"
    check "absent $name: the termination message says it" grep -qF -- "$want" "$TERM"
}

# ---- Pending, the scheduler's message; with a joined rank 1 whose verdict says it too
RANK1_V=$T/v-unsched-rank1.yaml
env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT PREFLIGHT_TOKEN=absent-secret \
    "$PREFLIGHT" run --root "$T/empty" --verdict "$RANK1_V" --format yaml --rank 1 \
    --world-size 3 --coordinator 127.0.0.1 --port "$RDV_PORT" --timeout 40 >/dev/null 2>&1 &
R1=$!
# trainer-2 is the absent one in a world of 3: the routes name trainer-1; rename the pods
python3 - "$T/bodies/unsched-pods.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["items"][1:]:
    p["spec"]["hostname"] = "trainer-2"
json.dump(d, open(sys.argv[1], "w"))
PY
rank0 unsched unsched "$T/on.yaml" 3
wait $R1
R1_RC=$?
expect_eq "absent unsched: rank 0 fails with class peer (exit 5)" "$RC" 5
expect_eq "absent unsched: evidence absent[0] is rank 2's pod" \
    "$(yq "$V" "[(a['rank'], a['pod'], a['phase'], a['reason']) for a in check('rendezvous')['evidence']['absent']]")" \
    '[[2, "trainer-1-q7w8e", "Pending", "Unschedulable"]]'
expect_eq "absent unsched: the message is the scheduler's" "$(absent message)" \
    "0/64 nodes are available: 64 Insufficient nvidia.com/gpu. preemption: 0/64 nodes are available: 64 No preemption victims found for incoming pod."
expect_eq "absent unsched: the scheduler's FailedScheduling Event is named" \
    "$(yq "$V" "check('rendezvous')['evidence']['absent'][0]['lastWarningEvent'].startswith('FailedScheduling: 0/64 nodes')")" "True"
check "absent unsched: evidence absentFrom names the selector" \
    grep -qF "labelled batch.kubernetes.io/controller-uid=$JOBUID" <<<"$(yq "$V" "check('rendezvous')['evidence']['absentFrom']")"
WANT="Unschedulable: 0/64 nodes are available: 64 Insufficient nvidia.com/gpu"
check "absent unsched: the finding says it" grep -qF -- "$WANT" <<<"$(finding)"
check "absent unsched: the human form says it" human_has "$H" "$WANT"
check "absent unsched: the termination message says it" grep -qF -- "$WANT" "$TERM"
expect_eq "absent unsched: joined rank 1 exits 5 (peer)" "$R1_RC" 5
check "absent unsched: joined rank 1's verdict says why rank 2 is absent (the SUMMARY)" \
    grep -qF -- "$WANT" <<<"$(yq "$RANK1_V" "[f['message'] for f in check('rendezvous')['findings'] if f['code'] == 'missing-ranks']")"
check "absent unsched: joined rank 1's culprit says it" \
    grep -qF -- "$WANT" <<<"$(yq "$RANK1_V" "[c['reason'] for c in d.get('culprits', [])]")"
python3 - "$LOG" "$JOBUID" >"$T/req-check.txt" 2>&1 <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
got = [r["path"] for r in reqs if "/namespaces/unsched/" in r["path"]]
want = ["/api/v1/namespaces/unsched/pods?labelSelector=batch.kubernetes.io%2Fcontroller-uid%3D" + sys.argv[2],
        "/api/v1/namespaces/unsched/events?fieldSelector=involvedObject.uid%3Duid-u"]
assert got == want, got
assert all(r["method"] == "GET" and r["auth"] for r in reqs), reqs
PY
check "absent unsched: two GETs with the token: the pods by selector, the absent pod's Events ($(tail -1 "$T/req-check.txt"))" test ! -s "$T/req-check.txt"

# ---- an image that does not pull
rank0 image image "$T/on.yaml"
expect_eq "absent image: reason and message from the waiting initContainer" \
    "$(absent reason) | $(absent message)" \
    'ImagePullBackOff | container data-fetch: Back-off pulling image "registry.example.com/data-fetch:9.9": ErrImagePull: failed to pull and unpack image'
expect_eq "absent image: node and address" "$(absent node) $(absent address)" "node-b 10.244.1.7"
told_everywhere image "pod trainer-1-q7w8e Pending, ImagePullBackOff: container data-fetch: Back-off pulling image"

# ---- its node NotReady
rank0 notready notready "$T/on.yaml"
expect_eq "absent notready: reason NodeNotReady (the node lifecycle controller's Event)" \
    "$(absent reason) | $(absent lastWarningEvent)" "NodeNotReady | NodeNotReady: Node is not ready"
told_everywhere notready "NodeNotReady: node node-c is not ready"

# ---- another initContainer still running
rank0 initrun initrun "$T/on.yaml"
expect_eq "absent initrun: reason InitContainerRunning" "$(absent reason)" InitContainerRunning
told_everywhere initrun "initContainer data-fetch has been running since 2026-11-28T13:00:04Z on node node-d; preflight starts after it"

# ---- running but unreachable: name, address, port
rank0 unreach unreach "$T/on.yaml"
expect_eq "absent unreach: reason Unreachable" "$(absent reason)" Unreachable
told_everywhere unreach "container preflight is running on node node-e at 10.244.4.2, but it never reached rank 0 at 127.0.0.1:$RDV_PORT"

# ---- no pod for the rank at all
rank0 nopod nopod "$T/on.yaml"
expect_eq "absent nopod: reason NoPod" "$(absent reason)" NoPod
told_everywhere nopod "NoPod: no pod named or with hostname trainer-1 among the 1 pods of the job"

# ---- a failed try and its replacement: the replacement's word (SchedulingGated)
rank0 retry retry "$T/on.yaml"
expect_eq "absent retry: the newer, live pod is told" "$(absent pod) $(absent reason)" \
    "trainer-1-new22 SchedulingGated"

# ---- 403: the reason is unknown, the verdict as without the option
rank0 denied denied "$T/on.yaml"
expect_eq "absent 403: reason unknown" "$(absent reason)" unknown
check "absent 403: the message says HTTP 403 and which right" \
    grep -qF "HTTP 403: the pod's ServiceAccount may not list them" <<<"$(absent message)"
DENIED_RC=$RC
DENIED_VERDICT=$(yq "$V" "(d['verdict'], d.get('failureClass'))")
rank0 off denied "$T/off.yaml"
expect_eq "absent 403: same exit code and verdict as with the option off" \
    "$RC $(yq "$V" "(d['verdict'], d.get('failureClass'))")" "$DENIED_RC $DENIED_VERDICT"
expect_eq "absent off: no evidence absent" "$(yq "$V" "'absent' in check('rendezvous')['evidence']")" False
expect_eq "absent off: nothing asked of the API server for it" \
    "$(grep -c '/namespaces/denied/' "$LOG")" 1

# ---- no API server at all (a closed port): unknown, within the budget
env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT NO_COLOR=1 \
    KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=1 \
    POD_NAME=trainer-0-a1b2c POD_NAMESPACE=unsched JOB_COMPLETION_INDEX=0 PREFLIGHT_TOKEN=absent-secret \
    "$PREFLIGHT" run --root "$T/root" --config "$T/on.yaml" --verdict "$T/v-closed.yaml" --format yaml \
    --rank 0 --world-size 2 --coordinator 127.0.0.1 --port "$RDV_PORT" --timeout 40 >/dev/null 2>&1
expect_eq "absent closed port: exit 5, reason unknown" \
    "$? $(yq "$T/v-closed.yaml" "check('rendezvous')['evidence']['absent'][0]['reason']")" "5 unknown"
