{{/* Chart name, truncated to 63 characters (a label value). */}}
{{- define "saw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's resources. The release name is used alone when it already contains the chart name.
*/}}
{{- define "saw.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "saw.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the server pods (never change them: Deployment selectors are immutable). */}}
{{- define "saw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "saw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{/* Labels on every resource. */}}
{{- define "saw.labels" -}}
helm.sh/chart: {{ include "saw.chart" . }}
{{ include "saw.selectorLabels" . }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "saw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "saw.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- include "saw.requireValues" . }}{{ .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "saw.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The policy ConfigMap's name is fixed: the server and the docs refer to it. */}}
{{- define "saw.policyConfigMapName" -}}storage-affinity-policy{{- end }}

{{/* Name of the Secret holding the serving certificate (tls.crt, tls.key), per certificate mode. */}}
{{- define "saw.tlsSecretName" -}}
{{- $c := .Values.certificates }}
{{- if eq $c.mode "provided" }}
{{- include "saw.requireValues" . }}{{ $c.provided.secretName }}
{{- else if eq $c.mode "self" }}
{{- default (printf "%s-tls" (include "saw.fullname" .)) $c.self.secretName }}
{{- else }}
{{- printf "%s-tls" (include "saw.fullname" .) }}
{{- end }}
{{- end }}

{{/* Directory the server reads tls.crt and tls.key from. In mode self it writes them there itself. */}}
{{- define "saw.certDir" -}}
{{- if eq .Values.certificates.mode "self" }}/tmp/certs{{ else }}/etc/storage-affinity-webhook/tls{{ end }}
{{- end }}

{{/*
Namespaces no webhook ever sees, as a JSON list: the release namespace (the webhook must never stand between
itself and its own pods), kube-system and kube-node-lease, then webhook.excludedNamespaces.
*/}}
{{- define "saw.excludedNamespaces" -}}
{{- $list := list .Release.Namespace "kube-system" "kube-node-lease" }}
{{- range .Values.webhook.excludedNamespaces }}
{{- $list = append $list . }}
{{- end }}
{{- toJson (uniq $list) }}
{{- end }}

{{/* namespaceSelector of the Pod, Job and template webhooks: the excluded names, ANDed with
webhook.namespaceSelector. */}}
{{- define "saw.namespaceSelector" -}}
namespaceSelector:
  {{- with .Values.webhook.namespaceSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "saw.excludedNamespaces" . }}
    {{- with .Values.webhook.namespaceSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* clientConfig of a webhook; $path is /mutate or /validate. */}}
{{- define "saw.clientConfig" -}}
{{- $root := index . 0 }}
{{- $path := index . 1 }}
clientConfig:
  service:
    name: {{ include "saw.fullname" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ $path }}
    port: 443
  {{- if eq $root.Values.certificates.mode "provided" }}
  caBundle: {{ include "saw.requireValues" $root }}{{ $root.Values.certificates.provided.caBundle }}
  {{- end }}
{{- end }}

{{/* Annotations of both webhook configurations. */}}
{{- define "saw.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s-tls" .Release.Namespace (include "saw.fullname" .) }}
{{- else if eq .Values.certificates.mode "serviceCA" }}
annotations:
  service.beta.openshift.io/inject-cabundle: "true"
{{- end }}
{{- end }}

{{/* CEL: true unless the object is a mirror pod (created by the kubelet from a static manifest). Valid for Jobs. */}}
{{- define "saw.celNotMirrorPod" -}}
!has(object.metadata.annotations) || !('kubernetes.io/config.mirror' in object.metadata.annotations)
{{- end }}

{{/* CEL: true unless the object is a KubeVirt/CDI first-consumer pod, which must be scheduled freely. */}}
{{- define "saw.celNotKubevirtFirstConsumer" -}}
!has(object.metadata.annotations) || !('kubevirt.io/ephemeral-provisioning' in object.metadata.annotations) || object.metadata.annotations['kubevirt.io/ephemeral-provisioning'] != 'true'
{{- end }}

{{/* Replicas that run at least: drives the PodDisruptionBudget. */}}
{{- define "saw.minReplicas" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.minReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/*
The Lease that picks the one replica writing policy reports.
*/}}
{{- define "saw.leaseName" -}}
{{- default (include "saw.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/*
The policy report resources the server may write, per reports.api: auto writes whichever is served. It replaces
and deletes only the one report it gives a namespace (rules/reports.py REPORT_NAME).
*/}}
{{- define "saw.reportRules" -}}
{{- $api := .Values.reports.api }}
{{- range $group, $resource := dict "openreports.io" "reports" "wgpolicyk8s.io" "policyreports" }}
{{- if has $api (list "auto" (ternary "openreports" "wgpolicyk8s" (eq $group "openreports.io"))) }}
- apiGroups: [{{ $group }}]
  resources: [{{ $resource }}]
  verbs: [list, create]
- apiGroups: [{{ $group }}]
  resources: [{{ $resource }}]
  resourceNames: [storage-affinity-webhook]
  verbs: [update, delete]
{{- end }}
{{- end }}
{{- end }}

{{/*
The ConfigMaps the server reads, by namespace (a JSON object: namespace -> [{name, verbs}]): the policy ConfigMap in
the release namespace (listed and watched with a field selector on its name), and the Velero node-agent ConfigMap
that policy.loadAffinitySource.configMap names (the same, plus a GET when a lookup misses). Read from the values:
a policy edited in the cluster to name another ConfigMap needs a Role for it (docs/operations.md#running-in-a-cluster-live-state-reload-and-rbac).
*/}}
{{- define "saw.configMapReads" -}}
{{- $reads := dict }}
{{- $_ := set $reads .Release.Namespace (list (dict "name" (include "saw.policyConfigMapName" .) "verbs" (list "list" "watch"))) }}
{{- with ((.Values.policy.loadAffinitySource | default dict).configMap) }}
{{- $read := dict "name" .name "verbs" (list "get" "list" "watch") }}
{{- $_ := set $reads .namespace (append (get $reads .namespace | default list) $read) }}
{{- end }}
{{- toJson $reads }}
{{- end }}

{{/* CEL: the object's labels (a Pod's, or a Job's pod template's) match one LabelSelector. $labels is the CEL
path of a metadata object ("object.metadata"); an empty selector matches every pod, as the server reads it. */}}
{{- define "saw.celSelector" -}}
{{- $meta := index . 0 }}
{{- $selector := index . 1 }}
{{- $labels := printf "%s.labels" $meta }}
{{- $has := printf "has(%s)" $labels }}
{{- $parts := list }}
{{- range $key, $value := ($selector.matchLabels | default dict) }}
{{- $parts = append $parts (printf "(%s && '%s' in %s && %s['%s'] == '%s')" $has $key $labels $labels $key $value) }}
{{- end }}
{{- range ($selector.matchExpressions | default list) }}
{{- $values := list }}
{{- range (.values | default list) }}{{ $values = append $values (printf "'%s'" .) }}{{ end }}
{{- $in := printf "%s['%s'] in [%s]" $labels .key (join ", " $values) }}
{{- if eq .operator "In" }}
{{- $parts = append $parts (printf "(%s && '%s' in %s && %s)" $has .key $labels $in) }}
{{- else if eq .operator "NotIn" }}
{{- $parts = append $parts (printf "(!%s || !('%s' in %s) || !(%s))" $has .key $labels $in) }}
{{- else if eq .operator "Exists" }}
{{- $parts = append $parts (printf "(%s && '%s' in %s)" $has .key $labels) }}
{{- else }}
{{- $parts = append $parts (printf "(!%s || !('%s' in %s))" $has .key $labels) }}
{{- end }}
{{- end }}
{{- if $parts }}({{ join " && " $parts }}){{ else }}true{{ end }}
{{- end }}

{{/* CEL: a metadata object carries an annotation the webhook reads: its own (storage-affinity.io/*), the
csi-baremetal disk annotations (*.volumes.csi-baremetal.dell.com/*, affinity.csi-baremetal.dell.com/taint). */}}
{{- define "saw.celReadAnnotations" -}}
(has({{ . }}.annotations) && {{ . }}.annotations.exists(k, k.startsWith('storage-affinity.io/') || k.contains('volumes.csi-baremetal.dell.com/') || k == 'affinity.csi-baremetal.dell.com/taint'))
{{- end }}

{{/* CEL: a pod spec mounts a claim (a persistentVolumeClaim or a generic ephemeral volume). */}}
{{- define "saw.celMountsClaim" -}}
(has({{ . }}.volumes) && {{ . }}.volumes.exists(v, has(v.persistentVolumeClaim) || has(v.ephemeral)))
{{- end }}

{{/* CEL: a Pod, or a Job's pod template, the webhook can act on: it mounts a claim, carries an annotation the
webhook reads, or its labels match a role selector of the policy (generated from policy.roles, so the condition
follows the policy). $extra is ORed in (the validating webhook adds what only it reads). */}}
{{- define "saw.celStoragePod" -}}
{{- $root := index . 0 }}
{{- $extra := index . 1 }}
{{- $template := "object.spec.template" }}
{{- $hasTemplate := printf "has(object.spec) && has(%s) && has(%s.metadata)" $template $template }}
{{- $parts := list (printf "(has(object.spec) && %s)" (include "saw.celMountsClaim" "object.spec")) }}
{{- $parts = append $parts (printf "(has(object.spec) && has(%s) && has(%s.spec) && %s)" $template $template (include "saw.celMountsClaim" (printf "%s.spec" $template))) }}
{{- $parts = append $parts (include "saw.celReadAnnotations" "object.metadata") }}
{{- $parts = append $parts (printf "(%s && %s)" $hasTemplate (include "saw.celReadAnnotations" (printf "%s.metadata" $template))) }}
{{- range $role, $spec := ($root.Values.policy.roles | default dict) }}
{{- range (($spec | default dict).selectors | default list) }}
{{- $parts = append $parts (include "saw.celSelector" (list "object.metadata" .)) }}
{{- $parts = append $parts (printf "(%s && %s)" $hasTemplate (include "saw.celSelector" (list (printf "%s.metadata" $template) .))) }}
{{- end }}
{{- end }}
{{- if $extra }}{{ $parts = append $parts $extra }}{{ end }}
{{- join " || " $parts }}
{{- end }}

{{/* CEL, validating only: what else it reads. A removed annotation on UPDATE (the old object's), and on Pod
CREATE the placement of any pod with a node name, a nodeSelector or required node affinity. */}}
{{- define "saw.celValidateAlso" -}}
(request.operation == 'UPDATE' && has(oldObject.metadata) && {{ include "saw.celReadAnnotations" "oldObject.metadata" }}) || (request.operation == 'CREATE' && has(object.spec) && (has(object.spec.nodeName) || has(object.spec.nodeSelector) || (has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution))))
{{- end }}

{{/* CEL: metadata (the path in $meta) claims a role by its labels: they match a role selector of the policy, or
carry CDI's worker label. The template rules report a role claimed where the policy does not trust it. */}}
{{- define "saw.celClaimsRole" -}}
{{- $root := index . 0 }}
{{- $meta := index . 1 }}
{{- $parts := list (printf "(has(%s.labels) && 'app' in %s.labels && %s.labels['app'] == 'containerized-data-importer')" $meta $meta $meta) }}
{{- range $role, $spec := ($root.Values.policy.roles | default dict) }}
{{- range (($spec | default dict).selectors | default list) }}
{{- $parts = append $parts (include "saw.celSelector" (list $meta .)) }}
{{- end }}
{{- end }}
{{- join " || " $parts }}
{{- end }}

{{/* CEL, workloads: the pod template (spec.template of a Deployment, StatefulSet, DaemonSet, ReplicaSet or Job,
spec.jobTemplate.spec.template of a CronJob) carries an annotation the template rules read, or claims a role. */}}
{{- define "saw.celTemplateAnnotations" -}}
{{- $job := "object.spec.jobTemplate" -}}
{{- $meta := "object.spec.template.metadata" -}}
{{- $jobMeta := printf "%s.spec.template.metadata" $job -}}
(has(object.spec) && has(object.spec.template) && has({{ $meta }}) && ({{ include "saw.celReadAnnotations" $meta }} || {{ include "saw.celClaimsRole" (list . $meta) }})) || (has(object.spec) && has({{ $job }}) && has({{ $job }}.spec) && has({{ $job }}.spec.template) && has({{ $jobMeta }}) && ({{ include "saw.celReadAnnotations" $jobMeta }} || {{ include "saw.celClaimsRole" (list . $jobMeta) }}))
{{- end }}

{{/* CEL, workloads: a creation, or an update that changes the pod template (for a CronJob, its job template). */}}
{{- define "saw.celTemplateChanged" -}}
request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || has(object.spec.template) != has(oldObject.spec.template) || (has(object.spec.template) && object.spec.template != oldObject.spec.template) || has(object.spec.jobTemplate) != has(oldObject.spec.jobTemplate) || (has(object.spec.jobTemplate) && object.spec.jobTemplate != oldObject.spec.jobTemplate)
{{- end }}

{{/*
Where the kubelet pulls image.repository from when it names no registry host (its first part has no '.' or ':' and
is not localhost): Docker Hub, spelt out; empty when it names a registry.
*/}}
{{- define "saw.imageFromDockerHub" -}}
{{- $repository := .Values.image.repository }}
{{- $first := splitList "/" $repository | first }}
{{- if not (and (contains "/" $repository) (or (contains "." $first) (contains ":" $first) (eq $first "localhost"))) }}
{{- printf "docker.io/%s%s" (ternary "" "library/" (contains "/" $repository)) (include "saw.image" .) }}
{{- end }}
{{- end }}

{{/*
Fails, naming every value that is required by another one and missing, each with what to set; nothing otherwise.
Every template that reads such a value includes it, so whichever Helm renders first reports all of them (the
values schema leaves these to it: its output would name a JSON path, not what to set).
*/}}
{{- define "saw.requireValues" -}}
{{- $v := .Values }}
{{- $missing := list }}
{{- if and (not $v.serviceAccount.create) (not $v.serviceAccount.name) }}
{{- $missing = append $missing "serviceAccount.create is false: set serviceAccount.name to the existing ServiceAccount the server runs as." }}
{{- end }}
{{- if eq $v.certificates.mode "provided" }}
{{- if not $v.certificates.provided.secretName }}
{{- $missing = append $missing (printf "certificates.mode is provided: set certificates.provided.secretName to an existing kubernetes.io/tls Secret (tls.crt, tls.key) in namespace %s, valid for %s.%s.svc." .Release.Namespace (include "saw.fullname" .) .Release.Namespace) }}
{{- end }}
{{- if not $v.certificates.provided.caBundle }}
{{- $missing = append $missing "certificates.mode is provided: set certificates.provided.caBundle to the base64-encoded PEM of the CA that signed that certificate (--set certificates.provided.caBundle=\"$(base64 -w0 ca.crt)\")." }}
{{- end }}
{{- end }}
{{- if and (eq $v.certificates.mode "certManager") $v.certificates.certManager.issuerRef (not $v.certificates.certManager.issuerRef.name) }}
{{- $missing = append $missing "certificates.certManager.issuerRef is set: set certificates.certManager.issuerRef.name to the Issuer or ClusterIssuer to issue from (or leave issuerRef empty for the chart's own CA)." }}
{{- end }}
{{- if and $v.monitoring.prometheusRule.enabled (not $v.monitoring.prometheusRule.runbookBaseUrl) }}
{{- $missing = append $missing "monitoring.prometheusRule.enabled is true: set monitoring.prometheusRule.runbookBaseUrl to the URL where your team reads docs/runbooks.md (each alert's runbook_url is it plus #<alert name in lower case>)." }}
{{- end }}
{{- if and $v.networkPolicy.enabled (not $v.networkPolicy.webhookFrom) }}
{{- $missing = append $missing "networkPolicy.enabled is true: set networkPolicy.webhookFrom to the peers your API servers connect from (e.g. [{ipBlock: {cidr: <control plane CIDR>}}]), or no API server could reach the webhook." }}
{{- end }}
{{- if $missing }}
{{- fail (printf "\n%s" (join "\n" $missing)) }}
{{- end }}
{{- end }}

{{/* Velero's namespace as the policy names it, where the server reads Velero's DataUploads (webhook/state/kinds.py,
watched "velero-namespace"): policy.nodeAgent.namespace, else that of policy.loadAffinitySource.configMap; empty
when the policy names neither, and the server then reads none (rules/datasource/exposer.py data_mover_namespace). */}}
{{- define "saw.dataMoverNamespace" -}}
{{- $policy := .Values.policy | default dict }}
{{- $source := ($policy.loadAffinitySource | default dict).configMap | default dict }}
{{- ($policy.nodeAgent | default dict).namespace | default $source.namespace | default "" }}
{{- end }}
