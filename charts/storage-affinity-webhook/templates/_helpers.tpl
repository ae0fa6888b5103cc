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
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
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
{{- required "certificates.provided.secretName is required when certificates.mode is provided" $c.provided.secretName }}
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

{{/* namespaceSelector of the Pod and Job webhooks. */}}
{{- define "saw.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "saw.excludedNamespaces" . }}
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
  caBundle: {{ required "certificates.provided.caBundle is required when certificates.mode is provided" $root.Values.certificates.provided.caBundle }}
  {{- end }}
{{- end }}

{{/* Annotations of both webhook configurations. */}}
{{- define "saw.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s-tls" .Release.Namespace (include "saw.fullname" .) }}
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
The policy report resources the server may write, per reports.api: auto writes whichever is served.
*/}}
{{- define "saw.reportRules" -}}
{{- $api := .Values.reports.api }}
{{- if has $api (list "auto" "openreports") }}
- apiGroups: [openreports.io]
  resources: [reports]
  verbs: [list, create, update, delete]
{{- end }}
{{- if has $api (list "auto" "wgpolicyk8s") }}
- apiGroups: [wgpolicyk8s.io]
  resources: [policyreports]
  verbs: [list, create, update, delete]
{{- end }}
{{- end }}
