{{/* The chart's name, or nameOverride. */}}
{{- define "ccm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: fullnameOverride, else the release's when it
names the chart, else both. */}}
{{- define "ccm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "ccm.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* What selects the Pods; unchanged since the first manifests, as a
Deployment's selector cannot change. One CCM runs per cluster. */}}
{{- define "ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ccm.name" . }}
{{- end -}}

{{- define "ccm.labels" -}}
{{ include "ccm.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The ServiceAccount the Deployment runs as. */}}
{{- define "ccm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ccm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: with serviceAccount.create false, name the ServiceAccount to run as" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image: the tag defaults to the chart's appVersion; a digest pins
it. */}}
{{- define "ccm.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The subjects the rights go to: the Deployment's ServiceAccount and the
static pod's user. */}}
{{- define "ccm.subjects" -}}
- kind: ServiceAccount
  name: {{ include "ccm.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- if .Values.rbac.staticPodUser }}
- kind: User
  apiGroup: rbac.authorization.k8s.io
  name: system:cloud-controller-manager
{{- end }}
{{- end -}}
