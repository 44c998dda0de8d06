{{/*
Names. Every name is derived from the release, so that the helpers give the same names when
they are included from a parent chart (with this chart as a dependency).
*/}}
{{- define "preflight.fullname" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- if $v.fullnameOverride -}}
{{- $v.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "preflight" $v.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* preflight's values: .Values here, .Values.preflight in a parent chart (as YAML). */}}
{{- define "preflight.v" -}}
{{- if hasKey .Values "preflight" -}}
{{- toYaml .Values.preflight -}}
{{- else -}}
{{- toYaml .Values -}}
{{- end -}}
{{- end -}}

{{- define "preflight.serviceName" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- default (include "preflight.fullname" .) $v.service.name -}}
{{- end -}}

{{- define "preflight.secretName" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- default (printf "%s-token" (include "preflight.fullname" .)) $v.token.existingSecret -}}
{{- end -}}

{{- define "preflight.configName" -}}
{{- printf "%s-config" (include "preflight.fullname" .) -}}
{{- end -}}

{{- define "preflight.serviceAccountName" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- if $v.serviceAccount.create -}}
{{- default (include "preflight.fullname" .) $v.serviceAccount.name -}}
{{- else -}}
{{- default "default" $v.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "preflight.image" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- printf "%s:%s" $v.image.repository (default .Chart.AppVersion $v.image.tag) -}}
{{- end -}}

{{- define "preflight.labels" -}}
app.kubernetes.io/name: preflight
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
preflight.podLabels: the label the headless Service selects. Put it on every pod that takes
part in the rendezvous (your training pods), so that they get DNS records:
  metadata:
    labels:
      {{- include "preflight.podLabels" . | nindent 6 }}
*/}}
{{- define "preflight.podLabels" -}}
preflight.dev/service: {{ include "preflight.serviceName" . }}
{{- end -}}

{{/*
preflight.container: the container that runs `preflight run`. Argument: a dict with
  ctx          the root context ($)
  worldSize    number of pods in the rendezvous (required)
  coordinator  rank 0's HOST[:PORT] (optional: derived from the hostname and subdomain)
  name         container name (default "preflight")
  tokenSecret  a Secret (key "token") of this job's own (optional: the release's Secret,
               preflight.secretName). Give each job of a release its own, so that a pod of
               another job never holds this job's token (docs/kubernetes.md, "One token per job")
With API use (config.report.events, .annotate, .markNode) it mounts the volume preflight-sa
(preflight.volumes): the pod must set automountServiceAccountToken: false, so that no other
container gets the token.
*/}}
{{- define "preflight.container" -}}
{{- $ctx := .ctx -}}
{{- $v := include "preflight.v" $ctx | fromYaml -}}
{{- $name := default "preflight" .name -}}
- name: {{ $name }}
  {{- if $v.trainingImage }}
  image: {{ $v.trainingImage }}
  command: [/opt/preflight/preflight]
  {{- else }}
  image: {{ include "preflight.image" $ctx }}
  {{- end }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args: [run]
  terminationMessagePolicy: FallbackToLogsOnError   # preflight's one-line reason
  {{- with include "preflight.trainerEnvFrom" $ctx }}
  envFrom:
    {{- . | nindent 4 }}
  {{- end }}
  env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NAMESPACE
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    - name: POD_UID
      valueFrom: {fieldRef: {fieldPath: metadata.uid}}
    - name: NODE_NAME
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: PREFLIGHT_WORLD_SIZE
      value: {{ required "preflight.container: worldSize is required" .worldSize | toString | quote }}
    {{- with .coordinator }}
    - name: PREFLIGHT_COORDINATOR
      value: {{ . | quote }}
    {{- end }}
    - name: PREFLIGHT_CONFIG
      value: /etc/preflight/config.yaml
    - name: PREFLIGHT_TIMEOUT
      value: {{ $v.timeoutSeconds | toString | quote }}
    - name: PREFLIGHT_TOKEN
      valueFrom:
        secretKeyRef:
          name: {{ default (include "preflight.secretName" $ctx) .tokenSecret }}
          key: token
    {{- /* the device plugins' resources of the limits, for net.multus (docs/kubernetes.md):
         the downward API cannot expose extended resources */}}
    {{- $devres := list }}
    {{- range $k, $n := (default dict (default dict $v.resources).limits) }}
    {{- if and (contains "/" $k) (not (hasPrefix "nvidia.com/" $k)) }}
    {{- $devres = append $devres (printf "%s=%v" $k $n) }}
    {{- end }}
    {{- end }}
    {{- with $devres }}
    - name: PREFLIGHT_DEVICE_RESOURCES
      value: {{ join "," . | quote }}
    {{- end }}
    {{- if (default dict $v.rbac).readClaims }}
    - name: PREFLIGHT_READ_CLAIMS
      value: "true"
    {{- end }}
    {{- with $v.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if $v.securityContext }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  {{- else if $v.ipcLock }}
  {{- /* added capabilities reach root processes only: IPC_LOCK needs UID 0 to take effect.
       Pod Security admits this under "privileged" only (IPC_LOCK is not on baseline's list) */}}
  securityContext:
    runAsUser: 0
    runAsNonRoot: false
    capabilities:
      drop: [ALL]
      add: [IPC_LOCK]
  {{- else }}
  {{- /* what Pod Security "restricted" (and so "baseline") admits: docs/kubernetes.md */}}
  securityContext:
    {{- include "preflight.restrictedSecurityContext" $ctx | nindent 4 }}
  {{- end }}
  {{- $res := deepCopy (default dict $v.resources) -}}
  {{- if $v.gpusPerPod }}
  {{- $limits := merge (dict "nvidia.com/gpu" $v.gpusPerPod) (default dict $res.limits) -}}
  {{- $_ := set $res "limits" $limits -}}
  {{- end }}
  {{- with $res }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - {name: preflight-podinfo, mountPath: /etc/podinfo, readOnly: true}
    - {name: preflight-config, mountPath: /etc/preflight, readOnly: true}
    - {name: preflight-verdict, mountPath: /run/preflight}
    - {name: preflight-shm, mountPath: /dev/shm}
    {{- if $v.trainingImage }}
    - {name: preflight-bin, mountPath: /opt/preflight, readOnly: true}
    {{- end }}
    {{- if include "preflight.usesApi" $ctx }}
    - {name: preflight-sa, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}
    {{- end }}
    {{- with $v.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/*
preflight.trainerEnvFrom: the envFrom list preflight uses (the ncclEnv ConfigMap, then
envFrom); give your trainer container the same, so that a pass holds for the trainer's view:
  envFrom:
    {{- include "preflight.trainerEnvFrom" . | nindent 4 }}
Empty when neither is set.
*/}}
{{- define "preflight.trainerEnvFrom" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- if $v.ncclEnv }}
- configMapRef:
    name: {{ include "preflight.fullname" . }}-nccl
{{- end }}
{{- with $v.envFrom }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The initContainer that copies the binary in, when preflight runs in the training image. */}}
{{- define "preflight.installContainer" -}}
{{- $ctx := .ctx -}}
{{- $v := include "preflight.v" $ctx | fromYaml -}}
{{- if $v.trainingImage -}}
- name: preflight-install
  image: {{ include "preflight.image" $ctx }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args: [install, /opt/preflight]
  terminationMessagePolicy: FallbackToLogsOnError
  securityContext:
    {{- include "preflight.restrictedSecurityContext" $ctx | nindent 4 }}
  volumeMounts:
    - {name: preflight-bin, mountPath: /opt/preflight}
{{- end -}}
{{- end -}}

{{/*
preflight.initContainer: preflight as initContainer(s) of your training pods; the trainer
starts only when the verdict is pass or warn. Argument: the dict of preflight.container.
  initContainers:
    {{- include "preflight.initContainer" (dict "ctx" $ "worldSize" 8) | nindent 8 }}
  volumes:
    {{- include "preflight.volumes" (dict "ctx" $) | nindent 8 }}
  automountServiceAccountToken: false   # the API token goes to preflight alone (preflight-sa)
Mount the volume preflight-verdict at /run/preflight in the trainer to read verdict.yaml;
mount nothing else of preflight's in the trainer (never preflight-sa).
*/}}
{{- define "preflight.initContainer" -}}
{{- with include "preflight.installContainer" . }}
{{ . }}
{{- end }}
{{ include "preflight.container" . }}
{{- end -}}

{{/*
preflight.volumes: the volumes the containers above mount. Argument: (dict "ctx" $).
When preflight talks to the API server (config.report.events, .annotate or .markNode,
rbac.readClaims, or config.rendezvous.explainMissing), one of
them is preflight-sa: the ServiceAccount token (bound to the pod, expiring), the cluster CA and
the namespace, mounted by the preflight container alone at the path every pod's automatic
token has (/var/run/secrets/kubernetes.io/serviceaccount). Your pod must then set
  automountServiceAccountToken: false
at pod level (the chart's ServiceAccount says false too, but a pod's true wins): otherwise
the kubelet mounts the token into every container, your trainer's included, which could then
do whatever the ServiceAccount may (patch nodes with report.markNode).
*/}}
{{- define "preflight.usesApi" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- $r := default dict $v.config.report -}}
{{- if or $r.events $r.annotate (has (default "none" $r.markNode) (list "label" "taint")) (default dict $v.rbac).readClaims (default dict $v.config.rendezvous).explainMissing -}}
true
{{- end -}}
{{- end -}}

{{- define "preflight.volumes" -}}
{{- $ctx := .ctx -}}
{{- $v := include "preflight.v" $ctx | fromYaml -}}
- name: preflight-podinfo
  downwardAPI:
    items:
      - path: annotations
        fieldRef: {fieldPath: metadata.annotations}
      - path: labels
        fieldRef: {fieldPath: metadata.labels}
- name: preflight-config
  configMap:
    name: {{ include "preflight.configName" $ctx }}
- name: preflight-verdict
  emptyDir: {}
- name: preflight-shm
  emptyDir:
    medium: Memory
    {{- with $v.shmSizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
{{- if $v.trainingImage }}
- name: preflight-bin
  emptyDir: {}
{{- end }}
{{- if include "preflight.usesApi" $ctx }}
- name: preflight-sa
  projected:
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3600   # the kubelet renews it; a leaked copy dies within the hour
      - configMap:
          name: kube-root-ca.crt
          items: [{key: ca.crt, path: ca.crt}]
      - downwardAPI:
          items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]
{{- end }}
{{- with $v.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
preflight.restrictedSecurityContext: a container securityContext that the Pod Security
Standards' "restricted" level admits (k8s.io/pod-security-admission policy checks
runAsNonRoot, allowPrivilegeEscalation, capabilities_restricted, seccompProfile_restricted):
the image's own non-root user (65532, the Dockerfile's USER, named so that a training image
that runs as root still runs preflight as non-root), no capability, no privilege escalation,
the runtime's default seccomp profile.
*/}}
{{- define "preflight.restrictedSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
preflight.watchContainer: `preflight watch` as a native sidecar of your training pod (an
initContainer with restartPolicy: Always, Kubernetes 1.29+; list it after preflight's own
initContainer, so that it starts once the gate passed and ends after the trainer). It follows
the NCCL log files the trainer writes into /run/preflight (the volume preflight-verdict, where
the gate wrote verdict.yaml) and compares them with the gate's verdict: docs/kubernetes.md,
"Watching the trainer's NCCL". Empty unless watch.enabled. Argument: (dict "ctx" $).
  initContainers:
    {{- include "preflight.initContainer" (dict "ctx" $ "worldSize" 8) | nindent 8 }}
    {{- include "preflight.watchContainer" (dict "ctx" $) | nindent 8 }}
Give the trainer the environment of preflight.watchTrainerEnv and mount preflight-verdict at
/run/preflight writable. With config.watch.onMismatch: stop, set shareProcessNamespace: true
on the pod (the watch signals the trainer's processes).
*/}}
{{- define "preflight.watchContainer" -}}
{{- $ctx := .ctx -}}
{{- $v := include "preflight.v" $ctx | fromYaml -}}
{{- if (default dict $v.watch).enabled -}}
- name: preflight-watch
  image: {{ include "preflight.image" $ctx }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  restartPolicy: Always
  args: [watch, /run/preflight]
  terminationMessagePolicy: FallbackToLogsOnError
  env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NAMESPACE
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    # the Event's involvedObject.uid: `kubectl describe pod` finds a pod's Events by its uid
    - name: POD_UID
      valueFrom: {fieldRef: {fieldPath: metadata.uid}}
    - name: NODE_NAME
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: PREFLIGHT_CONFIG
      value: /etc/preflight/config.yaml
  securityContext:
    {{- include "preflight.restrictedSecurityContext" $ctx | nindent 4 }}
  {{- with $v.watch.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - {name: preflight-config, mountPath: /etc/preflight, readOnly: true}
    - {name: preflight-verdict, mountPath: /run/preflight}
    {{- if include "preflight.usesApi" $ctx }}
    - {name: preflight-sa, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}
    {{- end }}
{{- end -}}
{{- end -}}

{{/*
preflight.watchTrainerEnv: the trainer's NCCL logging for the watch: INFO level, only the INIT
and NET subsystems (what the watch reads: version, network, NICs, channels, GPUDirect, init),
one file a process in /run/preflight (NCCL_DEBUG_FILE's %h host and %p pid, src/debug.cc of
NVIDIA/nccl). Empty unless watch.enabled. Argument: the root context.
  env:
    {{- include "preflight.watchTrainerEnv" . | nindent 4 }}
*/}}
{{- define "preflight.watchTrainerEnv" -}}
{{- $v := include "preflight.v" . | fromYaml -}}
{{- if (default dict $v.watch).enabled -}}
- {name: NCCL_DEBUG, value: INFO}
- {name: NCCL_DEBUG_SUBSYS, value: "INIT,NET"}
- {name: NCCL_DEBUG_FILE, value: "/run/preflight/nccl.%h.%p"}
{{- end -}}
{{- end -}}
