{{/* The objects' name: the release's when it names the chart. */}}
{{- define "ccm.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* What selects the Pods; unchanged since the first manifests, as a
Deployment's selector cannot change. One CCM runs per cluster. */}}
{{- define "ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
{{- end -}}

{{- define "ccm.labels" -}}
{{ include "ccm.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The subjects the rights go to: the Deployment's ServiceAccount and the
static pod's user. */}}
{{- define "ccm.subjects" -}}
- kind: ServiceAccount
  name: {{ include "ccm.fullname" . }}
  namespace: {{ .Release.Namespace }}
{{- if .Values.rbac.staticPodUser }}
- kind: User
  apiGroup: rbac.authorization.k8s.io
  name: system:cloud-controller-manager
{{- end }}
{{- end -}}
